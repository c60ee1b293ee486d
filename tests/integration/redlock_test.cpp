// The Redlock backend against independent redis-servers: quorum arithmetic for every
// pattern of foreign holders, dead instances, instances restarted empty, and fencing
// tokens across quorums.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <thread>

#include "dlock/admin.hpp"
#include "ha_fixtures.hpp"
#include "metrics.hpp"
#include "redis/connection.hpp"
#include "redis/crc16.hpp"
#include "redis/keys.hpp"
#include "redis/redlock_backend.hpp"
#include "redis/redlock_quorum.hpp"
#include "redis/run_records.hpp"
#include "run_store.hpp"

namespace dlock::test {
namespace {

LockSettings fair(Millis lease, Millis wait = Millis{0}) {
  LockSettings s = settings(lease, wait);
  s.fair = true;
  return s;
}

class Redlock : public ::testing::Test {
 protected:
  void SetUp() override { group.start(); }

  Config config(std::size_t instances) {
    auto all = endpoints_of(group.endpoints());
    all.resize(instances);
    return topology_config(Topology::kRedlock, all);
  }
  std::string lock_key(const std::string& key) {
    return internal::lock_keys(unique_service(), key).lock;
  }
  std::string fence_key(const std::string& key) {
    return internal::lock_keys(unique_service(), key).fence;
  }
  std::optional<std::string> owner_on(std::size_t i, const std::string& key) {
    RedisAdmin admin(group.instance(i));
    return admin.string({"HGET", lock_key(key), "owner"});
  }

  // The instance of the first `n` that keeps the order of `key`'s fair waiters (TOPOLOGIES.md,
  // Redlock): by the lock key's slot among the instances sorted by address.
  std::size_t order_instance(std::size_t n, const std::string& key) {
    const auto all = endpoints_of(group.endpoints());
    std::vector<std::size_t> by_address(n);
    for (std::size_t i = 0; i < n; ++i) by_address[i] = i;
    std::sort(by_address.begin(), by_address.end(), [&](std::size_t a, std::size_t b) {
      return internal::to_string(all[a]) < internal::to_string(all[b]);
    });
    return by_address[static_cast<std::size_t>(internal::key_slot(lock_key(key))) % n];
  }
  long long queued_on(std::size_t i, const std::string& key) {
    return RedisAdmin(group.instance(i))
        .integer({"ZCARD", internal::lock_keys(unique_service(), key).queue});
  }
  // A live place of `owner` in instance i's fair queue of `key`, first in line.
  void place_by_hand(std::size_t i, const std::string& key, const std::string& owner) {
    const internal::LockKeys keys = internal::lock_keys(unique_service(), key);
    RedisAdmin admin(group.instance(i));
    admin.command({"ZADD", keys.queue, "1", owner});
    const long long now_s = std::stoll(admin.command({"TIME"}));
    admin.command({"HSET", keys.places, owner, std::to_string((now_s + 30) * 1000000) + " X"});
  }

  RedlockGroup group{5};
};

// One instance per key keeps the order of its fair waiters; the others grant a fair request
// as a plain one, and a place in line is taken on the order instance alone.
TEST_F(Redlock, AFairLocksOrderIsKeptOnOneInstance) {
  Client holder(config(3)), waiter(config(3));
  const std::size_t order = order_instance(3, "ticket");
  Lease held = holder.acquire("ticket", fair(10s));
  ASSERT_TRUE(held) << held.error();
  std::thread queued([&] { EXPECT_TRUE(waiter.acquire("ticket", fair(10s, 5s))); });
  ASSERT_TRUE(wait_until([&] { return waiter.metrics().contention >= 1; }, 5s, 1ms));
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(queued_on(i, "ticket"), i == order ? 1 : 0) << "instance " << i;
  }
  held.release();
  queued.join();
  EXPECT_EQ(waiter.metrics().wakeups, 1u) << "woken once, by the order instance's 'turn'";
}

// Whose turn it is is the order instance's answer alone: a place ahead there makes a fair
// request busy although every instance is free; a place on another instance does not.
TEST_F(Redlock, TheOrderInstanceAloneSaysWhoseTurnItIs) {
  Client client(config(3));
  const std::size_t order = order_instance(3, "first");
  place_by_hand(order, "first", "ahead");
  Lease refused = client.try_acquire("first", fair(10s));
  EXPECT_EQ(refused.status(), AcquireStatus::kBusy) << refused.error();
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(owner_on(i, "first").has_value()) << "instance " << i << ": a key left behind";
  }
  const std::size_t other = (order_instance(3, "second") + 1) % 3;
  place_by_hand(other, "second", "ahead");
  Lease granted = client.try_acquire("second", fair(10s));
  EXPECT_TRUE(granted) << granted.error();
}

