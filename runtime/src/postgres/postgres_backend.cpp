#include "postgres/postgres_backend.hpp"

#include <fmt/format.h>

#include <limits>

#include "dlock/admin.hpp"
#include "log.hpp"
#include "owner.hpp"
#include "postgres/pg_backend.hpp"
#include "postgres/pg_rows.hpp"
#include "queue_standing.hpp"
#include "settler.hpp"

namespace dlock::internal {
namespace {

using Status = PgResult::Status;
using Params = std::vector<std::string>;

constexpr Millis kSweepEvery{std::chrono::minutes(10)};
constexpr Millis kClockReadEvery{std::chrono::minutes(1)};


}  // namespace

PgBackend::PgBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics)
    : config_(std::move(config)),
      service_(std::move(service)),
      statements_(std::make_shared<PgStatements>(config_.table)),
      pool_(std::make_shared<PgPool>(config_, statements_)),
      listener_(config_, statements_, std::move(metrics)),
      host_(hex(host_name())),
      pid_(number_text(process_id())) {}

std::string PgBackend::payload_of(std::string_view key) const {
  return service_ + ' ' + key_digest(key);
}

std::int64_t PgBackend::server_time_ms() {
  return checked(call(PgStatement::kServerTime, Params{}, deadline())).number(0, 0) / 1000;
}

