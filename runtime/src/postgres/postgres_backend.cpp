#include "postgres/postgres_backend.hpp"

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <limits>

#include "dlock/admin.hpp"
#include "log.hpp"
#include "owner.hpp"
#include "postgres/pg_connection.hpp"
#include "postgres/pg_listener.hpp"
#include "postgres/pg_rows.hpp"
#include "settler.hpp"

namespace dlock::internal {
namespace {

using Status = PgResult::Status;
using Params = std::vector<std::string>;

constexpr Millis kSweepEvery{std::chrono::minutes(10)};
constexpr Millis kClockReadEvery{std::chrono::minutes(1)};

std::string number_text(std::int64_t value) { return std::to_string(value); }

class PostgresBackend final : public Backend,
                              public RunStore,
                              public AdminBackend,
                              public std::enable_shared_from_this<PostgresBackend> {
 public:
  PostgresBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics)
      : config_(std::move(config)),
        service_(std::move(service)),
        statements_(std::make_shared<PgStatements>(config_.table)),
        pool_(std::make_shared<PgPool>(config_, statements_)),
        listener_(config_, statements_, std::move(metrics)),
        host_(hex(host_name())),
        pid_(number_text(process_id())) {}

  GrantReply acquire(const GrantRequest& request) override;
  void renew(std::vector<RenewItem>& items) override;
  ReleaseOutcome release(const Key& key, std::string_view owner,
                         Millis keep_for) noexcept override;
  bool release_later(const Key& key, std::string_view owner, Millis keep_for,
                     std::function<void(ReleaseOutcome)> done) noexcept override;
  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return listener_.watch(payload_of(key.str()));
  }
  [[nodiscard]] const BackendConfig& config() const override { return config_; }

  std::vector<LockInfo> list(std::string_view pattern) override;
  std::optional<LockInfo> inspect(const Key& key) override;
  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override;
  std::vector<AuditEntry> history(std::size_t limit) override;

  std::int64_t server_time_ms() override {
    return checked(call(PgStatement::kServerTime, Params{}, deadline())).number(0, 0) / 1000;
  }
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override;
  bool finish_run(const Key& key, std::string_view owner,
                  std::string_view outcome) noexcept override;
  std::vector<RunRecord> list_runs(std::string_view pattern) override;

 private:
  using Build = std::function<Params(PgConnection&)>;

  [[nodiscard]] Clock::time_point deadline() const {
    return later(Clock::now(), config_.command_timeout);
  }
  /// How long a waiter stays noted after a busy answer: it tries again at least every
  /// poll_interval (jittered), so four of them, and never under a second.
  [[nodiscard]] Millis waiter_noted_for() const {
    return std::max(Millis{1000}, 4 * config_.poll_interval);
  }
  [[nodiscard]] std::string payload_of(std::string_view key) const {
    return service_ + ' ' + key_digest(key);
  }
  /// Runs `statement` on a pool connection (waiting for one unless `wait` is false).
  PgResult call(PgStatement statement, const Build& build, Clock::time_point deadline,
                PgPool::Lane lane = PgPool::Lane::kShared, bool wait = true);
  PgResult call(PgStatement statement, Params params, Clock::time_point deadline,
                PgPool::Lane lane = PgPool::Lane::kShared, bool wait = true) {
    return call(
        statement, [&](PgConnection&) { return params; }, deadline, lane, wait);
  }
  /// A release refused by the server, sent again from the settler's thread.
  ReleaseOutcome release_once_more(const Key& key, const std::string& owner,
                                   Millis keep_for) noexcept;
  /// kRelease's `result` as an outcome; when it released nothing, missed() says whether
  /// the key was gone or taken.
  ReleaseOutcome release_outcome(const PgResult& result, const Key& key, std::string_view owner,
                                 Clock::time_point until, bool wait) {
    const ReleaseOutcome outcome = release_outcome_of(result);
    return outcome == ReleaseOutcome::kGone ? missed(key, owner, until, wait) : outcome;
  }
  /// Why a release found nothing to release: kTaken or kGone (waiting for a connection
  /// only with `wait`; the settler must not), asked by `until`.
  ReleaseOutcome missed(const Key& key, std::string_view owner, Clock::time_point until,
                        bool wait) noexcept;
  [[nodiscard]] Params release_params(const Key& key, std::string_view owner,
                                      Millis keep_for) const;
  /// `result` if the statement ran; else throws BackendUnavailable.
  PgResult checked(PgResult result) const;
  bool ensure_schema(PgConnection& conn, Clock::time_point deadline, std::string& error);
  void sweep_now_and_then() noexcept;
  void post_sweep();

