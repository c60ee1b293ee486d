// The flag a shared connection's callers sleep on (wake_flag.hpp): a value set before the
// wait is seen at once, a wait ends at its deadline, a set from another thread wakes the
// waiter with what the setter wrote before, whether it came during the spin or after it.
#include "wake_flag.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>

#include "dlock/config.hpp"

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;

// A shared connection's default spin (BackendConfig::spin).
constexpr auto kSpin = kDefaultSpin;

TEST(WakeFlag, AValueSetBeforeTheWaitIsSeenAtOnce) {
  WakeFlag flag;
  flag.set(2);
  EXPECT_EQ(flag.wait_until(Clock::time_point::max()), 2u);
  flag.reset();
  EXPECT_EQ(flag.peek(), 0u);
}

TEST(WakeFlag, AWaitWithNothingSetEndsAtItsDeadlineNotBefore) {
  WakeFlag flag;
  const auto deadline = Clock::now() + 30ms;
  std::uint32_t got = 0;
  int waits = 0;
  // A spurious wake returns 0 early: the caller waits again, as a shared connection does.
  while (Clock::now() < deadline && got == 0) {
    got = flag.wait_until(deadline, kSpin);
    ++waits;
  }
  EXPECT_EQ(got, 0u);
  EXPECT_GE(Clock::now(), deadline);
  EXPECT_LE(waits, 3) << "the wait does not sleep: it returned at once, again and again";
  EXPECT_EQ(flag.wait_until(Clock::now() - 1s), 0u) << "a deadline passed already";
}

TEST(WakeFlag, ASetFromAnotherThreadWakesTheSleeperWithWhatWasWrittenBefore) {
  for (int round = 0; round < 200; ++round) {
    WakeFlag flag;
    std::string message;
    std::thread setter([&] {
      message = "reply " + std::to_string(round);
      flag.set(1);
    });
    std::uint32_t got = 0;
    const auto deadline = Clock::now() + 10s;
    while (got == 0 && Clock::now() < deadline) got = flag.wait_until(deadline, kSpin);
    // Read before the join, which would order the write by itself (TSan checks the order).
    const std::string seen = got == 1u ? message : std::string();
    setter.join();
    ASSERT_EQ(got, 1u);
    ASSERT_EQ(seen, "reply " + std::to_string(round));
  }
}

// Sets `value` on `flag` from another thread `after` a while, and waits for it (spinning for
// `spin` first) for up to 20 s: what the wait returned, and how long it took.
std::pair<std::uint32_t, Clock::duration> set_later(WakeFlag& flag, std::uint32_t value,
                                                    std::chrono::milliseconds after,
                                                    std::chrono::microseconds spin = kSpin) {
  std::thread setter([&] {
    std::this_thread::sleep_for(after);
    flag.set(value);
  });
  const auto start = Clock::now();
  const auto deadline = start + 20s;
  std::uint32_t got = 0;
  while (got == 0 && Clock::now() < deadline) got = flag.wait_until(deadline, spin);
  const auto took = Clock::now() - start;
  setter.join();
  return {got, took};
}

// Long past the spin: the waiter sleeps by then, and only set()'s wake-up ends its sleep.
TEST(WakeFlag, ASetAfterTheSpinWakesTheSleeperAtOnce) {
  for (std::uint32_t round = 1; round <= 5; ++round) {
    WakeFlag flag;
    const auto [got, took] = set_later(flag, round, 50ms);
    ASSERT_EQ(got, round);
    ASSERT_LT(took, 10s) << "the sleeper was not woken: it slept to its deadline";
  }
}

// spin_us: 0 sleeps at once, and a set from another thread still wakes it.
TEST(WakeFlag, WithoutASpinASetFromAnotherThreadWakesTheSleeper) {
  for (std::uint32_t round = 1; round <= 5; ++round) {
    WakeFlag flag;
    const auto [got, took] = set_later(flag, round, 5ms, std::chrono::microseconds{0});
    ASSERT_EQ(got, round);
    ASSERT_LT(took, 10s) << "the sleeper was not woken: it slept to its deadline";
  }
}

// A wait that timed out asleep, then a reset and a set from another thread long after the
// spin: the next wait is woken by it, as a slot's flag is used again after a timeout.
TEST(WakeFlag, AFlagWhoseWaitTimedOutWakesItsNextSleeper) {
  WakeFlag flag;
  EXPECT_EQ(flag.wait_until(Clock::now() + 5ms, kSpin), 0u);
  EXPECT_EQ(flag.peek(), 0u) << "the sleep mark reads as a value";
  flag.reset();
  const auto [got, took] = set_later(flag, 2, 50ms);
  EXPECT_EQ(got, 2u);
  EXPECT_LT(took, 10s) << "the sleeper was not woken: it slept to its deadline";
}

}  // namespace
}  // namespace dlock::internal
