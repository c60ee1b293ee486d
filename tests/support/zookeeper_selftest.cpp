// Tests of the harness's ZooKeeper ensemble: it starts with one leader, serves clients on every
// member, elects a new leader when the leader is killed and takes the old one back, carries on
// without a paused follower, keeps its data across stop_all and start, and leaves no process
// behind: stopped by pid, destroyed, or when the test program dies by SIGKILL.
//
// One ensemble serves the ZookeeperEnsembleTest suite (JVM start-up is slow); each test starts
// with all members running and a quorum serving. Run as `dlock_zookeeper_selftest --hold`, the
// program is the holder the last test kills.
#include <signal.h>
#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_support.hpp"
#include "redis_process.hpp"
#include "selftest_support.hpp"
#include "zookeeper_ensemble.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using namespace selftest;
using detail::process_state;

int count_mode(const ZookeeperEnsemble& zk, const std::string& wanted) {
  int n = 0;
  for (int i = 0; i < zk.members(); ++i) n += zk.mode(i) == wanted ? 1 : 0;
  return n;
}

int some_follower(const ZookeeperEnsemble& zk) {
  for (int i = 0; i < zk.members(); ++i) {
    if (zk.mode(i) == "follower") return i;
  }
  return -1;
}

// Reads on another member than the write may lag behind it (ZooKeeper orders each session's
// view, not all of them): bounded.
bool eventually_reads(ZookeeperClient& client, const std::string& path, const std::string& data) {
  return wait_until([&] { return client.get(path) == data; }, 5s);
}

class ZookeeperEnsembleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    zk_ = new ZookeeperEnsemble();
    const auto before = Clock::now();
    zk_->start();
    std::cout << "[   TIME   ] ensemble start (3 JVMs, election, all serving) " << ms_since(before)
              << " ms\n";
  }

  static void TearDownTestSuite() {
    std::vector<pid_t> pids;
    for (int i = 0; i < zk_->members(); ++i) pids.push_back(zk_->pid(i));
    const std::filesystem::path dir = zk_->dir();
    const auto before = Clock::now();
    delete zk_;
    zk_ = nullptr;
    std::cout << "[   TIME   ] ensemble destruction " << ms_since(before) << " ms\n";
    EXPECT_TRUE(all_ended(pids));
    EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
    EXPECT_TRUE(live_child_pids().empty());
  }

  // Whatever the test before left: every member running and unpaused, a quorum serving.
  void SetUp() override {
    ASSERT_NE(zk_, nullptr);
    for (int i = 0; i < zk_->members(); ++i) {
      if (zk_->paused(i)) zk_->resume(i);
      if (!zk_->running(i)) zk_->start_member(i);
    }
    zk_->wait_serving(30s);
  }

  static ZookeeperEnsemble* zk_;
};

ZookeeperEnsemble* ZookeeperEnsembleTest::zk_ = nullptr;

