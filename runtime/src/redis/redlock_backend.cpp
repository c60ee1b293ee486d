#include "redis/redlock_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <mutex>

#include "log.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/redlock_quorum.hpp"
#include "redis/redlock_records.hpp"
#include "redis/subscriber.hpp"

namespace dlock::internal {
namespace {

// Redlock's fixed allowance for clock drift, besides the configured share of the lease.
constexpr Millis kDriftFloor{2};
constexpr Millis kMinNodeTimeout{2};
// Where acquire_call() puts the not-after time (acquire.lua's ARGV[3]).
constexpr std::size_t kAcquireNotAfterArg = 2;

// What one grant of ours is, for the renewals and the release that follow it.
struct Grant {
  std::uint64_t token = 0;
  std::string name;
  LockKind kind = LockKind::kExclusive;
  int permits = 0;
  std::size_t needed = 0;  ///< instances that must hold it (RedlockQuorum::quorum_for); 0: a quorum
  bool fair = false;       ///< granted in fair order: the order instance announces its release
};

// What the instances answered to one acquisition.
struct GrantTally {
  std::size_t granted = 0;
  std::size_t answered = 0;  ///< granted, busy or refused
  std::size_t refused = 0;   ///< held as another kind of lock there (permits against a lock)
  std::string refusal;       ///< the first instance's reason
  std::uint64_t token = 0;   ///< the highest granted
  Millis busy_ttl{0};        ///< the shortest time left on a busy instance, 0 when unknown
  bool outcome_unknown = false;
  std::string first_error;
  std::vector<bool> ours;  ///< per instance: granted to us
};

// The renew calls of one batch, with what restoring a lost key needs.
struct RenewBatch {
  std::vector<LockKeys> keys;
  std::vector<Grant> grants;
  std::vector<ScriptCall> calls;
  Millis shortest{0};
};

// (instance, item): an instance that lost a key still held by quorum.
using Heal = std::vector<std::pair<std::size_t, std::size_t>>;

class RedlockBackend final : public Backend {
 public:
  RedlockBackend(std::shared_ptr<RedlockQuorum> quorum, std::string service,
                 std::shared_ptr<Metrics> metrics)
      : quorum_(std::move(quorum)), service_(std::move(service)), metrics_(std::move(metrics)) {}

  // Shared holds: each on a majority, as an exclusive hold is, so the two always meet on
  // some instance. Permits: each on quorum_for(N) instances, so that N+1 holders cannot all
  // hold. Fair order: one instance per key keeps it (RedlockQuorum::order_instance), as the
  // instances could each order the waiters differently.
  [[nodiscard]] bool supports(LockKind /*kind*/, bool /*fair*/) const override { return true; }

  GrantReply acquire(const GrantRequest& request) override {
    const auto start = Clock::now();
    const LockKeys keys = lock_keys(service_, request.key.str());
    const std::size_t needed =
        quorum_->quorum_for(request.kind == LockKind::kPermit ? request.permits : 1);
    RedlockQuorum::Round round = quorum_->borrow(node_timeout(request.lease),
                                                 open_wait(request.lease),
                                                 ConnectionPool::Lane::kShared, needed);
    const auto deadline = Clock::now() + node_timeout(request.lease);
    // The order instance keeps a fair queue's order; the others grant a fair request as a
    // plain one.
    const std::size_t order = quorum_->order_instance(keys.lock);
    const std::vector<ScriptCall> calls = acquire_calls(keys, request, round, deadline, order);
    for (std::size_t i = 0; i < quorum_->size(); ++i) round.ask(i, &calls[i]);
    quorum_->send(round, deadline,
                  [needed, order, fair = request.fair](const std::vector<FanOutRequest>& requests,
                                                       const std::vector<bool>& complete) {
                    const auto granted_by = [&](std::size_t i) {
                      return complete[i] && grant_of(requests[i].replies[0]).kind ==
                                                GrantReply::Kind::kAcquired;
                    };
                    std::size_t granted = 0;
                    for (std::size_t i = 0; i < requests.size(); ++i) granted += granted_by(i);
                    // In fair order, the order instance's answer is waited for.
                    return granted >= needed && (!fair || granted_by(order));
                  });
    // "Too late" from an instance: its clock may have stepped since it was measured.
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      if (round.handles[i] && arrived_too_late(round.reply(i, 0))) {
        round.handles[i]->distrust_clock();
      }
    }
    GrantTally tally = tally_grants(round);
    const auto elapsed = Clock::now() - start;
    // Not this request's turn on the order instance (busy with no time left: a place ahead in
    // its fair queue, the lock free there or held by the waiter whose turn it is): busy,
    // whatever the others said. An order instance that did not answer in time, or whose key
    // is held by anyone else, keeps no order meanwhile (TOPOLOGIES.md).
    const GrantReply there = grant_of(round.reply(order, 0));
    const bool out_of_turn =
        there.kind == GrantReply::Kind::kBusy && there.ttl == Millis{0} && !tally.ours[order];
    if (tally.granted >= needed && elapsed < request.lease && !out_of_turn) {
      remember(request.owner, Grant{tally.token, std::string(request.name), request.kind,
                                    request.permits, needed, request.fair});
      GrantReply out;
      out.kind = GrantReply::Kind::kAcquired;
      out.token = tally.token;
      return out;
    }
    // No quorum (or it came too late to be worth anything): undo what we got.
    if (tally.granted > 0) {
      undo(keys, request.owner, tally.ours, round, request.lease,
           request.fair ? order : quorum_->size());
    }
    if (out_of_turn) tally.granted = 0;  // busy (refusal() below), not "took too long"
    return refusal(tally, elapsed, needed);
  }