  BackendConfig config_;
  std::string service_;
  std::shared_ptr<const PgStatements> statements_;
  std::shared_ptr<PgPool> pool_;
  PgListener listener_;
  std::string host_;
  std::string pid_;
  std::mutex schema_mutex_;
  std::atomic<bool> schema_ready_{false};
  std::atomic<Clock::rep> next_sweep_{0};
};

PgResult PostgresBackend::call(PgStatement statement, const Build& build,
                               Clock::time_point deadline, PgPool::Lane lane, bool wait) {
  for (int attempt = 0;; ++attempt) {
    // Past its time, a statement would only cost a connection (given up before its answer).
    if (Clock::now() >= deadline) return {Status::kRefused, "the command timeout passed first"};
    std::string error;
    PgPool::Handle conn = pool_->take(deadline, error, lane, wait);
    if (!conn) return {Status::kRefused, "cannot reach the database: " + error};
    if (!schema_ready_.load()) {
      conn->settle();  // owed answers (and their callbacks) before the schema lock is taken
      if (!ensure_schema(*conn, deadline, error)) return {Status::kRefused, error};
    }
    PgResult result = conn->run(statement, build(*conn), deadline);
    // The table was dropped behind dlock's back: create it again, once.
    if (result.status == Status::kRefused && result.sqlstate == "42P01" && attempt == 0) {
      schema_ready_ = false;
      continue;
    }
    return result;
  }
}

PgResult PostgresBackend::checked(PgResult result) const {
  if (result.status != Status::kOk) {
    throw BackendUnavailable(fmt::format("backend {}: {}", config_.name, result.error));
  }
  return result;
}

bool PostgresBackend::ensure_schema(PgConnection& conn, Clock::time_point deadline,
                                    std::string& error) {
  std::lock_guard lock(schema_mutex_);
  if (schema_ready_) return true;
  // Checked first: creating needs the CREATE privilege, using an existing table does not.
  for (int attempt = 0; attempt < 2; ++attempt) {
    PgResult exists = conn.run_text(statements_->exists(), deadline);
    if (exists.status == Status::kOk && exists.text(0, 0) == "t") {
      if (exists.number(0, 1) != 2 || exists.number(0, 2) != 1) {
        error = fmt::format(
            "the lock table {} has another layout (made by another version of dlock?): it "
            "lacks key_hash or waited_until; drop it and its _runs and _audit tables, or "
            "name another table",
            statements_->table());
        return false;
      }
      schema_ready_ = true;
      return true;
    }
    PgResult created = conn.run_text(statements_->schema(), deadline);
    if (created.status == Status::kOk) {
      schema_ready_ = true;
      return true;
    }
    // 23505/42P07: another process created it at the same moment; look again.
    if (created.sqlstate != "23505" && created.sqlstate != "42P07") {
      error = fmt::format("cannot create the lock table {}: {}", statements_->table(),
                          created.error);
      return false;
    }
  }
  error = fmt::format("the lock table {} could not be created", statements_->table());
  return false;
}

