// PostgresClient: a synchronous libpq client with a deadline on everything (non-blocking
// connect and query, poll(2) on the socket).
#include <errno.h>
#include <poll.h>

#include <libpq-fe.h>

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "postgres_server.hpp"
#include "process_support.hpp"

namespace dlock::test {

using namespace detail;

namespace {

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

PostgresRows rows_of(const PGresult* result) {
  PostgresRows rows;
  const int columns = PQnfields(result);
  for (int row = 0; row < PQntuples(result); ++row) {
    auto& values = rows.emplace_back();
    for (int column = 0; column < columns; ++column) {
      values.emplace_back(PQgetvalue(result, row, column),
                          static_cast<std::size_t>(PQgetlength(result, row, column)));
    }
  }
  return rows;
}

PostgresError error_of(const PGresult* result) {
  const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
  return PostgresError(trimmed(PQresultErrorMessage(result)), state != nullptr ? state : "");
}

}  // namespace

struct PostgresClient::Impl {
  std::string dsn;
  std::string application_name;
  milliseconds timeout;
  PGconn* conn = nullptr;

  void close() noexcept {
    if (conn != nullptr) PQfinish(conn);
    conn = nullptr;
  }

  [[noreturn]] void fail_io(const std::string& what) {
    const std::string detail = conn != nullptr ? trimmed(PQerrorMessage(conn)) : "";
    close();
    throw PostgresIoError(fmt::format("{} ({}): {}", what, dsn, detail.empty() ? "-" : detail));
  }

  // Until the socket is ready for `events`; false at the deadline.
  bool wait_socket(short events, Clock::time_point deadline) const {
    pollfd poller{PQsocket(conn), events, 0};
    for (;;) {
      const auto remaining = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      if (remaining.count() <= 0) return false;
      const int ready = ::poll(&poller, 1, static_cast<int>(remaining.count()));
      if (ready > 0) return true;
      if (ready == 0 || errno != EINTR) return false;
    }
  }

  void connect(Clock::time_point deadline) {
    // dbname is expanded (a URI or key=value string); what follows it overrides it.
    const char* keys[] = {"dbname", "application_name", nullptr};
    const char* values[] = {dsn.c_str(), application_name.c_str(), nullptr};
    conn = PQconnectStartParams(keys, values, 1);
    if (conn == nullptr) throw PostgresIoError("PQconnectStartParams: out of memory");
    if (PQstatus(conn) == CONNECTION_BAD) fail_io("cannot connect");
    PostgresPollingStatusType state = PGRES_POLLING_WRITING;
    while (state != PGRES_POLLING_OK) {
      if (state == PGRES_POLLING_FAILED) fail_io("cannot connect");
      if (!wait_socket(state == PGRES_POLLING_READING ? POLLIN : POLLOUT, deadline)) {
        fail_io(fmt::format("no connection within {} ms", timeout.count()));
      }
      state = PQconnectPoll(conn);
    }
    if (PQsetnonblocking(conn, 1) != 0) fail_io("PQsetnonblocking");
  }

  // A kept connection that the server closed since (restart, terminated backend) shows as
  // readable while idle: replaced before anything is sent. The server's last message (FATAL:
  // terminating connection ...) and the end of the stream take a read each.
  void ensure_connected(Clock::time_point deadline) {
    for (int read = 0; read < 2 && conn != nullptr; ++read) {
      pollfd poller{PQsocket(conn), POLLIN, 0};
      if (::poll(&poller, 1, 0) <= 0) break;
      if (PQconsumeInput(conn) == 0 || PQstatus(conn) != CONNECTION_OK) {
        close();
      } else {
        PQisBusy(conn);  // parses what came (a notice, a notification)
      }
    }
    if (conn == nullptr) connect(deadline);
  }

  void send(const std::string& sql, Clock::time_point deadline) {
    if (PQsendQuery(conn, sql.c_str()) == 0) fail_io("cannot send the query");
    for (;;) {
      const int left = PQflush(conn);
      if (left == 0) return;
      if (left < 0 || !wait_socket(POLLIN | POLLOUT, deadline)) fail_io("cannot send the query");
      if (PQconsumeInput(conn) == 0) fail_io("connection lost");
    }
  }

  // The next result, or nullptr after the last.
  PGresult* next_result(Clock::time_point deadline) {
    while (PQisBusy(conn) != 0) {
      if (!wait_socket(POLLIN, deadline)) {
        fail_io(fmt::format("no answer within {} ms", timeout.count()));
      }
      if (PQconsumeInput(conn) == 0) fail_io("connection lost");
    }
    return PQgetResult(conn);
  }

  PostgresRows exec(const std::string& sql) {
    const auto deadline = Clock::now() + timeout;
    ensure_connected(deadline);
    send(sql, deadline);
    PostgresRows rows;
    std::optional<PostgresError> error;
    while (PGresult* result = next_result(deadline)) {
      const ExecStatusType status = PQresultStatus(result);
      if (status == PGRES_TUPLES_OK) rows = rows_of(result);
      if (status == PGRES_FATAL_ERROR && !error) error = error_of(result);
      PQclear(result);
      if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH) {
        close();
        throw PostgresIoError("PostgresClient does not do COPY: " + sql);
      }
    }
    if (PQstatus(conn) != CONNECTION_OK) close();  // e.g. the backend was terminated
    if (error) throw *error;
    return rows;
  }
};

PostgresClient::PostgresClient(std::string dsn, std::string application_name,
                               milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->dsn = std::move(dsn);
  impl_->application_name = std::move(application_name);
  impl_->timeout = timeout;
}

PostgresClient::~PostgresClient() {
  if (impl_) impl_->close();
}
PostgresClient::PostgresClient(PostgresClient&&) noexcept = default;
PostgresClient& PostgresClient::operator=(PostgresClient&& other) noexcept {
  if (this != &other) {
    if (impl_) impl_->close();
    impl_ = std::move(other.impl_);
  }
  return *this;
}

PostgresRows PostgresClient::exec(const std::string& sql) { return impl_->exec(sql); }

bool PostgresClient::ping() noexcept {
  try {
    return impl_->exec("SELECT 1") == PostgresRows{{"1"}};
  } catch (const std::exception&) {
    return false;
  }
}

int PostgresClient::backend_pid() {
  impl_->ensure_connected(Clock::now() + impl_->timeout);
  return PQbackendPID(impl_->conn);
}

bool PostgresClient::connected() const { return impl_->conn != nullptr; }

void PostgresClient::disconnect() noexcept { impl_->close(); }

}  // namespace dlock::test
