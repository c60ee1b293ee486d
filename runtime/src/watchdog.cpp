#include "watchdog.hpp"

#include <pthread.h>

#include <map>

#include "log.hpp"

namespace dlock::internal {
namespace {

constexpr Millis kMinRetry{10};

Millis to_millis_ceil(Clock::duration d) {
  return std::max(Millis{1}, std::chrono::ceil<Millis>(d));
}

}  // namespace

std::shared_ptr<Watchdog> Watchdog::start(std::shared_ptr<Metrics> metrics) {
  std::shared_ptr<Watchdog> watchdog(new Watchdog(std::move(metrics)));
  watchdog->thread_ = std::thread([self = watchdog] { self->run(); });
  return watchdog;
}

Watchdog::~Watchdog() = default;  // stop() has joined or detached the thread

void Watchdog::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  // The last reference to a client can be dropped on this very thread (say, a lease
  // released in an on_lost callback). The thread then ends by itself and, holding the
  // last reference to this object, destroys it on the way out.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else if (thread_.joinable()) {
    thread_.join();
  }
}

void Watchdog::push(Task task) {
  bool earliest;
  {
    std::lock_guard lock(mutex_);
    earliest = queue_.empty() || task.due < queue_.top().due;
    queue_.push(std::move(task));
  }
  if (earliest) wake_.notify_one();
}

void Watchdog::track(const std::shared_ptr<LeaseState>& lease) {
  // With max_hold under lease/3 the first task is the max_hold mark itself.
  push(Task{std::min(later(lease->acquired_at, lease->settings.lease / 3), lease->hold_deadline()),
            lease, nullptr});
}

void Watchdog::clean_up_after(std::shared_ptr<Backend> backend, Key key, std::string owner,
                              Clock::time_point until) {
  const auto first = later(Clock::now(), backend->config().command_timeout);
  push(Task{first, {},
            std::make_shared<Cleanup>(Cleanup{std::move(backend), std::move(key),
                                              std::move(owner), until})});
}

std::size_t Watchdog::tracked() const {
  std::lock_guard lock(mutex_);
  return queue_.size();
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
      due.push_back(queue_.top());
      queue_.pop();
    }
    lock.unlock();
    renew_due(due);
    due.clear();
    lock.lock();
  }
  // Leases and clean-ups still queued are dropped here, on this thread.
  queue_ = {};
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
  if (next < c.until) again.push_back(Task{next, {}, task.cleanup});
}

void Watchdog::renew_due(std::vector<Task>& due) {
  std::vector<Task> again;
  // Group by backend so that each backend gets one batch (one pipeline for Redis).
  std::map<Backend*, std::vector<std::shared_ptr<LeaseState>>> batches;
  for (auto& task : due) {
    if (task.cleanup) {
      run_cleanup(task, again);
      continue;
    }
    auto lease = task.lease.lock();
    if (still_renewable(task, lease)) batches[lease->backend.get()].push_back(std::move(lease));
  }
  for (auto& [backend, leases] : batches) renew_batch(*backend, leases, again);
  for (auto& task : again) push(std::move(task));
}

bool Watchdog::still_renewable(const Task& task, const std::shared_ptr<LeaseState>& lease) {
  if (!lease || lease->released() || lease->lost()) return false;
  const auto now = Clock::now();
  metrics_->renewal_lag.record(now - task.due);
  lease->series->renewal_lag.record(now - task.due);
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

void Watchdog::renew_batch(Backend& backend, const std::vector<std::shared_ptr<LeaseState>>& leases,
                           std::vector<Task>& again) {
  std::vector<RenewItem> items;
  items.reserve(leases.size());
  const auto sent = Clock::now();
  for (const auto& lease : leases) {
    const auto ttl =
        std::min<Clock::duration>(lease->settings.lease, lease->hold_deadline() - sent);
    items.push_back(RenewItem{&lease->key, lease->owner, to_millis_ceil(ttl)});
    items.back().token = lease->token;
  }
  backend.renew(items);
  for (std::size_t i = 0; i < leases.size(); ++i) {
    // Released while the renewal was in flight: whatever it found says nothing about a
    // lease that no longer exists (the key may be gone or kept for min_hold).
    if (leases[i]->released()) continue;
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
      auto next = later(sent, lease->settings.lease / 3);
      // The last renewal before max_hold sets the key to expire exactly at max_hold.
      if (until >= lease->hold_deadline()) next = lease->hold_deadline();
      again.push_back(Task{next, lease, nullptr});
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
      again.push_back(
          Task{std::min(later(Clock::now(), retry), lease->valid_until()), lease, nullptr});
      break;
    }
  }
}

}  // namespace dlock::internal
