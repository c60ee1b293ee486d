// Releases nobody waits for (a lease's destructor, a guard's exit) against a real
// redis-server: the caller goes on at once, the thread's next command still comes after its
// release, and what the answer says is reported when it comes, before shutdown() or exit
// return.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "dlock/dlock.hpp"
#include "fixtures.hpp"
#include "redis/keys.hpp"

namespace dlock::test {
namespace {

class ReleaseLater : public OneServerSuite {
 protected:
  void TearDown() override { RedisAdmin(*server_).command({"CLIENT", "UNPAUSE"}); }

  static std::string lock_key(const Key& key) {
    return internal::lock_keys(unique_service(), key.str()).lock;
  }
  static bool exists(const Key& key) {
    return RedisAdmin(*server_).integer({"EXISTS", lock_key(key)}) == 1;
  }
  // How many scripts the server has run: EVALSHA, and EVAL (a script's first time on a
  // connection, or after NOSCRIPT).
  static long long script_calls() {
    const std::string info = RedisAdmin(*server_).command({"INFO", "commandstats"});
    long long calls = 0;
    for (const std::string verb : {"cmdstat_evalsha:calls=", "cmdstat_eval:calls="}) {
      const auto at = info.find(verb);
      if (at != std::string::npos) calls += std::stoll(info.substr(at + verb.size()));
    }
    return calls;
  }
  // Holds back every write (scripts included) for `pause`; reads still answer.
  static void pause_writes(std::chrono::milliseconds pause) {
    ASSERT_EQ(
        RedisAdmin(*server_).command({"CLIENT", "PAUSE", std::to_string(pause.count()), "WRITE"}),
        "OK");
  }
};

TEST_F(ReleaseLater, TheDestructorReturnsWhileTheServerHoldsTheReleaseBack) {
  Client client(single_node_config(*server_));
  auto lease = std::make_unique<Lease>(client.acquire("doc", settings(10s)));
  ASSERT_TRUE(*lease);
  pause_writes(400ms);
  const auto before = Clock::now();
  lease.reset();
  EXPECT_LT(elapsed_ms(before), 150) << "the destructor waited for the answer";
  EXPECT_TRUE(exists("doc")) << "applied while writes were paused";
  EXPECT_TRUE(wait_until([&] { return !exists("doc"); }, 3s, 10ms));
  EXPECT_GE(elapsed_ms(before), 300);
  EXPECT_TRUE(wait_until([&] { return client.metrics().releases == 1; }, 2s, 5ms));
}

TEST_F(ReleaseLater, AnExplicitReleaseWaitsAndSaysWhatHappened) {
  Client client(single_node_config(*server_));
  Lease lease = client.acquire("doc", settings(10s));
  ASSERT_TRUE(lease);
  pause_writes(300ms);
  const auto before = Clock::now();
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  EXPECT_GE(elapsed_ms(before), 200);
  EXPECT_FALSE(exists("doc"));
  EXPECT_EQ(client.metrics().releases, 1u);
}

// Without waiting for the release, the same thread acquires the key again at once (wait 0):
// only a release applied before that acquire lets it in. The server starts with an empty
// script cache, where a release sent by SHA would be refused (NOSCRIPT) and overtaken.
TEST_F(ReleaseLater, AThreadsNextAcquireComesAfterItsOwnRelease) {
  ASSERT_EQ(RedisAdmin(*server_).command({"SCRIPT", "FLUSH"}), "OK");
  Client client(single_node_config(*server_));
  for (int i = 0; i < 300; ++i) {
    Lease lease = client.acquire("again", settings(10s));
    ASSERT_TRUE(lease) << "round " << i << ": " << lease.error();
  }
  EXPECT_TRUE(wait_until([&] { return client.metrics().releases == 300; }, 3s, 5ms));
}

// Eight threads share two connections: each thread's release may sit on a connection that
// another thread takes next, and its own next acquire must still come after it.
TEST_F(ReleaseLater, ThreadsSharingAFewConnectionsEachComeAfterTheirOwnRelease) {
  Config config = single_node_config(*server_);
  config.backends["default"].pool_size = 2;
  config.backends["default"].command_timeout = 2s;
  Client client(config);
  constexpr int kThreads = 8;
  constexpr int kRounds = 150;
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const Key key("thread:" + std::to_string(t));
      for (int i = 0; i < kRounds; ++i) {
        if (!client.acquire(key, settings(10s))) ++refused;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(refused.load(), 0);
  EXPECT_TRUE(wait_until(
      [&] { return client.metrics().releases == std::uint64_t{kThreads * kRounds}; }, 3s, 5ms));
}

TEST_F(ReleaseLater, ALossFoundByAReleaseNobodyWaitsForReachesOnLost) {
  Client client(single_node_config(*server_));
  std::atomic<bool> called{false};
  std::thread::id called_on;
  {
    Lease lease = client.acquire("doc", settings(10s));
    ASSERT_TRUE(lease);
    lease.view().on_lost([&](const LeaseView& view) {
      called_on = std::this_thread::get_id();
      EXPECT_EQ(view.loss_reason(), LossReason::kTaken);
      called = true;
    });
    RedisAdmin(*server_).command({"HSET", lock_key("doc"), "owner", "intruder"});
  }
  ASSERT_TRUE(wait_until([&] { return called.load(); }, 3s, 5ms));
  EXPECT_NE(called_on, std::this_thread::get_id()) << "on_lost ran inside the destructor";
  EXPECT_EQ(client.metrics().losses, 1u);
  EXPECT_EQ(client.metrics().release_failures, 1u);
  EXPECT_EQ(RedisAdmin(*server_).string({"HGET", lock_key("doc"), "owner"}), "intruder");
}

// A server that forgot the script (SCRIPT FLUSH after the connection sent it) refuses the
// release sent by SHA; it is sent again with the script, and the key is still released.
TEST_F(ReleaseLater, AReleaseRefusedForAForgottenScriptIsSentAgain) {
  Client client(single_node_config(*server_));
  { Lease warm = client.acquire("doc", settings(10s)); }
  Lease lease = client.acquire("doc", settings(10s), "forgotten");
  ASSERT_TRUE(lease);
  ASSERT_EQ(RedisAdmin(*server_).command({"SCRIPT", "FLUSH"}), "OK");
  lease = Lease();
  EXPECT_TRUE(wait_until([&] { return !exists("doc"); }, 3s, 5ms));
  EXPECT_TRUE(wait_until([&] { return client.metrics().releases == 2; }, 3s, 5ms));
  EXPECT_EQ(client.metrics().release_failures, 0u);
  EXPECT_TRUE(client.acquire("doc", settings(10s, 2s)));
}

// The server stalls past A's command timeout with A's release queued; it applies it when it
// wakes, and B, waiting, takes the key. A's unanswered release must not be sent again (it
// would find B's key and call A's lease lost): its outcome is unknown, and reported so.
TEST_F(ReleaseLater, AnAppliedReleaseWhoseAnswerCameTooLateIsNotCalledALoss) {
  Config config_a = single_node_config(*server_);
  config_a.backends["default"].command_timeout = 200ms;
  Config config_b = single_node_config(*server_);
  config_b.backends["default"].command_timeout = 2s;
  Client a(config_a);
  Client b(config_b);
  { Lease warm = b.acquire("warm", settings(10s)); }  // b's connection is open
  std::atomic<bool> lost{false};
  auto lease = std::make_unique<Lease>(a.acquire("doc", settings(10s)));
  ASSERT_TRUE(*lease);
  lease->view().on_lost([&](const LeaseView&) { lost = true; });
  std::thread stall([] { RedisAdmin(*server_).command({"DEBUG", "SLEEP", "0.35"}); });
  std::this_thread::sleep_for(20ms);
  lease.reset();
  Lease other = b.acquire("doc", settings(10s, 3s));
  stall.join();
  ASSERT_TRUE(other) << other.error();
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(lost.load()) << "a lease whose release was applied was reported lost";
  EXPECT_EQ(a.metrics().losses, 0u);
}

// The keys of a lease that one server holds are taken in one request and released in one.
TEST_F(ReleaseLater, ALeaseOfSeveralKeysIsReleasedInOneRequest) {
  Client client(single_node_config(*server_));
  const std::vector<Key> keys{"acct:1", "acct:2", "acct:3"};
  {  // the server has the scripts, and the connection knows it has
    Lease warm = client.acquire(std::vector<Key>{"warm:1", "warm:2"}, settings(10s));
  }
  ASSERT_TRUE(wait_until([&] { return client.metrics().releases == 2; }, 3s, 5ms));
  const long long before = script_calls();
  {
    Lease all = client.acquire(keys, settings(10s));
    ASSERT_TRUE(all) << all.error();
  }
  EXPECT_TRUE(wait_until([&] { return client.metrics().releases == 5; }, 3s, 5ms));
  for (const Key& key : keys) EXPECT_FALSE(exists(key)) << key.str();
  EXPECT_EQ(script_calls() - before, 2) << "one request to take the keys, one to release them";
  EXPECT_EQ(client.metrics().release_failures, 0u);
  // An explicit release too, and it says what happened.
  Lease again = client.acquire(keys, settings(10s));
  ASSERT_TRUE(again);
  const long long taken = script_calls();
  EXPECT_EQ(again.release(), ReleaseStatus::kReleased);
  EXPECT_EQ(script_calls() - taken, 1);
  for (const Key& key : keys) EXPECT_FALSE(exists(key)) << key.str();
}

// One key of the lease is another owner's by the time of the release: that key is a loss,
// left to its owner, and the others are released all the same.
TEST_F(ReleaseLater, AKeyOfSeveralFoundTakenAtReleaseIsLostAndTheOthersAreReleased) {
  Client client(single_node_config(*server_));
  Lease both = client.acquire(std::vector<Key>{"acct:1", "acct:2"}, settings(10s));
  ASSERT_TRUE(both);
  RedisAdmin(*server_).command({"HSET", lock_key("acct:2"), "owner", "intruder"});
  EXPECT_EQ(both.release(), ReleaseStatus::kLost);
  EXPECT_FALSE(exists("acct:1"));
  EXPECT_EQ(RedisAdmin(*server_).string({"HGET", lock_key("acct:2"), "owner"}), "intruder");
  EXPECT_EQ(client.metrics().releases, 1u);
  EXPECT_EQ(client.metrics().release_failures, 1u);
  EXPECT_EQ(client.metrics().losses, 1u);
}

// As for one key: the release of several that the server refuses for a forgotten script is
// sent again with the script, and every key is released, none called lost.
TEST_F(ReleaseLater, AReleaseOfSeveralKeysRefusedForAForgottenScriptIsSentAgain) {
  Client client(single_node_config(*server_));
  const std::vector<Key> keys{"acct:1", "acct:2"};
  { Lease warm = client.acquire(keys, settings(10s)); }  // the connection sent the script
  ASSERT_TRUE(wait_until([&] { return client.metrics().releases == 2; }, 3s, 5ms));
  Lease lease = client.acquire(keys, settings(10s));
  ASSERT_TRUE(lease);
  ASSERT_EQ(RedisAdmin(*server_).command({"SCRIPT", "FLUSH"}), "OK");
  lease = Lease();
  EXPECT_TRUE(wait_until([&] { return client.metrics().releases == 4; }, 3s, 5ms));
  for (const Key& key : keys) EXPECT_FALSE(exists(key)) << key.str();
  EXPECT_EQ(client.metrics().release_failures, 0u);
  EXPECT_EQ(client.metrics().losses, 0u);
}

TEST_F(ReleaseLater, ShutdownWaitsForAReleaseInFlight) {
  init(single_node_config(*server_));
  auto lease = std::make_unique<Lease>(client().acquire("doc", settings(10s)));
  ASSERT_TRUE(*lease);
  pause_writes(300ms);
  lease.reset();
  const auto before = Clock::now();
  shutdown();
  EXPECT_GE(elapsed_ms(before), 150) << "shutdown did not wait";
  EXPECT_FALSE(exists("doc"));
}

// The worker lets its lease go and returns from main while the server holds writes back:
// the exit waits for the answer, so the key is gone when the process is.
TEST_F(ReleaseLater, ProcessExitWaitsForAReleaseInFlight) {
  ConfigFile config(*server_, unique_service());
  const auto go =
      std::filesystem::temp_directory_path() / ("dlock-let-go-" + std::to_string(::getpid()));
  std::filesystem::remove(go);
  ChildProcess worker({worker_program(), config.path(), "let-go", "doc", go.string()});
  ASSERT_EQ(worker.read_line(10s).value_or("timeout"), "acquired");
  pause_writes(400ms);
  const auto before = Clock::now();
  { std::ofstream(go) << "go\n"; }
  EXPECT_EQ(worker.wait(5s), 0);
  std::filesystem::remove(go);
  EXPECT_GE(elapsed_ms(before), 250) << "the process did not wait for its release";
  EXPECT_FALSE(exists("doc"));
}

}  // namespace
}  // namespace dlock::test
