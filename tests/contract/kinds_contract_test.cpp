// The lock kinds of DESIGN §7 (shared and exclusive, fair, several keys, permits), run against
// every backend that offers them; a backend that does not offers none of its tests (skipped,
// by the ConfigError that acquire() throws for it).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "topos.hpp"

namespace dlock::test {
namespace {

LockSettings shared(Millis lease, Millis wait = 0ms) {
  LockSettings s = settings(lease, wait);
  s.mode = LockMode::kShared;
  return s;
}

LockSettings fair(Millis lease, Millis wait = 0ms) {
  LockSettings s = settings(lease, wait);
  s.fair = true;
  return s;
}

LockSettings permits(int n, Millis lease, Millis wait = 0ms) {
  LockSettings s = settings(lease, wait);
  s.permits = n;
  return s;
}

class LockKinds : public LockContract {
 protected:
  // Skips the test where the backend does not offer `s`'s kind.
  Lease first(Client& client, const Key& key, const LockSettings& s) {
    try {
      return client.acquire(key, s);
    } catch (const ConfigError& e) {
      unsupported_ = e.what();
      return Lease::refused(AcquireStatus::kRefused, e.what());
    }
  }
  // a's and b's shared holds of "doc"; b's is not asked where shared holds are not offered.
  std::pair<Lease, Lease> two_readers(Client& a, Client& b, Millis lease) {
    Lease one = first(a, "doc", shared(lease));
    if (!unsupported_.empty()) return {std::move(one), Lease()};
    return {std::move(one), b.acquire("doc", shared(lease))};
  }
  std::string unsupported_;
};

#define DLOCK_SKIP_UNLESS_OFFERED() \
  if (!unsupported_.empty()) GTEST_SKIP() << unsupported_

// ---- shared and exclusive ----

TEST_P(LockKinds, SharedHoldsOverlapEachWithItsOwnToken) {
  Client a = make_client(), b = make_client(), c = make_client();
  Lease one = first(a, "doc", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(one) << one.error();
  Lease two = b.acquire("doc", shared(10s));
  ASSERT_TRUE(two) << two.error();
  EXPECT_NE(one.token(), two.token());
  EXPECT_EQ(two.view().mode(), LockMode::kShared);
  EXPECT_EQ(c.try_acquire("doc", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(one.release(), ReleaseStatus::kReleased);
  EXPECT_EQ(c.try_acquire("doc", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(two.release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(c.try_acquire("doc", settings(10s)));
}

TEST_P(LockKinds, AnExclusiveHolderKeepsReadersOut) {
  Client a = make_client(), b = make_client();
  Lease writer = first(a, "doc", settings(10s));
  ASSERT_TRUE(writer);
  Lease reader = first(b, "doc", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  EXPECT_EQ(reader.status(), AcquireStatus::kBusy);
}

TEST_P(LockKinds, AWriterWaitsForEveryReaderAndIsWokenByTheLast) {
  Config config = topo_->config();
  config.backends["default"].poll_interval = 3s;
  Client r1(config), r2(config), w(config);
  Lease one = first(r1, "doc", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  Lease two = r2.acquire("doc", shared(10s));
  ASSERT_TRUE(one && two);
  std::atomic<bool> granted{false};
  Clock::time_point at;
  std::thread writer([&] {
    Lease lease = w.acquire("doc", settings(10s, 8s));
    at = Clock::now();
    granted = static_cast<bool>(lease);
  });
  ASSERT_TRUE(wait_until([&] { return w.metrics().waits == 1; }, 2s, 1ms));
  one.release();
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(granted.load());
  const auto released = Clock::now();
  two.release();
  writer.join();
  EXPECT_TRUE(granted.load());
  EXPECT_LT(std::chrono::duration_cast<Millis>(at - released).count(), 150);
}

TEST_P(LockKinds, ANewReaderQueuesBehindAWaitingWriter) {
  Client r1 = make_client(), r2 = make_client(), w = make_client();
  Lease one = first(r1, "doc", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(one);
  std::thread writer([&] { EXPECT_TRUE(w.acquire("doc", settings(10s, 8s))); });
  ASSERT_TRUE(wait_until([&] { return w.metrics().waits == 1; }, 2s, 1ms));
  std::this_thread::sleep_for(50ms);  // the writer's place is taken with its second try
  EXPECT_EQ(r2.try_acquire("doc", shared(10s)).status(), AcquireStatus::kBusy);
  one.release();
  writer.join();
}

// Fair shared holds overlap as plain ones do, and a fair writer keeps its turn: a reader that
// comes after it waits behind it.
TEST_P(LockKinds, FairSharedHoldsOverlapAndAFairWriterKeepsItsTurn) {
  Client r1 = make_client(), r2 = make_client(), w = make_client(), r3 = make_client();
  LockSettings reader = shared(10s);
  reader.fair = true;
  Lease one = first(r1, "doc", reader);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(one) << one.error();
  Lease two = r2.acquire("doc", reader);
  ASSERT_TRUE(two) << two.error();
  EXPECT_NE(one.token(), two.token());
  std::thread writer([&] { EXPECT_TRUE(w.acquire("doc", fair(10s, 8s))); });
  JoinOnExit join_writer{writer};
  ASSERT_TRUE(wait_until([&] { return w.metrics().contention >= 1; }, 5s, 1ms));
  EXPECT_EQ(r3.try_acquire("doc", reader).status(), AcquireStatus::kBusy);
  one.release();
  two.release();
  writer.join();
}

TEST_P(LockKinds, SharedInsideExclusiveIsAReentrantHoldOfIt) {
  Client a = make_client(), b = make_client();
  Lease outer = a.acquire("doc", settings(10s));
  ASSERT_TRUE(outer);
  Lease inner = first(a, "doc", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(inner) << inner.error();
  EXPECT_EQ(inner.token(), outer.token());
  EXPECT_EQ(outer.hold_count(), 2);
  EXPECT_EQ(b.try_acquire("doc", shared(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(inner.release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(a.metrics().downgrades, 1u);
}

TEST_P(LockKinds, ExclusiveInsideSharedIsRefusedAtOnce) {
  Client a = make_client();
  Lease outer = first(a, "doc", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(outer);
  const auto started = Clock::now();
  Lease inner = a.acquire("doc", settings(10s, 5s));
  EXPECT_EQ(inner.status(), AcquireStatus::kRefused);
  EXPECT_NE(inner.error().find("upgrade"), std::string::npos) << inner.error();
  EXPECT_LT(ms_since(started), 1000);
  EXPECT_EQ(a.metrics().upgrades_refused, 1u);
  EXPECT_EQ(outer.hold_count(), 1);
}

TEST_P(LockKinds, SharedHoldsAreRenewedPastManyLeases) {
  Client a = make_client(), b = make_client(), c = make_client();
  auto [one, two] = two_readers(a, b, 600ms);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(one && two);
  std::this_thread::sleep_for(2400ms);
  EXPECT_FALSE(one.lost());
  EXPECT_FALSE(two.lost());
  EXPECT_EQ(c.try_acquire("doc", settings(1s)).status(), AcquireStatus::kBusy);
}

TEST_P(LockKinds, AReaderThatStopsRenewingStopsBlockingWithinItsLease) {
  Client a = make_client(), b = make_client(), c = make_client();
  LockSettings brief = shared(400ms);
  brief.max_hold = 400ms;
  Lease stale = first(a, "doc", brief);
  DLOCK_SKIP_UNLESS_OFFERED();
  Lease live = b.acquire("doc", shared(10s));
  ASSERT_TRUE(stale && live);
  live.release();
  const auto started = Clock::now();
  Lease writer = c.acquire("doc", settings(10s, 3s));
  ASSERT_TRUE(writer);
  EXPECT_LT(ms_since(started), 1000);
  EXPECT_GT(writer.token(), stale.token());
}

// ---- fair ----

TEST_P(LockKinds, FairGrantsFollowArrivalOrder) {
  Config config = topo_->config();
  config.backends["default"].poll_interval = 3s;
  Client holder_client(config);
  Lease holder = first(holder_client, "ticket", fair(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(holder);
  constexpr int kWaiters = 4;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kWaiters; ++i) clients.push_back(std::make_unique<Client>(config));
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&, i] {
      Lease lease = clients[i]->acquire("ticket", fair(10s, 8s));
      EXPECT_TRUE(lease) << lease.error();
      std::lock_guard lock(mutex);
      order.push_back(i);
    });
    // Each waiter reaches the server before the next one starts.
    ASSERT_TRUE(wait_until([&] { return clients[i]->metrics().contention >= 1; }, 2s, 1ms));
  }
  holder.release();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  // Each release woke only the waiter whose turn it was: one wake-up per grant, no herd.
  std::uint64_t wakeups = 0;
  for (const auto& c : clients) wakeups += c->metrics().wakeups;
  EXPECT_EQ(wakeups, static_cast<std::uint64_t>(kWaiters));
}

TEST_P(LockKinds, AFairLockOfAnExpiredHolderGoesToTheHeadOfTheQueue) {
  Client a = make_client(), b = make_client();
  LockSettings brief = fair(400ms);
  brief.max_hold = 400ms;
  Lease stale = first(a, "ticket", brief);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(stale);
  Lease next = b.acquire("ticket", fair(10s, 3s));
  ASSERT_TRUE(next) << next.error();
  EXPECT_GT(next.token(), stale.token());
}

TEST_P(LockKinds, AWaiterThatGaveUpLeavesTheFairQueue) {
  Client a = make_client(), b = make_client(), c = make_client();
  Lease holder = first(a, "ticket", fair(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(holder);
  EXPECT_EQ(b.acquire("ticket", fair(10s, 300ms)).status(), AcquireStatus::kBusy);
  holder.release();
  // b left its place when it gave up: c, later, is not kept behind it.
  EXPECT_TRUE(c.acquire("ticket", fair(10s, 500ms)));
}

// A waiter in another process that dies keeps its place only until the place lapses (no
// later than its lease; on ZooKeeper, its session's timeout): the queue moves on without it.
TEST_P(LockKinds, AKilledFairWaiterStopsHoldingUpTheQueue) {
  if (GetParam() == "memory") GTEST_SKIP() << "one process's store: no other process can wait";
  // gRPC does not work in a child forked after it started (its threads stay behind): the
  // child's calls could wait for ever.
  if (GetParam() == "etcd") GTEST_SKIP() << "the waiter is a forked child, and etcd's client is gRPC";
  Client a = make_client(), b = make_client();
  Lease holder = first(a, "ticket", fair(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(holder);
  const Config config = topo_->config();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
    Client waiter(config);
    Lease lease = waiter.acquire("ticket", fair(1s, 30s));
    ::_exit(lease ? 3 : 4);  // not reached before the kill, unless the queue is broken
  }
  std::this_thread::sleep_for(500ms);  // the child has queued
  std::thread behind([&] {
    const auto started = Clock::now();
    Lease lease = b.acquire("ticket", fair(10s, 8s));
    EXPECT_TRUE(lease) << lease.error();
    // The child's place (at most its 1 s lease) lapses, then b's next try gets the lock. On
    // ZooKeeper the place is a znode of the child's session, which ends at its 4 s timeout
    // (TOPOLOGIES.md).
    EXPECT_LT(ms_since(started), GetParam() == "zookeeper" ? 7000 : 4000);
  });
  JoinOnExit join_behind{behind};
  ASSERT_TRUE(wait_until([&] { return b.metrics().contention >= 1; }, 10s, 1ms));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the child got the lock while it was held";
  holder.release();
  behind.join();
}

// ---- permits ----

TEST_P(LockKinds, AtMostNHoldersEachWithItsOwnToken) {
  Client a = make_client(), b = make_client(), c = make_client(), d = make_client();
  Lease one = first(a, "export", permits(3, 10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  Lease two = b.acquire("export", permits(3, 10s));
  Lease three = c.acquire("export", permits(3, 10s));
  ASSERT_TRUE(one && two && three);
  EXPECT_EQ(one.view().permits(), 3);
  std::vector<std::uint64_t> tokens{one.token(), two.token(), three.token()};
  std::sort(tokens.begin(), tokens.end());
  EXPECT_EQ(std::unique(tokens.begin(), tokens.end()), tokens.end());
  EXPECT_EQ(d.try_acquire("export", permits(3, 10s)).status(), AcquireStatus::kBusy);
  two.release();
  Lease fourth = d.acquire("export", permits(3, 10s, 2s));
  ASSERT_TRUE(fourth);
  EXPECT_GT(fourth.token(), tokens.back());
}

TEST_P(LockKinds, ReenteringAPermitTakesNoSecond) {
  Client a = make_client(), b = make_client();
  Lease outer = first(a, "export", permits(2, 10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  Lease inner = a.acquire("export", permits(2, 10s));
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(inner.token(), outer.token());
  EXPECT_TRUE(b.try_acquire("export", permits(2, 10s)));
}

TEST_P(LockKinds, AKeyHeldAsALockIsRefusedToPermitsAndTheReverse) {
  Client a = make_client(), b = make_client();
  Lease lock = a.acquire("mixed", settings(10s));
  ASSERT_TRUE(lock);
  Lease permit = first(b, "mixed", permits(2, 10s, 2s));
  DLOCK_SKIP_UNLESS_OFFERED();
  EXPECT_EQ(permit.status(), AcquireStatus::kRefused) << permit.error();
  lock.release();
  Lease held = b.acquire("mixed", permits(2, 10s));
  ASSERT_TRUE(held);
  EXPECT_EQ(a.acquire("mixed", settings(10s, 2s)).status(), AcquireStatus::kRefused);
}

TEST_P(LockKinds, AKeyHeldAsASemaphoreRefusesSharedHolds) {
  Client a = make_client(), b = make_client();
  Lease permit = first(a, "mixed", permits(2, 10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(permit);
  for (const Millis wait : {0ms, 300ms}) {
    Lease read = b.acquire("mixed", shared(10s, wait));
    EXPECT_EQ(read.status(), AcquireStatus::kRefused) << read.error();
  }
  permit.release();
  EXPECT_TRUE(b.try_acquire("mixed", shared(10s))) << "nothing is left of the refused requests";
}

// A permit waits for any of the permits before it, and a try that finds none free leaves
// no place behind. Polls 3 s apart: the waiter is woken by the release, or not in time.
TEST_P(LockKinds, APermitWaiterIsWokenByAnyHolderAndABusyTryLeavesNoPlace) {
  Config config = topo_->config();
  config.backends["default"].poll_interval = 3s;
  Client a(config), b(config), c(config), d(config);
  Lease one = first(a, "export", permits(2, 10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  Lease two = b.acquire("export", permits(2, 10s));
  ASSERT_TRUE(one && two);
  EXPECT_EQ(d.try_acquire("export", permits(2, 10s)).status(), AcquireStatus::kBusy);
  Lease third;
  std::thread waiter([&] { third = c.acquire("export", permits(2, 10s, 5s)); });
  JoinOnExit join_waiter{waiter};
  ASSERT_TRUE(wait_until([&] { return c.metrics().contention >= 1; }, 10s, 1ms));
  const std::optional<LockInfo> full = Admin(d).inspect("export");
  ASSERT_TRUE(full);
  EXPECT_EQ(full->mode, "permits");
  EXPECT_EQ(full->holders.size(), 2u);
  if (GetParam() == "zookeeper" || GetParam() == "etcd") {
    ASSERT_EQ(full->queue.size(), 1u) << "the waiter only, not the try";
    EXPECT_EQ(full->queue[0].mode, "permits");
  }
  const std::uint64_t last = std::max(one.token(), two.token());
  const auto released = Clock::now();
  one.release();  // the first holder: not the one just before the waiter
  waiter.join();
  ASSERT_TRUE(third);
  EXPECT_LT(ms_since(released), 1500) << "woken by the release, not by a poll";
  EXPECT_GT(third.token(), last);
}

TEST_P(LockKinds, AKeyHeldAsASemaphoreRefusesALeaseOfSeveralKeys) {
  Client a = make_client(), b = make_client();
  Lease permit = first(a, "mixed", permits(2, 10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(permit);
  for (const Millis wait : {0ms, 300ms}) {
    Lease both = b.acquire(std::vector<Key>{"mixed", "plain"}, settings(10s, wait));
    EXPECT_EQ(both.status(), AcquireStatus::kRefused) << both.error();
    EXPECT_NE(both.error().find("mixed"), std::string::npos) << both.error();
  }
  EXPECT_TRUE(b.try_acquire("plain", settings(10s))) << "nothing is left of the refused leases";
  EXPECT_EQ(b.metrics().acquire_busy, 0u);
}

TEST_P(LockKinds, APermitThatStopsRenewingComesBackWithinItsLease) {
  Client a = make_client(), b = make_client();
  LockSettings brief = permits(1, 400ms);
  brief.max_hold = 400ms;
  Lease stale = first(a, "export", brief);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(stale);
  const auto started = Clock::now();
  Lease next = b.acquire("export", permits(1, 10s, 3s));
  ASSERT_TRUE(next);
  EXPECT_LT(ms_since(started), 1000);
}

// ---- several keys ----

TEST_P(LockKinds, SeveralKeysAreAllTakenOrNone) {
  Client a = make_client(), b = make_client(), c = make_client();
  Lease second = b.acquire("acct:2", settings(10s));
  ASSERT_TRUE(second);
  Lease both = a.acquire(std::vector<Key>{"acct:1", "acct:2"}, settings(10s, 300ms));
  EXPECT_EQ(both.status(), AcquireStatus::kBusy);
  EXPECT_NE(both.error().find("acct:2"), std::string::npos) << both.error();
  EXPECT_TRUE(c.try_acquire("acct:1", settings(10s))) << "the key taken first was given back";
  EXPECT_GE(a.metrics().multi_key_rollbacks, 1u);
}

// Keys with one hash tag share a slot (RUNTIME.md, "Several keys"): where one request can take
// every key (memory, single, sentinel without wait_replicas, a cluster's slot), a try that
// does not wait takes none of them while one is busy. Elsewhere the keys before the busy one
// are taken and given back.
TEST_P(LockKinds, KeysOfOneHashTagAreTakenInOneRequestWhereOneServerHoldsThem) {
  Client a = make_client(), b = make_client();
  Lease to = b.acquire("acct:{7}:to", settings(10s));
  ASSERT_TRUE(to);
  Lease both = a.try_acquire(std::vector<Key>{"acct:{7}:to", "acct:{7}:from"}, settings(10s));
  EXPECT_EQ(both.status(), AcquireStatus::kBusy);
  EXPECT_NE(both.error().find("acct:{7}:to"), std::string::npos) << both.error();
  const std::string topology = GetParam();
  const bool one_request = topology == "memory" || topology == "single" || topology == "cluster";
  EXPECT_EQ(a.metrics().multi_key_rollbacks, one_request ? 0u : 1u);
  EXPECT_EQ(a.metrics().acquire_busy, 1u);
  EXPECT_EQ(to.release(), ReleaseStatus::kReleased);
  Lease taken = a.try_acquire(std::vector<Key>{"acct:{7}:to", "acct:{7}:from"}, settings(10s));
  ASSERT_TRUE(taken);
  EXPECT_EQ(b.try_acquire("acct:{7}:from", settings(10s)).status(), AcquireStatus::kBusy);
  // dlockctl names the keys as written.
  std::vector<std::string> listed;
  for (const LockInfo& info : Admin(b).list("acct:*")) listed.push_back(info.key);
  std::sort(listed.begin(), listed.end());
  EXPECT_EQ(listed, (std::vector<std::string>{"acct:{7}:from", "acct:{7}:to"}));
}

TEST_P(LockKinds, EveryKeysTokenIsReadableInTheBody) {
  Client a = make_client(), b = make_client();
  Lease both = a.acquire(std::vector<Key>{"acct:9", "acct:3"}, settings(10s));
  ASSERT_TRUE(both);
  ASSERT_EQ(both.keys(), (std::vector<Key>{"acct:9", "acct:3"}));
  ASSERT_EQ(both.tokens().size(), 2u);
  EXPECT_EQ(both.token(0), both.token());
  EXPECT_GT(both.token(1), 0u);  // each key's own sequence: two keys may share a value
  EXPECT_EQ(current_lease().token(1), both.token(1));
  EXPECT_EQ(b.try_acquire("acct:3", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(both.release(), ReleaseStatus::kReleased);
  Lease three = b.try_acquire("acct:3", settings(10s));
  ASSERT_TRUE(three);
  EXPECT_GT(three.token(), both.token(1));
  Lease nine = b.try_acquire("acct:9", settings(10s));
  ASSERT_TRUE(nine);
  EXPECT_GT(nine.token(), both.token(0));
}

TEST_P(LockKinds, OppositeOrdersNeverDeadlock) {
  Client a = make_client(), b = make_client();
  constexpr int kRounds = 100;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
  const auto run = [&](Client& client, std::vector<Key> keys) {
    for (int i = 0; i < kRounds; ++i) {
      Lease lease = client.acquire(keys, settings(10s, 10s));
      if (!lease) continue;
      if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
      inside.fetch_sub(1);
      done.fetch_add(1);
    }
  };
  std::thread one([&] { run(a, {"x", "y"}); });
  std::thread two([&] { run(b, {"y", "x"}); });
  one.join();
  two.join();
  EXPECT_EQ(done.load(), 2 * kRounds);
  EXPECT_EQ(overlaps.load(), 0);
}

TEST_P(LockKinds, SeveralKeysAreEnteredAgainWholeOrRefused) {
  Client a = make_client();
  Lease one = a.acquire("acct:5", settings(10s));
  ASSERT_TRUE(one);
  Lease partial = a.acquire(std::vector<Key>{"acct:5", "acct:6"}, settings(10s, 1s));
  EXPECT_EQ(partial.status(), AcquireStatus::kRefused);
  Lease both = a.acquire(std::vector<Key>{"acct:6", "acct:7"}, settings(10s));
  ASSERT_TRUE(both);
  Lease again = a.acquire(std::vector<Key>{"acct:7", "acct:6"}, settings(10s));
  ASSERT_TRUE(again);
  EXPECT_EQ(again.token(0), both.token(1));
  EXPECT_EQ(again.release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(both.release(), ReleaseStatus::kReleased);
}

TEST_P(LockKinds, AKeyGivenTwiceKeepsTheTokensInTheOrderGiven) {
  Client a = make_client();
  Lease three = a.acquire(std::vector<Key>{"acct:1", "acct:2", "acct:1"}, settings(10s));
  ASSERT_TRUE(three);
  EXPECT_EQ(three.keys(), (std::vector<Key>{"acct:1", "acct:2", "acct:1"}));
  EXPECT_EQ(three.token(2), three.token(0));
  EXPECT_GT(three.token(1), 0u);
  EXPECT_EQ(three.tokens().size(), 3u);
  Lease same = a.acquire(std::vector<Key>{"acct:5", "acct:5"}, settings(10s));
  ASSERT_TRUE(same);
  EXPECT_EQ(same.token(1), same.token(0));
  EXPECT_NE(same.token(1), 0u);
  EXPECT_EQ(same.release(), ReleaseStatus::kReleased);
  EXPECT_EQ(three.release(), ReleaseStatus::kReleased);
}

TEST_P(LockKinds, ARefusedReentryOfSeveralKeysLeavesTheInnermostLeaseInPlace) {
  Client a = make_client();
  Lease outer_a = a.acquire("acct:a", settings(10s));
  Lease outer_b = first(a, "acct:b", shared(10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(outer_a && outer_b);
  // acct:a is entered again, then acct:b is refused (an upgrade): acct:a is given back.
  Lease both = a.acquire(std::vector<Key>{"acct:a", "acct:b"}, settings(10s));
  EXPECT_EQ(both.status(), AcquireStatus::kRefused);
  EXPECT_EQ(current_lease().key(), Key("acct:b"));
  EXPECT_EQ(outer_a.hold_count(), 1);
  outer_b.release();
  EXPECT_EQ(current_lease().key(), Key("acct:a"));
}

// A writer that waited behind readers whose holds ran out (here: min_hold) takes the lock; its
// release must free it, not hand it back to itself.
TEST_P(LockKinds, AWriterThatWaitedForReadersFreesTheLockWhenItReleases) {
  Client r = make_client(), w = make_client(), c = make_client();
  LockSettings reader = shared(10s);
  reader.min_hold = 400ms;
  Lease held = first(r, "doc", reader);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(held);
  std::thread writer([&] {
    Lease lease = w.acquire("doc", settings(10s, 5s));
    ASSERT_TRUE(lease) << lease.error();
    EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  });
  ASSERT_TRUE(wait_until([&] { return w.metrics().waits == 1; }, 2s, 1ms));
  std::this_thread::sleep_for(100ms);  // the writer has its place
  EXPECT_EQ(held.release(), ReleaseStatus::kKeptForMinHold);
  writer.join();
  EXPECT_TRUE(c.try_acquire("doc", settings(10s)));
}

TEST_P(LockKinds, ASemaphoreKeepsItsSizeWhileHeld) {
  Client a = make_client(), b = make_client();
  Lease two = first(a, "export", permits(2, 10s));
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(two);
  EXPECT_EQ(b.acquire("export", permits(5, 10s, 1s)).status(), AcquireStatus::kRefused);
  EXPECT_TRUE(b.acquire("export", permits(2, 10s)));
}

// What dlockctl shows: every holder of a shared lock or a semaphore, and the waiters.
TEST_P(LockKinds, InspectShowsEveryHolderAndTheFairQueue) {
  Client a = make_client(), b = make_client(), c = make_client();
  auto [one, two] = two_readers(a, b, 10s);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(one && two);
  const std::optional<LockInfo> doc = Admin(c).inspect("doc");
  ASSERT_TRUE(doc);
  EXPECT_EQ(doc->mode, "shared");
  ASSERT_EQ(doc->holders.size(), 2u);
  std::vector<std::uint64_t> tokens{doc->holders[0].token, doc->holders[1].token};
  std::sort(tokens.begin(), tokens.end());
  std::vector<std::uint64_t> held{one.token(), two.token()};
  std::sort(held.begin(), held.end());
  // Redlock's token is the highest of the instances'; inspect shows one instance's.
  if (GetParam() != "redlock") {
    EXPECT_EQ(tokens, held);
  }
  for (const HolderInfo& holder : doc->holders) {
    if (GetParam() == "zookeeper") {
      EXPECT_EQ(holder.ttl, -1ms);  // no expiry on the ensemble: the session's
      continue;
    }
    EXPECT_GT(holder.ttl, 9s);
    EXPECT_LE(holder.ttl, 10s + 200ms);  // Redlock adds its clock drift allowance
  }
  if (GetParam() == "zookeeper" || GetParam() == "etcd") {
    // Its queue: a writer waiting behind the two readers.
    std::thread writer([&] { EXPECT_TRUE(c.acquire("doc", settings(10s, 5s))); });
    JoinOnExit join_writer{writer};
    ASSERT_TRUE(wait_until([&] { return c.metrics().contention >= 1; }, 10s, 1ms));
    const std::optional<LockInfo> waited = Admin(a).inspect("doc");
    ASSERT_TRUE(waited);
    EXPECT_EQ(waited->holders.size(), 2u);
    const std::vector<LockInfo> listed = Admin(a).list("doc");
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].mode, "shared");
    EXPECT_EQ(listed[0].holders.size(), 2u);
    ASSERT_EQ(waited->queue.size(), 1u);
    EXPECT_EQ(waited->queue[0].mode, "exclusive");
    one.release();
    two.release();
    writer.join();
  }

  Lease permit = first(a, "export", permits(3, 10s));
  if (!unsupported_.empty()) return;  // permits not offered: the shared part stands
  Lease writer = first(a, "ticket", fair(10s));
  if (!unsupported_.empty()) return;
  ASSERT_TRUE(permit && writer);
  std::thread waiter([&] { EXPECT_TRUE(b.acquire("ticket", fair(10s, 5s))); });
  JoinOnExit join_waiter{waiter};
  ASSERT_TRUE(wait_until([&] { return b.metrics().contention >= 1; }, 10s, 1ms));
  const std::optional<LockInfo> exported = Admin(c).inspect("export");
  ASSERT_TRUE(exported);
  EXPECT_EQ(exported->mode, "permits");
  EXPECT_EQ(exported->permits, 3);
  EXPECT_EQ(exported->holders.size(), 1u);
  const std::optional<LockInfo> ticket = Admin(c).inspect("ticket");
  ASSERT_TRUE(ticket);
  ASSERT_EQ(ticket->queue.size(), 1u);
  EXPECT_TRUE(ticket->queue[0].fair);
  EXPECT_EQ(ticket->queue[0].mode, "exclusive");
  if (GetParam() == "zookeeper") {
    EXPECT_EQ(ticket->queue[0].ttl, -1ms);  // a place lives with its session
  } else {
    EXPECT_GT(ticket->queue[0].ttl, 0ms);
  }
  writer.release();
  waiter.join();
}

// dlockctl force-release of a key held shared frees it of every reader.
TEST_P(LockKinds, AForcedReleaseOfASharedLockRemovesEveryHolder) {
  Client a = make_client(), b = make_client(), c = make_client();
  auto [one, two] = two_readers(a, b, 10s);
  DLOCK_SKIP_UNLESS_OFFERED();
  ASSERT_TRUE(one && two);
  const std::optional<LockInfo> removed = Admin(c).force_release("doc", "stuck readers");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->mode, "shared");
  EXPECT_NE(removed->owner, "*shared") << "the audit names a holder";
  if (GetParam() != "redlock") {  // Redlock's token is the highest of the instances'
    EXPECT_TRUE(removed->token == one.token() || removed->token == two.token()) << removed->token;
  }
  Lease writer = c.try_acquire("doc", settings(10s));
  EXPECT_TRUE(writer) << writer.error();
}

INSTANTIATE_TEST_SUITE_P(Backends, LockKinds, ::testing::ValuesIn(topologies()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace dlock::test
