// Tests of the test harness itself: real processes start, answer, stop and leave nothing.
#include <errno.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_support.hpp"
#include "redis_process.hpp"
#include "tcp_proxy.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

using detail::process_state;

TEST(RedisServerTest, StartedServerAnswersPingOnLoopback) {
  RedisServer server;
  server.start();
  EXPECT_GT(server.port(), 0);
  EXPECT_GT(server.pid(), 0);
  EXPECT_EQ(server.host(), "127.0.0.1");
  EXPECT_EQ(server.address(), "redis://127.0.0.1:" + std::to_string(server.port()));
  RedisAdmin admin(server);
  EXPECT_EQ(admin.command({"PING"}), "PONG");
  EXPECT_EQ(admin.info_field("server", "process_id"), std::to_string(server.pid()));
}

TEST(RedisServerTest, StopLeavesNoProcess) {
  RedisServer server;
  server.start();
  const pid_t pid = server.pid();
  ASSERT_TRUE(process_exists(pid));
  server.stop();
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
  EXPECT_EQ(server.pid(), -1);
  EXPECT_FALSE(server.running());
}

TEST(RedisServerTest, KillLeavesNoProcessAndStartComesBackOnTheSamePort) {
  RedisServer server;
  server.start();
  const int port = server.port();
  const pid_t pid = server.pid();
  server.kill();
  EXPECT_FALSE(process_exists(pid));
  server.start();
  EXPECT_EQ(server.port(), port);
  EXPECT_TRUE(RedisAdmin(server).ping());
}

TEST(RedisServerTest, DestructorStopsTheProcessAndRemovesItsDirectory) {
  pid_t pid = -1;
  std::filesystem::path dir;
  {
    RedisServer server;
    server.start();
    pid = server.pid();
    dir = server.dir();
    EXPECT_TRUE(std::filesystem::exists(dir / "redis.conf"));
  }
  EXPECT_FALSE(process_exists(pid));
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(live_child_pids().empty());
}

TEST(RedisServerTest, RestartEmptyKeepsThePortAndDropsTheData) {
  RedisServer server;
  server.start();
  const int port = server.port();
  const pid_t old_pid = server.pid();
  RedisAdmin admin(server);
  ASSERT_TRUE(admin.ok({"SET", "key", "value"}));
  ASSERT_EQ(admin.integer({"DBSIZE"}), 1);

  server.restart_empty();

  EXPECT_EQ(server.port(), port);
  EXPECT_NE(server.pid(), old_pid);
  EXPECT_FALSE(process_exists(old_pid));
  EXPECT_EQ(admin.integer({"DBSIZE"}), 0);  // the admin reconnects by itself
  EXPECT_EQ(admin.string({"GET", "key"}), std::nullopt);
}

