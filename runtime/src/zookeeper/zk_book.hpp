// What a ZooKeeper backend knows of its own lock znodes (ZkBook: which owner made which, and
// when each is to be deleted, which its reaper thread does) and a waiter's watch (ZkWatch).
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "steady.hpp"
#include "zookeeper/zk_session.hpp"

namespace dlock::internal {

inline constexpr Millis kZkRetryDelete{1000};

/// A znode of this process's session: whose lock it is, and when this process deletes it.
struct Held {
  std::string path;
  std::uint64_t generation = 0;  ///< the ZkHandle it was made on
  std::uint64_t czxid = 0;
};

/// What this process knows of its own lock znodes: which owner made which, and when each is
/// to be deleted (its lease ran out unrenewed, a min_hold ended, a waiter left, a delete
/// failed). Shared with answers that arrive on the C client's thread.
class ZkBook {
 public:
  std::optional<Held> find(std::string_view owner) const {
    std::lock_guard lock(mutex_);
    const auto found = owners_.find(owner);
    if (found == owners_.end()) return std::nullopt;
    return found->second;
  }
  /// `owner` made `held`; deleted at `delete_at` (never: only when the owner lets it go).
  void note(std::string_view owner, const Held& held,
            std::optional<Clock::time_point> delete_at = std::nullopt) {
    std::lock_guard lock(mutex_);
    owners_[std::string(owner)] = held;
    if (delete_at) {
      schedule_locked(held.path, held.generation, *delete_at);
    } else {
      due_.erase(held.path);
    }
  }
  std::optional<Held> take(std::string_view owner) {
    std::lock_guard lock(mutex_);
    const auto found = owners_.find(owner);
    if (found == owners_.end()) return std::nullopt;
    Held held = std::move(found->second);
    owners_.erase(found);
    return held;
  }
  /// Deletes `path` at `when` (sooner if already due sooner) unless forgotten first.
  void delete_at(const std::string& path, std::uint64_t generation, Clock::time_point when,
                 bool sooner_only = false) {
    std::lock_guard lock(mutex_);
    const auto found = due_.find(path);
    if (sooner_only && found != due_.end() && found->second.when <= when) return;
    schedule_locked(path, generation, when);
  }
  void forget(const std::string& path) {
    std::lock_guard lock(mutex_);
    due_.erase(path);
  }
  /// The znodes `owner` may have made under `dir` (a create whose answer was lost, a release
  /// that could not finish) are to be found and deleted while the session of `generation`
  /// lives. Only for owners whose acquisition has ended.
  void sweep(const std::string& owner, const std::string& dir, std::uint64_t generation) {
    std::lock_guard lock(mutex_);
    sweeps_[owner] = Sweep{dir, generation};
    changed_.notify_all();
  }
  void swept(const std::string& owner) {
    std::lock_guard lock(mutex_);
    sweeps_.erase(owner);
  }

  struct Work {
    std::vector<std::pair<std::string, std::uint64_t>> deletes;  // path, generation
    std::vector<std::tuple<std::string, std::string, std::uint64_t>> sweeps;  // owner, dir, gen
    [[nodiscard]] bool empty() const { return deletes.empty() && sweeps.empty(); }
  };
  /// What is due by now (its next try set kZkRetryDelete later), waiting until something is
  /// due or stop(). Empty after stop().
  Work wait_for_due() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (stopped_) return {};
      const auto now = Clock::now();
      auto first = Clock::time_point::max();
      Work out;
      for (auto& [path, entry] : due_) {
        if (entry.when <= now) {
          out.deletes.emplace_back(path, entry.generation);
          entry.when = later(now, kZkRetryDelete);
          entry.handed_out = true;
        }
        first = std::min(first, entry.when);
      }
      for (auto& [owner, entry] : sweeps_) {
        if (entry.when <= now) {
          out.sweeps.emplace_back(owner, entry.dir, entry.generation);
          entry.when = later(now, kZkRetryDelete);
        }
        first = std::min(first, entry.when);
      }
      if (!out.empty()) return out;
      if (first == Clock::time_point::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, first);
      }
    }
  }
  /// Whether `path` is still to be deleted as wait_for_due() handed it out: not rescheduled
  /// (renewed, adopted, kept for min_hold) or forgotten since.
  bool still_due(const std::string& path) const {
    std::lock_guard lock(mutex_);
    const auto found = due_.find(path);
    return found != due_.end() && found->second.handed_out;
  }
  /// A renewal of `held` confirmed: deleted at `when` unless renewed again, if `owner`
  /// still holds it (a release meanwhile may have set a min_hold's end, which stays).
  void renewed(std::string_view owner, const Held& held, Clock::time_point when) {
    std::lock_guard lock(mutex_);
    const auto found = owners_.find(owner);
    if (found == owners_.end() || found->second.path != held.path) return;
    schedule_locked(held.path, held.generation, when);
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stopped_ = true;
    changed_.notify_all();
  }

 private:
  struct Due {
    Clock::time_point when;
    std::uint64_t generation;
    bool handed_out = false;  // to the reaper, which sends its delete unless rescheduled
  };
  struct Sweep {
    std::string dir;
    std::uint64_t generation;
    Clock::time_point when{};
  };
  void schedule_locked(const std::string& path, std::uint64_t generation, Clock::time_point when) {
    due_[path] = Due{when, generation};
    changed_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Held, std::less<>> owners_;
  std::map<std::string, Due> due_;
  std::map<std::string, Sweep> sweeps_;
  bool stopped_ = false;
};

/// A waiter's watch: woken when the znode before its own goes (or the session changes).
/// Its own znode, while it waits in the queue, is deleted when the watch goes.
class ZkWatch final : public ReleaseWatch {
 public:
  explicit ZkWatch(std::shared_ptr<ZkBook> book) : book_(std::move(book)) {}
  ~ZkWatch() override {
    if (queued_.path.empty()) return;
    book_->take(owner_);
    book_->delete_at(queued_.path, queued_.generation, Clock::now());
  }
  Wake wait_until(Clock::time_point until) override {
    if (!signal_->wait_until(until)) return Wake::kTimeout;
    armed_on_.clear();  // fired: the next busy answer arms it again
    return Wake::kReleased;
  }
  /// The znode the watch is armed on and has not fired for yet; empty when none.
  [[nodiscard]] const std::string& armed_on() const { return armed_on_; }
  void armed(std::string path) { armed_on_ = std::move(path); }
  [[nodiscard]] const std::shared_ptr<ZkSignal>& signal() const { return signal_; }
  void queued(std::string_view owner, const Held& held) {
    owner_ = owner;
    queued_ = held;
  }
  void settled() { queued_ = Held{}; }
  /// The znode this waiter keeps as its place; empty when none.
  [[nodiscard]] const std::string& place() const { return queued_.path; }

 private:
  std::shared_ptr<ZkBook> book_;
  std::shared_ptr<ZkSignal> signal_ = std::make_shared<ZkSignal>();
  std::string owner_;
  Held queued_;
  std::string armed_on_;
};

}  // namespace dlock::internal