// A place ahead in the order instance's fair queue holds a plain request back too, as on one
// server; a key held there (left by a release that did not reach it) holds nobody back.
TEST_F(Redlock, OnlyAPlaceAheadOnTheOrderInstanceOverridesTheQuorum) {
  Client client(config(3));
  place_by_hand(order_instance(3, "queued"), "queued", "ahead");
  Lease plain = client.try_acquire("queued", settings(10s));
  EXPECT_EQ(plain.status(), AcquireStatus::kBusy) << plain.error();
  RedisAdmin stale(group.instance(order_instance(3, "left")));
  stale.command({"HSET", lock_key("left"), "owner", "foreign", "token", "1"});
  stale.command({"PEXPIRE", lock_key("left"), "30000"});
  Lease fair_one = client.try_acquire("left", fair(10s));
  EXPECT_TRUE(fair_one) << fair_one.error();
}

// The order instance's key held by the waiter whose turn it is (a grant there that keeps its
// place while it seeks a quorum) holds a fair request, a plain one and a shared one back,
// although the other instances are free; the refused requests leave no key behind.
TEST_F(Redlock, AKeyOfTheWaiterWhoseTurnItIsHoldsOthersBack) {
  Client client(config(3));
  const std::size_t order = order_instance(3, "turn");
  RedisAdmin there(group.instance(order));
  there.command({"HSET", lock_key("turn"), "owner", "next-in-line", "token", "1"});
  there.command({"PEXPIRE", lock_key("turn"), "30000"});
  place_by_hand(order, "turn", "next-in-line");
  Lease fair_one = client.try_acquire("turn", fair(10s));
  EXPECT_EQ(fair_one.status(), AcquireStatus::kBusy) << fair_one.error();
  Lease plain = client.try_acquire("turn", settings(10s));
  EXPECT_EQ(plain.status(), AcquireStatus::kBusy) << plain.error();
  LockSettings reader = fair(10s);
  reader.mode = LockMode::kShared;
  Lease shared = client.try_acquire("turn", reader);
  EXPECT_EQ(shared.status(), AcquireStatus::kBusy) << shared.error();
  for (std::size_t i = 0; i < 3; ++i) {
    if (i == order) continue;
    EXPECT_FALSE(owner_on(i, "turn").has_value()) << "instance " << i << ": a key left behind";
  }
  EXPECT_EQ(owner_on(order, "turn"), "next-in-line");
}

// The order instance lost a holder's key while waiters queued there: the holder's next
// renewal puts it back, which the queue does not hold back (the holder holds by quorum).
TEST_F(Redlock, AKeyRestoredOnTheOrderInstanceIsNotHeldBackByItsQueue) {
  Client client(config(3));
  const std::size_t order = order_instance(3, "ticket");
  Lease held = client.acquire("ticket", fair(900ms));
  ASSERT_TRUE(held) << held.error();
  const std::optional<std::string> owner = owner_on((order + 1) % 3, "ticket");
  ASSERT_TRUE(owner.has_value());
  RedisAdmin(group.instance(order)).command({"DEL", lock_key("ticket")});
  place_by_hand(order, "ticket", "ahead");
  EXPECT_TRUE(wait_until([&] { return owner_on(order, "ticket") == owner; }, 2s, 10ms))
      << "the renewal did not restore the key on the order instance";
  EXPECT_FALSE(held.lost());
}

// With the order instance down, a fair lock is still granted by a quorum of the others, in no
// particular order, and a waiter learns of a release by polling.
TEST_F(Redlock, AFairLockIsGrantedWithItsOrderInstanceDown) {
  Config polled = config(3);
  polled.backends["default"].poll_interval = 100ms;
  Client holder(polled), waiter(polled);
  group.instance(order_instance(3, "ticket")).kill();
  Lease held = holder.acquire("ticket", fair(10s));
  ASSERT_TRUE(held) << held.error();
  std::thread queued([&] {
    Lease lease = waiter.acquire("ticket", fair(10s, 5s));
    EXPECT_TRUE(lease) << lease.error();
  });
  ASSERT_TRUE(wait_until([&] { return waiter.metrics().contention >= 1; }, 5s, 1ms));
  const auto released = Clock::now();
  held.release();
  queued.join();
  EXPECT_LT(elapsed_ms(released), 1500);
}

