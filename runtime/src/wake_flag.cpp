#include "wake_flag.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

namespace dlock::internal {
namespace {

// steady_clock is CLOCK_MONOTONIC, the clock FUTEX_WAIT_BITSET measures an absolute timeout
// against when FUTEX_CLOCK_REALTIME is not given.
static_assert(Clock::is_steady);

long futex(std::atomic<std::uint32_t>* word, int op, std::uint32_t value,
           const timespec* timeout) noexcept {
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), op | FUTEX_PRIVATE_FLAG, value,
                 timeout, nullptr, FUTEX_BITSET_MATCH_ANY);
}

}  // namespace

void WakeFlag::set(std::uint32_t value) noexcept {
  if (value_.exchange(value, std::memory_order_acq_rel) == kAsleep) {
    futex(&value_, FUTEX_WAKE_BITSET, 1, nullptr);
  }
}

std::uint32_t WakeFlag::wait_until(Clock::time_point deadline,
                                   std::chrono::microseconds spin) noexcept {
  if (const std::uint32_t now = peek(); now != 0) return now;
  if (spin.count() > 0) {
    const auto spun = std::min(deadline, Clock::now() + spin);
    while (Clock::now() < spun) {
      sched_yield();
      if (const std::uint32_t now = peek(); now != 0) return now;
    }
  }
  // Asleep from here on, unless set() came first.
  std::uint32_t seen = 0;
  if (!value_.compare_exchange_strong(seen, kAsleep, std::memory_order_acq_rel) &&
      seen != kAsleep) {
    return seen;
  }
  if (deadline != Clock::time_point::max()) {
    const auto since_epoch = deadline.time_since_epoch();
    if (since_epoch.count() <= 0) return peek();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch - seconds);
    const timespec at{static_cast<time_t>(seconds.count()), static_cast<long>(nanos.count())};
    // Returns at once when the value is no longer kAsleep (set() came first).
    futex(&value_, FUTEX_WAIT_BITSET, kAsleep, &at);
  } else {
    futex(&value_, FUTEX_WAIT_BITSET, kAsleep, nullptr);
  }
  return peek();
}

}  // namespace dlock::internal
