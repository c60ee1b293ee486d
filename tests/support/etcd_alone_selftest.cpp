// Tests of the harness's etcd clusters that need one of their own: nothing runs before
// start(), a start that fails says why and leaves nothing running, and no etcd process outlives
// its cluster: destroyed, or with the test program killed by SIGKILL. Run as
// `dlock_etcd_selftest --hold`, the program is the holder the last test kills.
#include <signal.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "etcd_cluster.hpp"
#include "process_support.hpp"
#include "redis_process.hpp"
#include "selftest_support.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using namespace selftest;
using detail::process_state;

TEST(EtcdClusterAloneTest, WithoutAStartNothingRunsAndTheClientFailsClearly) {
  EtcdCluster etcd;
  EXPECT_TRUE(etcd.endpoints().empty());
  EXPECT_EQ(etcd.endpoint(0), "");
  EXPECT_EQ(etcd.client_port(0), 0);
  EXPECT_EQ(etcd.pid(0), -1);
  EXPECT_EQ(etcd.member_id(0), 0u);
  EXPECT_TRUE(etcd.dir().empty());
  EXPECT_THROW(etcd.start_member(0), std::logic_error);
  EXPECT_THROW(etcd.wait_serving(1s), std::logic_error);
  EXPECT_THROW((void)etcd.proxy(0), std::logic_error);
  etcd.stop_all();  // no-op

  const int port = free_loopback_port();  // nothing listens there
  const auto before = Clock::now();
  try {
    EtcdClient("http://127.0.0.1:" + std::to_string(port), 500ms).put("k", "v");
    FAIL() << "a client with no server should throw";
  } catch (const EtcdError& error) {
    EXPECT_NE(std::string(error.what()).find(std::to_string(port)), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("Put"), std::string::npos) << error.what();
  }
  EXPECT_LT(Clock::now() - before, 3s);
  EXPECT_THROW(EtcdClient("https://127.0.0.1:1"), std::invalid_argument);
}

TEST(EtcdClusterAloneTest, AFailedStartReportsTheLogsAndLeavesNothingRunning) {
  EtcdClusterOptions options;
  options.extra_flags = {"--snapshot-count=not-a-number"};
  EtcdCluster etcd(options);
  const auto before = Clock::now();
  try {
    etcd.start();
    FAIL() << "start() with a broken flag should have thrown";
  } catch (const std::runtime_error& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("did not start"), std::string::npos) << what;
    EXPECT_NE(what.find("not-a-number"), std::string::npos) << "the log tail: " << what;
  }
  EXPECT_LT(Clock::now() - before, 30s);
  for (int i = 0; i < etcd.members(); ++i) EXPECT_FALSE(etcd.running(i));
  EXPECT_TRUE(live_child_pids().empty());

  options.extra_flags.clear();
  options.program = "/nonexistent/etcd";
  EtcdCluster missing(options);
  EXPECT_THROW(missing.start(), std::runtime_error);
  EXPECT_TRUE(live_child_pids().empty());
}

TEST(EtcdClusterAloneTest, DestroyingAClusterLeavesNoEtcdProcess) {
  std::vector<pid_t> pids;
  std::filesystem::path dir;
  {
    EtcdClusterOptions options;
    options.name = "etcd-destroyed";
    EtcdCluster etcd(options);
    const auto before = Clock::now();
    etcd.start();
    std::cout << "[   TIME   ] a second cluster's start " << ms_since(before) << " ms\n";
    for (int i = 0; i < etcd.members(); ++i) pids.push_back(etcd.pid(i));
    etcd.pause(1);  // a paused member goes too
    dir = etcd.dir();
  }
  for (const pid_t pid : pids) EXPECT_FALSE(in_proc(pid)) << pid;
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  EXPECT_TRUE(live_child_pids().empty());
}

// A test program killed by SIGKILL runs no destructor and no safety net: its members end by
// their parent-death signal, a paused one too.
TEST(EtcdClusterAloneTest, ATestProgramKilledBySigkillLeavesNoEtcd) {
  ChildProcess holder({"/proc/self/exe", "--hold"});
  const auto line = holding_line(holder, 30s);
  ASSERT_TRUE(line.has_value()) << holder.take_output();
  std::istringstream in(*line);
  pid_t running = -1;
  pid_t paused = -1;
  std::string dir;
  ASSERT_TRUE(in >> running >> paused >> dir) << *line;
  EXPECT_TRUE(in_proc(running));
  EXPECT_EQ(process_state(paused), 'T');

  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait(5s), 128 + SIGKILL);
  EXPECT_TRUE(all_ended({running, paused})) << *line;
  EXPECT_TRUE(std::filesystem::exists(dir)) << "nothing removed it";
  std::filesystem::remove_all(dir);
}

// The holder: a three-member cluster with member 1 paused; prints two pids and the directory,
// then waits to be killed.
int hold() {
  EtcdClusterOptions options;
  options.name = "etcd-holder";
  EtcdCluster etcd(options);
  etcd.start();
  etcd.pause(1);
  std::cout << "holding " << etcd.pid(0) << ' ' << etcd.pid(1) << ' ' << etcd.dir().string()
            << std::endl;
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