TEST_F(Redlock, AcquiresIffAMajorityIsFreeForEveryPatternOfForeignHolders) {
  for (const std::size_t n : {3u, 5u}) {
    Client client(config(n));
    const std::size_t quorum = n / 2 + 1;
    for (unsigned mask = 0; mask < (1u << n); ++mask) {
      const std::string key = "pattern-" + std::to_string(n) + "-" + std::to_string(mask);
      for (std::size_t i = 0; i < n; ++i) {
        if ((mask & (1u << i)) == 0) continue;
        RedisAdmin admin(group.instance(i));
        admin.command({"HSET", lock_key(key), "owner", "foreign", "token", "1"});
        admin.command({"PEXPIRE", lock_key(key), "30000"});
      }
      const std::size_t free = n - static_cast<std::size_t>(std::popcount(mask));
      Lease lease = client.try_acquire(key, settings(10s));
      const std::string pattern = "N=" + std::to_string(n) + " held elsewhere: mask " + std::to_string(mask);
      if (free >= quorum) {
        ASSERT_TRUE(lease) << pattern << ": " << lease.error();
        EXPECT_EQ(lease.release(), ReleaseStatus::kReleased) << pattern;
      } else {
        EXPECT_EQ(lease.status(), AcquireStatus::kBusy) << pattern << ": " << lease.error();
      }
      for (std::size_t i = 0; i < n; ++i) {
        const auto owner = owner_on(i, key);
        if (mask & (1u << i)) {
          EXPECT_EQ(owner, "foreign") << pattern << ", instance " << i << ": a foreign lock was touched";
        } else {
          EXPECT_FALSE(owner.has_value()) << pattern << ", instance " << i << ": our key was left behind";
        }
      }
    }
  }
}

TEST_F(Redlock, TwoOfFiveDownStillLocksAndThreeOfFiveDownIsUnavailableWithinTheTimeouts) {
  Client client(config(5));
  group.instance(0).kill();
  group.instance(1).kill();
  {
    Lease lease = client.acquire("two-down", settings(1500ms));
    ASSERT_TRUE(lease) << lease.error();
    std::this_thread::sleep_for(1600ms);  // renewals (every 500 ms) on 3 of 5
    EXPECT_FALSE(lease.lost());
    EXPECT_GE(client.metrics().renewals, 3u);
    EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  }
  Lease held = client.acquire("held-through", settings(900ms));
  ASSERT_TRUE(held);
  std::atomic<bool> lost{false};
  held.view().on_lost([&](const LeaseView&) { lost = true; });

  group.instance(2).kill();
  const auto start = Clock::now();
  Lease refused = client.acquire("three-down", settings(10s, 5s));
  const auto took = elapsed_ms(start);
  std::printf("[ measure ] redlock 3 of 5 down: refused after %lld ms\n", took);
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable) << refused.error();
  EXPECT_NE(refused.error().find("a quorum is 3"), std::string::npos) << refused.error();
  EXPECT_LE(took, 500 + 1000 + 300);
  EXPECT_TRUE(wait_until([&] { return lost.load(); }, 3s)) << "a lease without a quorum must expire";
  EXPECT_EQ(held.view().loss_reason(), LossReason::kExpired);
}

TEST_F(Redlock, ThreeUnresponsiveInstancesFailWithinThePerNodeTimeoutAndLeaveNoKey) {
  Client client(config(5));
  ASSERT_TRUE(client.try_acquire("warm-up", settings(2s)));  // pooled connections to all five
  for (std::size_t i = 0; i < 3; ++i) group.instance(i).pause();
  const auto start = Clock::now();
  Lease lease = client.try_acquire("paused", settings(2s));  // per-node timeout: 2s / 10
  const auto took = elapsed_ms(start);
  for (std::size_t i = 0; i < 3; ++i) group.instance(i).resume();
  std::printf("[ measure ] redlock 3 of 5 paused: refused after %lld ms (per-node timeout 200 ms)\n", took);
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable) << lease.error();
  EXPECT_GE(took, 200 - 5);
  EXPECT_LE(took, 200 + 300);
  // The paused instances run the late requests when they resume; none may leave a lock.
  std::this_thread::sleep_for(300ms);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_FALSE(owner_on(i, "paused").has_value()) << "instance " << i;
  }
  EXPECT_TRUE(client.try_acquire("paused", settings(2s)));
}

