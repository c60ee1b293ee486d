// The single-node Redis backend against a real redis-server: processes, kills, pauses,
// restarts, lost keys, notifications and awkward keys.
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include "client_core.hpp"
#include "dlock/admin.hpp"
#include "engine.hpp"
#include "fake_redis.hpp"
#include "fixtures.hpp"
#include "redis/keys.hpp"
#include "redis/lock_scripts.hpp"
#include "redis/master_backend.hpp"
#include "redis/pool.hpp"
#include "redis/subscriber.hpp"
#include "metrics.hpp"
#include "release_signals.hpp"

namespace dlock::test {
namespace {

class SingleNode : public ::testing::Test {
 protected:
  void SetUp() override { server.start(); }

  std::string lock_key(const Key& key) {
    return internal::lock_keys(unique_service(), key.str()).lock;
  }

  // Stops the server from answering anyone for `pause` (CLIENT PAUSE ... ALL).
  void pause_clients(std::chrono::milliseconds pause) {
    ASSERT_TRUE(RedisAdmin(server).ok({"CLIENT", "PAUSE", std::to_string(pause.count()), "ALL"}));
  }

  RedisServer server;
};

TEST_F(SingleNode, LostUpdateCounterStaysExactAcrossEightProcesses) {
  constexpr int kProcesses = 8;
  constexpr int kIncrements = 200;
  ConfigFile config(server, unique_service());
  const auto counter = std::filesystem::temp_directory_path() /
                       ("dlock-counter-" + std::to_string(::getpid()) + ".txt");
  { std::ofstream(counter) << 0 << '\n'; }

  std::vector<ChildProcess> workers;
  for (int i = 0; i < kProcesses; ++i) {
    workers.emplace_back(std::vector<std::string>{worker_program(), config.path(), "counter",
                                                  "shared-counter", counter.string(),
                                                  std::to_string(kIncrements), "100"});
  }
  for (auto& worker : workers) {
    EXPECT_EQ(worker.read_line(60s).value_or("timeout"), "done");
    EXPECT_EQ(worker.wait(5s), 0);
  }
  long total = -1;
  std::ifstream(counter) >> total;
  std::filesystem::remove(counter);
  EXPECT_EQ(total, kProcesses * kIncrements);
}

TEST_F(SingleNode, HolderKilledFreesTheLockWhenItsLeaseEndsAndNotBefore) {
  ConfigFile config(server, unique_service());
  ChildProcess holder({worker_program(), config.path(), "hold", "job", "1500", "0"});
  ASSERT_TRUE(holder.read_line(10s).value_or("").starts_with("acquired"));

  RedisAdmin admin(server);
  holder.kill();
  const auto killed = Clock::now();
  const long long ttl_at_kill = admin.integer({"PTTL", lock_key("job")});
  ASSERT_GT(ttl_at_kill, 0) << "the key must outlive its holder until the lease ends";

  Client client(single_node_config(server));
  EXPECT_EQ(client.try_acquire("job", settings(5s)).status(), AcquireStatus::kBusy);
  Lease lease = client.acquire("job", settings(5s, 5s));
  const auto waited = elapsed_ms(killed);
  ASSERT_TRUE(lease);
  EXPECT_GE(waited, ttl_at_kill - 30) << "acquired before the dead holder's lease ended";
  EXPECT_LE(waited, ttl_at_kill + 400);
}

TEST_F(SingleNode, ReleaseAfterExpiryFailsAndLeavesTheNewOwnersKey) {
  ConfigFile config(server, unique_service());
  ChildProcess old_owner({worker_program(), config.path(), "hold", "report", "400", "1500"});
  const auto first = old_owner.read_line(10s).value_or("");
  ASSERT_TRUE(first.starts_with("acquired")) << first;
  old_owner.signal(SIGSTOP);  // no renewals: its lease runs out

  Client client(single_node_config(server));
  Lease lease = client.acquire("report", settings(10s, 3s));
  ASSERT_TRUE(lease);
  old_owner.signal(SIGCONT);

  std::vector<std::string> lines;
  while (auto line = old_owner.read_line(10s)) {
    lines.push_back(*line);
    if (line->starts_with("released")) break;
  }
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "released lost");
  EXPECT_FALSE(lease.lost());
  RedisAdmin admin(server);
  EXPECT_EQ(admin.integer({"EXISTS", lock_key("report")}), 1) << "the new owner's key was removed";
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
}

TEST_F(SingleNode, ReleaseByANonOwnerIsRefused) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("invoice", settings(10s));
  ASSERT_TRUE(lease);
  const auto& backend = client.core()->backend("default");
  EXPECT_EQ(backend->release("invoice", "not-the-owner", 0ms), internal::ReleaseOutcome::kTaken);
  EXPECT_EQ(backend->release("no-such-lock", "not-the-owner", 0ms), internal::ReleaseOutcome::kGone);
  RedisAdmin admin(server);
  EXPECT_EQ(admin.integer({"EXISTS", lock_key("invoice")}), 1);
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  EXPECT_EQ(admin.integer({"EXISTS", lock_key("invoice")}), 0);
}

TEST_F(SingleNode, WatchdogKeepsABusyHolderForTenLeasesAndFreesWithinOneLeaseAfterItDies) {
  ConfigFile config(server, unique_service());
  ChildProcess holder({worker_program(), config.path(), "hold", "long-job", "500", "0"});
  ASSERT_TRUE(holder.read_line(10s).value_or("").starts_with("acquired"));

  Client client(single_node_config(server));
  const auto start = Clock::now();
  int attempts = 0;
  while (Clock::now() - start < 5s) {  // ten leases
    ASSERT_EQ(client.try_acquire("long-job", settings(1s)).status(), AcquireStatus::kBusy)
        << "lost the lock after " << elapsed_ms(start) << "ms";
    ++attempts;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_GT(attempts, 40);

  holder.kill();
  const auto killed = Clock::now();
  Lease lease = client.acquire("long-job", settings(1s, 2s));
  ASSERT_TRUE(lease);
  EXPECT_LE(elapsed_ms(killed), 500 + 250) << "free within one lease of the holder's death";
}

class LossDetection : public SingleNode {
 protected:
  // Waits for the loss callback; returns how long after `since` it came.
  static long long wait_for_loss(Lease& lease, Clock::time_point since) {
    std::atomic<long long> at{-1};
    lease.view().on_lost([&](const LeaseView&) { at = elapsed_ms(since); });
    wait_until([&] { return at.load() >= 0; }, 3s, 5ms);
    return at.load();
  }
};

TEST_F(LossDetection, KeyDeletedBehindTheHolderIsMarkedLostWithinALeaseThird) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("doc", settings(1200ms));
  ASSERT_TRUE(lease);
  RedisAdmin admin(server);
  ASSERT_EQ(admin.integer({"DEL", lock_key("doc")}), 1);
  const auto deleted = Clock::now();
  const long long after = wait_for_loss(lease, deleted);
  ASSERT_GE(after, 0) << "the loss was never reported";
  EXPECT_LE(after, 400 + 200) << "within about a lease third";
  EXPECT_EQ(lease.view().loss_reason(), LossReason::kGone);
  EXPECT_EQ(lease.view().remaining(), 0ms);
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
  EXPECT_EQ(client.metrics().losses, 1u);
}

