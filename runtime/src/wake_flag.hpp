// A flag one thread sleeps on until another sets it, or a deadline passes: a futex with a
// steady-clock deadline. Unlike a condition variable it takes no mutex, so a thread woken
// with its answer ready goes on without contending for the lock its waker just let go.
#pragma once

#include <atomic>
#include <cstdint>

#include "steady.hpp"

namespace dlock::internal {

class WakeFlag {
 public:
  /// Clears the flag; the next wait_until() sleeps until a set() after this.
  void reset() noexcept { value_.store(0, std::memory_order_relaxed); }
  /// Sets the flag to `value` (not 0) and wakes the thread sleeping on it. What the setter
  /// wrote before is seen by the thread that reads `value` from wait_until().
  void set(std::uint32_t value) noexcept;
  /// The value set since the last reset(), waiting for it until `deadline`; 0 when the
  /// deadline passed first (or, rarely, on a spurious wake: callers check again).
  [[nodiscard]] std::uint32_t wait_until(Clock::time_point deadline) noexcept;
  [[nodiscard]] std::uint32_t peek() const noexcept {
    return value_.load(std::memory_order_acquire);
  }

 private:
  // A futex word: 32 bits, as the kernel reads it.
  std::atomic<std::uint32_t> value_{0};
};

}  // namespace dlock::internal
