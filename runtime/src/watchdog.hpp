// Renews every held lease, detects losses, enforces max_hold and cleans up after
// acquisitions whose outcome was unknown. A scheduler thread keeps the timetable and never
// blocks on the network; each backend's renewals run on a worker of their own, and its
// clean-ups on another, so a stalled server delays only the calls that go to it.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "backend.hpp"
#include "lease_state.hpp"
#include "metrics.hpp"

namespace dlock::internal {

class Watchdog {
 public:
  /// Starts the scheduler thread. Every thread of the watchdog co-owns it (and the metrics),
  /// so that the client may even be destroyed on one of them.
  static std::shared_ptr<Watchdog> start(std::shared_ptr<Metrics> metrics);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Stops every thread: joins them, or lets the calling one finish by itself.
  void stop() noexcept;

  /// Starts renewing a newly granted lease at acquired_at + Backend::renew_every(lease)
  /// (lease/3 but on zookeeper).
  void track(const std::shared_ptr<LeaseState>& lease);

  /// An acquisition timed out but may have been applied: release `owner`'s key, if it
  /// exists, a few times until `until` (owner-checked, so it can never hurt a real holder).
  /// The first try is a command timeout from now, or now with `at_once` (a waiter leaving
  /// its queue).
  void clean_up_after(std::shared_ptr<Backend> backend, Key key, std::string owner,
                      Clock::time_point until, bool at_once = false);

  /// Number of leases currently scheduled for renewal (for tests and benchmarks).
  [[nodiscard]] std::size_t tracked() const;

 private:
  struct Cleanup {
    std::shared_ptr<Backend> backend;
    Key key;
    std::string owner;
    Clock::time_point until;
  };
  enum class Kind {
    kRenew,    ///< renew `lease` (on its backend's renewal worker)
    kExpiry,   ///< `lease` must have been renewed by now; if not, it is lost
    kCleanup,  ///< run `cleanup` (on its backend's clean-up worker)
  };
  struct Task {
    Clock::time_point due;
    std::weak_ptr<LeaseState> lease;
    std::shared_ptr<Cleanup> cleanup;
    Kind kind = Kind::kRenew;
    bool operator>(const Task& other) const { return due > other.due; }
  };
  /// A worker thread making one backend's blocking calls of one kind, one batch at a time;
  /// what arrives while it is busy waits for the next batch.
  struct Worker {
    std::vector<Task> work;  // guarded by mutex_
    std::condition_variable wake;
    std::thread thread;
  };
  using WorkerKey = std::pair<const Backend*, bool>;  // (backend, clean-ups?)

  explicit Watchdog(std::shared_ptr<Metrics> metrics) : metrics_(std::move(metrics)) {}
  void run();
  void run_worker(Worker& worker, bool cleanups);
  void push(Task task);
  /// Hands due tasks to their workers and checks the due expiry marks; never blocks on I/O.
  void dispatch(std::vector<Task>& due);
  /// Queues `tasks` on the worker for `key`, starting the worker if needed.
  void hand_to_worker(const WorkerKey& key, std::vector<Task> tasks);
  /// Whether `lease` is still held and within max_hold and its validity; marks it lost if not.
  bool still_renewable(const std::shared_ptr<LeaseState>& lease);
  /// One Backend::renew call for the due leases of one backend; the leases still held go
  /// into `again`.
  void renew_batch(std::vector<Task>& due, std::vector<Task>& again);
  /// What one renewal's outcome means for its lease: the next renewal, a retry, or a loss.
  void renewed(const std::shared_ptr<LeaseState>& lease, const RenewItem& item,
               Clock::time_point sent, std::vector<Task>& again);
  void run_cleanup(Task& task, std::vector<Task>& again);

  const std::shared_ptr<Metrics> metrics_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::priority_queue<Task, std::vector<Task>, std::greater<>> queue_;
  std::size_t renewals_queued_ = 0;  // kRenew tasks in queue_
  std::map<WorkerKey, std::unique_ptr<Worker>> workers_;
  bool stopping_ = false;
  std::thread thread_;
  std::weak_ptr<Watchdog> self_;  // for the workers, which co-own the watchdog too
};

}  // namespace dlock::internal