TEST_F(LossDetection, ServerRestartedEmptyIsMarkedLostWithinALeaseThird) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("doc", settings(1500ms));
  ASSERT_TRUE(lease);
  server.restart_empty();
  const auto restarted = Clock::now();
  const long long after = wait_for_loss(lease, restarted);
  ASSERT_GE(after, 0) << "the loss was never reported";
  EXPECT_LE(after, 500 + 250) << "within about a lease third";
  EXPECT_EQ(lease.view().loss_reason(), LossReason::kGone);
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
  // The client recovers: the same key can be taken again on the new server.
  EXPECT_TRUE(client.try_acquire("doc", settings(1s)));
}

TEST_F(LossDetection, KeyTakenByAnotherOwnerIsMarkedTaken) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("doc", settings(600ms));
  ASSERT_TRUE(lease);
  RedisAdmin admin(server);
  admin.command({"HSET", lock_key("doc"), "owner", "intruder"});
  const long long after = wait_for_loss(lease, Clock::now());
  ASSERT_GE(after, 0);
  EXPECT_EQ(lease.view().loss_reason(), LossReason::kTaken);
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
  EXPECT_EQ(admin.string({"HGET", lock_key("doc"), "owner"}), "intruder");
}

TEST_F(SingleNode, FencingTokensOfAThousandGrantsStrictlyIncrease) {
  Client client(single_node_config(server));
  std::uint64_t previous = 0;
  for (int i = 0; i < 1000; ++i) {
    Lease lease = client.acquire("fenced", settings(5s));
    ASSERT_TRUE(lease) << i << " " << lease.error();
    ASSERT_GT(lease.token(), previous) << "grant " << i;
    previous = lease.token();
  }
}

TEST_F(SingleNode, FencingTokensKeepIncreasingAfterTheServerRestartsEmpty) {
  Client client(single_node_config(server));
  std::uint64_t before = 0;
  {
    Lease lease = client.acquire("fenced", settings(5s));
    ASSERT_TRUE(lease);
    before = lease.token();
  }
  server.restart_empty();
  Lease after = client.acquire("fenced", settings(5s));
  ASSERT_TRUE(after) << after.error();
  EXPECT_GT(after.token(), before);
}

TEST_F(SingleNode, PausedHolderResumesWithALowerTokenThanTheNewHolder) {
  ConfigFile config(server, unique_service());
  ChildProcess paused({worker_program(), config.path(), "hold", "ledger", "400", "0"});
  const auto first = paused.read_line(10s).value_or("");
  ASSERT_TRUE(first.starts_with("acquired ")) << first;
  const std::uint64_t old_token = std::stoull(first.substr(9));
  paused.signal(SIGSTOP);

  Client client(single_node_config(server));
  Lease lease = client.acquire("ledger", settings(10s, 3s));
  ASSERT_TRUE(lease);
  EXPECT_GT(lease.token(), old_token);

  paused.signal(SIGCONT);
  const auto line = paused.read_line(5s).value_or("");
  EXPECT_TRUE(line.starts_with("lost ")) << "the resumed holder must learn it lost the lock: " << line;
  EXPECT_FALSE(lease.lost());
}

TEST_F(SingleNode, ReleaseWakesAWaiterFarSoonerThanThePollingInterval) {
  Config config = single_node_config(server);
  config.backends["default"].poll_interval = 2s;
  Client holder_client(config);
  Client waiter_client(config);
  Lease held = holder_client.acquire("queue", settings(10s));
  ASSERT_TRUE(held);

  std::atomic<bool> waiting{false};
  Clock::time_point acquired_at;
  std::thread waiter([&] {
    waiting = true;
    Lease lease = waiter_client.acquire("queue", settings(10s, 5s));
    acquired_at = Clock::now();
    EXPECT_TRUE(lease);
  });
  wait_until([&] { return waiter_client.metrics().waits == 1; }, 2s, 1ms);
  std::this_thread::sleep_for(100ms);  // the waiter is parked on the notification now
  const auto released = Clock::now();
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  waiter.join();
  const auto handoff = std::chrono::duration_cast<std::chrono::milliseconds>(acquired_at - released);
  EXPECT_LT(handoff.count(), 100) << "woken by polling, not by the release notification";
  EXPECT_GE(waiter_client.metrics().wakeups, 1u);
}

TEST_F(SingleNode, WaitersStillGetTheLockAfterThePubSubConnectionIsKilled) {
  Config config = single_node_config(server);
  config.backends["default"].poll_interval = 300ms;
  Client holder_client(config);
  Client waiter_client(config);
  Lease held = holder_client.acquire("queue", settings(10s));
  ASSERT_TRUE(held);

  std::atomic<bool> got{false};
  std::thread waiter([&] {
    Lease lease = waiter_client.acquire("queue", settings(10s, 8s));
    got = static_cast<bool>(lease);
  });
  ASSERT_TRUE(wait_until([&] { return waiter_client.metrics().waits == 1; }, 2s, 1ms));
  std::this_thread::sleep_for(50ms);
  RedisAdmin admin(server);
  ASSERT_GE(admin.integer({"CLIENT", "KILL", "TYPE", "pubsub"}), 1);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_TRUE(wait_until([&] { return waiter_client.metrics().subscriber_reconnects >= 1; }, 3s));
}

