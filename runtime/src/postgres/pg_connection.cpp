#include "postgres/pg_connection.hpp"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "log.hpp"

namespace dlock::internal {
namespace {

std::int64_t steady_us(Clock::time_point when) {
  return std::chrono::duration_cast<std::chrono::microseconds>(when.time_since_epoch()).count();
}

// libpq's message on one line: its line breaks and tabs become single spaces.
std::string trimmed(const char* text) {
  std::string out;
  for (const char* c = text == nullptr ? "" : text; *c != '\0'; ++c) {
    const bool space = *c == '\n' || *c == '\t' || *c == ' ';
    if (!space) {
      out += *c;
    } else if (!out.empty() && out.back() != ' ') {
      out += ' ';
    }
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Waits until `fd` is readable (or writable, with `write`) or `deadline` passes. Past the
// deadline it still looks once: an answer already there is read, not declared lost.
bool wait_for(int fd, bool write, Clock::time_point deadline) {
  if (fd < 0) return false;
  for (;;) {
    const auto left = deadline - Clock::now();
    const auto ms = std::clamp<long long>(std::chrono::ceil<Millis>(left).count(), 0, 60'000);
    pollfd p{fd, static_cast<short>(write ? (POLLOUT | POLLIN) : POLLIN), 0};
    const int ready = ::poll(&p, 1, static_cast<int>(ms));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
    if (ready == 0 && ms == 0) return false;
  }
}

// libpq prints the server's notices (NOTICE, WARNING) to stderr unless told otherwise.
void log_notice(void* /*arg*/, const char* message) {
  log(LogLevel::kDebug, "postgres: {}", trimmed(message));
}

}  // namespace

PgResult::PgResult(pg_result* result) : result_(result) {
  switch (PQresultStatus(result)) {
    case PGRES_TUPLES_OK:
    case PGRES_COMMAND_OK:
      status = Status::kOk;
      break;
    default:
      status = Status::kRefused;
      error = trimmed(PQresultErrorMessage(result));
      if (const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE)) sqlstate = state;
      if (error.empty()) error = PQresStatus(PQresultStatus(result));
  }
}

PgResult::PgResult(PgResult&& other) noexcept
    : status(other.status),
      error(std::move(other.error)),
      sqlstate(std::move(other.sqlstate)),
      result_(std::exchange(other.result_, nullptr)) {}

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    if (result_ != nullptr) PQclear(result_);
    status = other.status;
    error = std::move(other.error);
    sqlstate = std::move(other.sqlstate);
    result_ = std::exchange(other.result_, nullptr);
  }
  return *this;
}

PgResult::~PgResult() {
  if (result_ != nullptr) PQclear(result_);
}

int PgResult::rows() const { return result_ == nullptr ? 0 : PQntuples(result_); }

bool PgResult::is_null(int row, int column) const {
  return result_ == nullptr || row >= rows() || column >= PQnfields(result_) ||
         PQgetisnull(result_, row, column) != 0;
}

std::string PgResult::text(int row, int column) const {
  if (is_null(row, column)) return {};
  return {PQgetvalue(result_, row, column),
          static_cast<std::size_t>(PQgetlength(result_, row, column))};
}

std::int64_t PgResult::number(int row, int column) const {
  if (is_null(row, column)) return 0;
  return std::strtoll(PQgetvalue(result_, row, column), nullptr, 10);
}

PgConnection::PgConnection(pg_conn* conn, const PgStatements& statements)
    : conn_(conn), statements_(statements), prepared_(kPgStatementCount, false) {}

PgConnection::~PgConnection() { PQfinish(conn_); }

std::unique_ptr<PgConnection> PgConnection::open(const BackendConfig& config,
                                                 const PgStatements& statements,
                                                 Clock::time_point deadline, std::string& error,
                                                 Mode mode) {
  // The dsn is expanded in place of dbname; the application name is dlock's unless the dsn
  // names one.
  const char* keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* values[] = {config.dsn.c_str(), "dlock", nullptr};
  pg_conn* raw = PQconnectStartParams(keys, values, 1);
  if (raw == nullptr) {
    error = "out of memory";
    return nullptr;
  }
  std::unique_ptr<PgConnection> conn(new PgConnection(raw, statements));
  PQsetNoticeProcessor(raw, log_notice, nullptr);
  if (!conn->connect(deadline, error) || !conn->set_up(config, deadline, error)) return nullptr;
  if (mode == Mode::kPipelined && PQenterPipelineMode(raw) != 1) {
    error = "cannot enter pipeline mode: " + trimmed(PQerrorMessage(raw));
    return nullptr;
  }
  conn->pipelined_ = mode == Mode::kPipelined;
  return conn;
}

bool PgConnection::connect(Clock::time_point deadline, std::string& error) {
  if (PQstatus(conn_) == CONNECTION_BAD) {
    error = trimmed(PQerrorMessage(conn_));
    return false;
  }
  PostgresPollingStatusType state = PGRES_POLLING_WRITING;
  for (;;) {
    if (state == PGRES_POLLING_OK) return true;
    if (state == PGRES_POLLING_FAILED) {
      error = trimmed(PQerrorMessage(conn_));
      return false;
    }
    // The socket can change between calls (each host of a multi-host dsn).
    if (!wait_for(PQsocket(conn_), state == PGRES_POLLING_WRITING, deadline)) {
      error = "connect timed out";
      return false;
    }
    state = PQconnectPoll(conn_);
  }
}

bool PgConnection::set_up(const BackendConfig& config, Clock::time_point deadline,
                          std::string& error) {
  if (PQsetnonblocking(conn_, 1) != 0) {
    error = trimmed(PQerrorMessage(conn_));
    return false;
  }
  // The server gives up on a statement (a row lock held by a stalled session, say) when
  // its caller does; a session left idle in a transaction cannot hold rows.
  const long long ms = std::max<long long>(config.command_timeout.count(), 1);
  // dlock's statements look rows up by their primary key: one generic plan serves every
  // call, where custom plans would be planned again and again.
  // The session is pinned to what the statements assume, whatever the database's or the
  // role's defaults: read committed (ON CONFLICT waits for and re-reads a row another
  // transaction holds; repeatable read would fail the loser with a serialization error),
  // writable, and functions and operators from pg_catalog only (every table is qualified).
  PgResult set = run_text(fmt::format("SET statement_timeout = {0}; SET lock_timeout = {0}; "
                                      "SET idle_in_transaction_session_timeout = {0}; "
                                      "SET plan_cache_mode = force_generic_plan; "
                                      "SET default_transaction_isolation = 'read committed'; "
                                      "SET default_transaction_read_only = off; "
                                      "SET search_path = pg_catalog, pg_temp",
                                      ms),
                          deadline);
  if (set.status != PgResult::Status::kOk) {
    error = set.error;
    return false;
  }
  if (!resync_clock(deadline)) {
    error = "could not read the server's clock";
    return false;
  }
  return true;
}

bool PgConnection::resync_clock(Clock::time_point deadline) {
  // The answers owed first: their wait must not count as the clock read's.
  settle_by(deadline);
  const auto before = Clock::now();
  PgResult now = run(PgStatement::kServerTime, {}, deadline);
  const auto after = Clock::now();
  if (now.status != PgResult::Status::kOk || now.rows() != 1) return false;
  clock_offset_us_ = now.number(0, 0) - (steady_us(before) + steady_us(after)) / 2;
  clock_read_at_ = after;
  return true;
}

std::int64_t PgConnection::server_time_us(Clock::time_point when) const {
  return clock_offset_us_ + steady_us(when);
}

bool PgConnection::wait(bool write, Clock::time_point deadline) const {
  return wait_for(PQsocket(conn_), write, deadline);
}

PgResult PgConnection::fail(std::string error) {
  broken_ = true;
  return PgResult(PgResult::Status::kUnknown, std::move(error));
}

bool PgConnection::send_and_flush(bool sent, Clock::time_point deadline, std::string& error) {
  // Each statement is its own transaction: an error ends only its own pipeline.
  if (!sent || (pipelined_ && PQpipelineSync(conn_) != 1)) {
    error = trimmed(PQerrorMessage(conn_));
    return false;
  }
  for (;;) {
    const int flushed = PQflush(conn_);
    if (flushed == 0) return true;
    if (flushed < 0 || !wait(true, deadline) || PQconsumeInput(conn_) == 0) {
      error = flushed < 0 ? trimmed(PQerrorMessage(conn_)) : "timed out sending";
      return false;
    }
  }
}

PgResult PgConnection::read_answer(Clock::time_point deadline) {
  // Given up on (a timeout): nothing more is read from it. Ended by the server: what
  // arrived before the end is still read.
  if (broken_ && PQstatus(conn_) != CONNECTION_BAD) return fail("the connection is broken");
  PgResult kept;
  bool have = false;
  bool ended = false;  // pipeline mode: a NULL came; the next result or the Sync follows
  for (;;) {
    while (PQisBusy(conn_) == 0) {
      pg_result* raw = PQgetResult(conn_);
      if (raw == nullptr) {
        // Pipeline mode: only the Sync ends an answer, since the commit comes with it (an
        // error at commit arrives after the statement's rows), so an answer cut off
        // before its Sync is unknown. Two NULLs in a row: nothing is queued.
        if (PQstatus(conn_) == CONNECTION_BAD) {
          broken_ = true;
          if (pipelined_ || !have) return fail(trimmed(PQerrorMessage(conn_)));
          return kept;
        }
        if (!pipelined_) return have ? std::move(kept) : fail(trimmed(PQerrorMessage(conn_)));
        if (ended) return fail("no statement is waiting for an answer");
        ended = true;
        continue;
      }
      ended = false;
      if (PQresultStatus(raw) == PGRES_PIPELINE_SYNC) {
        PQclear(raw);
        return have ? std::move(kept) : fail("no answer before the pipeline's sync");
      }
      PgResult current(raw);
      // The first error wins; otherwise the last result (a multi-statement text).
      if (!have || kept.status == PgResult::Status::kOk) kept = std::move(current);
      have = true;
    }
    if (!wait(false, deadline)) return fail("timed out waiting for the server");
    if (PQconsumeInput(conn_) == 0) return fail(trimmed(PQerrorMessage(conn_)));
  }
}

void PgConnection::settle_by(Clock::time_point deadline) noexcept {
  // Each `done` is called once, whatever happens: out of memory while an answer is read,
  // the connection is given up and that answer and those after it are unknown.
  while (!owed_.empty()) {
    Owed owed = std::move(owed_.front());
    owed_.pop_front();
    PgResult result(PgResult::Status::kUnknown, std::string());
    try {
      result = read_answer(std::min(deadline, owed.deadline));
    } catch (...) {
      broken_ = true;
    }
    try {
      owed.done(std::move(result));
    } catch (...) {  // `done` must not throw; nothing more to do with it if it does
    }
  }
}

void PgConnection::settle() noexcept { settle_by(Clock::time_point::max()); }

PgResult PgConnection::collect(Clock::time_point deadline) {
  settle_by(deadline);
  return read_answer(deadline);
}

bool PgConnection::prepare(PgStatement statement, Clock::time_point deadline,
                           PgResult& failure) {
  // Prepared on the way, rarely: the answers owed first.
  settle_by(deadline);
  std::string error;
  const std::string& sql = statements_.sql(statement);
  if (!send_and_flush(
          PQsendPrepare(conn_, PgStatements::name(statement), sql.c_str(), 0, nullptr) == 1,
          deadline, error)) {
    failure = fail(error);
    return false;
  }
  PgResult prepared = read_answer(deadline);
  if (prepared.status != PgResult::Status::kOk) {
    failure = std::move(prepared);
    return false;
  }
  prepared_[static_cast<std::size_t>(statement)] = true;
  return true;
}

bool PgConnection::send(PgStatement statement, const std::vector<std::string>& params,
                        Clock::time_point deadline, PgResult& failure,
                        std::function<void(PgResult)> owe_to) {
  if (broken_) {
    failure = fail("the connection is broken");
    return false;
  }
  if (!prepared_[static_cast<std::size_t>(statement)] && !prepare(statement, deadline, failure)) {
    return false;
  }

  std::vector<const char*> values;
  values.reserve(params.size());
  for (const std::string& param : params) values.push_back(param.c_str());
  std::string error;
  // Noted before the statement goes out, so that nothing that can throw comes after it.
  const bool owing = owe_to != nullptr;
  if (owing) owed_.push_back(Owed{std::move(owe_to), deadline});
  const bool sent = PQsendQueryPrepared(conn_, PgStatements::name(statement),
                                        static_cast<int>(values.size()), values.data(), nullptr,
                                        nullptr, 0) == 1;
  if (!send_and_flush(sent, deadline, error)) {
    // Not all of it reached the server, whose implicit transaction then ends without a
    // commit: nothing was applied, and nobody is owed an answer.
    if (owing) owed_.pop_back();
    failure = fail(error);
    return false;
  }
  return true;
}

PgResult PgConnection::run(PgStatement statement, const std::vector<std::string>& params,
                           Clock::time_point deadline) {
  PgResult failure;
  if (!send(statement, params, deadline, failure)) return failure;
  return collect(deadline);
}

PgResult PgConnection::run_text(const std::string& sql, Clock::time_point deadline) {
  settle_by(deadline);
  if (broken_) return fail("the connection is broken");
  // Several statements in one text need the simple protocol, which pipeline mode refuses:
  // it is left for this call (nothing is owed now) and entered again after.
  const bool pipelined = pipelined_;
  if (pipelined && PQexitPipelineMode(conn_) != 1) return fail(trimmed(PQerrorMessage(conn_)));
  pipelined_ = false;
  std::string error;
  PgResult result = send_and_flush(PQsendQuery(conn_, sql.c_str()) == 1, deadline, error)
                        ? read_answer(deadline)
                        : fail(error);
  if (pipelined && !broken_) {
    if (PQenterPipelineMode(conn_) != 1) return fail(trimmed(PQerrorMessage(conn_)));
    pipelined_ = true;
  }
  return result;
}

bool PgConnection::healthy() {
  if (broken_ || PQstatus(conn_) == CONNECTION_BAD) return false;
  pollfd p{PQsocket(conn_), POLLIN, 0};
  if (::poll(&p, 1, 0) > 0) {
    // Nothing is expected on an idle connection: whatever came is the server ending the
    // session (a restart, pg_terminate_backend, idle timeouts).
    PQconsumeInput(conn_);
    broken_ = true;
    return false;
  }
  return true;
}

bool PgConnection::still_connected() {
  // A server ending the session sends its reason, then closes: the reason is read by one
  // PQconsumeInput, the close found by the next. Bounded: owed answers may keep arriving.
  for (int reads = 0; !broken_ && reads < 16; ++reads) {
    pollfd p{PQsocket(conn_), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) break;
    if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD) broken_ = true;
  }
  return !broken_;
}

int PgConnection::socket() const { return PQsocket(conn_); }

bool PgConnection::consume_input() {
  if (PQconsumeInput(conn_) == 0 || PQstatus(conn_) == CONNECTION_BAD) {
    broken_ = true;
    return false;
  }
  // Results of statements nobody waits for (none are sent by the listener) are dropped.
  while (PQisBusy(conn_) == 0) {
    pg_result* raw = PQgetResult(conn_);
    if (raw == nullptr) break;
    PQclear(raw);
  }
  return true;
}

bool PgConnection::next_notification(std::string& payload) {
  PGnotify* note = PQnotifies(conn_);
  if (note == nullptr) return false;
  payload = note->extra == nullptr ? "" : note->extra;
  PQfreemem(note);
  return true;
}

}  // namespace dlock::internal
