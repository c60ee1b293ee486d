#include "settler.hpp"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "log.hpp"

namespace dlock::internal::settler {
namespace {

struct State {
  std::mutex mutex;
  std::condition_variable wake;     // a job or a pool to watch arrived
  std::condition_variable settled;  // a release in flight ended
  std::deque<std::function<void()>> jobs;
  std::vector<std::weak_ptr<Settleable>> watched;
  bool running = false;  // the thread exists (not in a forked child)
  bool exit_hook = false;
  long in_flight = 0;
  Clock::duration longest = Clock::duration::zero();
};

// Never destroyed: its thread may outlive every static object, and process exit waits for
// releases through it (flush at exit).
State& state() {
  static auto* const s = new State;
  return *s;
}

// Adds `pool` unless it is there already. Returns whether it was added.
bool add_once(std::vector<std::weak_ptr<Settleable>>& pools, std::weak_ptr<Settleable> pool) {
  const auto same = [&](const auto& w) { return !w.owner_before(pool) && !pool.owner_before(w); };
  if (std::any_of(pools.begin(), pools.end(), same)) return false;
  pools.push_back(std::move(pool));
  return true;
}

void run(std::function<void()>& job) noexcept {
  try {
    job();
  } catch (...) {
    log(LogLevel::kError, "a release job failed");
  }
}

// Settles every watched pool once; the ones that still owe replies are watched again.
void settle_watched(std::unique_lock<std::mutex>& lock) {
  State& s = state();
  std::vector<std::weak_ptr<Settleable>> pools;
  pools.swap(s.watched);
  lock.unlock();
  std::vector<std::weak_ptr<Settleable>> again;
  for (auto& weak : pools) {
    auto pool = weak.lock();
    if (pool && pool->settle_idle(Clock::now() - kGrace)) again.push_back(weak);
  }
  pools.clear();
  lock.lock();
  for (auto& weak : again) add_once(s.watched, std::move(weak));
}

void loop() {
  ::pthread_setname_np(::pthread_self(), "dlock-settle");
  State& s = state();
  std::unique_lock lock(s.mutex);
  auto next_scan = Clock::now() + kGrace;
  for (;;) {
    if (!s.jobs.empty()) {
      auto job = std::move(s.jobs.front());
      s.jobs.pop_front();
      lock.unlock();
      run(job);
      job = nullptr;  // what it holds goes on this thread, before the lock is taken again
      lock.lock();
      continue;
    }
    if (s.watched.empty()) {
      s.wake.wait(lock);
      next_scan = Clock::now() + kGrace;
      continue;
    }
    if (Clock::now() < next_scan) {
      s.wake.wait_until(lock, next_scan);
      continue;
    }
    settle_watched(lock);
    next_scan = Clock::now() + kGrace;
  }
}

// With s.mutex held. False when no thread could be started.
bool ensure_thread(State& s) {
  if (s.running) return true;
  try {
    std::thread(loop).detach();
    s.running = true;
  } catch (const std::system_error& e) {
    log(LogLevel::kError, "cannot start the release thread: {}", e.what());
  }
  return s.running;
}

// A forked child has no settler thread; it starts one when it needs it. What the parent had
// in flight is the parent's.
void lock_before_fork() { state().mutex.lock(); }
void unlock_in_parent() { state().mutex.unlock(); }
void reset_in_child() {
  State& s = state();
  s.running = false;
  // Left behind, never run or destroyed: what they hold (a lease, so its client) would be
  // destroyed here, joining threads the child does not have.
  static auto* const abandoned = new std::deque<std::function<void()>>;
  for (auto& job : s.jobs) abandoned->push_back(std::move(job));
  s.jobs.clear();
  s.watched.clear();
  s.in_flight = 0;
  s.mutex.unlock();
}
[[maybe_unused]] const int g_fork_handlers =
    ::pthread_atfork(lock_before_fork, unlock_in_parent, reset_in_child);

}  // namespace

void post(std::function<void()> job) {
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    if (ensure_thread(s)) {
      s.jobs.push_back(std::move(job));
      s.wake.notify_one();
      return;
    }
  }
  run(job);
}

void report(bool quiet, std::function<void()> report) {
  if (quiet) {
    report();
  } else {
    post(std::move(report));
  }
}

void watch(std::weak_ptr<Settleable> pool) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!ensure_thread(s)) return;  // replies are then read by the connections' next users
  if (add_once(s.watched, std::move(pool))) s.wake.notify_one();
}

void begin(Clock::duration bound) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  ++s.in_flight;
  s.longest = std::max(s.longest, bound);
  if (!s.exit_hook) {
    // Registered after every static object of the program is built, so it runs before
    // any of them is destroyed.
    s.exit_hook = std::atexit([] { (void)flush(); }) == 0;
  }
}

void end() noexcept {
  State& s = state();
  {
    std::lock_guard lock(s.mutex);
    --s.in_flight;
  }
  s.settled.notify_all();
}

bool flush() {
  State& s = state();
  std::unique_lock lock(s.mutex);
  return s.settled.wait_for(lock, s.longest, [&] { return s.in_flight <= 0; });
}

}  // namespace dlock::internal::settler