TEST_F(SingleNode, WaitersGetTheLockByPollingWhenNotificationsAreRefused) {
  // A Redis 7 ACL user without channel permissions: SUBSCRIBE is refused, so no release
  // notification can ever arrive and only polling can hand the lock over.
  RedisAdmin admin(server);
  admin.command({"ACL", "SETUSER", "no-channels", "on", ">secret", "~*", "+@all", "resetchannels"});
  Config config = single_node_config(server);
  config.backends["default"].poll_interval = 300ms;
  Client holder_client(config);
  config.backends["default"].username = "no-channels";
  config.backends["default"].password = "secret";
  Client waiter_client(config);
  Lease held = holder_client.acquire("queue", settings(10s));
  ASSERT_TRUE(held);

  Clock::time_point acquired_at;
  std::thread waiter([&] {
    Lease lease = waiter_client.acquire("queue", settings(10s, 8s));
    acquired_at = Clock::now();
    EXPECT_TRUE(lease) << lease.error();
  });
  ASSERT_TRUE(wait_until([&] { return waiter_client.metrics().waits == 1; }, 3s, 1ms));
  std::this_thread::sleep_for(700ms);  // past the subscription attempt
  const auto released = Clock::now();
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  waiter.join();
  const auto handoff = std::chrono::duration_cast<std::chrono::milliseconds>(acquired_at - released);
  EXPECT_LE(handoff.count(), 300 + 200) << "polling must hand over within about poll_interval";
  EXPECT_EQ(waiter_client.metrics().wakeups, 0u) << "no notification can have woken it";
}

TEST_F(SingleNode, AForcedReleaseWithoutChannelRightsIsReportedAndAudited) {
  // A Redis 7 ACL user without channel permissions: the forced release's notification is
  // refused, which must not turn the release into an error or lose its audit entry.
  RedisAdmin admin(server);
  admin.command({"ACL", "SETUSER", "no-channels", "on", ">secret", "~*", "+@all", "resetchannels"});
  Config config = single_node_config(server);
  Client holder(config);
  Lease held = holder.acquire("stuck", settings(30s));
  ASSERT_TRUE(held);
  config.backends["default"].username = "no-channels";
  config.backends["default"].password = "secret";
  const Admin operator_admin{Client(config)};
  std::optional<LockInfo> removed;
  EXPECT_NO_THROW(removed = operator_admin.force_release("stuck", "stuck after a crash"));
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->token, held.token());
  const auto history = operator_admin.history();
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].note, "stuck after a crash");
  EXPECT_EQ(history[0].token, held.token());
}

// Answers INFO with `version`, TIME with `now_us()`, acquire.lua (5 keys, 11 arguments) as the
// script would with no lock held, anything else with 1.
FakeRedis::Answer redis_like(std::string version, std::function<std::int64_t()> now_us) {
  return [version = std::move(version), now_us = std::move(now_us)](const std::vector<std::string>& argv) {
    if (argv[0] == "INFO") return bulk("# Server\r\nredis_version:" + version + "\r\n");
    if (argv[0] == "TIME") {
      const std::int64_t now = now_us();
      return "*2\r\n" + bulk(std::to_string(now / 1000000)) + bulk(std::to_string(now % 1000000));
    }
    // EVALSHA sha 5 lock fence holders queue places owner lease not-after ...
    constexpr std::size_t kNotAfter = 10;
    if ((argv[0] == "EVALSHA" || argv[0] == "EVAL") && argv.size() == 19) {
      const std::int64_t not_after = std::stoll(argv[kNotAfter]);
      if (not_after > 0 && now_us() > not_after) return std::string("*2\r\n:-1\r\n:0\r\n");
      return "*2\r\n:1\r\n:" + std::to_string(now_us()) + "\r\n";
    }
    return std::string(":1\r\n");
  };
}

std::int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Config fake_config(const FakeRedis& fake) {
  Config config;
  config.service = unique_service();
  BackendConfig backend;
  backend.name = "default";
  backend.topology = Topology::kSingle;
  backend.endpoints = {Endpoint{"127.0.0.1", fake.port()}};
  backend.connect_timeout = 500ms;
  backend.command_timeout = 500ms;
  config.backends["default"] = backend;
  return config;
}

TEST(ServerVersion, ARedisOlderThanSevenIsRefusedWithAClearError) {
  FakeRedis old_server(redis_like("6.2.14", wall_us));
  Client client(fake_config(old_server));
  Lease lease = client.try_acquire("k", settings(5s));
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(lease.error().find("Redis 6.2.14"), std::string::npos) << lease.error();
  EXPECT_NE(lease.error().find("needs Redis 7.0 or later"), std::string::npos) << lease.error();
}

// Finding: no limit on replies. hiredis 0.14 allocates an array's element table as soon as
// `*N` arrives, so one short line from a faulty server cost N * 8 bytes, and the call then
// waited for the elements until the command timeout.
TEST(ReplyLimits, AReplyDeclaringMoreElementsThanTheLimitIsRefusedAsUnreadable) {
  const auto like_redis = redis_like("7.0.15", wall_us);
  FakeRedis huge([&](const std::vector<std::string>& argv) {
    if (argv[0] == "EVALSHA" || argv[0] == "EVAL") return std::string("*100000000\r\n");
    return like_redis(argv);
  });
  Config config = fake_config(huge);
  config.backends["default"].command_timeout = 2s;
  Client client(config);
  Lease lease = client.try_acquire("k", settings(30s));
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(lease.error().find("exceeded the limit"), std::string::npos) << lease.error();
}

// The sockets a program started now with fork+exec would inherit (popen runs /bin/sh).
int sockets_inherited_by_a_child() {
  std::FILE* child = ::popen("for f in /proc/$$/fd/*; do readlink \"$f\"; done", "r");
  if (child == nullptr) return -1;
  int sockets = 0;
  char line[256];
  while (std::fgets(line, sizeof line, child) != nullptr) {
    if (std::string_view(line).rfind("socket:", 0) == 0) ++sockets;
  }
  ::pclose(child);
  return sockets;
}

