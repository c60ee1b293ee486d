#include "watchdog.hpp"

#include <pthread.h>

#include <iterator>
#include <system_error>

#include "log.hpp"

namespace dlock::internal {
namespace {

constexpr Millis kMinRetry{10};

Millis to_millis_ceil(Clock::duration d) {
  return std::max(Millis{1}, std::chrono::ceil<Millis>(d));
}

// Joins `thread`, or detaches it when it is the calling thread (which then ends by itself).
void finish(std::thread& thread) noexcept {
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();
  } else if (thread.joinable()) {
    thread.join();
  }
}

}  // namespace

std::shared_ptr<Watchdog> Watchdog::start(std::shared_ptr<Metrics> metrics) {
  std::shared_ptr<Watchdog> watchdog(new Watchdog(std::move(metrics)));
  watchdog->self_ = watchdog;
  watchdog->thread_ = std::thread([self = watchdog] { self->run(); });
  return watchdog;
}

Watchdog::~Watchdog() = default;  // stop() has joined or detached every thread

void Watchdog::stop() noexcept {
  std::vector<std::thread*> workers;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    for (auto& [key, worker] : workers_) {
      worker->wake.notify_all();
      workers.push_back(&worker->thread);
    }
  }
  wake_.notify_all();
  // The last reference to a client can be dropped on a watchdog thread (say, a lease
  // released in an on_lost callback). That thread then ends by itself and, holding the
  // last reference to this object, destroys it on the way out. No worker is added once
  // stopping_ is set, so the list above is complete.
  finish(thread_);
  for (auto* thread : workers) finish(*thread);
}

void Watchdog::push(Task task) {
  bool earliest;
  {
    std::lock_guard lock(mutex_);
    earliest = queue_.empty() || task.due < queue_.top().due;
    if (task.kind == Kind::kRenew) ++renewals_queued_;
    queue_.push(std::move(task));
  }
  if (earliest) wake_.notify_one();
}

void Watchdog::track(const std::shared_ptr<LeaseState>& lease) {
  // With max_hold under a renewal interval the first task is the max_hold mark itself.
  push(Task{std::min(later(lease->acquired_at, lease->backend->renew_every(lease->settings.lease)),
                    lease->hold_deadline()),
            lease, nullptr, Kind::kRenew});
}

void Watchdog::clean_up_after(std::shared_ptr<Backend> backend, Key key, std::string owner,
                              Clock::time_point until, bool at_once) {
  const auto first =
      at_once ? Clock::now() : later(Clock::now(), backend->config().command_timeout);
  push(Task{first, {},
            std::make_shared<Cleanup>(Cleanup{std::move(backend), std::move(key),
                                              std::move(owner), until}),
            Kind::kCleanup});
}

std::size_t Watchdog::tracked() const {
  std::lock_guard lock(mutex_);
  std::size_t renewing = renewals_queued_;
  for (const auto& [key, worker] : workers_) {
    if (!key.second) renewing += worker->work.size();
  }
  return renewing;
}

void Watchdog::run() {
  // Named for `top -H`, `ps -L` and per-thread CPU accounting (/proc/<pid>/task/*/comm).
  ::pthread_setname_np(::pthread_self(), "dlock-watchdog");
  std::unique_lock lock(mutex_);
  std::vector<Task> due;
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const auto next = queue_.top().due;
    if (Clock::now() < next) {
      wake_.wait_until(lock, next);
      continue;
    }
    const auto now = Clock::now();
    while (!queue_.empty() && queue_.top().due <= now) {
      if (queue_.top().kind == Kind::kRenew) --renewals_queued_;
      due.push_back(queue_.top());
      queue_.pop();
    }
    lock.unlock();
    dispatch(due);
    due.clear();
    lock.lock();
  }
  // Leases and clean-ups still queued are dropped here, on this thread.
  queue_ = {};
  renewals_queued_ = 0;
}

void Watchdog::dispatch(std::vector<Task>& due) {
  // Handed over per worker in one go, so that leases due together go out as one batch.
  std::map<WorkerKey, std::vector<Task>> work;
  for (auto& task : due) {
    if (task.kind == Kind::kCleanup) {
      const Backend* backend = task.cleanup->backend.get();
      work[WorkerKey{backend, true}].push_back(std::move(task));
      continue;
    }
    auto lease = task.lease.lock();
    if (!lease || lease->released() || lease->lost()) continue;
    if (task.kind == Kind::kExpiry) {
      // The renewal may be stuck on a stalled server: the holder is told on time anyway.
      // A renewal that got through has moved valid_until on, and this finds nothing.
      still_renewable(lease);
      continue;
    }
    // Whatever the worker meets, the lease is checked again when its validity ends.
    push(Task{std::min(lease->valid_until(), lease->hold_deadline()), lease, nullptr,
              Kind::kExpiry});
    work[WorkerKey{lease->backend.get(), false}].push_back(std::move(task));
  }
  for (auto& [key, tasks] : work) hand_to_worker(key, std::move(tasks));
}

void Watchdog::hand_to_worker(const WorkerKey& key, std::vector<Task> tasks) {
  const bool cleanups = key.second;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    auto found = workers_.find(key);
    if (found == workers_.end()) {
      auto started = std::make_unique<Worker>();
      try {
        started->thread = std::thread([self = self_.lock(), w = started.get(), cleanups] {
          self->run_worker(*w, cleanups);
        });
        found = workers_.emplace(key, std::move(started)).first;
      } catch (const std::system_error& e) {
        log(LogLevel::kError, "event=watchdog_thread_failed detail={}", field(e.what()));
      }
    }
    if (found != workers_.end()) {
      auto& work = found->second->work;
      work.insert(work.end(), std::make_move_iterator(tasks.begin()),
                  std::make_move_iterator(tasks.end()));
      found->second->wake.notify_one();
      return;
    }
  }
  // No thread could be started: the calls are made here, as one thread did for everything.
  std::vector<Task> again;
  if (cleanups) {
    for (auto& task : tasks) run_cleanup(task, again);
  } else {
    renew_batch(tasks, again);
  }
  for (auto& next : again) push(std::move(next));
}