TEST_F(Redlock, AnInstanceRestartedEmptyGetsTheKeyBackAtTheNextRenewal) {
  Client a(config(3)), b(config(3));
  Lease lease = a.acquire("restarted", settings(900ms));
  ASSERT_TRUE(lease);
  const auto owner = owner_on(0, "restarted");
  ASSERT_TRUE(owner.has_value());
  group.instance(0).restart_empty();
  EXPECT_EQ(b.try_acquire("restarted", settings(5s)).status(), AcquireStatus::kBusy);
  EXPECT_FALSE(owner_on(0, "restarted").has_value()) << "the refused acquisition left its key";
  EXPECT_TRUE(wait_until([&] { return owner_on(0, "restarted") == owner; }, 2s))
      << "the renewal did not restore the key on the restarted instance";
  EXPECT_FALSE(lease.lost());
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
}

// Permits: each grant on floor(N·n/(N+1)) + 1 of the n instances, so that N+1 holders could
// not all hold: with a majority each, 3 holders of 2 permits fit on 5 instances (holds on
// {0,1,2}, {2,3,4}, {0,1,3,4}: no instance past 2).
TEST_F(Redlock, ASemaphoreNeedsAQuorumThatGrowsWithItsPermits) {
  Client client(config(5));
  LockSettings two = settings(5s);
  two.permits = 2;  // 4 of 5
  LockSettings one = settings(5s);
  one.permits = 1;  // a majority, as a lock
  group.instance(0).kill();
  Lease four_of_four = client.try_acquire("sem", two);
  ASSERT_TRUE(four_of_four) << four_of_four.error();
  EXPECT_EQ(four_of_four.release(), ReleaseStatus::kReleased);
  group.instance(1).kill();
  Lease refused = client.try_acquire("sem", two);
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable) << refused.error();
  EXPECT_NE(refused.error().find("a quorum is 4"), std::string::npos) << refused.error();
  for (std::size_t i = 2; i < 5; ++i) {
    EXPECT_FALSE(owner_on(i, "sem").has_value()) << "instance " << i << " kept a permit";
  }
  EXPECT_TRUE(client.try_acquire("sem-of-one", one));
  EXPECT_TRUE(client.try_acquire("lock", settings(5s)));
}

// A key held as another kind of lock on fewer instances than could stop a quorum (a stale
// semaphore left on one instance) makes a lock busy, not refused: it waits, and gets it.
TEST_F(Redlock, AnotherKindOnAMinorityOfInstancesIsBusyNotRefused) {
  Config c0 = topology_config(Topology::kSingle, endpoints_of({group.endpoints()[0]}));
  Config c1 = topology_config(Topology::kSingle, endpoints_of({group.endpoints()[1]}));
  c0.service = c1.service = unique_service();
  Client on0(c0), on1(c1), client(config(3));
  LockSettings two = settings(10s);
  two.permits = 2;
  Lease stale = on0.acquire("k", two);
  ASSERT_TRUE(stale) << stale.error();
  Lease held = on1.acquire("k", settings(10s));
  ASSERT_TRUE(held) << held.error();
  std::thread later([&] {
    std::this_thread::sleep_for(300ms);
    (void)held.release();
  });
  Lease lease = client.acquire("k", settings(5s, 3s));
  later.join();
  EXPECT_TRUE(lease) << lease.error();
  // On two of three instances no quorum can grant it: refused at once.
  Lease other = on1.acquire("j", two);
  Lease semaphores = on0.acquire("j", two);
  ASSERT_TRUE(other && semaphores);
  EXPECT_EQ(client.acquire("j", settings(5s, 3s)).status(), AcquireStatus::kRefused);
}

TEST_F(Redlock, AnInstanceRestartedEmptyGetsSharedHoldsBackAsShared) {
  Client a(config(3)), b(config(3));
  LockSettings shared = settings(900ms);
  shared.mode = LockMode::kShared;
  Lease one = a.acquire("doc", shared);
  Lease two = b.acquire("doc", shared);
  ASSERT_TRUE(one && two);
  group.instance(0).restart_empty();
  const std::string holders = internal::lock_keys(unique_service(), "doc").holders;
  RedisAdmin admin(group.instance(0));
  EXPECT_TRUE(wait_until(
      [&] {
        return owner_on(0, "doc") == "*shared" && admin.integer({"ZCARD", holders}) == 2;
      },
      2s))
      << "owner " << owner_on(0, "doc").value_or("(none)") << ", holders "
      << admin.integer({"ZCARD", holders});
  EXPECT_FALSE(one.lost());
  EXPECT_FALSE(two.lost());
}