TEST_F(SingleNode, AProgramStartedWithForkAndExecInheritsNoConnection) {
  const int before = sockets_inherited_by_a_child();
  ASSERT_GE(before, 0);
  Client client(single_node_config(server));
  Lease lease = client.acquire("held", settings(5s));
  ASSERT_TRUE(lease);
  Client other(single_node_config(server));
  // A waiter subscribes for release notifications: one more connection.
  EXPECT_EQ(other.acquire("held", settings(5s, 300ms)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(sockets_inherited_by_a_child(), before);
}

// The first attempt's reply is lost (the connection drops after the command arrived), the
// retry finds the key busy: the first attempt may have taken it after all, so giving up
// must clean up its owner id rather than leave a key held by nobody.
TEST(LostReply, ABusyAnswerAfterALostReplyCleansUpTheFirstAttempt) {
  std::mutex mutex;
  int acquires = 0;
  std::vector<std::string> released_owners;
  std::string acquiring_owner;
  FakeRedis server([&, redis = redis_like("7.0.15", wall_us)](const std::vector<std::string>& argv) {
    const bool script = argv[0] == "EVALSHA" || argv[0] == "EVAL";
    if (!script || argv[3].find("orphan") == std::string::npos) return redis(argv);
    std::lock_guard lock(mutex);
    constexpr std::size_t kOwner = 8;  // EVALSHA sha 5 lock fence holders queue places owner
    if (argv.size() == 19) {           // acquire.lua
      acquiring_owner = argv[kOwner];
      return ++acquires == 1 ? std::string() : std::string("*2\r\n:0\r\n:20000\r\n");
    }
    released_owners.push_back(argv[kOwner]);
    return std::string(":1\r\n");
  });
  Client client(fake_config(server));
  ASSERT_TRUE(client.try_acquire("warm-up", settings(5s)));  // the first attempt reuses this connection
  Lease lease = client.try_acquire("orphan", settings(5s));
  EXPECT_EQ(lease.status(), AcquireStatus::kBusy);
  const bool cleaned = wait_until(
      [&] {
        std::lock_guard lock(mutex);
        return !released_owners.empty();
      },
      3s);
  std::lock_guard lock(mutex);
  EXPECT_EQ(acquires, 2) << "one attempt whose reply was lost, one retry";
  ASSERT_TRUE(cleaned) << "no release was sent for the first attempt's owner id";
  EXPECT_EQ(released_owners[0], acquiring_owner);
}

// The client maps its deadline to the server's clock with an offset measured on connect. A
// server clock that steps forward (ntp, a restored VM) must not leave every later acquire
// on that connection "too late", nor refuse the first one: its "too late" answer came back in
// time, so the connection measures the clock again and sends it once more.
TEST(ServerClock, AnAcquireAfterTheServerClockSteppedForwardSucceedsAgain) {
  std::atomic<std::int64_t> step_us{0};
  FakeRedis server(redis_like("7.0.15", [&] { return wall_us() + step_us.load(); }));
  Client client(fake_config(server));
  ASSERT_TRUE(client.try_acquire("before-the-step", settings(5s)));
  step_us = 5'000'000;
  int refused = 0;
  bool granted = false;
  for (int attempt = 0; attempt < 3 && !granted; ++attempt) {
    Lease lease = client.try_acquire("after-the-step-" + std::to_string(attempt), settings(5s));
    granted = static_cast<bool>(lease);
    if (!granted) ++refused;
  }
  EXPECT_TRUE(granted) << "every acquire after the step was answered too late";
  EXPECT_EQ(refused, 0);
}

// A real redis-server whose wall clock steps (RedisServerOptions::clock_step), on one client.
class RealServerClock : public ::testing::Test {
 protected:
  static RedisServerOptions stepping() {
    RedisServerOptions options;
    options.clock_step = true;
    return options;
  }
  void SetUp() override { server.start(); }

  // Steps the server's clock, then acquires (waiting up to 2 s) and releases `key` until a
  // grant, at most 5 times: how many acquires were refused, and when the grant came.
  struct AfterStep {
    int refused = 0;
    long long granted_after_ms = -1;
    std::uint64_t token = 0;
    std::string first_error;
  };
  AfterStep step_and_acquire(Client& client, std::chrono::milliseconds step, const Key& key) {
    server.step_clock(step);
    const auto stepped = Clock::now();
    AfterStep out;
    for (int attempt = 0; attempt < 5 && out.token == 0; ++attempt) {
      Lease lease = client.acquire(key, settings(5s, 2s));
      if (!lease) {
        if (out.refused++ == 0) out.first_error = lease.error();
        continue;
      }
      out.granted_after_ms = elapsed_ms(stepped);
      out.token = lease.token();
      EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
    }
    return out;
  }

  RedisServer server{stepping()};
};

// The server's clock steps forward by more than the command timeout, then back by more. The
// client maps its deadline to the server's clock with an offset measured per connection: after
// the forward step the next acquire arrives "too late" by the server's clock although its
// reply came in time, so the estimate, not the request, was late: the connection measures
// the clock again and the acquire is sent once more, rather than refused as unavailable. A
// step back makes no acquire late. Tokens are max(counter + 1, server time in us): they jump
// with the forward step and continue from the counter after the step back, never going back.
TEST_F(RealServerClock, AcquiresKeepSucceedingAndTokensKeepGrowingAcrossServerClockSteps) {
  Config config = single_node_config(server);  // command_timeout 500 ms
  Client client(config);
  const Key key("stepped");
  std::vector<std::uint64_t> tokens;
  const auto acquire_and_release = [&] {
    Lease lease = client.try_acquire(key, settings(5s));
    ASSERT_TRUE(lease) << lease.error();
    tokens.push_back(lease.token());
    (void)lease.release();
  };
  for (int i = 0; i < 3; ++i) acquire_and_release();

  const auto wall_us = [] {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(now).count());
  };
  const std::uint64_t before_forward_us = wall_us();
  const AfterStep forward = step_and_acquire(client, 3s, key);
  ASSERT_NE(forward.token, 0u) << "no grant in 5 acquires after the forward step: "
                               << forward.first_error;
  EXPECT_EQ(forward.refused, 0) << forward.first_error;
  EXPECT_GE(forward.token, before_forward_us + 3'000'000) << "the token ignores the stepped clock";
  tokens.push_back(forward.token);

  const AfterStep back = step_and_acquire(client, -6s, key);
  ASSERT_NE(back.token, 0u) << "no grant in 5 acquires after the step back: " << back.first_error;
  EXPECT_EQ(back.refused, 0) << back.first_error;
  EXPECT_EQ(back.token, forward.token + 1) << "after the step back the counter, not the clock";
  tokens.push_back(back.token);
  for (int i = 0; i < 3; ++i) acquire_and_release();
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    EXPECT_GT(tokens[i], tokens[i - 1]) << "token " << i << " went back";
  }
  std::printf(
      "[ measure ] real server clock, command_timeout 500 ms: stepped +3000 ms: %d "
      "acquire(s) refused, granted %lld ms after the step; stepped -6000 ms: %d refused, "
      "granted after %lld ms\n",
      forward.refused, forward.granted_after_ms, back.refused, back.granted_after_ms);
}

