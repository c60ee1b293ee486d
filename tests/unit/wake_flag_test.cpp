// The flag a shared connection's callers sleep on (wake_flag.hpp): a value set before the
// wait is seen at once, a wait ends at its deadline, and a set from another thread wakes the
// sleeper with what the setter wrote before.
#include "wake_flag.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;

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
    got = flag.wait_until(deadline);
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
    while (got == 0 && Clock::now() < deadline) got = flag.wait_until(deadline);
    setter.join();
    ASSERT_EQ(got, 1u);
    ASSERT_EQ(message, "reply " + std::to_string(round));
  }
}

}  // namespace
}  // namespace dlock::internal
