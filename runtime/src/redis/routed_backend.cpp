#include "redis/routed_backend.hpp"

#include <fmt/format.h>

#include "redis/backend_admin.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/reply.hpp"
#include "redis/run_records.hpp"
#include "settler.hpp"

namespace dlock::internal {
namespace {

// Whether a reply that is not an answer says the command was not applied: never sent, or
// refused before it ran (the script unknown, the key elsewhere, not a master right now).
bool nothing_applied(const Reply& reply) {
  if (reply.status() == Reply::Status::kNotSent) return true;
  if (reply.status() != Reply::Status::kOk) return false;
  switch (reply.server_error()) {
    case ServerError::kNoScript:
    case ServerError::kMoved:
    case ServerError::kAsk:
    case ServerError::kTryAgain:
    case ServerError::kClusterDown:
    case ServerError::kReadOnly:
    case ServerError::kNotReady: return true;
    case ServerError::kNone:
    case ServerError::kOther: return false;
  }
  return false;
}

}  // namespace

ReleaseOutcome RoutedBackend::release(const Key& key, std::string_view owner,
                                      Millis keep_for) noexcept {
  try {
    const LockKeys keys = lock_keys(service_, key.str());
    const ScriptCall call = release_call(keys, owner, keep_for);
    return release_outcome_of(on_server_of(
        keys.lock, [&](Connection& conn, bool asking) { return call.run(conn, asking); }));
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

bool RoutedBackend::release_later(const Key& key, std::string_view owner, Millis keep_for,
                                  std::function<void(ReleaseOutcome)> done) noexcept {
  try {
    const LockKeys keys = lock_keys(service_, key.str());
    const auto read = [](const Reply& reply) -> std::optional<ReleaseOutcome> {
      const ReleaseOutcome outcome = release_outcome_of(reply);
      if (outcome == ReleaseOutcome::kUnavailable) return std::nullopt;
      return outcome;
    };
    const auto again = [self = weak_from_this(), key, owner = std::string(owner), keep_for] {
      const auto backend = self.lock();
      return backend ? backend->release(key, owner, keep_for) : ReleaseOutcome::kUnavailable;
    };
    return send_release<ReleaseOutcome>(keys.lock, release_call(keys, owner, keep_for), read,
                                        again, ReleaseOutcome::kUnavailable, std::move(done));
  } catch (...) {
    return false;
  }
}

std::vector<ReleaseOutcome> RoutedBackend::release_together(
    const std::vector<ReleaseItem>& items) noexcept {
  try {
    const std::vector<LockKeys> keys = keys_of(items);
    const ScriptCall call = release_together_call(keys, items);
    return release_outcomes_of(
        on_server_of(keys.front().lock,
                     [&](Connection& conn, bool asking) { return call.run(conn, asking); }),
        items.size());
  } catch (...) {
    return std::vector<ReleaseOutcome>(items.size(), ReleaseOutcome::kUnavailable);
  }
}

bool RoutedBackend::release_together_later(
    const std::vector<ReleaseItem>& items,
    std::function<void(std::vector<ReleaseOutcome>)> done) noexcept {
  try {
    if (items.empty()) return false;
    const std::vector<LockKeys> keys = keys_of(items);
    const auto read = [count = items.size()](const Reply& reply)
        -> std::optional<std::vector<ReleaseOutcome>> {
      std::vector<ReleaseOutcome> outcomes = release_outcomes_of(reply, count);
      if (outcomes.front() == ReleaseOutcome::kUnavailable) return std::nullopt;
      return outcomes;
    };
    const auto again = [self = weak_from_this(), items] {
      const auto backend = self.lock();
      return backend ? backend->release_together(items)
                     : std::vector<ReleaseOutcome>(items.size(), ReleaseOutcome::kUnavailable);
    };
    return send_release<std::vector<ReleaseOutcome>>(
        keys.front().lock, release_together_call(keys, items), read, again,
        std::vector<ReleaseOutcome>(items.size(), ReleaseOutcome::kUnavailable), std::move(done));
  } catch (...) {
    return false;
  }
}

std::vector<LockKeys> RoutedBackend::keys_of(const std::vector<ReleaseItem>& items) const {
  std::vector<LockKeys> keys;
  keys.reserve(items.size());
  for (const ReleaseItem& item : items) keys.push_back(lock_keys(service_, item.key.str()));
  return keys;
}

template <typename Outcome>
bool RoutedBackend::send_release(const std::string& lock, ScriptCall call,
                                 std::function<std::optional<Outcome>(const Reply&)> read,
                                 std::function<Outcome()> again, Outcome unknown,
                                 std::function<void(Outcome)> done) {
  const auto pool = known_pool_of(lock);
  if (!pool) return false;
  const auto on_reply = [read = std::move(read), again = std::move(again),
                         unknown = std::move(unknown), done](Reply reply, ConnectionPool::Pin pin) {
    std::optional<Outcome> outcome = read(reply);
    // Sent again only after an answer that says nothing was applied. Otherwise (no answer in
    // time, a broken connection, a script that failed part way) the release may have been
    // applied, and sending it again could find the next owner's key, or this release's own
    // work, and call that a loss: the outcome is unknown, as release() says then.
    if (outcome || !nothing_applied(reply)) {
      pin = {};  // applied, or nothing more to learn: the thread may go on
      done(outcome ? std::move(*outcome) : unknown);
      return;
    }
    // An answer that says "not here" (NOSCRIPT, a redirect, a demoted master), so nothing
    // was applied: sent again the way release() sends it, off this thread. The thread stays
    // pinned until then, so that its later commands still come after the release.
    pin.hold_off();
    auto kept = std::make_shared<ConnectionPool::Pin>(std::move(pin));
    settler::post([again, done, kept] {
      Outcome later_outcome = again();
      *kept = {};
      done(std::move(later_outcome));
    });
  };
  std::string error;
  // The first time on a connection with EVAL, which cannot meet NOSCRIPT: a release that
  // is not applied as sent would let the thread's next command overtake it.
  const auto append = [&call](Connection& conn) {
    call.append(conn, !conn.sent_script(call.script->sha));
    conn.note_script(call.script->sha);
  };
  return pool->send_detached(append, on_reply, later(Clock::now(), config_.command_timeout),
                             error);
}

std::int64_t RoutedBackend::server_time_ms() {
  std::int64_t now_ms = 0;
  require(on_server_of({}, [&](Connection& conn,
                               bool asking) { return runs::read_time_ms(conn, now_ms, asking); }),
          config_.name, "TIME");
  return now_ms;
}

RunClaimReply RoutedBackend::claim_run(const Key& key, const RunRecord& mine, Millis keep) {
  const std::string lock_key = lock_keys(service_, key.str()).lock;
  const ScriptCall call =
      runs::claim_call(lock_key, runs::run_key(service_, key.str()), mine, keep);
  const Reply reply =
      on_server_of(lock_key, [&](Connection& conn, bool asking) { return call.run(conn, asking); });
  require(reply, config_.name, "recording the run");
  if (auto claim = runs::claim_of(reply, mine)) return std::move(*claim);
  throw BackendUnavailable(
      fmt::format("backend '{}': unexpected reply to the run claim", config_.name));
}

bool RoutedBackend::finish_run(const Key& key, std::string_view owner,
                               std::string_view outcome) noexcept {
  try {
    const std::string run_key = runs::run_key(service_, key.str());
    const ScriptCall call = runs::finish_call(run_key, owner, outcome);
    return runs::finished_of(on_server_of(
        run_key, [&](Connection& conn, bool asking) { return call.run(conn, asking); }));
  } catch (...) {
    return false;
  }
}

template <typename Item, typename Read>
std::vector<Item> RoutedBackend::read_matching(std::string_view pattern, std::string_view kind,
                                               const Read& read) {
  std::vector<Item> out;
  for (const auto& redis_key : scan_all(admin::scan_match(service_, kind))) {
    const auto key = admin::user_key_of(service_, redis_key, kind);
    if (!key || !glob_match(pattern, *key)) continue;
    std::optional<Item> item;
    require(on_server_of(redis_key,
                         [&](Connection& conn, bool asking) {
                           return read(conn, redis_key, *key, item, asking);
                         }),
            config_.name, "HGETALL");
    if (item) out.push_back(std::move(*item));
  }
  return out;
}

std::vector<RunRecord> RoutedBackend::list_runs(std::string_view pattern) {
  return read_matching<RunRecord>(pattern, "run", runs::read_run);
}

// Each lock is read from the server that holds it now.
std::vector<LockInfo> RoutedBackend::list(std::string_view pattern) {
  return read_matching<LockInfo>(pattern, "lock", admin::read_lock);
}

std::optional<LockInfo> RoutedBackend::inspect(const Key& key) {
  const std::string lock_key = lock_keys(service_, key.str()).lock;
  std::optional<LockInfo> info;
  require(on_server_of(lock_key,
                              [&](Connection& conn, bool asking) {
                                return admin::read_lock(conn, lock_key, key.str(), info, asking);
                              }),
                 config_.name, "HGETALL");
  return info;
}

std::optional<LockInfo> RoutedBackend::force_release(const Key& key, const AuditEntry& who) {
  const LockKeys keys = lock_keys(service_, key.str());
  const ScriptCall call = admin::force_release_call(keys);
  const Reply reply = on_server_of(
      keys.lock, [&](Connection& conn, bool asking) { return call.run(conn, asking); });
  require(reply, config_.name, "force release");
  std::optional<LockInfo> removed;
  std::int64_t now_ms = 0;
  if (!admin::removed_of(reply, key.str(), removed, now_ms)) {
    throw BackendUnavailable(
        fmt::format("backend '{}': unexpected reply to force release", config_.name));
  }
  if (!removed) return removed;
  const AuditEntry entry = admin::complete_audit(who, *removed, now_ms);
  admin::log_forced(config_.name, entry);
  const std::string audit = admin::audit_key(service_);
  require(on_server_of(audit,
                       [&](Connection& conn, bool asking) {
                         return admin::push_audit(conn, audit, entry, asking);
                       }),
          config_.name, "recording the audit entry (the lock was released)");
  return removed;
}

std::vector<AuditEntry> RoutedBackend::history(std::size_t limit) {
  std::vector<AuditEntry> out;
  const std::string audit = admin::audit_key(service_);
  require(on_server_of(audit,
                              [&](Connection& conn, bool asking) {
                                out.clear();
                                return admin::read_audit(conn, audit, limit, out, asking);
                              }),
                 config_.name, "LRANGE");
  return out;
}

}  // namespace dlock::internal