// A forward step larger than the time left on a lease expires its key early on the server
// (Redis keeps absolute expiry times): another client gets the lock while the holder still
// believes it holds it. The holder's next renewal finds the key gone and reports the lease
// lost, and the new holder's token is above the old one, so a fenced resource refuses the
// old holder's writes.
TEST_F(RealServerClock, ALeaseWhoseKeyExpiredInAForwardStepIsReportedLostAndOutranked) {
  Client holder_client(single_node_config(server));
  Client other_client(single_node_config(server));
  Lease held = holder_client.acquire("expires-early", settings(3s));
  ASSERT_TRUE(held) << held.error();
  server.step_clock(4s);
  Lease next = other_client.acquire("expires-early", settings(3s, 2s));
  ASSERT_TRUE(next) << "the key did not expire with the step: " << next.error();
  EXPECT_GT(next.token(), held.token());
  EXPECT_TRUE(wait_until([&] { return held.lost(); }, 3s))
      << "the holder's renewals did not notice the key gone";
}

TEST_F(SingleNode, AUserNotAllowedToRunInfoCanStillLock) {
  // The version check at connect needs INFO; an ACL user without it skips the check.
  RedisAdmin admin(server);
  admin.command({"ACL", "SETUSER", "no-info", "on", ">secret", "~*", "&*", "+@all", "-info"});
  Config config = single_node_config(server);
  config.backends["default"].username = "no-info";
  config.backends["default"].password = "secret";
  Client client(config);
  Lease lease = client.try_acquire("k", settings(5s));
  EXPECT_TRUE(lease) << lease.error();
}

TEST_F(SingleNode, ServerDownFailsAsUnavailableWithinTheTimeouts) {
  Config config = single_node_config(server);
  server.stop();
  Client client(config);
  const auto start = Clock::now();
  Lease lease = client.acquire("anything", settings(5s, 5s));
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_FALSE(lease.error().empty());
  EXPECT_LE(elapsed_ms(start), 500 + 200);
}

TEST_F(SingleNode, ServerStoppedWithSigstopFailsAsUnavailableWithinTheTimeouts) {
  Client client(single_node_config(server));
  ASSERT_TRUE(client.try_acquire("warm-up", settings(1s)));  // a pooled, idle connection
  server.pause();
  const auto start = Clock::now();
  Lease lease = client.acquire("paused", settings(5s, 5s));
  const auto took = elapsed_ms(start);
  server.resume();
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_LE(took, 2 * 500 + 200);
}

// Finding: the confirmation of a SUBSCRIBE that was dropped before it arrived (SUBSCRIBE,
// UNSUBSCRIBE in flight) marked the channel subscribed again, so the next watch's wait for
// the subscription returned at once while the server had none: a release could be missed.
TEST_F(SingleNode, ASubscriptionDroppedBeforeItsConfirmationArrivedIsNotReportedConfirmed) {
  BackendConfig config = single_node_config(server).backends["default"];
  internal::ReleaseSignals signals;
  internal::Subscriber subscriber({Endpoint{server.host(), server.port()}}, config, internal::ServerKind::kData,
                                  signals, std::make_shared<internal::Metrics>());
  const std::string channel = "dropped-before-confirmed";
  // Connected, with nothing subscribed yet.
  subscriber.await_subscribed("nothing", Clock::now() + 300ms);
  server.pause();
  subscriber.interest(channel, true);
  std::this_thread::sleep_for(50ms);  // the SUBSCRIBE is written, its confirmation owed
  subscriber.interest(channel, false);
  std::this_thread::sleep_for(50ms);
  server.resume();
  RedisAdmin admin(server);
  ASSERT_TRUE(wait_until([&] {
    const auto reply = admin.array({"PUBSUB", "NUMSUB", channel});
    return reply.size() == 2 && reply[1] == "0";
  }, 2s));
  std::this_thread::sleep_for(50ms);  // both confirmations have been read
  EXPECT_FALSE(subscriber.await_subscribed(channel, Clock::now() + 200ms))
      << "reported subscribed while the server has no subscription";
}

// Finding: fencing across a failover depended on the promoted server's clock alone (the
// token is max(counter + 1, server time in us), and the counter may not have reached the
// replica). The holder's renewals now raise the counter to its token, as Redlock's do: here
// the server lost both the lock and the counter, as a replica promoted too early would.
TEST_F(SingleNode, ARenewalRaisesTheTokenCounterOfAServerThatLostItToTheLeasesToken) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("fenced-failover", settings(600ms));
  ASSERT_TRUE(lease);
  const internal::LockKeys keys = internal::lock_keys(unique_service(), "fenced-failover");
  RedisAdmin admin(server);
  admin.command({"DEL", keys.lock, keys.fence});
  ASSERT_TRUE(wait_until([&] { return lease.lost(); }, 2s)) << "the renewal did not find the key gone";
  const auto counter = admin.string({"GET", keys.fence});
  ASSERT_TRUE(counter.has_value()) << "the renewal left the server without a token counter";
  EXPECT_GE(std::stoull(*counter), lease.token());
}

// A grant's token is past the lock's counter and never below the server clock in us. The
// script compares the two as text, without reading the counter as a number: a counter ahead of
// the clock, a shorter one and garbage (taken for none) each take their path.
TEST_F(SingleNode, AGrantsTokenIsPastTheCounterAndNotBelowTheServerClock) {
  Client client(single_node_config(server));
  const internal::LockKeys keys = internal::lock_keys(unique_service(), "counted");
  RedisAdmin admin(server);
  const auto clock_us = [] {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
  };
  const std::uint64_t hour_ahead = clock_us() + 3600ull * 1000000;
  const std::uint64_t far_ahead = 9007199254740000ull;  // year 2255, still exact as a double
  for (const std::uint64_t counter : {hour_ahead, far_ahead}) {
    admin.command({"SET", keys.fence, std::to_string(counter)});
    Lease lease = client.acquire("counted", settings(5s));
    ASSERT_TRUE(lease) << lease.error();
    EXPECT_EQ(lease.token(), counter + 1);
    EXPECT_EQ(admin.string({"GET", keys.fence}), std::to_string(counter + 1));
  }
  // A lease of several keys takes each key's token from its own counter.
  const internal::LockKeys other = internal::lock_keys(unique_service(), "counted-too");
  admin.command({"SET", keys.fence, std::to_string(hour_ahead + 10)});
  admin.command({"DEL", other.fence});
  {
    const std::uint64_t before = clock_us();
    Lease both = client.acquire(std::vector<Key>{"counted", "counted-too"}, settings(5s));
    ASSERT_TRUE(both) << both.error();
    EXPECT_EQ(admin.string({"GET", keys.fence}), std::to_string(hour_ahead + 11));
    const auto fresh = std::stoull(admin.string({"GET", other.fence}).value_or("0"));
    EXPECT_GE(fresh + 5000000, before);
    EXPECT_LE(fresh, clock_us() + 5000000);
  }
  for (const std::string counter : {"42", "not a number", ""}) {
    admin.command({"SET", keys.fence, counter});
    const std::uint64_t before = clock_us();
    Lease lease = client.acquire("counted", settings(5s));
    ASSERT_TRUE(lease) << "counter '" << counter << "': " << lease.error();
    EXPECT_GE(lease.token() + 5000000, before) << "counter '" << counter << "'";  // 5 s of skew
    EXPECT_LE(lease.token(), clock_us() + 5000000) << "counter '" << counter << "'";
    EXPECT_EQ(admin.string({"GET", keys.fence}), std::to_string(lease.token()));
  }
}