  void renew(std::vector<RenewItem>& items) override {
    const auto sent = Clock::now();
    const RenewBatch batch = renew_batch(items);
    // The budget is the shortest lease's: a quorum that answers within it renews every
    // lease of the batch, and each lease is judged by its own length.
    std::size_t most = quorum_->quorum();
    for (const Grant& grant : batch.grants) most = std::max(most, needed(grant));
    RedlockQuorum::Round round =
        quorum_->borrow(node_timeout(batch.shortest), open_wait(batch.shortest),
                        ConnectionPool::Lane::kRenewal, most);
    const auto deadline = Clock::now() + node_timeout(batch.shortest);
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      for (const auto& call : batch.calls) round.ask(i, &call);
    }
    quorum_->send(round, deadline,
                  [this, &batch](const std::vector<FanOutRequest>& requests,
                                 const std::vector<bool>& complete) {
                    for (std::size_t k = 0; k < batch.grants.size(); ++k) {
                      std::size_t renewed = 0;
                      for (std::size_t i = 0; i < requests.size(); ++i) {
                        renewed += complete[i] && renew_outcome_of(requests[i].replies[k]) ==
                                                      RenewOutcome::kRenewed;
                      }
                      if (renewed < needed(batch.grants[k])) return false;
                    }
                    return true;
                  });
    // Instances that lost a key we still hold by quorum (restarted empty, flushed) get it
    // back, so that the next failure of another instance does not cost the quorum.
    Heal heal;
    const auto took = Clock::now() - sent;
    for (std::size_t k = 0; k < items.size(); ++k) {
      items[k].outcome = renew_outcome(round, k, needed(batch.grants[k]), took < items[k].ttl, heal);
    }
    if (!heal.empty()) restore(items, batch, heal, round);
  }

  ReleaseOutcome release(const Key& key, std::string_view owner,
                         Millis keep_for) noexcept override {
    try {
      // From here on no renewal restores this owner's key; one restoring it now is waited
      // for, so that the release below comes after it on every instance.
      const Grant grant = forget(owner);
      const LockKeys keys = lock_keys(service_, key.str());
      const Millis keep = keep_for > Millis{0} ? keep_for + drift(keep_for) : Millis{0};
      const ScriptCall call = release_call(keys, owner, keep, grant.token);
      // Of a fair grant, only the order instance announces the release: to the next waiter.
      const std::size_t order = grant.fair ? quorum_->order_instance(keys.lock) : quorum_->size();
      const ScriptCall quiet = release_call(keys, owner, keep, grant.token, "q");
      const Millis timeout = config().command_timeout;
      RedlockQuorum::Round round = quorum_->borrow(node_timeout(timeout), open_wait(timeout));
      for (std::size_t i = 0; i < quorum_->size(); ++i) {
        round.ask(i, grant.fair && i != order ? &quiet : &call);
      }
      // Every instance that answers in time: a release cut off at quorum would leave the
      // key on the stragglers for a lease.
      quorum_->send(round, Clock::now() + config().command_timeout);
      OwnerTally tally;
      std::size_t kept = 0;
      for (std::size_t i = 0; i < quorum_->size(); ++i) {
        switch (release_outcome_of(round.reply(i, 0))) {
          case ReleaseOutcome::kReleased: ++tally.ours; break;
          case ReleaseOutcome::kKept:
            ++tally.ours;
            ++kept;
            break;
          case ReleaseOutcome::kGone: ++tally.gone; break;
          case ReleaseOutcome::kTaken: ++tally.taken; break;
          case ReleaseOutcome::kUnavailable: break;
        }
      }
      switch (quorum_->verdict(tally, needed(grant))) {
        case OwnerVerdict::kOurs:
          return kept > 0 ? ReleaseOutcome::kKept : ReleaseOutcome::kReleased;
        case OwnerVerdict::kUnknown: return ReleaseOutcome::kUnavailable;
        case OwnerVerdict::kTaken: return ReleaseOutcome::kTaken;
        case OwnerVerdict::kGone: return ReleaseOutcome::kGone;
      }
      return ReleaseOutcome::kUnavailable;
    } catch (...) {
      return ReleaseOutcome::kUnavailable;
    }
  }

