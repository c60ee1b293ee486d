// What an etcd backend knows of its own lock keys and leases (EtcdBook: each owner's key and
// lease, the leases free for the next lock, the waiters' leases it keeps alive itself) and a
// waiter's watch (EtcdWatch).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend.hpp"
#include "etcd/etcd_channel.hpp"
#include "steady.hpp"

namespace dlock::internal {

/// One owner's key under a lock's prefix, and the lease it lives on (one lease per hold,
/// never shared by two holds at once).
struct EtcdHold {
  std::string key;
  std::int64_t lease = 0;
  std::int64_t ttl_s = 0;         ///< the TTL asked for the lease, seconds (etcd may grant more)
  std::int64_t revision = 0;      ///< the key's create revision; 0 while unknown
  /// Until when the lease lives for sure (its last grant or keep-alive was sent before
  /// this less its TTL).
  Clock::time_point fresh_until{};
  bool waiting = false;  ///< queued behind another holder: this process keeps it alive
  /// A put on this lease may have been applied unseen (an attempt that failed after it was
  /// sent, answered by a retry): a key may sit on the lease that no hold knows of, so the
  /// lease is revoked, never reused.
  bool in_doubt = false;
  Clock::time_point kept_at{};  ///< waiting: when its last keep-alive was sent
  /// Held: when this process deletes the key unless renewed first (the holder's validity
  /// ends then; etcd would keep it until the lease's whole seconds run out).
  Clock::time_point delete_at = Clock::time_point::max();
};

/// A key this process deletes when its time comes, if it is still the one created at
/// `revision`.
struct EtcdDoomed {
  std::string key;
  std::int64_t revision = 0;
  Clock::time_point until{};  ///< past this, its lease has surely taken it: stop trying
};

/// A lease with no key on it, ready for the next lock of the same TTL.
struct EtcdFreeLease {
  std::int64_t lease = 0;
  std::int64_t ttl_s = 0;
  Clock::time_point fresh_until{};
};

class EtcdBook {
 public:
  static constexpr std::size_t kFreePerTtl = 32;

  std::optional<EtcdHold> find(std::string_view owner) const {
    std::lock_guard lock(mutex_);
    const auto found = owners_.find(owner);
    if (found == owners_.end()) return std::nullopt;
    return found->second;
  }
  void note(std::string_view owner, const EtcdHold& hold) {
    std::lock_guard lock(mutex_);
    owners_[std::string(owner)] = hold;
    // The keeper is woken only for work due before it would wake anyway.
    const auto due = hold.waiting ? hold.kept_at + std::chrono::seconds(hold.ttl_s) / 3
                                  : hold.delete_at;
    if (due < sleeping_until_) changed_.notify_all();
  }
  std::optional<EtcdHold> take(std::string_view owner) {
    std::lock_guard lock(mutex_);
    const auto found = owners_.find(owner);
    if (found == owners_.end()) return std::nullopt;
    EtcdHold hold = std::move(found->second);
    owners_.erase(found);
    return hold;
  }
  /// A keep-alive of `lease` sent at `sent` was answered with `ttl_s` (<= 0: gone); a held
  /// key is then kept until `valid_until`. False when the owner's hold is no longer in the
  /// book (released, or deleted by the reaper meanwhile): the renewal does not count.
  bool kept(std::string_view owner, std::int64_t lease, Clock::time_point sent,
            std::int64_t ttl_s, Clock::time_point valid_until = Clock::time_point::max()) {
    std::lock_guard lock(mutex_);
    const auto found = owners_.find(owner);
    if (found == owners_.end() || found->second.lease != lease) return false;
    EtcdHold& hold = found->second;
    if (ttl_s <= 0) {
      if (hold.waiting) owners_.erase(found);  // its next try queues again
      return false;
    }
    hold.fresh_until = std::max(hold.fresh_until, sent + std::chrono::seconds(ttl_s));
    if (!hold.waiting && valid_until != Clock::time_point::max()) {
      hold.delete_at = std::max(hold.delete_at == Clock::time_point::max() ? valid_until
                                                                           : hold.delete_at,
                                valid_until);  // later: no need to wake the keeper
    }
    return true;
  }
  /// Deletes `key` (if still the one created at `revision`) at `when`. Without a revision
  /// (0) nothing is doomed: a delete by name alone could remove a later key of that name, so
  /// the key is left to its lease.
  void doom(const std::string& key, std::int64_t revision, Clock::time_point when,
            Clock::time_point until) {
    if (revision == 0) return;
    std::lock_guard lock(mutex_);
    doomed_[when].push_back(EtcdDoomed{key, revision, until});
    changed_.notify_all();
  }