TEST_F(ZookeeperEnsembleTest, StartsOnFreePortsAndAClientWritesOnOneMemberAndReadsOnAnother) {
  ZookeeperEnsemble& zk = *zk_;
  ASSERT_EQ(zk.members(), 3);
  std::string expected;
  for (int i = 0; i < 3; ++i) {
    EXPECT_GT(zk.client_port(i), 0);
    EXPECT_GT(zk.pid(i), 0);
    EXPECT_TRUE(zk.running(i));
    EXPECT_TRUE(in_proc(zk.pid(i)));
    expected += (i == 0 ? "127.0.0.1:" : ",127.0.0.1:") + std::to_string(zk.client_port(i));
    const std::string config = detail::read_file(zk.member_dir(i) / "zoo.cfg");
    for (const char* line : {"tickTime=500\n", "syncLimit=5\n", "forceSync=no\n",
                             "standaloneEnabled=false\n", "admin.enableServer=false\n",
                             "minSessionTimeout=1000\n", "clientPortAddress=127.0.0.1\n"}) {
      EXPECT_NE(config.find(line), std::string::npos) << line << " in\n" << config;
    }
    EXPECT_EQ(detail::read_file(zk.member_dir(i) / "data" / "myid"), std::to_string(i + 1) + "\n");
    EXPECT_NE(detail::read_file(zk.log_file(i)).find("Peer state changed"), std::string::npos)
        << "the server's log goes to " << zk.log_file(i);
  }
  EXPECT_EQ(zk.connect_string(), expected);
  EXPECT_NE(zk.client_port(0), zk.client_port(1));
  const auto ruok = zookeeper_four_letter_word(zk.client_port(0), "ruok");
  EXPECT_EQ(ruok, "imok");

  ZookeeperClient writer(zk.endpoint(0));
  ZookeeperClient reader(zk.endpoint(1));
  EXPECT_NE(writer.session_id(), reader.session_id());
  EXPECT_EQ(writer.connected_to(), zk.endpoint(0));
  EXPECT_EQ(writer.create("/rw", "hello"), "/rw");
  EXPECT_TRUE(eventually_reads(reader, "/rw", "hello"));
  const auto stat = reader.exists("/rw");
  ASSERT_TRUE(stat.has_value());
  EXPECT_GT(stat->czxid, 0);
  EXPECT_EQ(stat->ephemeral_owner, 0);
  EXPECT_EQ(stat->data_length, 5);

  const std::string first = writer.create("/rw/lock-", "a", ZOO_EPHEMERAL_SEQUENTIAL);
  const std::string second = writer.create("/rw/lock-", "b", ZOO_EPHEMERAL_SEQUENTIAL);
  EXPECT_EQ(first, "/rw/lock-0000000000");
  EXPECT_EQ(second, "/rw/lock-0000000001");
  EXPECT_TRUE(wait_until([&] { return reader.children("/rw").size() == 2; }, 5s));
  EXPECT_EQ(reader.children("/rw"),
            (std::vector<std::string>{"lock-0000000000", "lock-0000000001"}));
  const auto owner = reader.exists(first);
  ASSERT_TRUE(owner.has_value());
  EXPECT_EQ(owner->ephemeral_owner, writer.session_id());

  reader.set("/rw", "changed");  // tampering from another session
  EXPECT_TRUE(eventually_reads(writer, "/rw", "changed"));
  EXPECT_TRUE(reader.remove(first));
  EXPECT_FALSE(reader.remove(first));
  EXPECT_EQ(reader.get(first), std::nullopt);
  EXPECT_EQ(reader.exists(first), std::nullopt);

  try {
    reader.create("/rw", "again");
    FAIL() << "creating an existing node should throw";
  } catch (const ZookeeperError& error) {
    EXPECT_EQ(error.code(), ZNODEEXISTS);
    EXPECT_NE(std::string(error.what()).find("/rw"), std::string::npos) << error.what();
  }
  EXPECT_THROW(reader.children("/no/such/node"), ZookeeperError);
  try {
    reader.remove("/rw");
    FAIL() << "removing a node with children should throw";
  } catch (const ZookeeperError& error) {
    EXPECT_EQ(error.code(), ZNOTEMPTY);
  }

  writer.close();  // its ephemeral nodes go with the session
  EXPECT_TRUE(wait_until([&] { return reader.children("/rw").empty(); }, 5s));
  EXPECT_THROW(writer.get("/rw"), ZookeeperError);
  EXPECT_TRUE(reader.remove("/rw"));
}

TEST_F(ZookeeperEnsembleTest, LeaderFindsExactlyOneLeader) {
  ZookeeperEnsemble& zk = *zk_;
  const int leader = zk.leader();
  ASSERT_GE(leader, 0) << zk.modes();
  EXPECT_EQ(zk.mode(leader), "leader");
  EXPECT_EQ(count_mode(zk, "leader"), 1) << zk.modes();
  EXPECT_EQ(count_mode(zk, "follower"), 2) << zk.modes();
  EXPECT_EQ(zk.wait_serving(1s), leader);
}

TEST_F(ZookeeperEnsembleTest, KillingTheLeaderElectsANewOneAndTheOldMemberRejoins) {
  ZookeeperEnsemble& zk = *zk_;
  ZookeeperClient client(zk.connect_string());
  client.create("/before-failover", "kept");
  const int old_leader = zk.leader();
  ASSERT_GE(old_leader, 0) << zk.modes();
  const pid_t old_pid = zk.pid(old_leader);

  auto before = Clock::now();
  zk.kill(old_leader);
  EXPECT_FALSE(in_proc(old_pid));
  EXPECT_EQ(zk.pid(old_leader), -1);
  EXPECT_EQ(zk.mode(old_leader), "down");
  const int new_leader = zk.wait_serving(30s);
  const auto election_ms = ms_since(before);
  EXPECT_NE(new_leader, old_leader);
  EXPECT_EQ(zk.leader(), new_leader);
  EXPECT_EQ(client.get("/before-failover"), "kept") << "the session moves to a living member";
  client.create("/during-failover", "x");

  before = Clock::now();
  zk.start_member(old_leader);
  const auto rejoin_ms = ms_since(before);
  EXPECT_TRUE(zk.running(old_leader));
  EXPECT_NE(zk.pid(old_leader), old_pid);
  EXPECT_EQ(zk.mode(old_leader), "follower") << zk.modes();
  EXPECT_EQ(zk.wait_serving(30s), new_leader);
  ZookeeperClient on_old(zk.endpoint(old_leader));
  EXPECT_TRUE(eventually_reads(on_old, "/during-failover", "x")) << "it caught up";
  EXPECT_EQ(on_old.get("/before-failover"), "kept") << "its own data survived the SIGKILL";
  client.remove("/before-failover");
  client.remove("/during-failover");
  std::cout << "[   TIME   ] leader killed -> new leader, quorum serving " << election_ms
            << " ms; old leader restarted -> follower " << rejoin_ms << " ms\n";
}