TEST_F(Redlock, RestartsWithoutDelayCanAdmitASecondHolderWhoseRivalLearnsAtItsNextRenewal) {
  Client a(config(3)), b(config(3));
  group.instance(2).stop();
  Lease first = a.acquire("split", settings(1500ms));  // held on instances 0 and 1 only
  ASSERT_TRUE(first) << first.error();
  std::atomic<long long> lost_after{-1};
  group.instance(2).start();
  group.instance(1).restart_empty();  // no delayed restart: instance 1 forgets the lock
  const auto second_at = Clock::now();
  first.view().on_lost([&](const LeaseView&) { lost_after = elapsed_ms(second_at); });
  Lease second = b.try_acquire("split", settings(5s));
  ASSERT_TRUE(second) << "instances 1 and 2 are a quorum that does not know the first lock";
  EXPECT_TRUE(wait_until([&] { return lost_after.load() >= 0; }, 3s));
  std::printf("[ measure ] redlock restart without delay: the first holder learned of the second "
              "after %lld ms (lease 1500 ms, renewal every 500 ms)\n", lost_after.load());
  EXPECT_LE(lost_after.load(), 1500) << "the first holder must learn within one lease";
  EXPECT_EQ(first.view().loss_reason(), LossReason::kTaken);
  EXPECT_FALSE(second.lost());
}

TEST_F(Redlock, FencingTokensIncreaseAcrossQuorumsThatShareOneInstance) {
  Client a(config(3)), b(config(3));
  // Instance 0 issues far higher tokens than the others (its clock runs ahead, say).
  const auto ahead = std::chrono::duration_cast<std::chrono::microseconds>(
                         std::chrono::system_clock::now().time_since_epoch() + std::chrono::hours(1))
                         .count();
  RedisAdmin(group.instance(0)).command({"SET", fence_key("fenced"), std::to_string(ahead)});
  std::uint64_t first_token = 0;
  {
    Lease first = a.acquire("fenced", settings(5s));
    ASSERT_TRUE(first);
    first_token = first.token();
    EXPECT_GT(first_token, static_cast<std::uint64_t>(ahead)) << "the token is the highest of the quorum's";
  }
  group.instance(0).stop();  // the next quorum is {1, 2}, whose counters the release raised
  Lease second = b.acquire("fenced", settings(5s));
  ASSERT_TRUE(second) << second.error();
  EXPECT_GT(second.token(), first_token);
}

TEST(RedlockConfig, TheSameInstanceListedTwiceIsRefusedWhenTheConfigIsLoaded) {
  try {
    (void)parse_config("backends:\n  default:\n    topology: redlock\n    instances:\n"
                       "      - 127.0.0.1:6380\n      - 127.0.0.1:6381\n      - redis://127.0.0.1:6380\n",
                       "dup.yaml");
    FAIL() << "a duplicate instance was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("listed twice"), std::string::npos) << e.what();
  }
}

// Faults that stall rather than refuse: an instance SIGSTOPped keeps accepting TCP
// connections and answers nothing. One group of five for every test of this fixture; each
// test resumes what it paused.
class RedlockStall : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    group_ = new RedlockGroup(5);
    group_->start();
  }
  static void TearDownTestSuite() {
    delete group_;
    group_ = nullptr;
  }
  void TearDown() override {
    for (std::size_t i = 0; i < group_->size(); ++i) {
      if (group_->instance(i).paused()) group_->instance(i).resume();
      if (!group_->instance(i).running()) group_->instance(i).start();
    }
  }

  static Config config(std::size_t instances, Millis command_timeout = 1000ms) {
    auto all = endpoints_of(group_->endpoints());
    all.resize(instances);
    Config c = topology_config(Topology::kRedlock, all);
    c.backends["default"].command_timeout = command_timeout;
    return c;
  }
  static RedisServer& instance(std::size_t i) { return group_->instance(i); }
  // The lock calls of a Redlock backend over the first `instances`, without a client.
  static internal::Engine engine_over(std::size_t instances, Millis command_timeout = 1000ms) {
    return internal::make_redlock_backend(config(instances, command_timeout).backends["default"],
                                          unique_service(), std::make_shared<internal::Metrics>());
  }
  static std::string lock_key(const std::string& key) {
    return internal::lock_keys(unique_service(), key).lock;
  }
  static std::optional<std::string> owner_on(std::size_t i, const std::string& key) {
    RedisAdmin admin(group_->instance(i));
    return admin.string({"HGET", lock_key(key), "owner"});
  }

  static RedlockGroup* group_;
};

