// Handoff against a real redis-server: a waiter queued on a busy lock is granted it by the
// holder's release, in the same script, and learns of it from the release notification
// without a request of its own. Waiters are served in the order they queued; one that gives
// up leaves the queue; a dead waiter's place lapses; a grant whose notice never arrives is
// found by the waiter's next attempt, with the key's real time left.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "dlock/dlock.hpp"
#include "fixtures.hpp"
#include "redis/keys.hpp"
#include "redis/scripts.hpp"

namespace dlock::test {
namespace {

class Handoff : public OneServerSuite {
 protected:
  static internal::LockKeys keys(const std::string& key) {
    return internal::lock_keys(unique_service(), key);
  }
  // `owner`, a fair waiter of `kind`, first in the fair queue of `key` (for 30 s).
  static void place_first(const std::string& key, const std::string& owner, const char* kind) {
    RedisAdmin admin(*server_);
    const long long now_s = std::stoll(admin.command({"TIME"}));
    admin.command({"ZADD", keys(key).queue, "1", owner});
    admin.command({"HSET", keys(key).places, owner,
                   std::to_string((now_s + 30) * 1000000) + " " + kind});
  }
  // `owner` leaves with the release script that a waiter giving up sends.
  static void leave(const std::string& key, const std::string& owner) {
    const internal::LockKeys k = keys(key);
    RedisAdmin(*server_).command({"EVAL", std::string(internal::release_script().text), "5",
                                  k.lock, k.fence, k.holders, k.queue, k.places, owner, "0",
                                  k.channel, "0", "604800000", ""});
  }
  // `waiter` asks for `key` as `s` says, queues behind `gone`, which then leaves: the ms from
  // the leave to the grant, -1 when not granted.
  static long long granted_after_leave(Client& waiter, const std::string& key,
                                       const LockSettings& s, const std::string& gone) {
    std::atomic<bool> granted{false};
    std::thread next([&] { granted = static_cast<bool>(waiter.acquire(key, s)); });
    const bool queued = wait_until([&] { return waiter.metrics().contention >= 1; }, 2s, 1ms);
    const auto left = Clock::now();
    leave(key, gone);
    next.join();
    return queued && granted ? elapsed_ms(left) : -1;
  }
  // The places in the key's queue: the lock hash's "w:<owner>" fields.
  static long long queued(const std::string& key) {
    const auto fields = RedisAdmin(*server_).array({"HKEYS", keys(key).lock});
    return std::count_if(fields.begin(), fields.end(),
                         [](const std::string& f) { return f.rfind("w:", 0) == 0; });
  }
  // The owner of the queue's first place.
  static std::string first_waiter(const std::string& key) {
    RedisAdmin admin(*server_);
    const std::string head = admin.string({"HGET", keys(key).lock, "qhead"}).value_or("1");
    const std::string record = admin.string({"HGET", keys(key).lock, "q:" + head}).value_or("");
    std::istringstream fields(record);
    std::string expires, lease, owner;
    fields >> expires >> lease >> owner;
    return owner;
  }
  static std::optional<std::string> holder(const std::string& key) {
    return RedisAdmin(*server_).string({"HGET", keys(key).lock, "owner"});
  }
  // The server's clock in microseconds.
  static long long server_us() {
    const auto t = RedisAdmin(*server_).array({"TIME"});
    return std::stoll(t.at(0)) * 1000000 + std::stoll(t.at(1));
  }
  // A waiter of another process that never comes back: a place lasting `place`, a grant
  // of `lease`.
  static void queue_ghost(const std::string& key, const std::string& owner, Millis place,
                          Millis lease) {
    RedisAdmin admin(*server_);
    const long long now = server_us();
    const std::string n = std::to_string(admin.integer({"HINCRBY", keys(key).lock, "qtail", "1"}));
    admin.command({"HSET", keys(key).lock, "w:" + owner, n, "q:" + n,
                   std::to_string(now + place.count() * 1000) + " " + std::to_string(lease.count()) +
                       " " + owner + " ghost-host 1 1 ghost name"});
  }
  static Config slow_polling() {
    Config config = single_node_config(*server_);
    config.backends["default"].poll_interval = 3s;  // a retry would take seconds
    return config;
  }
};

TEST_F(Handoff, TheReleaseGrantsTheLockToTheQueuedWaiter) {
  Client a(slow_polling()), b(slow_polling());
  Lease held = a.acquire("doc", settings(10s));
  ASSERT_TRUE(held);
  Lease got;
  std::thread waiter([&] { got = b.acquire("doc", settings(7s, 5s)); });
  ASSERT_TRUE(wait_until([&] { return queued("doc") == 1; }, 2s, 1ms));
  // The release issues the waiter's token, past a counter ahead of the server's clock as a
  // grant by a request of its own would be.
  const long long ahead = server_us() + 3600LL * 1000000;
  RedisAdmin(*server_).command({"SET", keys("doc").fence, std::to_string(ahead)});
  const auto released = Clock::now();
  ASSERT_EQ(held.release(), ReleaseStatus::kReleased);
  // Granted by the release itself: the key already has its next owner, with that owner's lease.
  const auto next = holder("doc");
  ASSERT_TRUE(next.has_value());
  const long long pttl = RedisAdmin(*server_).integer({"PTTL", keys("doc").lock});
  EXPECT_GT(pttl, 6000);
  EXPECT_LE(pttl, 7000);
  EXPECT_EQ(queued("doc"), 0);
  waiter.join();
  ASSERT_TRUE(got) << got.error();
  EXPECT_LT(elapsed_ms(released), 1000) << "woke by polling, not by the grant";
  EXPECT_EQ(got.token(), static_cast<std::uint64_t>(ahead + 1));
  EXPECT_EQ(std::to_string(got.token()),
            RedisAdmin(*server_).string({"HGET", keys("doc").lock, "token"}).value_or(""));
  EXPECT_EQ(b.metrics().handoffs, 1u);
  EXPECT_EQ(b.metrics().contention, 2u) << "the first try, then the try that queued";
  EXPECT_GT(got.remaining(), 5000ms);
  EXPECT_EQ(got.release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(holder("doc").has_value());
}

TEST_F(Handoff, WaitersAreServedInTheOrderTheyQueued) {
  Client a(slow_polling());
  Lease held = a.acquire("line", settings(10s));
  ASSERT_TRUE(held);
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::thread> waiters;
  std::mutex mutex;
  std::vector<int> order;
  for (int i = 0; i < 4; ++i) {
    clients.push_back(std::make_unique<Client>(slow_polling()));
    waiters.emplace_back([&, i] {
      Lease lease = clients[i]->acquire("line", settings(10s, 8s));
      EXPECT_TRUE(lease) << lease.error();
      {
        std::lock_guard lock(mutex);
        order.push_back(i);
      }
      std::this_thread::sleep_for(10ms);
      // The destructor's release, which nobody waits for, hands the lock on.
    });
    ASSERT_TRUE(wait_until([&] { return queued("line") == i + 1; }, 2s, 1ms));
  }
  held.release();
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  for (auto& client : clients) EXPECT_EQ(client->metrics().handoffs, 1u);
}

// Without leaving the queue, the place (1 s here) would outlive the wait, and the release
// below would hand the lock to a waiter that has gone.
TEST_F(Handoff, AWaiterThatGivesUpLeavesTheQueue) {
  Client a(slow_polling()), b(slow_polling());
  Lease held = a.acquire("doc", settings(10s));
  ASSERT_TRUE(held);
  Lease refused = b.acquire("doc", settings(10s, 300ms));
  EXPECT_EQ(refused.status(), AcquireStatus::kBusy);
  EXPECT_TRUE(wait_until([&] { return queued("doc") == 0; }, 2s, 5ms));
  ASSERT_EQ(held.release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(holder("doc").has_value());
}

TEST_F(Handoff, ALapsedPlaceIsSkipped) {
  Client a(slow_polling()), b(slow_polling());
  Lease held = a.acquire("doc", settings(10s));
  ASSERT_TRUE(held);
  queue_ghost("doc", "ghost-lapsed", -1000ms, 10s);
  ASSERT_EQ(held.release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(holder("doc").has_value());
  EXPECT_TRUE(b.try_acquire("doc", settings(1s)));
}

// A waiter that died while its place was still good is granted the lock, which then expires
// with the lease it asked for: the queue is blocked for at most one lease.
TEST_F(Handoff, ADeadWaitersGrantExpiresWithItsLease) {
  Client a(slow_polling()), b(slow_polling());
  Lease held = a.acquire("doc", settings(10s));
  ASSERT_TRUE(held);
  queue_ghost("doc", "ghost", 5000ms, 400ms);
  ASSERT_EQ(held.release(), ReleaseStatus::kReleased);
  EXPECT_EQ(holder("doc").value_or(""), "ghost");
  const auto granted = Clock::now();
  Lease next = b.acquire("doc", settings(10s, 3s));
  ASSERT_TRUE(next) << next.error();
  EXPECT_GE(elapsed_ms(granted), 250);
  EXPECT_LT(elapsed_ms(granted), 2000);
  EXPECT_GT(next.token(), held.token());
}

// The grant's notice is lost (here it is never published: another release wrote it): the
// waiter's next attempt finds the key its own, and counts its validity from the key's time
// left rather than from a full lease.
TEST_F(Handoff, AGrantWhoseNoticeIsLostIsFoundByTheNextAttempt) {
  Config config = single_node_config(*server_);  // polls every 250 ms
  Client a(config), b(config);
  Lease held = a.acquire("doc", settings(10s));
  ASSERT_TRUE(held);
  Lease got;
  std::thread waiter([&] { got = b.acquire("doc", settings(10s, 5s)); });
  ASSERT_TRUE(wait_until([&] { return queued("doc") == 1; }, 2s, 1ms));
  RedisAdmin admin(*server_);
  const std::string owner = first_waiter("doc");
  ASSERT_FALSE(owner.empty());
  const std::string token = std::to_string(held.token() + 1000);
  admin.command({"HDEL", keys("doc").lock, "w:" + owner, "q:1"});
  admin.command({"HSET", keys("doc").lock, "owner", owner, "token", token, "qhead", "2"});
  admin.command({"PEXPIRE", keys("doc").lock, "4000"});
  waiter.join();
  ASSERT_TRUE(got) << got.error();
  EXPECT_EQ(std::to_string(got.token()), token);
  EXPECT_EQ(b.metrics().handoffs, 0u);
  EXPECT_LE(got.remaining(), 4000ms);
  EXPECT_GT(got.remaining(), 2500ms);
  EXPECT_EQ(held.release(), ReleaseStatus::kLost);
}

// Nobody waited: the lock hash holds no queue, and a release deletes it.
// A fair waiter whose turn was announced, but which gave up before taking the lock, tells
// the next one it is its turn when it leaves: the next one is not kept waiting for a poll.
TEST_F(Handoff, AFairWaiterThatLeavesAFreeLockAnnouncesTheNextTurn) {
  Config config = single_node_config(*server_);
  config.backends["default"].poll_interval = 5s;
  Client client(config);
  place_first("ticket", "gone", "X");  // a free lock's, as after its turn was announced
  LockSettings fair = settings(10s, 4s);
  fair.fair = true;
  const long long took = granted_after_leave(client, "ticket", fair, "gone");
  EXPECT_GE(took, 0) << "not granted";
  EXPECT_LT(took, 1000) << "the next waiter waited for its poll";
}

// So does a writer at the head of the queue of a lock held shared: the readers behind it may
// join the holders at once.
TEST_F(Handoff, AFairWriterThatLeavesASharedLocksQueueAnnouncesTheReadersTurn) {
  Config config = single_node_config(*server_);
  config.backends["default"].poll_interval = 5s;
  Client holder(config), reader(config);
  LockSettings shared = settings(10s, 4s);
  shared.mode = LockMode::kShared;
  shared.fair = true;
  Lease first = holder.acquire("doc", shared);
  ASSERT_TRUE(first);
  place_first("doc", "gone", "X");  // a writer, as if it had come before the reader
  const long long took = granted_after_leave(reader, "doc", shared, "gone");
  EXPECT_GE(took, 0) << "not granted";
  EXPECT_LT(took, 1000) << "the reader waited for its poll";
}

TEST_F(Handoff, TheUncontendedPathMakesNoQueue) {
  Client a(slow_polling());
  Lease held = a.acquire("solo", settings(1s));
  ASSERT_TRUE(held);
  EXPECT_EQ(RedisAdmin(*server_).array({"HKEYS", keys("solo").lock}).size(), 8u);
  ASSERT_EQ(held.release(), ReleaseStatus::kReleased);
  EXPECT_EQ(RedisAdmin(*server_).integer({"EXISTS", keys("solo").lock}), 0);
}

// A lease granted by handoff is this thread's like any other: it is entered again.
TEST_F(Handoff, AHandedOffLeaseIsReentrant) {
  Client a(slow_polling()), b(slow_polling());
  Lease held = a.acquire("doc", settings(10s));
  ASSERT_TRUE(held);
  std::thread waiter([&] {
    Lease outer = b.acquire("doc", settings(10s, 5s));
    ASSERT_TRUE(outer) << outer.error();
    Lease inner = b.acquire("doc", settings(10s));
    EXPECT_TRUE(inner) << inner.error();
    EXPECT_EQ(inner.token(), outer.token());
    EXPECT_EQ(inner.release(), ReleaseStatus::kStillHeld);
  });
  ASSERT_TRUE(wait_until([&] { return queued("doc") == 1; }, 2s, 1ms));
  held.release();
  waiter.join();
  EXPECT_EQ(b.metrics().handoffs, 1u);
  EXPECT_EQ(b.metrics().reentrant_acquisitions, 1u);
}

// The holder's key expires while a waiter is queued: the queue goes with it, and the waiter
// takes the free lock with its next try (woken by the key's expiry, not by a poll).
TEST_F(Handoff, AQueueEndsWithItsLocksExpiry) {
  Client a(slow_polling()), b(slow_polling());
  LockSettings s = settings(400ms);
  s.max_hold = 400ms;
  Lease held = a.acquire("doc", s);
  ASSERT_TRUE(held);
  const auto started = Clock::now();
  Lease next = b.acquire("doc", settings(10s, 5s));
  ASSERT_TRUE(next) << next.error();
  EXPECT_LT(elapsed_ms(started), 1500);
  EXPECT_EQ(b.metrics().handoffs, 0u);
  EXPECT_EQ(queued("doc"), 0);
  EXPECT_GT(next.token(), held.token());
}

}  // namespace
}  // namespace dlock::test