TEST_F(ZookeeperEnsembleTest, APausedFollowerAnswersNothingAndRejoinsWhenResumed) {
  ZookeeperEnsemble& zk = *zk_;
  const int follower = some_follower(zk);
  ASSERT_GE(follower, 0) << zk.modes();
  const int leader = zk.leader();
  ZookeeperClient on_leader(zk.endpoint(leader));

  zk.pause(follower);
  EXPECT_TRUE(zk.paused(follower));
  EXPECT_EQ(process_state(zk.pid(follower)), 'T');
  EXPECT_EQ(zk.mode(follower), "paused");
  auto before = Clock::now();
  EXPECT_EQ(zookeeper_four_letter_word(zk.client_port(follower), "srvr", 300ms), std::nullopt);
  EXPECT_LT(Clock::now() - before, 2s);
  EXPECT_THROW(ZookeeperClient(zk.endpoint(follower), 500ms), ZookeeperError)
      << "no session through a paused member";
  EXPECT_EQ(zk.wait_serving(5s), leader) << "two of three still serve";
  on_leader.create("/while-paused", "w");

  zk.resume(follower);
  EXPECT_FALSE(zk.paused(follower));
  EXPECT_NE(process_state(zk.pid(follower)), 'T');
  EXPECT_EQ(zk.wait_serving(30s), leader);
  EXPECT_TRUE(wait_until([&] { return zk.mode(follower) == "follower"; }, 30s)) << zk.modes();
  ZookeeperClient on_follower(zk.endpoint(follower));
  EXPECT_TRUE(eventually_reads(on_follower, "/while-paused", "w"));
  on_leader.remove("/while-paused");
}

TEST_F(ZookeeperEnsembleTest, StopByPidLeavesNoProcessBehind) {
  ZookeeperEnsemble& zk = *zk_;
  const int follower = some_follower(zk);
  ASSERT_GE(follower, 0) << zk.modes();
  const pid_t pid = zk.pid(follower);
  EXPECT_TRUE(detail::child_pids_of(pid).empty()) << "a JVM forks no helper";
  const auto live = live_child_pids();
  EXPECT_NE(std::find(live.begin(), live.end(), pid), live.end()) << "a registered child";

  const auto before = Clock::now();
  zk.stop(follower);
  const auto stop_ms = ms_since(before);
  EXPECT_FALSE(in_proc(pid));
  EXPECT_EQ(zk.pid(follower), -1);
  EXPECT_FALSE(zk.running(follower));
  EXPECT_EQ(zk.mode(follower), "down");
  const auto after = live_child_pids();
  EXPECT_EQ(std::find(after.begin(), after.end(), pid), after.end());
  EXPECT_FALSE(std::filesystem::exists("/tmp/hsperfdata_root/" + std::to_string(pid)));
  EXPECT_GE(zk.wait_serving(30s), 0) << "two of three serve";
  zk.stop(follower);  // no-op when down
  zk.kill(follower);

  // A paused member too: SIGTERM alone would stay pending.
  const int other = some_follower(zk);
  ASSERT_GE(other, 0) << zk.modes();
  const pid_t other_pid = zk.pid(other);
  zk.pause(other);
  zk.stop(other);
  EXPECT_FALSE(in_proc(other_pid));
  EXPECT_THROW(zk.wait_serving(1s), std::logic_error) << "one of three cannot serve";
  EXPECT_EQ(count_mode(zk, "down"), 2) << zk.modes();
  std::cout << "[   TIME   ] stop (SIGTERM) of a member " << stop_ms << " ms\n";
}