RedlockGroup* RedlockStall::group_ = nullptr;

// Finding: every call after the first opened a new connection to the stalled instance, and
// the open (TCP accepted, then AUTH/TIME unanswered) cost the command timeout, longer than
// the lease: nothing could be acquired although four of five instances were healthy.
TEST_F(RedlockStall, LeasesUpToTheCommandTimeoutAreGrantedAndRenewedWhileOneInstanceIsStalled) {
  Client client(config(5, 1000ms));
  ASSERT_TRUE(client.try_acquire("warm-up", settings(1s)));  // pooled connections to all five
  instance(0).pause();
  for (int i = 0; i < 5; ++i) {
    Lease lease = client.try_acquire("stalled-" + std::to_string(i), settings(1s));
    ASSERT_TRUE(lease) << "attempt " << i << ": " << lease.error();
    EXPECT_EQ(lease.release(), ReleaseStatus::kReleased) << "attempt " << i;
  }
  Lease held = client.try_acquire("held-while-stalled", settings(1s));
  ASSERT_TRUE(held) << held.error();
  std::this_thread::sleep_for(2500ms);  // renewals every 333 ms, each past the stalled instance
  EXPECT_FALSE(held.lost()) << "renewals on 4 of 5 healthy instances did not keep a 1 s lease";
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
}

// Finding: Redlock's renewals borrowed the same pooled connections as acquirers, so
// acquirers holding every one of them (pool_size per instance) left a renewal round with no
// connection at all, and leases expired. A renewal round now has a connection of its own to
// each instance, and the acquirers' share is still pool_size.
TEST_F(RedlockStall, ARenewalIsSentWhileAcquirersHoldEveryPooledConnection) {
  BackendConfig backend = config(3).backends["default"];
  backend.pool_size = 1;
  auto quorum = std::make_shared<internal::RedlockQuorum>(backend);
  internal::Engine engine = internal::make_redlock_backend(quorum, unique_service(),
                                                           std::make_shared<internal::Metrics>());
  const Key key("renewed-under-contention");
  const internal::GrantReply grant = engine.lock->acquire(
      internal::GrantRequest{key, "holder", 2s, "contended", Clock::now() + 500ms});
  ASSERT_EQ(grant.kind, internal::GrantReply::Kind::kAcquired) << grant.error;

  const internal::RedlockQuorum::Round acquirers = quorum->borrow(200ms, 500ms);
  for (std::size_t i = 0; i < quorum->size(); ++i) ASSERT_TRUE(acquirers.usable(i)) << i;
  std::vector<internal::RenewItem> items{internal::RenewItem{&key, "holder", 10s}};
  items[0].token = grant.token;
  engine.lock->renew(items);
  EXPECT_EQ(items[0].outcome, internal::RenewOutcome::kRenewed)
      << "the renewal waited for a pooled connection and gave up";
  for (std::size_t i = 0; i < quorum->size(); ++i) {
    RedisAdmin admin(instance(i));
    EXPECT_GT(admin.integer({"PTTL", lock_key(key.str())}), 5000) << "instance " << i;
  }
  // Acquirers still share the pool as before: its size is theirs.
  const internal::RedlockQuorum::Round another = quorum->borrow(50ms, 100ms);
  for (std::size_t i = 0; i < quorum->size(); ++i) {
    EXPECT_FALSE(another.usable(i)) << "instance " << i << " lent a connection beyond pool_size";
  }
}