TEST_F(SingleNode, ClientPauseTimesOutAndTheLateReplyLeavesNoLockBehind) {
  Config config = single_node_config(server);
  config.backends["default"].command_timeout = 200ms;
  Client client(config);
  ASSERT_TRUE(client.try_acquire("warm-up", settings(1s)));  // the request goes out on a live connection
  RedisAdmin admin(server);
  ASSERT_TRUE(admin.ok({"CLIENT", "PAUSE", "1000", "ALL"}));
  const auto start = Clock::now();
  Lease lease = client.acquire("paused", settings(30s, 5s));
  const auto took = elapsed_ms(start);
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_LE(took, 2 * 200 + 150);
  // Let the pause end and the queued request run; it must not leave a lock.
  std::this_thread::sleep_for(1300ms);
  RedisAdmin after(server);
  EXPECT_EQ(after.integer({"EXISTS", lock_key("paused")}), 0);
  EXPECT_TRUE(client.try_acquire("paused", settings(1s)));
}

TEST_F(SingleNode, AGrantThatArrivesAfterItsLeaseRanOutIsRefusedAndLeavesNoLock) {
  Config config = single_node_config(server);
  config.backends["default"].command_timeout = 2s;
  Client client(config);
  ASSERT_TRUE(client.try_acquire("warm-up", settings(1s)));  // the request goes out on a live connection
  pause_clients(700ms);
  Lease lease = client.acquire("late", settings(300ms));
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable)
      << "granted with " << lease.remaining().count() << "ms left";
  EXPECT_FALSE(lease.error().empty());
  RedisAdmin after(server);
  EXPECT_EQ(after.integer({"EXISTS", lock_key("late")}), 0);
  Client other(single_node_config(server));
  EXPECT_TRUE(other.try_acquire("late", settings(1s)));
}

TEST_F(SingleNode, ANestedAcquireIsRefusedWhileTheOuterLeaseHasNoTimeLeft) {
  Config config = single_node_config(server);
  config.backends["default"].command_timeout = 2s;
  Client client(config);
  Lease outer = client.acquire("nested", settings(300ms));
  ASSERT_TRUE(outer);
  // The renewal due at lease/3 waits behind the pause, past the end of the lease. The
  // watchdog does not wait for it to tell the holder: by now the lease is either marked
  // expired or (a moment before that) has no time left, and either refuses the nested hold.
  pause_clients(1200ms);
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(outer.remaining().count(), 0);
  Lease inner = client.try_acquire("nested", settings(300ms));
  EXPECT_EQ(inner.status(), AcquireStatus::kBusy);
  const bool no_time_left = inner.error().find("no time left") != std::string::npos;
  const bool was_lost = inner.error().find("was lost") != std::string::npos;
  EXPECT_TRUE(no_time_left || was_lost) << inner.error();
  EXPECT_TRUE(outer.lost()) << "the renewal stuck behind the pause kept the holder from being told";
  EXPECT_EQ(outer.view().loss_reason(), LossReason::kExpired);
}

// A call whose reply is lost after the server applied it is sent again (pool, cluster and
// sentinel retries). What the retry finds must be read with that in mind.
class RetriedCall : public SingleNode {
 protected:
  void SetUp() override {
    SingleNode::SetUp();
    config_ = single_node_config(server).backends["default"];
    pool_ = std::make_unique<internal::ConnectionPool>(Endpoint{server.host(), server.port()}, config_);
    // One idle connection, so that the first attempt below runs on a reused one.
    ASSERT_TRUE(pool_->run([](internal::Connection& conn) { return conn.command({"PING"}); }).ok());
  }

  // Runs `first` (whose reply then goes missing, as if the connection broke), then `retry`.
  internal::Reply applied_then_retried(const internal::ScriptCall& first,
                                       const internal::ScriptCall& retry) {
    int attempt = 0;
    return pool_->run([&](internal::Connection& conn) {
      if (attempt++ > 0) return retry.run(conn);
      (void)first.run(conn);
      conn.abandon();  // the socket failed before the reply was read
      return internal::Reply::failed(internal::Reply::Status::kBroken, "the reply was lost");
    });
  }

  internal::GrantRequest request(const Key& key, std::string_view owner) {
    return internal::GrantRequest{key, owner, 30s, "retried", Clock::now() + 1s};
  }

  const internal::LockKeys keys_ = internal::lock_keys(unique_service(), "retried");
  BackendConfig config_;
  std::unique_ptr<internal::ConnectionPool> pool_;
};

TEST_F(RetriedCall, AnUnreadableReplyOnAConnectionStillInStepIsNotRunAgain) {
  // A force release whose reply the caller cannot read: running it again would find the key
  // gone and report "nothing removed" for a lock the first run deleted.
  int runs = 0;
  const internal::Reply reply = pool_->run([&](internal::Connection& conn) {
    ++runs;
    (void)conn.command({"INCR", keys_.lock + ":runs"});
    return internal::Reply::failed(internal::Reply::Status::kBroken, "unexpected reply");
  });
  EXPECT_EQ(reply.status(), internal::Reply::Status::kBroken);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(RedisAdmin(server).integer({"INCRBY", keys_.lock + ":runs", "0"}), 1);
}