  std::unique_ptr<ReleaseWatch> watch(const Key& key) override {
    return feed().watch(lock_keys(service_, key.str()).channel);
  }

  const BackendConfig& config() const override { return quorum_->config(); }

 private:
  // The acquisition's call for each instance the round reached. One call, built once (its
  // owner details cost system calls); only the not-after time, on each instance's own clock,
  // differs between the instances, and for a fair request (`order` an instance's index) the
  // order instance's call keeps the order and the others' do not.
  std::vector<ScriptCall> acquire_calls(const LockKeys& keys, const GrantRequest& request,
                                        const RedlockQuorum::Round& round,
                                        Clock::time_point deadline, std::size_t order) const {
    const ScriptCall call = acquire_call(keys, request, request.lease + drift(request.lease), 0);
    std::vector<ScriptCall> calls(quorum_->size());
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      if (!round.handles[i]) continue;
      calls[i] = call;
      calls[i].args[kAcquireNotAfterArg] =
          std::to_string(round.handles[i]->server_time_us(deadline));
      if (request.fair && i == order) keeping_fair_place(calls[i]);
      if (request.fair && i != order) without_fair_order(calls[i]);
    }
    return calls;
  }

  GrantTally tally_grants(const RedlockQuorum::Round& round) const {
    GrantTally tally;
    tally.ours.resize(quorum_->size());
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      const GrantReply grant = grant_of(round.reply(i, 0));
      tally.outcome_unknown = tally.outcome_unknown || grant.outcome_unknown;
      if (grant.kind == GrantReply::Kind::kAcquired) {
        ++tally.granted;
        ++tally.answered;
        tally.ours[i] = true;
        tally.token = std::max(tally.token, grant.token);
      } else if (grant.kind == GrantReply::Kind::kRefused) {
        ++tally.answered;
        if (tally.refused++ == 0) tally.refusal = grant.error;
      } else if (grant.kind == GrantReply::Kind::kBusy) {
        ++tally.answered;
        if (grant.ttl > Millis{0} && (tally.busy_ttl == Millis{0} || grant.ttl < tally.busy_ttl)) {
          tally.busy_ttl = grant.ttl;
        }
      } else if (tally.first_error.empty()) {
        tally.first_error =
            fmt::format("{}: {}", to_string(quorum_->endpoint(i)),
                        grant.error.empty() ? std::string("no connection") : grant.error);
      }
    }
    return tally;
  }

  // Why an acquisition without a (timely) quorum of `needed` instances is no grant.
  GrantReply refusal(const GrantTally& tally, Clock::duration elapsed, std::size_t needed) const {
    GrantReply out;
    out.outcome_unknown = tally.outcome_unknown;
    if (tally.refused > quorum_->size() - needed) {
      // In use as another kind of lock on so many instances that no quorum can grant it:
      // waiting would not help, as on one server. On fewer (a stale key), it is busy.
      out.kind = GrantReply::Kind::kRefused;
      out.error = tally.refusal;
    } else if (tally.answered < needed) {
      out.kind = GrantReply::Kind::kUnavailable;
      out.error =
          fmt::format("only {} of {} instances answered; a quorum is {} (first failure: {})",
                      tally.answered, quorum_->size(), needed, tally.first_error);
    } else if (tally.granted >= needed) {
      out.kind = GrantReply::Kind::kUnavailable;
      out.error = fmt::format("the quorum took {}ms, longer than the lease; released it",
                              std::chrono::duration_cast<Millis>(elapsed).count());
    } else {
      out.kind = GrantReply::Kind::kBusy;
      out.ttl = tally.busy_ttl;
    }
    return out;
  }

  RenewBatch renew_batch(const std::vector<RenewItem>& items) {
    RenewBatch batch;
    for (const auto& item : items) {
      batch.keys.push_back(lock_keys(service_, item.key->str()));
      batch.grants.push_back(recall(item.owner));
      batch.calls.push_back(renew_call(batch.keys.back(), item.owner, item.ttl + drift(item.ttl),
                                       batch.grants.back().token));
      batch.shortest = batch.shortest == Millis{0} ? item.ttl : std::min(batch.shortest, item.ttl);
    }
    return batch;
  }

  // Item k's outcome over the instances, which `needed` of them must hold; adds the
  // instances that lost its key to `heal`.
  RenewOutcome renew_outcome(const RedlockQuorum::Round& round, std::size_t k,
                             std::size_t needed, bool in_time, Heal& heal) const {
    OwnerTally tally;
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      switch (renew_outcome_of(round.reply(i, k))) {
        case RenewOutcome::kRenewed: ++tally.ours; break;
        case RenewOutcome::kGone: ++tally.gone; break;
        case RenewOutcome::kTaken: ++tally.taken; break;
        case RenewOutcome::kUnavailable: break;
      }
    }
    switch (quorum_->verdict(tally, needed)) {
      case OwnerVerdict::kOurs:
        if (!in_time) return RenewOutcome::kUnavailable;  // retried; expires unless confirmed
        for (std::size_t i = 0; i < quorum_->size() && tally.gone > 0; ++i) {
          if (renew_outcome_of(round.reply(i, k)) == RenewOutcome::kGone) heal.emplace_back(i, k);
        }
        return RenewOutcome::kRenewed;
      case OwnerVerdict::kUnknown: return RenewOutcome::kUnavailable;  // retried, as above
      case OwnerVerdict::kTaken: return RenewOutcome::kTaken;
      case OwnerVerdict::kGone: return RenewOutcome::kGone;
    }
    return RenewOutcome::kUnavailable;
  }

  // Keys live this much longer than the lease the client counts on: even a server whose
  // clock runs fast by clock_drift_factor keeps the key for the whole lease. (Redlock's
  // validity = TTL - elapsed - drift, with TTL = lease + drift.)
  Millis drift(Millis ttl) const {
    const double share = config().clock_drift_factor * static_cast<double>(ttl.count());
    return Millis{static_cast<Millis::rep>(std::ceil(share))} + kDriftFloor;
  }

  Millis node_timeout(Millis lease) const {
    return std::clamp(lease / 10, kMinNodeTimeout,
                      std::max(kMinNodeTimeout, config().command_timeout));
  }

  // How long a round waits for connections to instances that have not failed: a third of
  // the lease (the rest is for the calls), at most an open's own timeouts.
  Millis open_wait(Millis lease) const {
    return std::min(lease / 3, config().connect_timeout + config().command_timeout);
  }

  // Releases what a failed acquisition got (owner-checked), on the round's connections. With
  // `order` an instance's index (a fair request), quietly: the owner keeps its place there
  // and tries again after its pause, and no waiter is woken for a lock nobody could take.
  void undo(const LockKeys& keys, std::string_view owner, const std::vector<bool>& ours,
            RedlockQuorum::Round& round, Millis lease, std::size_t order) {
    const bool fair = order < quorum_->size();
    const ScriptCall call = release_call(keys, owner, Millis{0});
    const ScriptCall quiet = release_call(keys, owner, Millis{0}, 0, "q");
    const ScriptCall kept = release_call(keys, owner, Millis{0}, 0, "kq");
    std::vector<FanOutRequest> requests(quorum_->size());
    for (std::size_t i = 0; i < quorum_->size(); ++i) {
      const ScriptCall* mine = !fair ? &call : i == order ? &kept : &quiet;
      if (ours[i] && round.usable(i)) requests[i] = {&*round.handles[i], {mine}, {}};
    }
    fan_out(requests, Clock::now() + node_timeout(lease));
  }

  // Grants the keys of `heal` again on the instances that lost them, on the round's
  // connections.
  void restore(const std::vector<RenewItem>& items, const RenewBatch& batch, Heal heal,
               RedlockQuorum::Round& round) {
    // Only owners not released meanwhile (a release deletes the key on each instance, and
    // one that got there before the renewal looks like a lost key); they stay marked as
    // being restored until the restore calls have been answered.
    std::vector<std::string> marked;
    {
      std::lock_guard lock(grants_mutex_);
      heal.erase(
          std::remove_if(heal.begin(), heal.end(),
                         [&](const auto& h) { return grants_.count(items[h.second].owner) == 0; }),
          heal.end());
      for (const auto& [i, k] : heal) {
        ++restoring_[std::string(items[k].owner)];
        marked.emplace_back(items[k].owner);
      }
    }
    struct Unmark {
      RedlockBackend& self;
      const std::vector<std::string>& owners;
      ~Unmark() {
        {
          std::lock_guard lock(self.grants_mutex_);
          for (const auto& owner : owners) {
            if (--self.restoring_[owner] == 0) self.restoring_.erase(owner);
          }
        }
        self.restored_.notify_all();
      }
    } unmark{*this, marked};
    if (heal.empty()) return;
    std::vector<ScriptCall> calls;
    calls.reserve(heal.size());
    std::vector<FanOutRequest> requests(quorum_->size());
    Millis longest{0};
    for (const auto& [i, k] : heal) longest = std::max(longest, items[k].ttl);
    const auto deadline = Clock::now() + node_timeout(longest);
    for (const auto& [i, k] : heal) {
      if (!round.usable(i)) continue;
      // Of the kind it was granted as: a shared hold or a permit comes back as one.
      const Grant& grant = batch.grants[k];
      GrantRequest request{*items[k].key, items[k].owner, items[k].ttl, grant.name, deadline};
      request.kind = grant.kind;
      request.permits = grant.permits;
      calls.push_back(acquire_call(batch.keys[k], request, items[k].ttl + drift(items[k].ttl),
                                   round.handles[i]->server_time_us(deadline)));
      restoring(calls.back());  // held by quorum already: no fair queue holds it back
      requests[i].conn = &*round.handles[i];
      requests[i].calls.push_back(&calls.back());  // no reallocation: reserved above
    }
    fan_out(requests, deadline);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (!requests[i].calls.empty()) {
        log(LogLevel::kInfo, "redlock: restored {} lock(s) on {}, which had lost them",
            requests[i].calls.size(), to_string(quorum_->endpoint(i)));
      }
    }
  }

  // How many instances must hold `grant` (a grant forgotten or never known: a quorum).
  std::size_t needed(const Grant& grant) const {
    return grant.needed > 0 ? grant.needed : quorum_->quorum();
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
  // Forgets the owner's grant, then waits (bounded by the command timeout; a restore takes
  // at most the per-node timeout) until no renewal is restoring its key.
  Grant forget(std::string_view owner) {
    std::unique_lock lock(grants_mutex_);
    Grant grant;
    auto it = grants_.find(std::string(owner));
    if (it != grants_.end()) {
      grant = std::move(it->second);
      grants_.erase(it);
    }
    restored_.wait_for(lock, config().command_timeout,
                       [&] { return restoring_.find(std::string(owner)) == restoring_.end(); });
    return grant;
  }

  ReleaseFeed& feed() {
    std::call_once(feed_once_, [this] {
      std::vector<std::vector<Endpoint>> sources;
      for (const auto& endpoint : config().endpoints) sources.push_back({endpoint});
      feed_ = std::make_unique<ReleaseFeed>(sources, config(), metrics_);
    });
    return *feed_;
  }

  const std::shared_ptr<RedlockQuorum> quorum_;
  const std::string service_;
  const std::shared_ptr<Metrics> metrics_;
  std::mutex grants_mutex_;
  std::map<std::string, Grant, std::less<>> grants_;
  std::map<std::string, int, std::less<>> restoring_;  // owner -> restores in flight
  std::condition_variable restored_;
  std::once_flag feed_once_;
  std::unique_ptr<ReleaseFeed> feed_;
};

}  // namespace

Engine make_redlock_backend(const BackendConfig& config, const std::string& service,
                            std::shared_ptr<Metrics> metrics) {
  return make_redlock_backend(std::make_shared<RedlockQuorum>(config), service, std::move(metrics));
}

Engine make_redlock_backend(std::shared_ptr<RedlockQuorum> quorum, const std::string& service,
                            std::shared_ptr<Metrics> metrics) {
  Engine engine;
  engine.lock = std::make_shared<RedlockBackend>(quorum, service, std::move(metrics));
  add_redlock_records(engine, std::move(quorum), service);
  return engine;
}

}  // namespace dlock::internal
