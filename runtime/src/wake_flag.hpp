// A flag one thread waits on until another sets it, or a deadline passes: a futex with a
// steady-clock deadline. Unlike a condition variable it takes no mutex, so a thread woken
// with its answer ready goes on without contending for the lock its waker just let go.
//
// The waiter first spins for a few microseconds, yielding its CPU to any thread that can
// run, and only then sleeps; set() makes the wake-up call only for a waiter that sleeps.
// An answer that comes within the spin (a reply read by another thread of a busy client)
// costs no futex call on either side, and the CPU does not go idle in between: on a
// virtual machine an idle CPU is slow to wake (docs/BENCHMARKS.md, figure 18). How long it
// spins is the caller's (BackendConfig::spin); 0 sleeps at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "steady.hpp"

namespace dlock::internal {

class WakeFlag {
 public:
  /// Clears the flag; the next wait_until() waits until a set() after this.
  void reset() noexcept { value_.store(0, std::memory_order_relaxed); }
  /// Sets the flag to `value` (not 0, below 2^31) and wakes the thread sleeping on it. What
  /// the setter wrote before is seen by the thread that reads `value` from wait_until().
  void set(std::uint32_t value) noexcept;
  /// The value set since the last reset(), waiting for it until `deadline`, spinning for up
  /// to `spin` first; 0 when the deadline passed first (or, rarely, on a spurious wake:
  /// callers check again).
  [[nodiscard]] std::uint32_t wait_until(Clock::time_point deadline,
                                         std::chrono::microseconds spin = {}) noexcept;
  [[nodiscard]] std::uint32_t peek() const noexcept {
    const std::uint32_t v = value_.load(std::memory_order_acquire);
    return v == kAsleep ? 0 : v;
  }

 private:
  // The waiter is asleep (or about to be): set() must wake it.
  static constexpr std::uint32_t kAsleep = 0x80000000U;
  // A futex word: 32 bits, as the kernel reads it.
  std::atomic<std::uint32_t> value_{0};
};

}  // namespace dlock::internal