// Finding: a batch of renewals waited for the stalled instance by the longest lease's budget
// and judged every lease by it, so a short lease was reported renewed after it had run out.
TEST_F(RedlockStall, ABatchedRenewalNeverReportsAShortLeaseRenewedAfterItRanOut) {
  internal::Engine engine = engine_over(5, 1000ms);
  const Key short_key("short"), long_key("long");
  for (const Key* key : {&short_key, &long_key}) {
    const internal::GrantReply grant = engine.lock->acquire(
        internal::GrantRequest{*key, "owner-" + key->str(), 30s, "", Clock::now() + 1s});
    ASSERT_EQ(grant.kind, internal::GrantReply::Kind::kAcquired) << grant.error;
  }
  instance(0).pause();  // its pooled connection now answers nothing
  for (int round = 0; round < 3; ++round) {
    std::vector<internal::RenewItem> items{{&short_key, "owner-short", 300ms}, {&long_key, "owner-long", 30s}};
    const auto sent = Clock::now();
    engine.lock->renew(items);
    const auto took = elapsed_ms(sent);
    if (items[0].outcome == internal::RenewOutcome::kRenewed) {
      EXPECT_LT(took, 300) << "round " << round << ": the 300 ms lease was reported renewed after " << took << " ms";
    }
    // The 30 s lease shares the short one's budget: renewed, or (a loaded host missing the
    // 30 ms budget) retried, never lost.
    EXPECT_TRUE(items[1].outcome == internal::RenewOutcome::kRenewed ||
                items[1].outcome == internal::RenewOutcome::kUnavailable)
        << "round " << round << ": outcome " << static_cast<int>(items[1].outcome);
  }
  engine.lock->release(short_key, "owner-short", 0ms);
  engine.lock->release(long_key, "owner-long", 0ms);
}

// Finding: a run record left on one instance of three by a claim that reached no quorum made
// every later claim answer "already ran", so the slot never ran although no run ever held a
// quorum. "Already ran" needs a quorum agreeing on one earlier run.
TEST_F(RedlockStall, ARunRecordOnOneInstanceOfThreeDoesNotCountAsARunThatHappened) {
  internal::Engine engine = engine_over(3);
  const Key key("slot:1");
  // Instance 2 is held by someone else; instances 0 and 1 grant us the lock.
  RedisAdmin(instance(2)).command({"HSET", lock_key("slot:1"), "owner", "foreign", "token", "1"});
  RedisAdmin(instance(2)).command({"PEXPIRE", lock_key("slot:1"), "30000"});
  const internal::GrantReply grant =
      engine.lock->acquire(internal::GrantRequest{key, "owner-now", 30s, "slot", Clock::now() + 1s});
  ASSERT_EQ(grant.kind, internal::GrantReply::Kind::kAcquired) << grant.error;
  // What an earlier claim (1 of 3, the others timed out) left on instance 0.
  const std::string run_key = internal::runs::run_key(unique_service(), "slot:1");
  RedisAdmin(instance(0)).command({"HSET", run_key, "owner", "owner-earlier", "token", "1", "name", "slot", "label",
                                   "", "host", "h", "pid", "1", "started_at_ms", "1", "outcome", "running"});
  RedisAdmin(instance(0)).command({"PEXPIRE", run_key, "60000"});
  RunRecord mine;
  mine.key = "slot:1";
  mine.owner = "owner-now";
  mine.token = grant.token;
  try {
    const internal::RunClaimReply claim = engine.runs->claim_run(key, mine, 60s);
    EXPECT_NE(claim.status, ClaimStatus::kAlreadyRan)
        << "one instance's record (owner " << claim.record.owner << ") was taken for a run that happened";
  } catch (const BackendUnavailable&) {
    // No quorum either way: the caller tries again later.
  }
  engine.lock->release(key, "owner-now", 0ms);
}

// Finding: a renewal that still reached a quorum restored the key on an instance where the
// release (called while the renewal was in flight) had already deleted it: an orphan held by
// nobody for a lease.
TEST_F(RedlockStall, ARenewalInFlightDuringReleaseDoesNotRestoreTheReleasedKey) {
  internal::Engine engine = engine_over(3);
  const Key key("healed");
  const internal::GrantReply grant =
      engine.lock->acquire(internal::GrantRequest{key, "owner-1", 30s, "", Clock::now() + 1s});
  ASSERT_EQ(grant.kind, internal::GrantReply::Kind::kAcquired) << grant.error;
  std::vector<internal::RenewItem> items{{&key, "owner-1", 3s}};
  for (int i = 0; i < 3; ++i) engine.lock->renew(items);  // a pooled connection to each instance
  // The release reached instance 0 before the renewal did; instance 1 answers the renewal
  // only after the release has returned.
  RedisAdmin(instance(0)).command({"DEL", lock_key("healed")});
  instance(1).pause();
  std::thread renewal([&] { engine.lock->renew(items); });  // waits up to 300 ms for instance 1
  std::this_thread::sleep_for(50ms);
  engine.lock->release(key, "owner-1", 0ms);
  std::this_thread::sleep_for(50ms);
  instance(1).resume();
  renewal.join();
  EXPECT_FALSE(owner_on(0, "healed").has_value()) << "the renewal re-created the released key on instance 0";
  RedisAdmin(instance(1)).command({"DEL", lock_key("healed")});
}