  /// A free lease of `ttl_s` that lives at least until `fresh_enough`, if there is one.
  std::optional<EtcdFreeLease> take_free(std::int64_t ttl_s, Clock::time_point fresh_enough) {
    std::lock_guard lock(mutex_);
    auto& free = free_[ttl_s];
    while (!free.empty()) {
      EtcdFreeLease lease = free.back();
      free.pop_back();
      if (lease.fresh_until >= fresh_enough) return lease;
    }
    return std::nullopt;
  }
  /// `hold`'s key is gone: the next lock of its TTL may use the lease, unless a key may
  /// sit on it unseen (in doubt), when it is revoked instead.
  void let_go(const EtcdHold& hold) {
    if (hold.lease == 0) return;
    std::lock_guard lock(mutex_);
    if (hold.in_doubt) {
      revoke_locked(hold.lease, hold.fresh_until);
      return;
    }
    if (hold.fresh_until <= Clock::now()) return;
    auto& free = free_[hold.ttl_s];
    if (free.size() < kFreePerTtl) free.push_back({hold.lease, hold.ttl_s, hold.fresh_until});
  }
  /// Revokes `lease` (and every key on it), trying again every second until `until`, past
  /// which the lease has surely expired.
  void revoke(std::int64_t lease, Clock::time_point until) {
    std::lock_guard lock(mutex_);
    revoke_locked(lease, until);
  }
  [[nodiscard]] bool stopped() const {
    std::lock_guard lock(mutex_);
    return stopped_;
  }

  struct Work {
    /// Waiting owners whose lease is due a keep-alive (a third of its TTL after the last).
    std::vector<std::pair<std::string, std::int64_t>> keep;
    /// Keys whose holder's validity ended unrenewed, and min_hold ends.
    std::vector<EtcdDoomed> remove;
    /// Leases to revoke, and until when to try.
    std::vector<std::pair<std::int64_t, Clock::time_point>> revoke;
    [[nodiscard]] bool empty() const { return keep.empty() && remove.empty() && revoke.empty(); }
  };
  /// What is due by now, waiting until something is or stop(). Empty after stop().
  Work wait_for_work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (stopped_) return {};
      const auto now = Clock::now();
      auto first = doomed_.empty() ? Clock::time_point::max() : doomed_.begin()->first;
      Work work;
      for (auto it = owners_.begin(); it != owners_.end();) {
        EtcdHold& hold = it->second;
        if (!hold.waiting && hold.delete_at <= now) {
          work.remove.push_back(EtcdDoomed{hold.key, hold.revision, hold.fresh_until});
          it = owners_.erase(it);  // its release finds the key gone
          continue;
        }
        const auto when = hold.waiting ? hold.kept_at + std::chrono::seconds(hold.ttl_s) / 3
                                       : hold.delete_at;
        if (hold.waiting && when <= now) {
          work.keep.emplace_back(it->first, hold.lease);
          hold.kept_at = now;
        } else {
          first = std::min(first, when);
        }
        ++it;
      }
      while (!doomed_.empty() && doomed_.begin()->first <= now) {
        for (auto& doomed : doomed_.begin()->second) work.remove.push_back(std::move(doomed));
        doomed_.erase(doomed_.begin());
      }
      work.revoke.swap(revokes_);
      if (!work.empty()) return work;
      sleeping_until_ = first;
      if (first == Clock::time_point::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, first);
      }
      sleeping_until_ = Clock::time_point::min();  // awake: notes need not wake it
    }
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    changed_.notify_all();
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, EtcdHold, std::less<>> owners_;
  std::map<std::int64_t, std::vector<EtcdFreeLease>> free_;
  std::map<Clock::time_point, std::vector<EtcdDoomed>> doomed_;
  std::vector<std::pair<std::int64_t, Clock::time_point>> revokes_;
  Clock::time_point sleeping_until_ = Clock::time_point::min();  // the keeper's wake-up
  bool stopped_ = false;

  void revoke_locked(std::int64_t lease, Clock::time_point until) {
    revokes_.emplace_back(lease, until);
    changed_.notify_all();
  }
};

/// A waiter's watch: woken when the key it waits for goes (a permit's: any key of the lock).
/// While it waits its own key stays in the queue; when the watch goes without the lock, so
/// does the key (its lease revoked).
class EtcdWatch final : public ReleaseWatch {
 public:
  EtcdWatch(std::shared_ptr<EtcdBook> book, std::shared_ptr<EtcdChannel> channel)
      : book_(std::move(book)), channel_(std::move(channel)) {}
  ~EtcdWatch() override {
    if (call_) call_->cancel();
    if (owner_.empty()) return;
    const auto hold = book_->find(owner_);
    if (hold && hold->waiting) {
      book_->take(owner_);
      // Its key leaves the queue with the lease; the next in line is woken by the delete.
      book_->revoke(hold->lease, hold->fresh_until);
    }
  }
  Wake wait_until(Clock::time_point until) override {
    if (!signal_->wait_until(until)) return Wake::kTimeout;
    armed_on_.clear();  // fired: the next busy answer arms it again
    return Wake::kReleased;
  }
  /// Watches `key` (or every key in [key, range_end)) for a deletion after `revision`,
  /// unless already watching it.
  void arm(const std::string& key, std::int64_t revision, const std::string& range_end = {}) {
    const std::string what = key + '\0' + range_end;
    if (armed_on_ == what) return;
    if (call_) call_->cancel();
    call_ = channel_->watch_delete(key, revision, signal_, range_end);
    armed_on_ = what;
  }
  void queued(std::string_view owner) { owner_ = owner; }
  /// The lock was granted: the key is the holder's now.
  void settled() { owner_.clear(); }

 private:
  std::shared_ptr<EtcdBook> book_;
  std::shared_ptr<EtcdChannel> channel_;
  std::shared_ptr<EtcdSignal> signal_ = std::make_shared<EtcdSignal>();
  std::shared_ptr<EtcdWatchCall> call_;
  std::string owner_;
  std::string armed_on_;
};

}  // namespace dlock::internal
