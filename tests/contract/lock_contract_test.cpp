// The behaviour every backend must share, run against each of them. A topology passes
// this suite before it ships; a change that makes one backend drift fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "topos.hpp"

namespace dlock::test {
namespace {

TEST_P(LockContract, ASecondOwnerIsRefusedWhileTheLockIsHeld) {
  Client a = make_client(), b = make_client();
  Lease held = a.acquire("k", settings(10s));
  ASSERT_TRUE(held);
  Lease refused = b.try_acquire("k", settings(10s));
  EXPECT_EQ(refused.status(), AcquireStatus::kBusy);
  EXPECT_FALSE(refused);
  EXPECT_FALSE(refused.error().empty());
  EXPECT_EQ(refused.release(), ReleaseStatus::kNotHeld);
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(b.try_acquire("k", settings(10s)));
}

TEST_P(LockContract, AnotherThreadOfTheSameClientIsRefusedToo) {
  Client a = make_client();
  Lease held = a.acquire("k", settings(10s));
  ASSERT_TRUE(held);
  AcquireStatus other = AcquireStatus::kAcquired;
  std::thread([&] { other = a.try_acquire("k", settings(10s)).status(); }).join();
  EXPECT_EQ(other, AcquireStatus::kBusy);
}

TEST_P(LockContract, WaitingForABusyLockGivesUpAfterAboutWait) {
  Client a = make_client(), b = make_client();
  Lease held = a.acquire("k", settings(10s));
  ASSERT_TRUE(held);
  const auto start = Clock::now();
  Lease refused = b.acquire("k", settings(10s, 1s));
  const auto took = ms_since(start);
  EXPECT_EQ(refused.status(), AcquireStatus::kBusy);
  EXPECT_GE(took, 1000 * 85 / 100);
  EXPECT_LE(took, 1000 * 115 / 100);
}

TEST_P(LockContract, ThreeNestedHoldsAndTwoReleasesLeaveTheLockHeldOnce) {
  Client a = make_client(), b = make_client();
  Lease outer = a.acquire("k", settings(10s));
  Lease middle = a.acquire("k", settings(10s));
  Lease inner = a.acquire("k", settings(10s));
  ASSERT_TRUE(outer && middle && inner);
  EXPECT_EQ(inner.token(), outer.token()) << "reentrant holds share one grant";
  EXPECT_EQ(outer.hold_count(), 3);
  EXPECT_EQ(inner.release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(middle.release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(outer.hold_count(), 1);
  AcquireStatus other_thread = AcquireStatus::kAcquired;
  std::thread([&] { other_thread = a.try_acquire("k", settings(10s)).status(); }).join();
  EXPECT_EQ(other_thread, AcquireStatus::kBusy);
  EXPECT_EQ(b.try_acquire("k", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(a.metrics().acquisitions, 1u);
  EXPECT_EQ(a.metrics().reentrant_acquisitions, 2u);
  EXPECT_EQ(outer.release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(b.try_acquire("k", settings(10s)));
}

TEST_P(LockContract, CurrentLeaseIsTheInnermostHoldOfThisThread) {
  Client a = make_client();
  EXPECT_FALSE(current_lease());
  Lease outer = a.acquire("outer", settings(10s), "outer-guard");
  ASSERT_TRUE(outer);
  EXPECT_EQ(current_lease().key(), Key("outer"));
  {
    Lease inner = a.acquire("inner", settings(10s), "inner-guard");
    ASSERT_TRUE(inner);
    const LeaseView view = current_lease();
    EXPECT_EQ(view.key(), Key("inner"));
    EXPECT_EQ(view.name(), "inner-guard");
    EXPECT_EQ(view.token(), inner.token());
    EXPECT_GT(view.remaining(), fresh(10s));
    EXPECT_LE(view.remaining(), std::min<Millis>(10s, topo_->lease_limit()));
    EXPECT_FALSE(view.lost());
    bool seen_elsewhere = true;
    std::thread([&] { seen_elsewhere = static_cast<bool>(current_lease()); }).join();
    EXPECT_FALSE(seen_elsewhere);
  }
  EXPECT_EQ(current_lease().key(), Key("outer"));
  outer.release();
  EXPECT_FALSE(current_lease());
}

TEST_P(LockContract, FencingTokensStrictlyIncreaseAcrossClients) {
  Client a = make_client(), b = make_client();
  std::uint64_t previous = 0;
  for (int i = 0; i < 100; ++i) {
    Lease lease = (i % 2 ? a : b).acquire("fenced", settings(10s));
    ASSERT_TRUE(lease);
    ASSERT_GT(lease.token(), previous);
    previous = lease.token();
    // Waits for the answer: the other client's next acquire must find the key free.
    ASSERT_EQ(lease.release(), ReleaseStatus::kReleased);
  }
}

TEST_P(LockContract, EarlyReleaseKeepsTheLockUntilMinHold) {
  Client a = make_client(), b = make_client();
  LockSettings s = settings(10s);
  s.min_hold = 700ms;
  const auto start = Clock::now();
  Lease lease = a.acquire("tick", s);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease.release(), ReleaseStatus::kKeptForMinHold);
  EXPECT_EQ(b.try_acquire("tick", settings(10s)).status(), AcquireStatus::kBusy);
  Lease next = b.acquire("tick", settings(10s, 3s));
  ASSERT_TRUE(next);
  EXPECT_GE(ms_since(start), 700 - 20);
  EXPECT_LE(ms_since(start), 700 + 300);
  EXPECT_EQ(a.metrics().min_hold_kept, 1u);
}

TEST_P(LockContract, MaxHoldStopsRenewingAndTheLockFreesThen) {
  Client a = make_client(), b = make_client();
  LockSettings s = settings(300ms);
  s.max_hold = 700ms;
  const auto start = Clock::now();
  Lease lease = a.acquire("capped", s);
  ASSERT_TRUE(lease);
  std::atomic<long long> lost_at{-1};
  lease.view().on_lost([&](const LeaseView&) { lost_at = ms_since(start); });
  Lease next = b.acquire("capped", settings(10s, 3s));
  ASSERT_TRUE(next);
  EXPECT_GE(ms_since(start), 700 - 20);
  EXPECT_LE(ms_since(start), 700 + 300);
  // The watchdog marks the loss at max_hold; on a loaded machine it may run a moment after
  // the next owner's acquisition.
  // The on_lost callback runs just after lost() turns true: wait for both.
  EXPECT_TRUE(wait_until([&] { return lease.lost() && lost_at.load() >= 0; }, 2s, 5ms));
  EXPECT_EQ(lease.view().loss_reason(), LossReason::kMaxHold);
  EXPECT_GE(lost_at.load(), 700 - 20);
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
  EXPECT_FALSE(next.lost());
}

TEST_P(LockContract, WatchdogRenewsPastManyLeases) {
  Client a = make_client(), b = make_client();
  Lease lease = a.acquire("long", settings(600ms));
  ASSERT_TRUE(lease);
  std::this_thread::sleep_for(2400ms);  // four leases
  EXPECT_FALSE(lease.lost());
  EXPECT_GT(lease.remaining(), 100ms);
  EXPECT_EQ(b.try_acquire("long", settings(1s)).status(), AcquireStatus::kBusy);
  EXPECT_GE(a.metrics().renewals, 5u);
}

TEST_P(LockContract, AReleaseWakesAWaiterPromptly) {
  Config config = topo_->config();
  config.backends["default"].poll_interval = 3s;
  Client a(config), b(config);
  Lease held = a.acquire("handoff", settings(10s));
  ASSERT_TRUE(held);
  Clock::time_point acquired;
  std::thread waiter([&] {
    Lease lease = b.acquire("handoff", settings(10s, 8s));
    acquired = Clock::now();
    EXPECT_TRUE(lease);
  });
  ASSERT_TRUE(wait_until([&] { return b.metrics().waits == 1; }, 2s, 1ms));
  std::this_thread::sleep_for(50ms);
  const auto released = Clock::now();
  held.release();
  waiter.join();
  EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(acquired - released).count(), 100);
}

TEST_P(LockContract, AnExpiredHoldersLockGoesToTheNextOwner) {
  Client a = make_client(), b = make_client();
  LockSettings s = settings(300ms);
  s.max_hold = 300ms;
  Lease first = a.acquire("expiring", s);
  ASSERT_TRUE(first);
  Lease second = b.acquire("expiring", settings(10s, 2s));
  ASSERT_TRUE(second);
  EXPECT_GT(second.token(), first.token());
  EXPECT_EQ(first.release(), ReleaseStatus::kLost);
  EXPECT_FALSE(second.lost());
  EXPECT_EQ(a.try_acquire("expiring", settings(1s)).status(), AcquireStatus::kBusy);
}

TEST_P(LockContract, MovedLeaseReleasesOnceAndDestructorReleases) {
  Client a = make_client(), b = make_client();
  {
    Lease lease = a.acquire("moved", settings(10s));
    Lease moved = std::move(lease);
    EXPECT_TRUE(moved);
    EXPECT_EQ(lease.release(), ReleaseStatus::kNotHeld);  // NOLINT: testing moved-from
    EXPECT_EQ(b.try_acquire("moved", settings(10s)).status(), AcquireStatus::kBusy);
  }
  // The destructor does not wait for the answer; another client sees the key free soon.
  LockSettings waiting = settings(10s);
  waiting.wait = 5s;
  EXPECT_TRUE(b.acquire("moved", waiting));
}

// Thread ids are reused as soon as a thread ends (glibc hands the next thread the same
// one), so a lease moved off its acquiring thread must not let a later thread in.
TEST_P(LockContract, ALaterThreadWithTheExitedAcquirersIdIsNotLetIntoAMovedLease) {
  Client a = make_client();
  Lease moved;
  std::thread::id acquirer;
  std::thread([&] {
    acquirer = std::this_thread::get_id();
    moved = a.acquire("handed-over", settings(10s));
  }).join();
  ASSERT_TRUE(moved);
  AcquireStatus later = AcquireStatus::kAcquired;
  std::uint64_t later_token = 0;
  bool same_id = false;
  std::thread([&] {
    same_id = std::this_thread::get_id() == acquirer;
    Lease lease = a.try_acquire("handed-over", settings(10s));
    later = lease.status();
    later_token = lease.token();
  }).join();
  EXPECT_EQ(later, AcquireStatus::kBusy)
      << "token " << later_token << " (the moved lease has " << moved.token()
      << "); the later thread had the acquirer's id: " << same_id;
  EXPECT_EQ(moved.hold_count(), 1);
  EXPECT_EQ(moved.release(), ReleaseStatus::kReleased);
}

TEST_P(LockContract, ALeaseMovedAwayIsNotReenteredByItsAcquiringThread) {
  Client a = make_client();
  Lease elsewhere;
  AcquireStatus again = AcquireStatus::kAcquired;
  std::thread([&] {
    Lease lease = a.acquire("given-away", settings(10s));
    ASSERT_TRUE(lease);
    elsewhere = std::move(lease);  // handed to another thread, which keeps holding it
    again = a.try_acquire("given-away", settings(10s)).status();
  }).join();
  EXPECT_EQ(again, AcquireStatus::kBusy);
  EXPECT_EQ(elsewhere.hold_count(), 1);
  EXPECT_EQ(elsewhere.release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(a.try_acquire("given-away", settings(10s)));
}

TEST_P(LockContract, TheLongestConfigurableDurationsDoNotOverflow) {
  Client a = make_client(), b = make_client();
  const Millis longest{9223372036854};  // what the configuration accepts: ~292 years
  LockSettings s = settings(longest, longest);
  s.min_hold = longest;
  Lease lease = a.acquire("forever", s);
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_GT(lease.remaining(), fresh(std::chrono::hours(24 * 365)));
  EXPECT_EQ(b.try_acquire("forever", settings(1s)).status(), AcquireStatus::kBusy);
  Lease waiting = b.acquire("forever", settings(1s, 50ms));
  EXPECT_EQ(waiting.status(), AcquireStatus::kBusy);
  EXPECT_EQ(lease.release(), ReleaseStatus::kKeptForMinHold);
}

TEST_P(LockContract, ManyThreadsSharingOneClientNeverOverlap) {
  // Two clients, eight threads, a handful of keys: each key guards a plain counter and an
  // "inside" flag; any overlap of two holders shows up as a lost update or a set flag.
  Client clients[2] = {make_client(), make_client()};
  constexpr int kThreads = 8, kRounds = 40, kKeys = 3;
  struct Guarded {
    int counter = 0;
    std::atomic<bool> inside{false};
  };
  Guarded guarded[kKeys];
  std::atomic<int> overlaps{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const int k = (t + r) % kKeys;
        Lease lease = clients[t % 2].acquire("shared-" + std::to_string(k), settings(5s, 10s));
        if (!lease) {
          ++failures;
          continue;
        }
        if (guarded[k].inside.exchange(true)) ++overlaps;
        const int seen = guarded[k].counter;
        std::this_thread::yield();
        guarded[k].counter = seen + 1;
        guarded[k].inside = false;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(overlaps.load(), 0);
  int total = 0;
  for (auto& g : guarded) total += g.counter;
  EXPECT_EQ(total, kThreads * kRounds);
}

// Admin (dlock/admin.hpp): one Admin may be used from several threads at once.

TEST_P(LockContract, AdminCallsFromSeveralThreadsAtOnceEachSeeTheirOwnAnswers) {
  Client holder = make_client();
  const Admin admin(make_client());
  constexpr int kThreads = 4, kRounds = 5;
  std::vector<Lease> leases;
  for (int t = 0; t < kThreads; ++t) {
    leases.push_back(holder.acquire("admin:" + std::to_string(t), settings(30s)));
    ASSERT_TRUE(leases.back()) << leases.back().error();
  }
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "admin:" + std::to_string(t);
      try {
        for (int r = 0; r < kRounds; ++r) {
          const std::optional<LockInfo> info = admin.inspect(key);
          if (!info || info->key != key || info->token != leases[t].token()) ++wrong;
          for (const InstanceLockInfo& instance : info ? info->instances : std::vector<InstanceLockInfo>{}) {
            if (!instance.answered || !instance.held) ++wrong;  // redlock: every instance holds it
          }
          const std::vector<LockInfo> listed = admin.list("admin:*");
          if (std::none_of(listed.begin(), listed.end(), [&](const LockInfo& l) { return l.key == key; })) {
            ++wrong;
          }
          (void)admin.history(5);
          (void)admin.runs("admin:*");
        }
        // Each thread removes its own key; the others go on reading meanwhile.
        const std::optional<LockInfo> removed = admin.force_release(key, "contract test");
        if (!removed || removed->key != key) ++wrong;
      } catch (const std::exception& e) {
        ADD_FAILURE() << key << ": " << e.what();
        ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_TRUE(admin.list("admin:*").empty());
  EXPECT_GE(admin.history(kThreads * 2).size(), static_cast<std::size_t>(kThreads));
}

// Scheduled runs (dlock/schedule.hpp): one record per key, written only by a holder.

TEST_P(LockContract, ARunIsClaimedOnceEvenAfterItsLockExpiredAndWasTakenAgain) {
  Client a = make_client(), b = make_client();
  LockSettings s = settings(300ms);
  s.max_hold = 300ms;  // the first run outlives its lock
  Lease first = a.acquire("report:7", s, "report");
  ASSERT_TRUE(first);
  RunClaim mine = claim_run(first.view(), RunOptions{"instance-a", 60s});
  ASSERT_EQ(mine.status(), ClaimStatus::kClaimed);
  EXPECT_EQ(mine.record().token, first.token());
  EXPECT_EQ(mine.record().outcome, "running");
  EXPECT_EQ(mine.record().name, "report");
  EXPECT_GT(mine.record().started_at_ms, 0);

  Lease second = b.acquire("report:7", settings(10s, 3s), "report");  // after max_hold
  ASSERT_TRUE(second) << second.error();
  RunClaim again = claim_run(second.view(), RunOptions{"instance-b", 60s});
  EXPECT_EQ(again.status(), ClaimStatus::kAlreadyRan);
  EXPECT_FALSE(again);
  EXPECT_EQ(again.record().label, "instance-a");
  EXPECT_EQ(again.record().owner, mine.record().owner);
  EXPECT_EQ(again.record().token, first.token());
  EXPECT_GT(again.record().ttl, 50s);

  // The first holder lost its lease during the run: its outcome says so.
  ASSERT_TRUE(wait_until([&] { return first.lost(); }, 2s, 5ms));
  EXPECT_TRUE(mine.finish());
  const std::vector<RunRecord> runs = Admin(a).runs("report:*");
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].key, "report:7");
  EXPECT_EQ(runs[0].outcome, "lost");
  EXPECT_GE(runs[0].finished_at_ms, runs[0].started_at_ms);
  EXPECT_FALSE(mine.finish());  // once
}

TEST_P(LockContract, OnlyTheHolderCanClaimAndARunFinishesOkOrFailed) {
  Client a = make_client();
  {
    Lease lease = a.acquire("job:ok", settings(10s));
    ASSERT_TRUE(lease);
    { RunClaim run = claim_run(lease.view()); ASSERT_TRUE(run); }
    Lease failing = a.acquire("job:failed", settings(10s));
    ASSERT_TRUE(failing);
    try {
      RunClaim run = claim_run(failing.view());
      ASSERT_TRUE(run);
      throw std::runtime_error("the job failed");
    } catch (const std::runtime_error&) {
    }
    Lease released = a.acquire("job:released", settings(10s));
    ASSERT_TRUE(released);
    const LeaseView view = released.view();
    released.release();
    EXPECT_EQ(claim_run(view).status(), ClaimStatus::kNotHeld);
  }
  std::vector<RunRecord> runs = Admin(a).runs("job:*");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].key, "job:failed");
  EXPECT_EQ(runs[0].outcome, "failed");
  EXPECT_EQ(runs[1].key, "job:ok");
  EXPECT_EQ(runs[1].outcome, "ok");
  EXPECT_TRUE(Admin(a).runs("nothing:*").empty());
  EXPECT_THROW((void)claim_run(LeaseView{}), std::logic_error);
}

TEST_P(LockContract, ClientsNameTheSameSlotFromTheServersClock) {
  Client a = make_client(), b = make_client();
  const std::int64_t before = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  const Slot x = nearest_slot(a, 60s);
  const Slot y = current_slot(b, 60s);
  // Same server clock, read a moment apart: the slot in progress is the nearest one or the
  // one before it.
  EXPECT_TRUE(x.index == y.index || x.index == y.index + 1) << x.index << " " << y.index;
  EXPECT_EQ(y.starts_at_ms, y.index * 60000);
  EXPECT_LE(y.starts_at_ms, y.server_now_ms);
  EXPECT_GT(y.starts_at_ms + 60000, y.server_now_ms);
  EXPECT_LE(std::abs(y.server_now_ms - before), 5000);  // the servers run on this host
  EXPECT_LE(y.next_starts_at - std::chrono::steady_clock::now(), 60s);
  EXPECT_THROW((void)current_slot(a, 0ms), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Backends, LockContract, ::testing::ValuesIn(topologies()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::test