TEST_F(RetriedCall, ALateRetryOfAnAcquireThatHadBeenAppliedLeavesNoLockBehind) {
  const Key key("retried");
  const auto ours = request(key, "owner-1");
  // The retry reaches the server after the caller's not-after time (1 us past the epoch).
  const internal::GrantReply grant = internal::grant_of(applied_then_retried(
      internal::acquire_call(keys_, ours, 30s, 0), internal::acquire_call(keys_, ours, 30s, 1)));
  RedisAdmin admin(server);
  const bool nothing_held = admin.integer({"EXISTS", keys_.lock}) == 0;
  EXPECT_EQ(grant.kind, internal::GrantReply::Kind::kUnavailable);
  EXPECT_TRUE(nothing_held || grant.outcome_unknown)
      << "'nothing was taken', yet the first attempt's key is held for "
      << admin.integer({"PTTL", keys_.lock}) << "ms by nobody";
}

TEST_F(RetriedCall, ABusyAnswerAfterABrokenAttemptLeavesTheOutcomeUnknown) {
  const Key key("retried");
  const auto ours = request(key, "owner-1");
  const auto theirs = request(key, "owner-2");
  // The first attempt may have been applied for all the caller knows; here another owner
  // took the key in between, so the retry answers busy.
  const internal::GrantReply grant = internal::grant_of(applied_then_retried(
      internal::acquire_call(keys_, theirs, 30s, 0), internal::acquire_call(keys_, ours, 30s, 0)));
  EXPECT_EQ(grant.kind, internal::GrantReply::Kind::kBusy);
  EXPECT_TRUE(grant.outcome_unknown);
}

TEST_F(RetriedCall, ARetriedReleaseThatHadBeenAppliedCountsAsReleased) {
  const Key key("retried");
  const auto ours = request(key, "owner-1");
  ASSERT_EQ(internal::grant_of(pool_->run([&](internal::Connection& conn) {
              return internal::acquire_call(keys_, ours, 30s, 0).run(conn);
            })).kind,
            internal::GrantReply::Kind::kAcquired);
  const auto release = internal::release_call(keys_, "owner-1", 0ms);
  EXPECT_EQ(internal::release_outcome_of(applied_then_retried(release, release)),
            internal::ReleaseOutcome::kReleased);
}

TEST_F(SingleNode, ScriptFlushIsRecoveredForAcquireRenewAndRelease) {
  Client client(single_node_config(server));
  RedisAdmin admin(server);
  ASSERT_TRUE(client.try_acquire("warm", settings(1s)));
  Lease lease = client.acquire("flushed", settings(300ms));
  ASSERT_TRUE(lease);
  ASSERT_TRUE(admin.ok({"SCRIPT", "FLUSH"}));
  std::this_thread::sleep_for(400ms);  // renewals happen after the flush
  EXPECT_FALSE(lease.lost());
  EXPECT_GE(client.metrics().renewals, 1u);
  ASSERT_TRUE(admin.ok({"SCRIPT", "FLUSH"}));
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  ASSERT_TRUE(admin.ok({"SCRIPT", "FLUSH"}));
  EXPECT_TRUE(client.try_acquire("flushed", settings(1s)));
}

TEST_F(SingleNode, AwkwardKeysAreHeldAndNeverCollide) {
  Client client(single_node_config(server));
  const std::string binary("a\0b\xff\n", 5);
  const std::vector<std::string> keys = {"",      std::string(1 << 20, 'k'), binary, "{",
                                         "}",     ":",   "{}",   "a:b", "a}b", "a{b", "a%3Ab",
                                         "{a}:b", "a:{b}"};
  std::vector<Lease> leases;
  for (const auto& key : keys) {
    leases.push_back(client.acquire(key, settings(5s)));
    ASSERT_TRUE(leases.back()) << "key of " << key.size() << " bytes: " << leases.back().error();
    EXPECT_EQ(leases.back().key().str(), key);
  }
  // Another owner is refused on every one of them.
  Client other(single_node_config(server));
  for (const auto& key : keys) {
    EXPECT_EQ(other.try_acquire(key, settings(5s)).status(), AcquireStatus::kBusy);
  }
  for (auto& lease : leases) EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
}

TEST_F(SingleNode, ServiceNamespacesNeverCollide) {
  Config a = single_node_config(server);
  a.service = "x";
  Config b = single_node_config(server);
  b.service = "x:a";
  Client ca(a), cb(b);
  Lease la = ca.acquire("a:b", settings(5s));
  Lease lb = cb.acquire("b", settings(5s));
  EXPECT_TRUE(la);
  EXPECT_TRUE(lb);
}

TEST_F(SingleNode, LockStoresOwnerMetadataForTools) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("meta", settings(5s), "shop::place_order");
  ASSERT_TRUE(lease);
  RedisAdmin admin(server);
  const auto key = lock_key("meta");
  EXPECT_EQ(admin.string({"HGET", key, "name"}), "shop::place_order");
  EXPECT_EQ(admin.string({"HGET", key, "token"}), std::to_string(lease.token()));
  EXPECT_EQ(admin.string({"HGET", key, "pid"}), std::to_string(::getpid()));
  EXPECT_TRUE(admin.string({"HGET", key, "host"}).has_value());
  EXPECT_TRUE(admin.string({"HGET", key, "thread"}).has_value());
  EXPECT_TRUE(admin.string({"HGET", key, "acquired_at_ms"}).has_value());
  const auto owner = admin.string({"HGET", key, "owner"}).value_or("");
  EXPECT_GE(owner.find(':'), 32u) << "owner ids carry 128 random bits: " << owner;
}

TEST_F(SingleNode, AServerDyingUnderLargeWritesNeverKillsTheClientWithSigpipe) {
  ConfigFile config(server, unique_service());
  ChildProcess worker({worker_program(), config.path(), "churn", std::to_string(4 << 20), "4"});
  ASSERT_EQ(worker.read_line(10s).value_or(""), "started");
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(150ms);
    server.kill();
    std::this_thread::sleep_for(50ms);
    server.start();
  }
  const auto last = worker.read_line(15s).value_or("");
  EXPECT_TRUE(last.starts_with("done")) << last;
  EXPECT_EQ(worker.wait(5s), 0) << "128 + 13 means SIGPIPE";
}

TEST_F(SingleNode, RenewalFailureWhileTheServerIsDownEndsInExpiry) {
  Client client(single_node_config(server));
  Lease lease = client.acquire("down", settings(600ms));
  ASSERT_TRUE(lease);
  server.stop();
  std::atomic<bool> lost{false};
  lease.view().on_lost([&](const LeaseView&) { lost = true; });
  EXPECT_TRUE(wait_until([&] { return lost.load(); }, 2s, 5ms));
  EXPECT_EQ(lease.view().loss_reason(), LossReason::kExpired);
  EXPECT_GE(client.metrics().renewal_failures, 1u);
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
}

