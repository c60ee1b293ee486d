// ReleaseSignals: plain releases wake every watch of a channel; a grant ("granted <token>
// <owner>") wakes only the watch that expects it, and only with a token above the one it
// was told to expect.
#include "release_signals.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace dlock::internal {
namespace {

using namespace std::chrono_literals;
using Wake = ReleaseWatch::Wake;

Clock::time_point soon() { return Clock::now() + 20ms; }

// How often the calling thread has gone to sleep so far (Linux: /proc/thread-self/status).
long sleeps_of_this_thread() {
  std::ifstream status("/proc/thread-self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("voluntary_ctxt_switches:", 0) == 0) return std::stol(line.substr(24));
  }
  return -1;
}

TEST(ReleaseSignals, APlainReleaseWakesEveryWatchOnce) {
  ReleaseSignals signals;
  auto a = signals.watch("ch");
  auto b = signals.watch("ch");
  signals.notify("ch", "released");
  EXPECT_EQ(a->wait_until(soon()), Wake::kReleased);
  EXPECT_EQ(b->wait_until(soon()), Wake::kReleased);
  EXPECT_EQ(a->wait_until(soon()), Wake::kTimeout);
  signals.notify("other");
  EXPECT_EQ(b->wait_until(soon()), Wake::kTimeout);
}

TEST(ReleaseSignals, AGrantWakesOnlyTheWatchExpectingThatOwner) {
  ReleaseSignals signals;
  auto mine = signals.watch("ch");
  auto other = signals.watch("ch");
  mine->expect_grant("owner-1", 100);
  other->expect_grant("owner-2", 100);
  signals.notify("ch", "granted 101 owner-1");
  EXPECT_EQ(other->wait_until(soon()), Wake::kTimeout);
  EXPECT_EQ(mine->wait_until(soon()), Wake::kGranted);
  EXPECT_EQ(mine->granted_token(), 101u);
}

TEST(ReleaseSignals, AGrantForAnOwnerNobodyHereExpectsWakesNobody) {
  ReleaseSignals signals;
  auto watch = signals.watch("ch");
  signals.notify("ch", "granted 7 someone-else");
  EXPECT_EQ(watch->wait_until(soon()), Wake::kTimeout);
}

// A grant that came before the waiter's latest place (its token not above the key's last
// token then) was lost since; only a later one counts.
TEST(ReleaseSignals, AGrantNotAboveTheExpectedTokenIsStale) {
  ReleaseSignals signals;
  auto watch = signals.watch("ch");
  watch->expect_grant("me", 0);
  signals.notify("ch", "granted 50 me");
  watch->expect_grant("me", 50);  // a later attempt saw token 50 as the key's last
  EXPECT_EQ(watch->wait_until(soon()), Wake::kTimeout);
  signals.notify("ch", "granted 51 me");
  EXPECT_EQ(watch->wait_until(soon()), Wake::kGranted);
  EXPECT_EQ(watch->granted_token(), 51u);
}

// The watch is told what to expect and a grant arrives, in either order: (expected token
// before the grant, granted token, expected token after it) and what the waiter then sees.
struct Crossing {
  const char* why;
  std::uint64_t before, granted, after;
  Wake seen;
};

TEST(ReleaseSignals, AGrantIsJudgedByTheHighestTokenExpectedEver) {
  for (const Crossing& c : {
           // The notice came between the request that queued the waiter and its reply: it is
           // kept until the waiter looks, and the reply's last token is below it.
           Crossing{"notice before the reply", 0, 9, 8, Wake::kGranted},
           // A later answer showed a lower last token (a server that lost its counter): a grant
           // already judged stale must not look new again.
           Crossing{"expectation lowered", 50, 40, 10, Wake::kTimeout},
       }) {
    ReleaseSignals signals;
    auto watch = signals.watch("ch");
    watch->expect_grant("me", c.before);
    signals.notify("ch", "granted " + std::to_string(c.granted) + " me");
    watch->expect_grant("me", c.after);
    EXPECT_EQ(watch->wait_until(soon()), c.seen) << c.why;
  }
}

TEST(ReleaseSignals, MalformedGrantsAreTakenAsPlainReleases) {
  ReleaseSignals signals;
  auto watch = signals.watch("ch");
  watch->expect_grant("me", 0);
  for (const char* payload : {"granted", "granted x me", "granted 0 me", "granted 12", "granted  me",
                              "granted 1x me"}) {
    signals.notify("ch", payload);
    EXPECT_EQ(watch->wait_until(soon()), Wake::kReleased) << payload;
  }
}

TEST(ReleaseSignals, AWaiterBlockedInWaitUntilIsWokenByItsGrant) {
  ReleaseSignals signals;
  auto watch = signals.watch("ch");
  watch->expect_grant("me", 3);
  std::thread releaser([&] {
    std::this_thread::sleep_for(30ms);
    signals.notify("ch", "granted 4 me");
  });
  const auto started = Clock::now();
  EXPECT_EQ(watch->wait_until(Clock::now() + 5s), Wake::kGranted);
  EXPECT_LT(Clock::now() - started, 2s);
  releaser.join();
}

TEST(ReleaseSignals, AnExpectationEndsWithItsWatch) {
  ReleaseSignals signals;
  auto keep = signals.watch("ch");  // keeps the channel's entry alive
  {
    auto gone = signals.watch("ch");
    gone->expect_grant("me", 0);
  }
  auto again = signals.watch("ch");
  signals.notify("ch", "granted 5 me");  // nobody expects "me" any more
  EXPECT_EQ(again->wait_until(soon()), Wake::kTimeout);
}

// Releases of one key wake the waiters of that key only: a process with many waiters on
// other keys does not wake them all for every message.
TEST(ReleaseSignals, AReleaseDoesNotWakeTheWaitersOfOtherChannels) {
  ReleaseSignals signals;
  if (sleeps_of_this_thread() < 0) GTEST_SKIP() << "no /proc/thread-self/status here";
  auto busy = signals.watch("busy");
  constexpr int kWaiters = 4;
  std::vector<std::unique_ptr<ReleaseWatch>> watches;
  for (int i = 0; i < kWaiters; ++i) watches.push_back(signals.watch("other-" + std::to_string(i)));
  std::atomic<int> ready{0};
  std::vector<long> sleeps(kWaiters, -1);
  std::vector<Wake> wakes(kWaiters, Wake::kTimeout);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      const long before = sleeps_of_this_thread();
      ++ready;
      wakes[i] = watches[i]->wait_until(Clock::now() + 10s);
      sleeps[i] = sleeps_of_this_thread() - before;
    });
  }
  while (ready.load() < kWaiters) std::this_thread::yield();
  std::this_thread::sleep_for(50ms);  // all blocked in wait_until by now
  for (int n = 0; n < 2000; ++n) {
    signals.notify("busy");
    if (n % 10 == 0) std::this_thread::sleep_for(1ms);  // let woken threads sleep again
  }
  for (int i = 0; i < kWaiters; ++i) signals.notify("other-" + std::to_string(i));
  for (auto& waiter : waiters) waiter.join();
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(wakes[i], Wake::kReleased) << "waiter " << i;
    // Woken once, for its own release (a few more for the scheduler's own reasons).
    EXPECT_LT(sleeps[i], 20) << "waiter " << i << " was woken by releases of another channel";
  }
}

}  // namespace
}  // namespace dlock::internal