// Finding: with 1 of 5 instances answering, force release deleted the key there and said
// "released", while 4 instances still held the lock for its owner.
TEST_F(RedlockStall, AForceReleaseThatReachesFewerThanAQuorumDoesNotReportTheLockReleased) {
  Client holder(config(5));
  Lease lease = holder.acquire("forced", settings(30s));
  ASSERT_TRUE(lease) << lease.error();
  for (std::size_t i = 1; i < 5; ++i) instance(i).kill();
  const Admin admin{Client(config(5))};
  try {
    const auto removed = admin.force_release("forced", "operator");
    ADD_FAILURE() << "reported released (" << (removed ? "a lock removed" : "no lock")
                  << ") with 1 of 5 instances answering";
  } catch (const BackendUnavailable& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 5"), std::string::npos) << e.what();
  }
}

// Finding (kBusy with an unknown outcome schedules no clean-up): a busy refusal with an
// instance that did not answer says the outcome is unknown, and ClientCore::acquire cleans up
// after any refusal that says so (whatever its kind; LostReply.* in the single-node tests).
TEST_F(RedlockStall, ABusyRefusalWithAnInstanceThatDidNotAnswerSaysTheOutcomeIsUnknown) {
  internal::Engine engine = engine_over(3);
  const Key key("busy-unknown");
  ASSERT_EQ(engine.lock->acquire(internal::GrantRequest{key, "warm-up", 30s, "", Clock::now() + 1s}).kind,
            internal::GrantReply::Kind::kAcquired);
  engine.lock->release(key, "warm-up", 0ms);
  RedisAdmin(instance(2)).command({"HSET", lock_key("busy-unknown"), "owner", "foreign", "token", "1"});
  RedisAdmin(instance(2)).command({"PEXPIRE", lock_key("busy-unknown"), "30000"});
  instance(1).pause();
  const internal::GrantReply reply =
      engine.lock->acquire(internal::GrantRequest{key, "owner-1", 3s, "", Clock::now() + 1s});
  instance(1).resume();
  EXPECT_EQ(reply.kind, internal::GrantReply::Kind::kBusy) << reply.error;
  EXPECT_TRUE(reply.outcome_unknown);
  RedisAdmin(instance(2)).command({"DEL", lock_key("busy-unknown")});
}

// An instance whose clock stepped forward by more than the per-instance timeout answers the
// next acquire "arrived too late": the client's estimate of that clock, which maps its
// deadline to the instance's time, is behind. The connection must measure the clock again,
// so that later acquires are granted there too; otherwise the instance refuses every acquire
// until the estimate is renewed anyway (kClockRemeasure, a minute), and the quorum does
// without it meanwhile.
TEST(RedlockClock, AnInstanceWhoseClockSteppedForwardGrantsAgainAfterOneLateAnswer) {
  RedlockGroup group(5, true);
  group.start();
  Client client(topology_config(Topology::kRedlock, endpoints_of(group.endpoints())));
  Lease warm_up = client.try_acquire("warm-up", settings(5s));
  ASSERT_TRUE(warm_up) << warm_up.error();
  (void)warm_up.release();
  group.instance(0).step_clock(5s);
  RedisAdmin stepped(group.instance(0));
  int held_there = 0;
  constexpr int kAcquires = 5;
  for (int i = 0; i < kAcquires; ++i) {
    const std::string key = "after-the-step-" + std::to_string(i);
    Lease lease = client.try_acquire(key, settings(5s));
    ASSERT_TRUE(lease) << lease.error();
    held_there += stepped.string({"HGET", internal::lock_keys(unique_service(), key).lock, "owner"})
                      .has_value();
    (void)lease.release();
  }
  EXPECT_GE(held_there, kAcquires - 1) << "the stepped instance kept refusing acquires";
  std::printf(
      "[ measure ] redlock, instance 0 of 5 stepped +5000 ms: it held %d of the %d locks "
      "acquired next\n",
      held_there, kAcquires);
}

}  // namespace
}  // namespace dlock::test
