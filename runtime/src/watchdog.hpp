// One scheduler thread per client renews every held lease, detects losses, enforces
// max_hold and cleans up after acquisitions whose outcome was unknown.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "lease_state.hpp"
#include "metrics.hpp"

namespace dlock::internal {

class Watchdog {
 public:
  /// Starts the thread. The thread co-owns the watchdog (and the metrics), so that the
  /// client may even be destroyed on the watchdog thread itself.
  static std::shared_ptr<Watchdog> start(std::shared_ptr<Metrics> metrics);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Stops the thread: joins it, or lets it finish by itself when called on it.
  void stop() noexcept;

  /// Starts renewing a newly granted lease at acquired_at + lease/3.
  void track(const std::shared_ptr<LeaseState>& lease);

  /// An acquisition timed out but may have been applied: release `owner`'s key, if it
  /// exists, a few times until `until` (owner-checked, so it can never hurt a real holder).
  void clean_up_after(std::shared_ptr<Backend> backend, Key key, std::string owner,
                      Clock::time_point until);

  /// Number of leases currently scheduled (for tests and benchmarks).
  [[nodiscard]] std::size_t tracked() const;

 private:
  struct Cleanup {
    std::shared_ptr<Backend> backend;
    Key key;
    std::string owner;
    Clock::time_point until;
  };
  struct Task {
    Clock::time_point due;
    std::weak_ptr<LeaseState> lease;
    std::shared_ptr<Cleanup> cleanup;
    bool operator>(const Task& other) const { return due > other.due; }
  };

  explicit Watchdog(std::shared_ptr<Metrics> metrics) : metrics_(std::move(metrics)) {}
  void run();
  void push(Task task);
  /// Renews the due leases (one batch per backend) and runs the due clean-ups; what must
  /// come back later is pushed again.
  void renew_due(std::vector<Task>& due);
  /// Whether `lease` is still held and within max_hold and its validity; marks it lost if not.
  bool still_renewable(const Task& task, const std::shared_ptr<LeaseState>& lease);
  /// One Backend::renew call for `leases`; the leases still held go into `again`.
  void renew_batch(Backend& backend, const std::vector<std::shared_ptr<LeaseState>>& leases,
                   std::vector<Task>& again);
  /// What one renewal's outcome means for its lease: the next renewal, a retry, or a loss.
  void renewed(const std::shared_ptr<LeaseState>& lease, const RenewItem& item,
               Clock::time_point sent, std::vector<Task>& again);
  void run_cleanup(Task& task, std::vector<Task>& again);

  const std::shared_ptr<Metrics> metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<Task, std::vector<Task>, std::greater<>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace dlock::internal