GrantReply PostgresBackend::acquire(const GrantRequest& request) {
  const auto until = std::min(request.give_up_at, deadline());
  const std::string key = hex(request.key.str());
  bool resync = false;
  std::int64_t not_after = 0;
  const Build build = [&](PgConnection& conn) {
    // The estimate drifts with the two clocks' rates: read again every minute.
    if (resync || Clock::now() - conn.clock_read_at() > kClockReadEvery) conn.resync_clock(until);
    not_after = request.give_up_at == Clock::time_point::max()
                    ? 0
                    : conn.server_time_us(request.give_up_at);
    return Params{service_, key, std::string(request.owner), number_text(request.lease.count()),
                  number_text(not_after), host_, pid_, number_text(thread_id()),
                  hex(request.name)};
  };
  // A refused acquire asks what it met: a holder (busy), a key freed since (try again, a
  // few times at most), or its own lateness.
  constexpr int kRounds = 3;
  GrantReply reply;
  for (int round = 0; round < kRounds; ++round) {
    reply = grant_of(call(PgStatement::kAcquire, build, until));
    if (reply.kind != GrantReply::Kind::kBusy) return reply;
    Params asked{service_, key, number_text(not_after)};
    if (request.waiting) asked.push_back(number_text(waiter_noted_for().count()));
    const BusyAnswer busy = busy_of(call(
        request.waiting ? PgStatement::kNoteWaiter : PgStatement::kBusy, std::move(asked), until));
    if (!busy.known) return reply;  // busy, holder unknown
    if (busy.late) {
      // Late by the connection's estimate of the server's clock, not by ours: read the clock
      // again and ask once more.
      if (!resync && Clock::now() < request.give_up_at) {
        resync = true;
        continue;
      }
      // Late indeed: an earlier attempt of this owner may hold the key, which nobody would
      // release. (Owner-checked; a rare path.)
      release(request.key, request.owner, Millis{0});
      reply.kind = GrantReply::Kind::kUnavailable;
      reply.error = "the database answered after the command timeout; nothing was taken";
      return reply;
    }
    reply.last_token = busy.last_token;
    reply.ttl = busy.ttl;
    if (busy.ttl > Millis{0}) return reply;
  }
  return reply;
}

void PostgresBackend::renew(std::vector<RenewItem>& items) {
  if (items.empty()) return;
  Params keys, owners, ttls, tokens;
  // An answer after a lease's validity comes too late for it; the others wait no less.
  const auto until = renewal_until(items, Clock::now(), deadline());
  for (const RenewItem& item : items) {
    keys.push_back(hex(item.key->str()));
    owners.emplace_back(item.owner);
    ttls.push_back(number_text(item.ttl.count()));
    tokens.push_back(number_text(static_cast<std::int64_t>(
        std::min<std::uint64_t>(item.token, std::numeric_limits<std::int64_t>::max()))));
  }
  for (auto& item : items) item.outcome = RenewOutcome::kUnavailable;
  const PgResult result = call(PgStatement::kRenew,
                               Params{service_, array_of(keys), array_of(owners),
                                      array_of(ttls), array_of(tokens)},
                               until, PgPool::Lane::kRenewal);
  if (result.status != Status::kOk) return;
  for (int row = 0; row < result.rows(); ++row) {
    const auto index = static_cast<std::size_t>(result.number(row, 0) - 1);
    if (index >= items.size()) continue;
    const auto code = result.number(row, 1);
    items[index].outcome = code == 0   ? RenewOutcome::kRenewed
                           : code == 2 ? RenewOutcome::kTaken
                                       : RenewOutcome::kGone;
  }
}

Params PostgresBackend::release_params(const Key& key, std::string_view owner,
                                       Millis keep_for) const {
  return Params{service_, hex(key.str()), std::string(owner), number_text(keep_for.count()),
                statements_->channel(), payload_of(key.str())};
}

ReleaseOutcome PostgresBackend::missed(const Key& key, std::string_view owner,
                                       Clock::time_point until, bool wait) noexcept {
  try {
    return missed_outcome_of(call(PgStatement::kReleaseMissed,
                                  Params{service_, hex(key.str()), std::string(owner)}, until,
                                  PgPool::Lane::kShared, wait));
  } catch (...) {
    return ReleaseOutcome::kGone;  // lost either way
  }
}