PgResult PgBackend::call(PgStatement statement, const Build& build,
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

PgResult PgBackend::checked(PgResult result) const {
  if (result.status != Status::kOk) {
    throw BackendUnavailable(fmt::format("backend {}: {}", config_.name, result.error));
  }
  return result;
}

bool PgBackend::ensure_schema(PgConnection& conn, Clock::time_point deadline,
                                    std::string& error) {
  std::lock_guard lock(schema_mutex_);
  if (schema_ready_) return true;
  // Checked first: creating needs the CREATE privilege, using an existing table does not.
  for (int attempt = 0; attempt < 3; ++attempt) {
    bool earlier = false;
    PgResult exists = conn.run_text(statements_->exists(), deadline);
    if (exists.status == Status::kOk && exists.text(0, 0) == "t") {
      if (exists.number(0, 1) != 1 || exists.number(0, 3) != 1) {
        error = fmt::format(
            "the lock table {} has another layout (made by another version of dlock?): it "
            "lacks key_hash; drop it and its _runs and _audit tables, or name another table",
            statements_->table());
        return false;
      }
      if (exists.number(0, 2) == 3) {
        schema_ready_ = true;
        return true;
      }
      // A table of an earlier version, without the queue columns: the schema adds them.
      earlier = true;
    }
    PgResult created = conn.run_text(statements_->schema(), deadline);
    if (created.status == Status::kOk) continue;  // looked at again
    if (earlier) {
      error = fmt::format(
          "the lock table {} was made by an earlier version of dlock and lacks the queue "
          "columns; adding them failed ({}); the table's owner can add them: {}",
          statements_->table(), created.error, statements_->upgrade());
      return false;
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

PgBackend::Params PgBackend::grant_params(PgConnection& conn, const GrantRequest& request,
                                          bool resync, Clock::time_point until) {
  // The estimate drifts with the two clocks' rates: read again every minute.
  if (resync || Clock::now() - conn.clock_read_at() > kClockReadEvery) conn.resync_clock(until);
  const std::int64_t not_after = request.give_up_at == Clock::time_point::max()
                                     ? 0
                                     : conn.server_time_us(request.give_up_at);
  return Params{service_, hex(request.key.str()), std::string(request.owner),
                number_text(request.lease.count()), number_text(not_after), host_, pid_,
                number_text(thread_id()), hex(request.name)};
}

// A plain exclusive try takes the key's row (kAcquire: one statement, the fast path); every
// other request, and every try of a waiter, goes through the key's queue (pg_queue.cpp).
GrantReply PgBackend::acquire(const GrantRequest& request) {
  if (request.kind != LockKind::kExclusive || request.fair || request.place > Millis{0}) {
    return acquire_queued(request);
  }
  const auto until = std::min(request.give_up_at, deadline());
  bool resync = false;
  std::string not_after;
  const Build build = [&](PgConnection& conn) {
    Params params = grant_params(conn, request, resync, until);
    not_after = params[4];
    return params;
  };
  // A refused acquire asks what it met: a holder or a queue (busy, or refused when the queue
  // is a semaphore's), a key freed since (try again, a few times at most), or its own
  // lateness.
  constexpr int kRounds = 3;
  GrantReply reply;
  for (int round = 0; round < kRounds; ++round) {
    reply = grant_of(call(PgStatement::kAcquire, build, until));
    if (reply.kind != GrantReply::Kind::kBusy) return reply;
    const BusyAnswer busy = busy_of(call(
        PgStatement::kBusy, Params{service_, hex(request.key.str()), not_after}, until));
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
    if (busy.first_permits != 0) {  // a semaphore's queue: waiting would not help
      reply.kind = GrantReply::Kind::kRefused;
      reply.error = held_as(Queued{LockKind::kPermit, busy.first_permits});
      return reply;
    }
    reply.last_token = busy.last_token;
    reply.ttl = busy.ttl;
    if (busy.ttl > Millis{0}) return reply;
  }
  return reply;
}

// Items of owners in a queue are renewed there (pg_queue.cpp), the others in their keys' rows.
void PgBackend::renew(std::vector<RenewItem>& all) {
  std::vector<RenewItem*> items, in_queues;
  for (RenewItem& item : all) {
    item.outcome = RenewOutcome::kUnavailable;
    (queued(item.owner) ? in_queues : items).push_back(&item);
  }
  // An answer after a lease's validity comes too late for it; the others wait no less.
  const auto until = renewal_until(all, Clock::now(), deadline());
  renew_in(PgStatement::kQueueRenew, in_queues, until);
  renew_in(PgStatement::kRenew, items, until);
}

// kRenew (the rows' own holders; it also raises each key's token counter to the lease's)
// or kQueueRenew (entries of queues): one statement for all of `items`.
void PgBackend::renew_in(PgStatement statement, std::vector<RenewItem*>& items,
                         Clock::time_point until) {
  if (items.empty()) return;
  Params params{service_};
  Params keys, owners, ttls, tokens;
  for (const RenewItem* item : items) {
    keys.push_back(hex(item->key->str()));
    owners.emplace_back(item->owner);
    ttls.push_back(number_text(item->ttl.count()));
    tokens.push_back(number_text(static_cast<std::int64_t>(
        std::min<std::uint64_t>(item->token, std::numeric_limits<std::int64_t>::max()))));
  }
  for (const Params* column : {&keys, &owners, &ttls}) params.push_back(array_of(*column));
  if (statement == PgStatement::kRenew) params.push_back(array_of(tokens));
  const PgResult result = call(statement, std::move(params), until, PgPool::Lane::kRenewal);
  if (result.status != Status::kOk) return;
  for (int row = 0; row < result.rows(); ++row) {
    const auto index = static_cast<std::size_t>(result.number(row, 0) - 1);
    if (index >= items.size()) continue;
    const auto code = result.number(row, 1);  // a queue's entry is never taken
    items[index]->outcome = code == 0   ? RenewOutcome::kRenewed
                            : code == 2 ? RenewOutcome::kTaken
                                        : RenewOutcome::kGone;
  }
}

PgBackend::Params PgBackend::release_params(const Key& key, std::string_view owner,
                                          Millis keep_for) const {
  return Params{service_, hex(key.str()), std::string(owner), number_text(keep_for.count()),
                statements_->channel(), payload_of(key.str())};
}

ReleaseOutcome PgBackend::release_outcome(const PgResult& result, const Key& key,
                                          std::string_view owner, Millis keep_for,
                                          Clock::time_point until, bool wait) {
  const ReleaseOutcome outcome = release_outcome_of(result);
  return outcome == ReleaseOutcome::kGone ? after_miss(key, owner, keep_for, until, wait)
                                          : outcome;
}

// The key's row was not the owner's: its entry may be in the queue all the same (a queue try
// whose answer was lost, applied after the release that left the queue and forgot the
// owner). Else, why.
ReleaseOutcome PgBackend::after_miss(const Key& key, std::string_view owner, Millis keep_for,
                                     Clock::time_point until, bool wait) noexcept {
  const ReleaseOutcome queued = release_queued(key, owner, keep_for, wait);
  if (queued != ReleaseOutcome::kGone) return queued;  // released, kept, or not known
  return missed(key, owner, until, wait);
}

ReleaseOutcome PgBackend::missed(const Key& key, std::string_view owner,
                                       Clock::time_point until, bool wait) noexcept {
  try {
    return missed_outcome_of(call(PgStatement::kReleaseMissed,
                                  Params{service_, hex(key.str()), std::string(owner)}, until,
                                  PgPool::Lane::kShared, wait));
  } catch (...) {
    return ReleaseOutcome::kGone;  // lost either way
  }
}

ReleaseOutcome PgBackend::release_once_more(const Key& key, const std::string& owner,
                                             Millis keep_for) noexcept {
  try {
    if (queued(owner)) return release_queued(key, owner, keep_for, false);
    const auto until = deadline();
    return release_outcome(call(PgStatement::kRelease, release_params(key, owner, keep_for),
                                until, PgPool::Lane::kShared, false),
                           key, owner, keep_for, until, false);
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

ReleaseOutcome PgBackend::release(const Key& key, std::string_view owner,
                                   Millis keep_for) noexcept {
  try {
    if (queued(owner)) return release_queued(key, owner, keep_for, true);
    const auto until = deadline();
    PgResult result = call(PgStatement::kRelease, release_params(key, owner, keep_for), until);
    // Refused (a lock or statement timeout, a full notification queue): nothing was applied,
    // and the key would stay held for the rest of its lease. Once more.
    if (result.status == Status::kRefused) {
      result = call(PgStatement::kRelease, release_params(key, owner, keep_for), until);
    }
    if (result.status == Status::kOk) sweep_now_and_then();
    return release_outcome(result, key, owner, keep_for, until, true);
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

bool PgBackend::release_later(const Key& key, std::string_view owner, Millis keep_for,
                              std::function<void(ReleaseOutcome)> done) noexcept {
  try {
    sweep_now_and_then();
    // Refused by the server: sent again, synchronously, on the settler's thread; nothing
    // released: why is asked there too. It never waits for a pool connection there: the
    // settler must not (see post_sweep).
    // A queue's entry (pg_queue.cpp) that is not there is gone: no row holds it.
    const bool in_queue = queued(owner);
    auto answered = [self = weak_from_this(), key, owner = std::string(owner), keep_for, done,
                     in_queue](PgResult result) {
      const bool refused = result.status == Status::kRefused;
      const ReleaseOutcome outcome = release_outcome_of(result);
      if (in_queue && result.status == Status::kOk) {
        if (const auto backend = self.lock()) backend->forget(owner);
        return done(outcome);
      }
      if (!refused && outcome != ReleaseOutcome::kGone) return done(outcome);
      // What it is when the settler cannot do better: not applied, or lost either way.
      const ReleaseOutcome fallback = refused ? ReleaseOutcome::kUnavailable : outcome;
      try {
        settler::post([self, key, owner, keep_for, done, refused, fallback] {
          const auto backend = self.lock();
          if (!backend) return done(fallback);
          done(refused ? backend->release_once_more(key, owner, keep_for)
                       : backend->after_miss(key, owner, keep_for, backend->deadline(), false));
        });
      } catch (...) {
        done(fallback);
      }
    };
    return pool_->send_detached(in_queue ? PgStatement::kQueueRelease : PgStatement::kRelease,
                                release_params(key, owner, keep_for),
                                deadline(), std::move(answered));
  } catch (...) {
    return false;  // nothing was sent, or the release is owner-checked and may go again
  }
}

void PgBackend::sweep_now_and_then() noexcept {
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

void PgBackend::post_sweep() {
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
  return Engine::of(std::make_shared<PgBackend>(config, service, std::move(metrics)));
}

}  // namespace dlock::internal