// A master whose connection pool the test shares, so that it can hold connections the way
// acquirers waiting on WAIT or a slow server do.
class SharedPoolMaster final : public internal::MasterLocator {
 public:
  explicit SharedPoolMaster(std::shared_ptr<internal::ConnectionPool> pool) : pool_(std::move(pool)) {}
  Master current(Clock::time_point) override { return {pool_, 0, {}}; }
  Master relocate(std::uint64_t, Clock::time_point) override { return {pool_, 0, {}}; }
  std::shared_ptr<internal::ConnectionPool> known() override { return pool_; }
  void set_listener(Listener) override {}

 private:
  const std::shared_ptr<internal::ConnectionPool> pool_;
};

// Acquirers hold every connection of the pool (pool_size of them, each for longer than the
// command timeout, as acquires waiting on WAIT do under contention). The watchdog's renewal
// must not queue behind them: renewals have a connection of their own.
TEST_F(SingleNode, ARenewalIsSentWhileAcquirersHoldEveryPooledConnection) {
  BackendConfig config = single_node_config(server).backends["default"];
  config.pool_size = 2;
  auto pool = std::make_shared<internal::ConnectionPool>(Endpoint{server.host(), server.port()}, config);
  internal::Engine engine = internal::make_master_backend(
      config, unique_service(), std::make_shared<internal::Metrics>(),
      std::make_unique<SharedPoolMaster>(pool));
  const Key key("renewed-under-contention");
  const internal::GrantReply grant = engine.lock->acquire(
      internal::GrantRequest{key, "holder", 2s, "contended", Clock::now() + 500ms});
  ASSERT_EQ(grant.kind, internal::GrantReply::Kind::kAcquired) << grant.error;

  std::string error;
  std::vector<internal::ConnectionPool::Handle> held;
  for (int i = 0; i < config.pool_size; ++i) {
    held.push_back(pool->take(Clock::now() + 500ms, error));
    ASSERT_TRUE(held.back()) << error;
  }
  std::vector<internal::RenewItem> items{internal::RenewItem{&key, "holder", 10s}};
  engine.lock->renew(items);
  EXPECT_EQ(items[0].outcome, internal::RenewOutcome::kRenewed)
      << "the renewal waited for a pooled connection and gave up";
  RedisAdmin admin(server);
  EXPECT_GT(admin.integer({"PTTL", internal::lock_keys(unique_service(), key.str()).lock}), 5000)
      << "the key was not extended";
  // Acquirers still share the pool as before: its size is theirs.
  const internal::Reply other = pool->run([](internal::Connection& conn) { return conn.command({"PING"}); });
  EXPECT_FALSE(other.ok()) << "an acquirer got a connection beyond pool_size";
}

// Two backends, one stalled (SIGSTOP: connections are accepted, nothing is answered) for
// longer than the lease of the other's holder. Renewals on the healthy backend must not wait
// behind the stalled one's: its lease stays held and its key never expires on the server.
TEST(BackendIsolation, ABackendStoppedLongerThanALeaseDoesNotDelayRenewalsOnAnother) {
  RedisServer stalled_server;
  RedisServer healthy_server;
  stalled_server.start();
  healthy_server.start();
  Config config = single_node_config(healthy_server);
  config.backends["default"].name = "healthy";
  config.backends["healthy"] = config.backends["default"];
  config.backends.erase("default");
  BackendConfig stalled = config.backends["healthy"];
  stalled.name = "stalled";
  stalled.endpoints = {Endpoint{stalled_server.host(), stalled_server.port()}};
  stalled.command_timeout = 1s;  // each call to the stopped server costs a whole second
  config.backends["stalled"] = stalled;
  Client client(config);

  LockSettings on_stalled = settings(5s);
  on_stalled.backend = "stalled";
  LockSettings on_healthy = settings(900ms);
  on_healthy.backend = "healthy";
  Lease stalled_lease = client.acquire("on-the-stalled-backend", on_stalled);
  ASSERT_TRUE(stalled_lease) << stalled_lease.error();
  Lease healthy_lease = client.acquire("on-the-healthy-backend", on_healthy, "healthy");
  ASSERT_TRUE(healthy_lease) << healthy_lease.error();
  std::atomic<bool> told_lost{false};
  healthy_lease.view().on_lost([&](const LeaseView&) { told_lost = true; });

  stalled_server.pause();
  struct Resume {
    RedisServer& server;
    ~Resume() {
      if (server.paused()) server.resume();
    }
  } resume{stalled_server};
  // Acquires that time out on the stalled server leave clean-ups behind, as in production.
  for (int i = 0; i < 3; ++i) {
    LockSettings timed_out = on_stalled;
    timed_out.lease = 2s;
    EXPECT_FALSE(client.try_acquire("timed-out-" + std::to_string(i), timed_out));
  }
  RedisAdmin admin(healthy_server);
  const std::string key = internal::lock_keys(unique_service(), "on-the-healthy-backend").lock;
  long long lowest_ttl = 1'000'000;
  const auto stalled_until = Clock::now() + 3s;  // three times the healthy lease
  while (Clock::now() < stalled_until && !told_lost) {
    lowest_ttl = std::min(lowest_ttl, admin.integer({"PTTL", key}));
    std::this_thread::sleep_for(20ms);
  }
  stalled_server.resume();
  for (const auto& m : client.metrics().by_name) {
    if (m.name != "healthy") continue;
    std::printf("[ measure ] two single backends, one stopped for 3 s (command_timeout 1 s, 3 acquires "
                "timed out on it): the 900 ms lease on the other: lowest TTL %lld ms, renewal lag max "
                "%llu ms, p99 <= %llu ms\n",
                lowest_ttl, static_cast<unsigned long long>(m.renewal_lag.max_us / 1000),
                static_cast<unsigned long long>(m.renewal_lag.percentile_us(0.99) / 1000));
  }
  EXPECT_FALSE(told_lost.load()) << "on_lost ran for the lease on the healthy backend";
  EXPECT_FALSE(healthy_lease.lost()) << to_string(healthy_lease.view().loss_reason());
  EXPECT_GT(lowest_ttl, 0) << "the key on the healthy backend expired while the other stalled";
  EXPECT_EQ(healthy_lease.release(), ReleaseStatus::kReleased);
}

}  // namespace
}  // namespace dlock::test