void Watchdog::run_worker(Worker& worker, bool cleanups) {
  ::pthread_setname_np(::pthread_self(), cleanups ? "dlock-cleanup" : "dlock-renew");
  std::unique_lock lock(mutex_);
  std::vector<Task> batch;
  std::vector<Task> again;
  while (!stopping_) {
    if (worker.work.empty()) {
      worker.wake.wait(lock);
      continue;
    }
    batch.swap(worker.work);
    lock.unlock();
    if (cleanups) {
      for (auto& task : batch) run_cleanup(task, again);
    } else {
      renew_batch(batch, again);
    }
    batch.clear();
    for (auto& task : again) push(std::move(task));
    again.clear();
    lock.lock();
  }
  worker.work.clear();  // dropped on this thread, as the scheduler drops its queue
}

void Watchdog::run_cleanup(Task& task, std::vector<Task>& again) {
  Cleanup& c = *task.cleanup;
  const auto outcome = c.backend->release(c.key, c.owner, Millis{0});
  if (outcome == ReleaseOutcome::kReleased) {
    log(LogLevel::kInfo,
        "event=orphan_released key={} detail=\"granted after its request timed out\"",
        printable(c.key.str()));
    return;
  }
  // Nothing there yet may still mean a late request is in flight; look again until `until`.
  const auto next = later(Clock::now(), c.backend->config().command_timeout);
  if (next < c.until) again.push_back(Task{next, {}, task.cleanup, Kind::kCleanup});
}

bool Watchdog::still_renewable(const std::shared_ptr<LeaseState>& lease) {
  if (!lease || lease->released() || lease->lost()) return false;
  const auto now = Clock::now();
  if (now >= lease->hold_deadline()) {
    lease->mark_lost(LossReason::kMaxHold, "max_hold reached; the key expires now");
    return false;
  }
  if (now >= lease->valid_until()) {
    lease->mark_lost(LossReason::kExpired, "no renewal reached the backend within the lease");
    return false;
  }
  return true;
}

void Watchdog::renew_batch(std::vector<Task>& due, std::vector<Task>& again) {
  std::vector<std::shared_ptr<LeaseState>> leases;
  const auto sent = Clock::now();
  for (auto& task : due) {
    auto lease = task.lease.lock();
    if (!still_renewable(lease)) continue;
    // The lag is measured here, where the renewal goes out, not where it fell due.
    metrics_->renewal_lag.record(sent - task.due);
    lease->series->renewal_lag.record(sent - task.due);
    leases.push_back(std::move(lease));
  }
  if (leases.empty()) return;
  std::vector<RenewItem> items;
  items.reserve(leases.size());
  for (const auto& lease : leases) {
    const auto ttl =
        std::min<Clock::duration>(lease->settings.lease, lease->hold_deadline() - sent);
    items.push_back(RenewItem{&lease->key, lease->owner, to_millis_ceil(ttl)});
    items.back().token = lease->token;
    items.back().valid_until = lease->valid_until();
  }
  leases.front()->backend->renew(items);
  for (std::size_t i = 0; i < leases.size(); ++i) {
    // Released while the renewal was in flight: whatever it found says nothing about a
    // lease that no longer exists (the key may be gone or kept for min_hold). Declared lost
    // meanwhile (the renewal took longer than the validity): the holder has been told.
    if (leases[i]->released() || leases[i]->lost()) continue;
    renewed(leases[i], items[i], sent, again);
  }
}

void Watchdog::renewed(const std::shared_ptr<LeaseState>& lease, const RenewItem& item,
                       Clock::time_point sent, std::vector<Task>& again) {
  switch (item.outcome) {
    case RenewOutcome::kRenewed: {
      bump(metrics_->renewals);
      const auto until = later(sent, item.ttl);
      lease->extend_validity(until);
      auto next = later(sent, lease->backend->renew_every(lease->settings.lease));
      // The last renewal before max_hold sets the key to expire exactly at max_hold.
      if (until >= lease->hold_deadline()) next = lease->hold_deadline();
      again.push_back(Task{next, lease, nullptr, Kind::kRenew});
      break;
    }
    case RenewOutcome::kGone:
      lease->mark_lost(LossReason::kGone, "the key is gone");
      break;
    case RenewOutcome::kTaken:
      lease->mark_lost(LossReason::kTaken, "another owner holds the key");
      break;
    case RenewOutcome::kUnavailable: {
      bump(metrics_->renewal_failures);
      bump(lease->series->renewal_failures);
      const auto retry = std::max<Clock::duration>(kMinRetry, lease->settings.lease / 10);
      log(LogLevel::kWarn, "event=renewal_failed name={} key={} token={} retry_ms={} valid_ms={}",
          name_field(lease->name), printable(lease->key.str()), lease->token,
          std::chrono::duration_cast<Millis>(retry).count(),
          std::max<std::int64_t>(
              0, std::chrono::duration_cast<Millis>(lease->valid_until() - Clock::now()).count()));
      // Retry soon, but come back no later than the end of validity to declare expiry.
      again.push_back(Task{std::min(later(Clock::now(), retry), lease->valid_until()), lease,
                           nullptr, Kind::kRenew});
      break;
    }
  }
}

}  // namespace dlock::internal