ReleaseOutcome PostgresBackend::release_once_more(const Key& key, const std::string& owner,
                                                  Millis keep_for) noexcept {
  try {
    const auto until = deadline();
    return release_outcome(call(PgStatement::kRelease, release_params(key, owner, keep_for),
                                until, PgPool::Lane::kShared, false),
                           key, owner, until, false);
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

ReleaseOutcome PostgresBackend::release(const Key& key, std::string_view owner,
                                        Millis keep_for) noexcept {
  try {
    const auto until = deadline();
    PgResult result = call(PgStatement::kRelease, release_params(key, owner, keep_for), until);
    // Refused (a lock or statement timeout, a full notification queue): nothing was applied,
    // and the key would stay held for the rest of its lease. Once more.
    if (result.status == Status::kRefused) {
      result = call(PgStatement::kRelease, release_params(key, owner, keep_for), until);
    }
    if (result.status == Status::kOk) sweep_now_and_then();
    return release_outcome(result, key, owner, until, true);
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

bool PostgresBackend::release_later(const Key& key, std::string_view owner, Millis keep_for,
                                    std::function<void(ReleaseOutcome)> done) noexcept {
  try {
    sweep_now_and_then();
    // Refused by the server: sent again, synchronously, on the settler's thread; nothing
    // released: why is asked there too. It never waits for a pool connection there: the
    // settler must not (see post_sweep).
    auto answered = [self = weak_from_this(), key, owner = std::string(owner), keep_for,
                     done](PgResult result) {
      const bool refused = result.status == Status::kRefused;
      const ReleaseOutcome outcome = release_outcome_of(result);
      if (!refused && outcome != ReleaseOutcome::kGone) return done(outcome);
      // What it is when the settler cannot do better: not applied, or lost either way.
      const ReleaseOutcome fallback = refused ? ReleaseOutcome::kUnavailable : outcome;
      try {
        settler::post([self, key, owner, keep_for, done, refused, fallback] {
          const auto backend = self.lock();
          if (!backend) return done(fallback);
          done(refused ? backend->release_once_more(key, owner, keep_for)
                       : backend->missed(key, owner, backend->deadline(), false));
        });
      } catch (...) {
        done(fallback);
      }
    };
    return pool_->send_detached(PgStatement::kRelease, release_params(key, owner, keep_for),
                                deadline(), std::move(answered));
  } catch (...) {
    return false;  // nothing was sent, or the release is owner-checked and may go again
  }
}

void PostgresBackend::sweep_now_and_then() noexcept {
  const auto now = Clock::now();
  auto due = next_sweep_.load();
  if (now.time_since_epoch().count() < due) return;
  const auto next = later(now, kSweepEvery).time_since_epoch().count();
  if (!next_sweep_.compare_exchange_strong(due, next)) return;  // another thread sweeps
  // On the settler's thread: no caller waits for it. The pool outlives the job.
  try {
    post_sweep();
  } catch (...) {  // out of memory: the next sweep is due in kSweepEvery
  }
}

void PostgresBackend::post_sweep() {
  settler::post([pool = pool_, timeout = config_.command_timeout, name = config_.name] {
    // Only a connection nobody uses: the settler must never wait for one, as the threads
    // whose owed answers it reads may hold the others.
    std::string error = "no idle connection; again later";
    PgPool::Handle conn = pool->take_idle();
    if (conn) {
      const PgResult swept =
          conn->run(PgStatement::kSweep, Params{}, later(Clock::now(), timeout));
      error = swept.status == Status::kOk ? "" : swept.error;
    }
    if (!error.empty()) log(LogLevel::kDebug, "backend {}: sweeping old rows: {}", name, error);
  });
}

std::vector<LockInfo> PostgresBackend::list(std::string_view pattern) {
  const PgResult result = checked(call(PgStatement::kList, Params{service_}, deadline()));
  std::vector<LockInfo> out;
  for (int row = 0; row < result.rows(); ++row) {
    LockInfo info = lock_info(result, row);
    if (glob_match(pattern, info.key)) out.push_back(std::move(info));
  }
  return out;
}

std::optional<LockInfo> PostgresBackend::inspect(const Key& key) {
  const PgResult& result =
      checked(call(PgStatement::kInspect, Params{service_, hex(key.str())}, deadline()));
  if (result.rows() == 0) return std::nullopt;
  return lock_info(result, 0);
}

std::optional<LockInfo> PostgresBackend::force_release(const Key& key, const AuditEntry& who) {
  const PgResult result = checked(call(
      PgStatement::kForceRelease,
      Params{service_, hex(key.str()), statements_->channel(), payload_of(key.str()), who.id,
             hex(who.user), hex(who.host), number_text(who.pid), hex(who.note)},
      deadline()));
  if (result.rows() == 0) return std::nullopt;
  LockInfo removed = lock_info(result, 0);
  log(LogLevel::kWarn,
      "forced release: backend={} key={} owner={} token={} by {}@{} pid {} note=\"{}\"",
      config_.name, printable(removed.key), removed.owner, removed.token, who.user, who.host,
      who.pid, printable(who.note));
  return removed;
}

std::vector<AuditEntry> PostgresBackend::history(std::size_t limit) {
  const auto most = std::min<std::size_t>(limit, std::numeric_limits<std::int64_t>::max());
  const PgResult result = checked(call(
      PgStatement::kHistory,
      Params{service_, number_text(static_cast<std::int64_t>(most))}, deadline()));
  std::vector<AuditEntry> out;
  for (int row = 0; row < result.rows(); ++row) out.push_back(audit_entry(result, row));
  return out;
}

RunClaimReply PostgresBackend::claim_run(const Key& key, const RunRecord& mine, Millis keep) {
  const PgResult result = checked(call(
      PgStatement::kClaimRun,
      Params{service_, hex(key.str()), mine.owner, number_text(std::max(keep, Millis{1}).count()),
             hex(mine.label), hex(mine.host), number_text(mine.pid),
             number_text(static_cast<std::int64_t>(mine.token))},
      deadline()));
  if (result.rows() == 0) return {ClaimStatus::kNotHeld, {}};
  const bool claimed = result.number(0, 0) == 1;
  return {claimed ? ClaimStatus::kClaimed : ClaimStatus::kAlreadyRan, run_record(result, 0, 1)};
}

bool PostgresBackend::finish_run(const Key& key, std::string_view owner,
                                 std::string_view outcome) noexcept {
  try {
    const PgResult result =
        call(PgStatement::kFinishRun,
             Params{service_, hex(key.str()), std::string(owner), hex(outcome)}, deadline());
    return result.status == Status::kOk && result.rows() == 1;
  } catch (...) {
    return false;
  }
}

std::vector<RunRecord> PostgresBackend::list_runs(std::string_view pattern) {
  const PgResult result = checked(call(PgStatement::kListRuns, Params{service_}, deadline()));
  std::vector<RunRecord> out;
  for (int row = 0; row < result.rows(); ++row) {
    RunRecord record = run_record(result, row, 0);
    if (glob_match(pattern, record.key)) out.push_back(std::move(record));
  }
  return out;
}

}  // namespace

Engine make_postgres_backend(const BackendConfig& config, const std::string& service,
                             std::shared_ptr<Metrics> metrics) {
  if (config.dsn.empty()) {
    throw ConfigError(fmt::format("backends.{}: a postgres backend needs dsn", config.name));
  }
  if (!PgStatements::valid_table(config.table)) {
    throw ConfigError(fmt::format(
        "backends.{}.table: '{}' is not a table name like dlock_locks or app.dlock_locks",
        config.name, printable(config.table)));
  }
  if (!usable_service(service)) {
    throw ConfigError(fmt::format(
        "service '{}': a postgres backend stores it as text: UTF-8 without NUL bytes, at most "
        "1024 bytes",
        printable(service)));
  }
  return Engine::of(std::make_shared<PostgresBackend>(config, service, std::move(metrics)));
}

}  // namespace dlock::internal