TEST_F(ZookeeperEnsembleTest, StopAllAndStartKeepPortsAndData) {
  ZookeeperEnsemble& zk = *zk_;
  {
    ZookeeperClient client(zk.connect_string());
    client.create("/survives", "restart");
  }
  const std::string hosts = zk.connect_string();
  std::vector<pid_t> pids;
  for (int i = 0; i < zk.members(); ++i) pids.push_back(zk.pid(i));
  zk.stop_all();
  for (const pid_t pid : pids) EXPECT_FALSE(in_proc(pid)) << pid;
  EXPECT_EQ(count_mode(zk, "down"), 3);
  EXPECT_THROW(zk.start_member(3), std::out_of_range);

  const auto before = Clock::now();
  zk.start();
  std::cout << "[   TIME   ] ensemble restart with its data " << ms_since(before) << " ms\n";
  EXPECT_EQ(zk.connect_string(), hosts);
  EXPECT_EQ(count_mode(zk, "leader"), 1) << zk.modes();
  EXPECT_THROW(zk.start(), std::logic_error);
  ZookeeperClient client(zk.connect_string());
  EXPECT_EQ(client.get("/survives"), "restart");
  client.remove("/survives");
}

TEST(ZookeeperEnsembleAloneTest, WithoutAStartNothingRunsAndTheClientFailsClearly) {
  ZookeeperEnsemble zk;
  EXPECT_EQ(zk.connect_string(), "");
  EXPECT_EQ(zk.client_port(0), 0);
  EXPECT_EQ(zk.pid(0), -1);
  EXPECT_TRUE(zk.dir().empty());
  EXPECT_THROW(zk.start_member(0), std::logic_error);
  zk.stop_all();  // no-op

  const int port = free_loopback_port();  // nothing listens there
  const auto before = Clock::now();
  try {
    ZookeeperClient client("127.0.0.1:" + std::to_string(port), 500ms);
    FAIL() << "a client with no server should throw";
  } catch (const ZookeeperError& error) {
    EXPECT_EQ(error.code(), ZOPERATIONTIMEOUT);
    EXPECT_NE(std::string(error.what()).find(std::to_string(port)), std::string::npos)
        << error.what();
  }
  EXPECT_LT(Clock::now() - before, 5s);
}

TEST(ZookeeperEnsembleAloneTest, AFailedStartReportsTheLogsAndLeavesNothingRunning) {
  ZookeeperEnsemble::Options options;
  options.extra_config = {"syncLimit=not-a-number"};
  ZookeeperEnsemble zk(options);
  const auto before = Clock::now();
  try {
    zk.start();
    FAIL() << "start() with a broken zoo.cfg should have thrown";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("did not start"), std::string::npos) << what;
    EXPECT_NE(what.find("not-a-number"), std::string::npos) << "the log tail: " << what;
  }
  EXPECT_LT(Clock::now() - before, 30s);
  for (int i = 0; i < zk.members(); ++i) EXPECT_FALSE(zk.running(i));
  EXPECT_TRUE(live_child_pids().empty());
}

// A test program killed by SIGKILL runs no destructor and no safety net: its members end by
// their parent-death signal, a paused one too.
TEST(ZookeeperEnsembleAloneTest, ATestProgramKilledBySigkillLeavesNoZookeeper) {
  ChildProcess holder({"/proc/self/exe", "--hold"});
  const auto line = holding_line(holder, 60s);
  ASSERT_TRUE(line.has_value()) << holder.take_output();
  std::istringstream in(*line);
  pid_t running = -1;
  pid_t paused = -1;
  std::string first_dir;
  std::string second_dir;
  ASSERT_TRUE(in >> running >> paused >> first_dir >> second_dir) << *line;
  EXPECT_TRUE(in_proc(running));
  EXPECT_EQ(process_state(paused), 'T');

  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait(5s), 128 + SIGKILL);
  EXPECT_TRUE(all_ended({running, paused})) << *line;
  for (const auto& dir : {first_dir, second_dir}) {
    EXPECT_TRUE(std::filesystem::exists(dir)) << "nothing removed it";
    std::filesystem::remove_all(dir);
  }
}

// The holder: two one-member ensembles, the second paused; prints their pids and directories,
// then waits to be killed.
int hold() {
  ZookeeperEnsemble::Options options;
  options.members = 1;
  options.name = "zookeeper-holder";
  ZookeeperEnsemble first(options);
  ZookeeperEnsemble second(options);
  first.start();
  second.start();
  second.pause(0);
  std::cout << "holding " << first.pid(0) << ' ' << second.pid(0) << ' ' << first.dir().string()
            << ' ' << second.dir().string() << std::endl;
  std::this_thread::sleep_for(120s);
  return 1;
}

}  // namespace
}  // namespace dlock::test

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--hold") == 0) return dlock::test::hold();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
