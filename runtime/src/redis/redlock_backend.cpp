#include "redis/redlock_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "log.hpp"
#include "redis/backend_admin.hpp"
#include "redis/fan_out.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/pool.hpp"
#include "redis/run_records.hpp"
#include "redis/subscriber.hpp"

namespace dlock::internal {
namespace {

// Redlock's fixed allowance for clock drift, besides the configured share of the lease.
constexpr Millis kDriftFloor{2};
constexpr Millis kMinNodeTimeout{2};
// Where acquire_call() puts the not-after time (acquire.lua's ARGV[3]).
constexpr std::size_t kAcquireNotAfterArg = 2;
// After a failed connect an instance is skipped (counted as failed at once) for this long,
// so that a dead instance does not cost every call a connect timeout.
constexpr Millis kReconnectPause{100};

struct Instance {
  explicit Instance(const Endpoint& endpoint, const BackendConfig& config)
      : pool(endpoint, config) {}
  ConnectionPool pool;
  std::atomic<Clock::rep> skip_until{0};
};

// What one grant of ours is, for the renewals and the release that follow it.
struct Grant {
  std::uint64_t token = 0;
  std::string name;
};

class RedlockBackend final : public Backend, public RunStore, public AdminBackend {
 public:
  RedlockBackend(BackendConfig config, std::string service, std::shared_ptr<Metrics> metrics)
      : config_(std::move(config)),
        service_(std::move(service)),
        metrics_(std::move(metrics)),
        quorum_(config_.endpoints.size() / 2 + 1) {
    for (const auto& endpoint : config_.endpoints) {
      instances_.push_back(std::make_unique<Instance>(endpoint, config_));
    }
  }

  GrantReply acquire(const GrantRequest& request) override {
    const auto start = Clock::now();
    const LockKeys keys = lock_keys(service_, request.key.str());
    const Millis key_ttl = request.lease + drift(request.lease);
    auto handles = borrow();
    const auto deadline = Clock::now() + node_timeout(request.lease);
    // One call, built once (its owner details cost system calls); only the not-after time,
    // on each instance's own clock, differs between the instances.
    const ScriptCall call = acquire_call(keys, request, key_ttl, 0);
    std::vector<ScriptCall> calls(instances_.size());
    std::vector<FanOutRequest> requests(instances_.size());
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      if (!handles[i]) continue;
      calls[i] = call;
      calls[i].args[kAcquireNotAfterArg] = std::to_string(handles[i]->server_time_us(deadline));
      requests[i] = {&*handles[i], {&calls[i]}, {}};
    }
    run(requests, handles, deadline);

    std::size_t granted = 0, busy = 0, answered = 0;
    std::uint64_t token = 0;
    Millis busy_ttl{0};
    bool unknown = false;
    std::string error;
    std::vector<bool> ours(instances_.size(), false);
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      const Reply& reply = requests[i].replies.empty() ? kNoConnection : requests[i].replies[0];
      const GrantReply grant = grant_of(reply);
      unknown = unknown || grant.outcome_unknown;
      if (grant.kind == GrantReply::Kind::kAcquired) {
        ++granted;
        ++answered;
        ours[i] = true;
        token = std::max(token, grant.token);
      } else if (grant.kind == GrantReply::Kind::kBusy) {
        ++busy;
        ++answered;
        if (grant.ttl > Millis{0} && (busy_ttl == Millis{0} || grant.ttl < busy_ttl)) busy_ttl = grant.ttl;
      } else if (error.empty()) {
        error = fmt::format("{}: {}", to_string(config_.endpoints[i]),
                            grant.error.empty() ? std::string("no connection") : grant.error);
      }
    }
    const auto elapsed = Clock::now() - start;
    if (granted >= quorum_ && elapsed < request.lease) {
      remember(request.owner, Grant{token, std::string(request.name)});
      GrantReply out;
      out.kind = GrantReply::Kind::kAcquired;
      out.token = token;
      return out;
    }
    // No quorum (or it came too late to be worth anything): undo what we got.
    if (granted > 0) undo(keys, request.owner, ours, handles, request.lease);
    GrantReply out;
    out.outcome_unknown = unknown;
    if (answered < quorum_) {
      out.kind = GrantReply::Kind::kUnavailable;
      out.error = fmt::format("only {} of {} instances answered; a quorum is {} (first failure: {})",
                              answered, instances_.size(), quorum_, error);
    } else if (granted >= quorum_) {
      out.kind = GrantReply::Kind::kUnavailable;
      out.error = fmt::format("the quorum took {}ms, longer than the lease; released it",
                              std::chrono::duration_cast<Millis>(elapsed).count());
    } else {
      out.kind = GrantReply::Kind::kBusy;
      out.ttl = busy_ttl;
    }
    return out;
  }

