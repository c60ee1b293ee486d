// The shared state of one granted lock: what Lease, LeaseView, the watchdog and the
// reentrancy table all point at.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend.hpp"
#include "dlock/lease.hpp"
#include "metrics.hpp"

namespace dlock::internal {

class ClientCore;

/// The calling thread's number: drawn once per thread from a process-wide counter, so that,
/// unlike std::thread::id, a thread that starts after another ended never gets its number.
[[nodiscard]] std::uint64_t this_thread_token() noexcept;

class LeaseState : public std::enable_shared_from_this<LeaseState> {
 public:
  LeaseState(std::shared_ptr<ClientCore> core, std::shared_ptr<Backend> backend, Key key,
             std::string name, std::string owner, std::uint64_t token, LockSettings settings,
             Clock::time_point acquired_at, std::shared_ptr<NameMetrics> series);

  const std::shared_ptr<ClientCore> core;
  const std::shared_ptr<Backend> backend;
  const Key key;
  const std::string name;
  const std::string owner;
  const std::uint64_t token;
  const LockSettings settings;
  const Clock::time_point acquired_at;  ///< when the granting request was sent
  const std::uint64_t thread;  ///< this_thread_token() of the acquiring thread
  const std::shared_ptr<NameMetrics> series;  ///< the counters of `name`

  /// Point after which the key may have expired unless a renewal confirms it.
  [[nodiscard]] Clock::time_point valid_until() const noexcept;
  void extend_validity(Clock::time_point until) noexcept;
  /// acquired_at + max_hold, or time_point::max().
  [[nodiscard]] Clock::time_point hold_deadline() const noexcept;

  [[nodiscard]] bool lost() const noexcept { return loss_.load() != LossReason::kNone; }
  [[nodiscard]] LossReason loss_reason() const noexcept { return loss_.load(); }
  /// Marks the lease lost once: logs, counts and runs the callbacks. Later calls do nothing.
  void mark_lost(LossReason reason, std::string_view detail) noexcept;
  void add_on_lost(std::function<void(const LeaseView&)> callback);

  [[nodiscard]] bool released() const noexcept { return released_.load(); }
  void mark_released() noexcept { released_.store(true); }

  /// The Lease handle was moved: it may now be on another thread, so the acquiring thread
  /// no longer counts as holding the key and is not let in again without the server.
  [[nodiscard]] bool moved() const noexcept { return moved_.load(); }
  void mark_moved() noexcept {
    moved_.store(true);
    for (const auto& part : parts) part->mark_moved();
  }

  std::atomic<int> holds{1};

  /// A lease of several keys: one lease per key, in the order the keys were written, each
  /// renewed, released and counted on its own; this one (not tracked by the watchdog) counts
  /// as lost when any of them is (LeaseView), and is released with them. Empty for a lease
  /// of one key. Set before the lease is shared.
  std::vector<std::shared_ptr<LeaseState>> parts;
  /// For each key as the caller gave it, the index of its part (a key given twice has one
  /// part); empty when the keys were given once each, in the order of `parts`.
  std::vector<std::size_t> written;
  /// The part of the key given at `index`, or nullptr past the end.
  [[nodiscard]] const LeaseState* part_written(std::size_t index) const noexcept {
    if (written.empty()) return index < parts.size() ? parts[index].get() : nullptr;
    return index < written.size() ? parts[written[index]].get() : nullptr;
  }
  [[nodiscard]] std::size_t keys_written() const noexcept {
    return written.empty() ? parts.size() : written.size();
  }

 private:
  std::atomic<Clock::rep> valid_until_;
  std::atomic<LossReason> loss_{LossReason::kNone};
  std::atomic<bool> released_{false};
  std::atomic<bool> moved_{false};
  std::mutex callbacks_mutex_;
  std::vector<std::function<void(const LeaseView&)>> on_lost_;
};

}  // namespace dlock::internal