// Options::clock_step: the time the server reads moves with step_clock, forward and back,
// keys expire by it, and the offset survives a restart, as a machine's clock would.
TEST(RedisServerTest, AClockStepMovesTimeScriptTimeAndKeyExpiry) {
  RedisServerOptions options;
  options.clock_step = true;
  RedisServer server(options);
  server.start();
  RedisAdmin admin(server);
  const auto server_s = [&](const std::vector<std::string>& argv) {
    return std::stoll(admin.array(argv).at(0));
  };
  const auto real_s = [] {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(now).count());
  };
  const std::vector<std::string> script_time{"EVAL", "return redis.call('TIME')", "0"};
  EXPECT_NEAR(server_s({"TIME"}), real_s(), 1);
  ASSERT_TRUE(admin.ok({"SET", "short", "v", "PX", "5000"}));
  ASSERT_TRUE(admin.ok({"SET", "long", "v", "PX", "60000"}));

  server.step_clock(10s);
  EXPECT_EQ(server.clock_offset(), 10s);
  EXPECT_NEAR(server_s({"TIME"}), real_s() + 10, 1);
  EXPECT_NEAR(server_s(script_time), real_s() + 10, 1);
  EXPECT_EQ(admin.string({"GET", "short"}), std::nullopt)
      << "past its expiry on the server's clock";
  const long long stepped_ttl = admin.integer({"PTTL", "long"});
  EXPECT_GT(stepped_ttl, 45'000);
  EXPECT_LE(stepped_ttl, 50'000);

  server.step_clock(-15s);
  EXPECT_NEAR(server_s({"TIME"}), real_s() - 5, 1);
  EXPECT_NEAR(server_s(script_time), real_s() - 5, 1);
  EXPECT_GT(admin.integer({"PTTL", "long"}), 60'000) << "a step back makes a key live longer";

  server.restart_empty();
  EXPECT_EQ(server.clock_offset(), -5s);
  EXPECT_NEAR(server_s({"TIME"}), real_s() - 5, 1);
}

TEST(RedisServerTest, StepClockNeedsTheClockStepOption) {
  RedisServer server;
  server.start();
  EXPECT_THROW(server.step_clock(1s), std::logic_error);
}

TEST(RedisServerTest, PausedServerTimesOutAndResumedServerAnswers) {
  RedisServer server;
  server.start();
  RedisAdmin admin(server, 300ms);
  ASSERT_TRUE(admin.ping());

  server.pause();
  EXPECT_TRUE(server.paused());
  const auto before = std::chrono::steady_clock::now();
  EXPECT_THROW(admin.command({"PING"}), RedisIoError);
  EXPECT_LT(std::chrono::steady_clock::now() - before, 3s);
  EXPECT_FALSE(admin.ping());

  server.resume();
  EXPECT_FALSE(server.paused());
  EXPECT_TRUE(admin.ping());
}

TEST(RedisServerTest, StopEndsAPausedServer) {
  RedisServer server;
  server.start();
  const pid_t pid = server.pid();
  server.pause();
  server.stop();
  EXPECT_FALSE(process_exists(pid));
}

TEST(RedisServerTest, ServerStartedFromAShortLivedThreadOutlivesTheThread) {
  RedisServer server;
  std::thread([&] { server.start(); }).join();
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(server.running());
  EXPECT_TRUE(RedisAdmin(server).ping());
}

TEST(RedisServerTest, ExtraConfigLinesReachTheServer) {
  RedisServer::Options options;
  options.extra_config = {"maxmemory-policy allkeys-lru"};
  options.password = "s3cret";
  RedisServer server(options);
  server.start();
  RedisAdmin admin(server);
  EXPECT_THROW(admin.command({"GET", "k"}), RedisError);
  admin.set_auth("", "s3cret");
  EXPECT_EQ(admin.array({"CONFIG", "GET", "maxmemory-policy"}),
            (std::vector<std::string>{"maxmemory-policy", "allkeys-lru"}));
  EXPECT_EQ(admin.array({"CONFIG", "GET", "save"}), (std::vector<std::string>{"save", ""}));
}

TEST(RedisServerTest, TwoServersGetDistinctPorts) {
  RedisServer first;
  RedisServer second;
  first.start();
  second.start();
  EXPECT_NE(first.port(), second.port());
  RedisAdmin a(first);
  RedisAdmin b(second);
  ASSERT_TRUE(a.ok({"SET", "only-in-first", "1"}));
  EXPECT_EQ(b.integer({"EXISTS", "only-in-first"}), 0);
}

TEST(RedisServerTest, ServerCanBeMovedIntoAContainer) {
  std::vector<RedisServer> servers;
  servers.emplace_back();
  servers.emplace_back();
  for (auto& server : servers) server.start();
  for (auto& server : servers) EXPECT_TRUE(RedisAdmin(server).ping());
}

TEST(RedisServerTest, SentinelModeStartsAndAnswersPing) {
  RedisServer master;
  master.start();
  RedisServer::Options options;
  options.mode = RedisServer::Options::Mode::sentinel;
  options.name = "sentinel";
  options.extra_config = {"sentinel monitor mymaster 127.0.0.1 " + std::to_string(master.port()) +
                          " 1"};
  RedisServer sentinel(options);
  sentinel.start();
  RedisAdmin admin(sentinel);
  EXPECT_TRUE(admin.ping());
  EXPECT_EQ(admin.info_field("server", "redis_mode"), "sentinel");
  EXPECT_EQ(admin.array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", "mymaster"}),
            (std::vector<std::string>{"127.0.0.1", std::to_string(master.port())}));
}

TEST(RedisServerTest, ClusterNodeGetsItsOwnBusPort) {
  RedisServer::Options options;
  options.cluster = true;
  RedisServer node(options);
  node.start();
  EXPECT_GT(node.bus_port(), 0);
  EXPECT_NE(node.bus_port(), node.port());
  RedisAdmin admin(node);
  EXPECT_EQ(admin.info_field("cluster", "cluster_enabled"), "1");
}

TEST(RedisServerTest, FailedStartReportsTheLog) {
  RedisServer::Options options;
  options.extra_config = {"no-such-directive yes"};
  RedisServer server(options);
  try {
    server.start();
    FAIL() << "start() should have thrown";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("no-such-directive"), std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(server.running());
  EXPECT_TRUE(live_child_pids().empty());
}

TEST(RedisServerTest, FixedPortThatStaysTakenFailsWithAClearError) {
  RedisServer owner;
  owner.start();
  RedisServer::Options options;
  options.port = owner.port();
  RedisServer latecomer(options);
  try {
    latecomer.start();
    FAIL() << "start() on a taken port should have thrown";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("port taken"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(RedisAdmin(owner).ping());
  EXPECT_EQ(live_child_pids(), std::vector<pid_t>{owner.pid()});
}

TEST(RedisAdminTest, RepliesAreTypedAndErrorsCarryTheRedisText) {
  RedisServer server;
  server.start();
  RedisAdmin admin(server);
  const std::string binary("a\0b\r\nc", 6);
  EXPECT_TRUE(admin.ok({"SET", "bin", binary}));
  EXPECT_EQ(admin.string({"GET", "bin"}), binary);
  EXPECT_FALSE(admin.ok({"SET", "bin", "x", "NX"}));
  EXPECT_EQ(admin.integer({"INCR", "n"}), 1);
  EXPECT_EQ(admin.command({"INCR", "n"}), "2");
  EXPECT_EQ(admin.command({"GET", "missing"}), "(nil)");
  EXPECT_EQ(admin.integer({"RPUSH", "list", "x", "y"}), 2);
  EXPECT_EQ(admin.array({"LRANGE", "list", "0", "-1"}), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(admin.command({"LRANGE", "list", "0", "-1"}), "x\ny");
  try {
    admin.command({"INCR", "list"});
    FAIL() << "INCR on a list should fail";
  } catch (const RedisError& error) {
    EXPECT_NE(std::string(error.what()).find("WRONGTYPE"), std::string::npos) << error.what();
  }
  EXPECT_THROW(admin.integer({"GET", "n"}), std::runtime_error);
}

TEST(RedisAdminTest, UnreachableServerIsAnIoError) {
  const int port = free_loopback_port();  // nothing listens there
  RedisAdmin admin("127.0.0.1", port, 500ms);
  EXPECT_THROW(admin.command({"PING"}), RedisIoError);
  EXPECT_FALSE(admin.ping());
}

TEST(RedisAdminTest, ReconnectsAfterTheServerRestarts) {
  RedisServer server;
  server.start();
  RedisAdmin admin(server);
  ASSERT_TRUE(admin.ping());
  server.kill();
  EXPECT_THROW(admin.command({"PING"}), RedisIoError);  // and the test is not killed by SIGPIPE
  server.start();
  EXPECT_TRUE(admin.ping());
}

TEST(ChildProcessTest, ReadLineReturnsALine) {
  ChildProcess child({"echo", "hello"});
  EXPECT_EQ(child.read_line(5s), "hello");
  EXPECT_EQ(child.read_line(1s), std::nullopt);  // end of output
  EXPECT_EQ(child.wait(5s), 0);
}

TEST(ChildProcessTest, ReadLineTimesOutOnASilentChild) {
  ChildProcess child({"sleep", "5"});
  const auto before = std::chrono::steady_clock::now();
  EXPECT_EQ(child.read_line(200ms), std::nullopt);
  const auto waited = std::chrono::steady_clock::now() - before;
  EXPECT_GE(waited, 190ms);
  EXPECT_LT(waited, 2s);
  EXPECT_TRUE(child.running());
  const pid_t pid = child.pid();
  child.kill();
  EXPECT_FALSE(child.running());
  EXPECT_FALSE(process_exists(pid));
}

TEST(ChildProcessTest, WaitReportsExitCodeAndSignal) {
  ChildProcess exits({"sh", "-c", "echo partial; printf tail; exit 3"});
  EXPECT_EQ(exits.wait(5s), 3);
  EXPECT_EQ(exits.read_line(1s), "partial");
  EXPECT_EQ(exits.read_line(1s), "tail");

  ChildProcess sleeper({"sleep", "5"});
  EXPECT_EQ(sleeper.wait(50ms), std::nullopt);
  sleeper.signal(SIGTERM);
  EXPECT_EQ(sleeper.wait(5s), 128 + SIGTERM);
}

TEST(ChildProcessTest, EnvironmentOverridesReachTheChild) {
  ChildProcess child({"sh", "-c", "echo \"$DLOCK_SELFTEST_VALUE\""},
                     ChildOptions{{"DLOCK_SELFTEST_VALUE=from-test"}, false});
  EXPECT_EQ(child.read_line(5s), "from-test");
}

TEST(ChildProcessTest, MissingProgramThrows) {
  EXPECT_THROW(ChildProcess({"/nonexistent/dlock-no-such-program"}), std::runtime_error);
  EXPECT_TRUE(live_child_pids().empty());
}

TEST(ChildProcessTest, DestructorKillsTheChildAndItsGroup) {
  pid_t pid = -1;
  pid_t grandchild = -1;
  {
    ChildProcess child({"sh", "-c", "sleep 30 & echo $!; wait"});
    const auto line = child.read_line(5s);
    ASSERT_TRUE(line);
    grandchild = std::stoi(*line);
    pid = child.pid();
  }
  EXPECT_FALSE(process_exists(pid));
  EXPECT_TRUE(live_child_pids().empty());
  // The grandchild is not ours to reap: gone, or a zombie waiting for init, both count.
  EXPECT_TRUE(wait_until([&] { return !process_exists(grandchild) || process_state(grandchild) == 'Z'; },
                         5s));
}

TEST(RunCommandTest, CollectsOutputAndStatus) {
  const auto result = run_command({"sh", "-c", "echo out; echo err >&2; exit 2"}, 5s);
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(result.output, "out\nerr\n");
  EXPECT_THROW(run_command({"sleep", "5"}, 100ms), std::runtime_error);
  EXPECT_TRUE(live_child_pids().empty());
}

TEST(PortTest, FreeLoopbackPortIsBindable) {
  const int port = free_loopback_port();
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

TEST(TcpProxyTest, ForwardsHoldsDelaysAndResetsConnections) {
  RedisServer server;
  server.start();
  TcpProxy proxy(server.host(), server.port());
  RedisAdmin admin("127.0.0.1", proxy.port(), 300ms);
  ASSERT_TRUE(admin.ping());

  proxy.blackhole();
  EXPECT_THROW(admin.command({"PING"}), RedisIoError) << "a held request was answered";
  RedisAdmin newcomer("127.0.0.1", proxy.port(), 300ms);
  EXPECT_FALSE(newcomer.ping()) << "a new connection got through the blackhole";

  proxy.delay(150ms);
  const auto before = std::chrono::steady_clock::now();
  EXPECT_TRUE(admin.ping());
  EXPECT_GE(std::chrono::steady_clock::now() - before, 150ms);

  proxy.reset();
  EXPECT_FALSE(admin.ping());
  proxy.pass();
  EXPECT_TRUE(admin.ping());
  proxy.stop();
  EXPECT_FALSE(admin.ping());
}

}  // namespace
}  // namespace dlock::test