  void renew(std::vector<RenewItem>& items) override {
    const auto sent = Clock::now();
    std::vector<LockKeys> keys;
    std::vector<ScriptCall> calls;
    std::vector<Grant> grants;
    Millis longest{0};
    for (const auto& item : items) {
      keys.push_back(lock_keys(service_, item.key->str()));
      grants.push_back(recall(item.owner));
      calls.push_back(renew_call(keys.back(), item.owner, item.ttl + drift(item.ttl), grants.back().token));
      longest = std::max(longest, item.ttl);
    }
    auto handles = borrow();
    const auto deadline = Clock::now() + node_timeout(longest);
    std::vector<FanOutRequest> requests(instances_.size());
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      if (!handles[i]) continue;
      requests[i].conn = &*handles[i];
      for (const auto& call : calls) requests[i].calls.push_back(&call);
    }
    run(requests, handles, deadline);

    // Instances that lost a key we still hold by quorum (restarted empty, flushed) get it
    // back, so that the next failure of another instance does not cost the quorum.
    std::vector<ScriptCall> heal_calls;
    std::vector<std::pair<std::size_t, std::size_t>> heal;  // (instance, item)
    const bool in_time = Clock::now() - sent < longest;
    for (std::size_t k = 0; k < items.size(); ++k) {
      std::size_t renewed = 0, gone = 0, taken = 0;
      for (std::size_t i = 0; i < instances_.size(); ++i) {
        const RenewOutcome outcome =
            requests[i].replies.empty() ? RenewOutcome::kUnavailable : renew_outcome_of(requests[i].replies[k]);
        renewed += outcome == RenewOutcome::kRenewed;
        gone += outcome == RenewOutcome::kGone;
        taken += outcome == RenewOutcome::kTaken;
      }
      const std::size_t unknown = instances_.size() - renewed - gone - taken;
      if (renewed >= quorum_ && in_time) {
        items[k].outcome = RenewOutcome::kRenewed;
        for (std::size_t i = 0; i < instances_.size() && gone > 0; ++i) {
          if (!requests[i].replies.empty() && renew_outcome_of(requests[i].replies[k]) == RenewOutcome::kGone) {
            heal.emplace_back(i, k);
          }
        }
      } else if (renewed + unknown >= quorum_) {
        items[k].outcome = RenewOutcome::kUnavailable;  // retried; expires unless confirmed
      } else {
        items[k].outcome = taken > 0 ? RenewOutcome::kTaken : RenewOutcome::kGone;
      }
    }
    if (!heal.empty()) restore(items, keys, grants, heal, handles);
  }

  ReleaseOutcome release(const Key& key, std::string_view owner, Millis keep_for) noexcept override {
    try {
      const Grant grant = forget(owner);
      const LockKeys keys = lock_keys(service_, key.str());
      const Millis keep = keep_for > Millis{0} ? keep_for + drift(keep_for) : Millis{0};
      const ScriptCall call = release_call(keys, owner, keep, grant.token);
      auto handles = borrow();
      std::vector<FanOutRequest> requests(instances_.size());
      for (std::size_t i = 0; i < instances_.size(); ++i) {
        if (handles[i]) requests[i] = {&*handles[i], {&call}, {}};
      }
      run(requests, handles, Clock::now() + config_.command_timeout);
      std::size_t ours = 0, kept = 0, gone = 0, taken = 0;
      for (const auto& request : requests) {
        if (request.replies.empty()) continue;
        switch (release_outcome_of(request.replies[0])) {
          case ReleaseOutcome::kReleased: ++ours; break;
          case ReleaseOutcome::kKept: ++ours; ++kept; break;
          case ReleaseOutcome::kGone: ++gone; break;
          case ReleaseOutcome::kTaken: ++taken; break;
          case ReleaseOutcome::kUnavailable: break;
        }
      }
      const std::size_t unknown = instances_.size() - ours - gone - taken;
      if (ours >= quorum_) return kept > 0 ? ReleaseOutcome::kKept : ReleaseOutcome::kReleased;
      if (ours + unknown >= quorum_) return ReleaseOutcome::kUnavailable;
      return taken > 0 ? ReleaseOutcome::kTaken : ReleaseOutcome::kGone;
    } catch (...) {
      return ReleaseOutcome::kUnavailable;
    }
  }

  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return feed().watch(lock_keys(service_, key.str()).channel);
  }

  const BackendConfig& config() const override { return config_; }

  // Scheduled runs. These come from any thread, so they keep their per-instance state to
  // themselves (not in answered_mask_). Instances are asked one after the other: a claim
  // happens once per run, not once per lock.

  // The median of the instances' clocks, from a quorum of them.
  std::int64_t server_time_ms() override {
    std::vector<std::int64_t> times;
    std::string first_error;
    for (const auto& instance : instances_) {
      std::int64_t now_ms = 0;
      const Reply reply = instance->pool.run([&](Connection& conn) { return runs::read_time_ms(conn, now_ms); });
      if (reply.ok() && !reply.is_error()) {
        times.push_back(now_ms);
      } else if (first_error.empty()) {
        first_error = reply.ok() ? std::string(reply.text()) : reply.error();
      }
    }
    if (times.size() < quorum_) {
      throw BackendUnavailable(fmt::format("backend '{}': TIME: only {} of {} instances answered; a quorum is {} ({})",
                                           config_.name, times.size(), instances_.size(), quorum_, first_error));
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  // Claimed when a quorum of instances recorded it; a record on a quorum can exist for one
  // owner only, so two owners can never both claim a key.
  RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) override {
    const ScriptCall call = runs::claim_call(lock_keys(service_, key.str()).lock, runs::run_key(service_, key.str()),
                                             mine, keep);
    std::size_t claimed = 0;
    std::size_t unknown = 0;
    std::optional<RunClaimReply> ours;
    std::optional<RunClaimReply> earlier;
    std::string first_error;
    for (const auto& instance : instances_) {
      const Reply reply = instance->pool.run([&](Connection& conn) { return call.run(conn); });
      std::optional<RunClaimReply> claim = runs::claim_of(reply, mine);
      if (!claim) {
        ++unknown;
        if (first_error.empty()) first_error = reply.ok() ? std::string(reply.text()) : reply.error();
      } else if (claim->status == ClaimStatus::kClaimed) {
        ++claimed;
        if (!ours || claim->record.started_at_ms > ours->record.started_at_ms) ours = std::move(claim);
      } else if (claim->status == ClaimStatus::kAlreadyRan && !earlier) {
        earlier = std::move(claim);
      }
    }
    if (claimed >= quorum_) return std::move(*ours);
    if (claimed + unknown >= quorum_) {
      throw BackendUnavailable(fmt::format("backend '{}': recording the run: {} of {} instances did not answer ({})",
                                           config_.name, unknown, instances_.size(), first_error));
    }
    if (earlier) return std::move(*earlier);
    return RunClaimReply{ClaimStatus::kNotHeld, {}};
  }

  bool finish_run(const Key& key, std::string_view owner, std::string_view outcome) noexcept override {
    try {
      const ScriptCall call = runs::finish_call(runs::run_key(service_, key.str()), owner, outcome);
      std::size_t finished = 0;
      for (const auto& instance : instances_) {
        if (runs::finished_of(instance->pool.run([&](Connection& conn) { return call.run(conn); }))) ++finished;
      }
      return finished >= quorum_;
    } catch (...) {
      return false;
    }
  }

  // A key's record is the one a majority of the answering instances agree on (by owner);
  // otherwise the first found.
  std::vector<RunRecord> list_runs(std::string_view pattern) override {
    const std::string match = admin::scan_match(service_, "run");
    std::map<std::string, std::vector<RunRecord>> seen;
    std::size_t answered = 0;
    std::string first_error;
    for (const auto& instance : instances_) {
      std::vector<RunRecord> here;
      const Reply reply = instance->pool.run([&](Connection& conn) {
        here.clear();
        std::vector<std::string> found;
        Reply scanned = admin::scan_keys_sorted(conn, match, found);
        if (!scanned.ok() || scanned.is_error()) return scanned;
        for (const auto& run_key : found) {
          const auto key = admin::user_key_of(service_, run_key, "run");
          if (!key || !glob_match(pattern, *key)) continue;
          std::optional<RunRecord> record;
          Reply read = runs::read_run(conn, run_key, *key, record);
          if (!read.ok() || read.is_error()) return read;
          if (record) here.push_back(std::move(*record));
        }
        return Reply::ok(nullptr);
      });
      if (!reply.ok() || reply.is_error()) {
        if (first_error.empty()) first_error = reply.ok() ? std::string(reply.text()) : reply.error();
        continue;
      }
      ++answered;
      for (auto& record : here) seen[record.key].push_back(std::move(record));
    }
    require_quorum(answered, first_error);
    std::vector<RunRecord> out;
    for (auto& entry : seen) {
      std::vector<RunRecord>& records = entry.second;  // not a structured binding: clang 14 cannot capture those
      std::size_t best = 0;
      std::size_t best_count = 0;
      for (std::size_t i = 0; i < records.size(); ++i) {
        const auto count = static_cast<std::size_t>(std::count_if(
            records.begin(), records.end(), [&](const RunRecord& r) { return r.owner == records[i].owner; }));
        if (count > best_count) {
          best = i;
          best_count = count;
        }
      }
      out.push_back(std::move(records[best]));
    }
    return out;
  }

  // Admin: every instance is asked; a lock is held when a majority holds it for one owner.

  std::vector<LockInfo> list(std::string_view pattern) override {
    const std::string match = admin::scan_match(service_);
    std::map<std::string, std::vector<std::optional<LockInfo>>> seen;
    std::vector<InstanceLockInfo> status(instances_.size());
    std::size_t answered = 0;
    std::string first_error;
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      std::vector<std::pair<std::string, std::optional<LockInfo>>> here;
      const Reply reply = instances_[i]->pool.run([&](Connection& conn) {
        here.clear();
        std::vector<std::string> found;
        Reply scanned = admin::scan_keys_sorted(conn, match, found);
        if (!scanned.ok() || scanned.is_error()) return scanned;
        for (const auto& lock_key : found) {
          const auto key = admin::user_key_of(service_, lock_key);
          if (!key || !glob_match(pattern, *key)) continue;
          std::optional<LockInfo> info;
          Reply read = admin::read_lock(conn, lock_key, *key, info);
          if (!read.ok() || read.is_error()) return read;
          if (info) here.emplace_back(*key, std::move(info));
        }
        return Reply::ok(nullptr);
      });
      if (!answered_ok(reply, i, first_error)) continue;
      ++answered;
      for (auto& [key, info] : here) {
        auto& per = seen[key];
        per.resize(instances_.size());
        per[i] = std::move(info);
      }
    }
    require_quorum(answered, first_error);
    std::vector<LockInfo> out;
    for (auto& [key, per] : seen) {
      per.resize(instances_.size());
      if (auto info = combine(per, answered_mask_)) out.push_back(std::move(*info));
    }
    return out;
  }

  std::optional<LockInfo> inspect(const Key& key) override {
    const std::string lock_key = lock_keys(service_, key.str()).lock;
    std::vector<std::optional<LockInfo>> per(instances_.size());
    std::size_t answered = 0;
    std::string first_error;
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      const Reply reply = instances_[i]->pool.run(
          [&](Connection& conn) { return admin::read_lock(conn, lock_key, key.str(), per[i]); });
      if (answered_ok(reply, i, first_error)) ++answered;
    }
    require_quorum(answered, first_error);
    return combine(per, answered_mask_);
  }

  std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) override {
    const LockKeys keys = lock_keys(service_, key.str());
    const ScriptCall call = admin::force_release_call(keys);
    std::vector<std::optional<LockInfo>> per(instances_.size());
    std::size_t answered = 0;
    std::int64_t now_ms = 0;
    std::string first_error;
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      const Reply reply = instances_[i]->pool.run([&](Connection& conn) { return call.run(conn); });
      std::int64_t at = 0;
      if (!answered_ok(reply, i, first_error)) continue;
      if (!admin::removed_of(reply, key.str(), per[i], at)) {
        answered_mask_[i] = false;
        if (first_error.empty()) first_error = "unexpected reply to force release";
        continue;
      }
      ++answered;
      now_ms = std::max(now_ms, at);
    }
    if (answered == 0) {
      throw BackendUnavailable(fmt::format("backend '{}': no instance answered: {}", config_.name, first_error));
    }
    std::optional<LockInfo> removed = combine(per, answered_mask_, /*majority=*/false);
    if (!removed) return removed;
    const AuditEntry entry = admin::complete_audit(who, *removed, now_ms);
    admin::log_forced(config_.name, entry);
    const std::string audit = admin::audit_key(service_);
    std::size_t recorded = 0;
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      if (!answered_mask_[i]) continue;
      const Reply reply = instances_[i]->pool.run([&](Connection& conn) { return admin::push_audit(conn, audit, entry); });
      if (reply.ok() && !reply.is_error()) ++recorded;
    }
    if (recorded == 0) {
      throw BackendUnavailable(fmt::format("backend '{}': the lock was released but no instance recorded the audit entry",
                                           config_.name));
    }
    return removed;
  }

  std::vector<AuditEntry> history(std::size_t limit) override {
    std::vector<AuditEntry> all;
    std::size_t answered = 0;
    std::string first_error;
    const std::string audit = admin::audit_key(service_);
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      std::vector<AuditEntry> here;
      const Reply reply = instances_[i]->pool.run([&](Connection& conn) {
        here.clear();
        return admin::read_audit(conn, audit, limit, here);
      });
      if (!answered_ok(reply, i, first_error)) continue;
      ++answered;
      for (auto& e : here) {
        const bool known = std::any_of(all.begin(), all.end(), [&](const AuditEntry& a) { return a.id == e.id; });
        if (!known) all.push_back(std::move(e));
      }
    }
    if (answered == 0) {
      throw BackendUnavailable(fmt::format("backend '{}': no instance answered: {}", config_.name, first_error));
    }
    std::stable_sort(all.begin(), all.end(), [](const AuditEntry& a, const AuditEntry& b) { return a.at_ms > b.at_ms; });
    if (all.size() > limit) all.resize(limit);
    return all;
  }

 private:
  // Records whether instance i answered (in answered_mask_); keeps the first failure.
  bool answered_ok(const Reply& reply, std::size_t i, std::string& first_error) {
    answered_mask_.resize(instances_.size());
    const bool ok = reply.ok() && !reply.is_error();
    answered_mask_[i] = ok;
    if (!ok && first_error.empty()) {
      first_error = fmt::format("{}: {}", to_string(config_.endpoints[i]),
                                reply.ok() ? std::string(reply.text()) : reply.error());
    }
    return ok;
  }

  void require_quorum(std::size_t answered, const std::string& first_error) const {
    if (answered < quorum_) {
      throw BackendUnavailable(fmt::format("backend '{}': only {} of {} instances answered; a quorum is {} ({})",
                                           config_.name, answered, instances_.size(), quorum_, first_error));
    }
  }

  // The lock as a majority of instances hold it (with `majority` false: as most of the
  // instances that had it held it), with every instance's view in `instances`.
  std::optional<LockInfo> combine(const std::vector<std::optional<LockInfo>>& per,
                                  const std::vector<bool>& answered, bool majority = true) const {
    std::map<std::string, std::size_t> votes;
    for (const auto& info : per) {
      if (info) ++votes[info->owner];
    }
    std::string owner;
    std::size_t best = 0;
    for (const auto& [o, n] : votes) {
      if (n > best) {
        owner = o;
        best = n;
      }
    }
    if (best == 0 || (majority && best < quorum_)) return std::nullopt;
    std::optional<LockInfo> out;
    std::vector<Millis> ttls;
    for (std::size_t i = 0; i < per.size(); ++i) {
      if (!per[i] || per[i]->owner != owner) continue;
      ttls.push_back(per[i]->ttl);
      if (!out) {
        out = *per[i];
      } else {
        out->token = std::max(out->token, per[i]->token);
        out->min_hold = out->min_hold || per[i]->min_hold;
      }
    }
    // Held for as long as a majority (or, without one, all of them) still has the key.
    std::sort(ttls.begin(), ttls.end(), std::greater<>());
    out->ttl = ttls[std::min(ttls.size(), majority ? quorum_ : ttls.size()) - 1];
    out->instances.clear();
    for (std::size_t i = 0; i < per.size(); ++i) {
      InstanceLockInfo detail;
      detail.endpoint = to_string(config_.endpoints[i]);
      detail.answered = i < answered.size() && answered[i];
      if (!detail.answered) detail.error = "no answer";
      if (per[i]) {
        detail.held = true;
        detail.owner = per[i]->owner;
        detail.token = per[i]->token;
        detail.ttl = per[i]->ttl;
      }
      out->instances.push_back(std::move(detail));
    }
    return out;
  }

  // Keys live this much longer than the lease the client counts on: even a server whose
  // clock runs fast by clock_drift_factor keeps the key for the whole lease. (Redlock's
  // validity = TTL - elapsed - drift, with TTL = lease + drift.)
  Millis drift(Millis ttl) const {
    return Millis{static_cast<Millis::rep>(std::ceil(config_.clock_drift_factor * static_cast<double>(ttl.count())))} +
           kDriftFloor;
  }

  Millis node_timeout(Millis lease) const {
    return std::clamp(lease / 10, kMinNodeTimeout, std::max(kMinNodeTimeout, config_.command_timeout));
  }

  // A connection to every instance that can have one: idle ones at once, new ones opened in
  // parallel (each bounded by the connect timeout). Instances that failed to connect a
  // moment ago are skipped.
  std::vector<ConnectionPool::Handle> borrow() {
    std::vector<ConnectionPool::Handle> handles(instances_.size());
    std::vector<std::size_t> missing;
    const auto now = Clock::now();
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      handles[i] = instances_[i]->pool.take_idle();
      if (!handles[i] && now.time_since_epoch().count() >= instances_[i]->skip_until.load()) {
        missing.push_back(i);
      }
    }
    auto open = [&](std::size_t i) {
      std::string error;
      handles[i] = instances_[i]->pool.take(Clock::now() + config_.command_timeout, error);
      if (!handles[i]) {
        instances_[i]->skip_until = (Clock::now() + kReconnectPause).time_since_epoch().count();
        log(LogLevel::kDebug, "redlock: {}", error);
      }
    };
    if (missing.size() == 1) {
      open(missing[0]);
    } else if (!missing.empty()) {
      std::vector<std::thread> openers;
      for (std::size_t i : missing) openers.emplace_back(open, i);
      for (auto& t : openers) t.join();
    }
    return handles;
  }

  // fan_out, plus one more try on a fresh connection for instances whose pooled connection
  // turned out dead (the instance restarted since it was last used).
  void run(std::vector<FanOutRequest>& requests, std::vector<ConnectionPool::Handle>& handles,
           Clock::time_point deadline) {
    fan_out(requests, deadline);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const bool stale = handles[i] && handles[i].reused() && !requests[i].replies.empty() &&
                         requests[i].replies[0].status() == Reply::Status::kBroken;
      if (!stale || Clock::now() >= deadline) continue;
      instances_[i]->pool.clear();
      handles[i] = ConnectionPool::Handle();
      std::string error;
      handles[i] = instances_[i]->pool.take(deadline, error);
      std::vector<FanOutRequest> retry(1);
      retry[0].calls = requests[i].calls;
      retry[0].conn = handles[i] ? &*handles[i] : nullptr;
      fan_out(retry, deadline);
      requests[i].replies = std::move(retry[0].replies);
    }
  }

  // Releases what a failed acquisition got (owner-checked).
  void undo(const LockKeys& keys, std::string_view owner, const std::vector<bool>& ours,
            std::vector<ConnectionPool::Handle>& handles, Millis lease) {
    const ScriptCall call = release_call(keys, owner, Millis{0});
    std::vector<FanOutRequest> requests(instances_.size());
    for (std::size_t i = 0; i < instances_.size(); ++i) {
      if (ours[i] && handles[i] && !handles[i]->broken()) requests[i] = {&*handles[i], {&call}, {}};
    }
    fan_out(requests, Clock::now() + node_timeout(lease));
  }

  void restore(const std::vector<RenewItem>& items, const std::vector<LockKeys>& keys,
               const std::vector<Grant>& grants,
               const std::vector<std::pair<std::size_t, std::size_t>>& heal,
               std::vector<ConnectionPool::Handle>& handles) {
    std::vector<ScriptCall> calls;
    calls.reserve(heal.size());
    std::vector<FanOutRequest> requests(instances_.size());
    Millis longest{0};
    for (const auto& [i, k] : heal) longest = std::max(longest, items[k].ttl);
    const auto deadline = Clock::now() + node_timeout(longest);
    for (const auto& [i, k] : heal) {
      if (!handles[i] || handles[i]->broken()) continue;
      const GrantRequest request{*items[k].key, items[k].owner, items[k].ttl, grants[k].name, deadline};
      calls.push_back(acquire_call(keys[k], request, items[k].ttl + drift(items[k].ttl),
                                   handles[i]->server_time_us(deadline)));
      requests[i].conn = &*handles[i];
      requests[i].calls.push_back(&calls.back());  // no reallocation: reserved above
    }
    fan_out(requests, deadline);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!requests[i].calls.empty()) {
        log(LogLevel::kInfo, "redlock: restored {} lock(s) on {}, which had lost them",
            requests[i].calls.size(), to_string(config_.endpoints[i]));
      }
    }
  }

  void remember(std::string_view owner, Grant grant) {
    std::lock_guard lock(grants_mutex_);
    grants_[std::string(owner)] = std::move(grant);
  }
  Grant recall(std::string_view owner) {
    std::lock_guard lock(grants_mutex_);
    auto it = grants_.find(std::string(owner));
    return it == grants_.end() ? Grant{} : it->second;
  }
  Grant forget(std::string_view owner) {
    std::lock_guard lock(grants_mutex_);
    auto it = grants_.find(std::string(owner));
    if (it == grants_.end()) return {};
    Grant grant = std::move(it->second);
    grants_.erase(it);
    return grant;
  }

  ReleaseFeed& feed() {
    std::call_once(feed_once_, [this] {
      std::vector<std::vector<Endpoint>> sources;
      for (const auto& endpoint : config_.endpoints) sources.push_back({endpoint});
      feed_ = std::make_unique<ReleaseFeed>(sources, config_, metrics_);
    });
    return *feed_;
  }

  static inline const Reply kNoConnection = Reply::failed(Reply::Status::kNotSent, "no connection");

  const BackendConfig config_;
  const std::string service_;
  const std::shared_ptr<Metrics> metrics_;
  const std::size_t quorum_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::mutex grants_mutex_;
  std::map<std::string, Grant, std::less<>> grants_;
  std::once_flag feed_once_;
  std::unique_ptr<ReleaseFeed> feed_;
  // Which instances answered the last admin call (admin calls come from one thread).
  std::vector<bool> answered_mask_;
};

}  // namespace

Engine make_redlock_backend(const BackendConfig& config, const std::string& service,
                                              std::shared_ptr<Metrics> metrics) {
  return Engine::of(std::make_shared<RedlockBackend>(config, service, std::move(metrics)));
}

}  // namespace dlock::internal
