// Tests of the harness's PostgreSQL server: it starts, answers SQL, stalls when paused, comes
// back with its data after a crash, and leaves no process behind, even when the test program
// dies by SIGKILL.
#include <errno.h>
#include <signal.h>
#include <sys/shm.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "postgres_server.hpp"
#include "process_support.hpp"
#include "redis_process.hpp"

#ifndef DLOCK_POSTGRES_HOLDER
#define DLOCK_POSTGRES_HOLDER ""
#endif

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using detail::process_state;

// Gone, or a zombie waiting for init (not ours to reap): both count as ended.
bool ended(pid_t pid) {
  const char state = process_state(pid);
  return state == '?' || state == 'Z' || state == 'X';
}

// A child that exited just before the pause stays a zombie: a stopped postmaster reaps nothing.
bool stopped_or_ended(pid_t pid) { return process_state(pid) == 'T' || ended(pid); }

bool all_ended(const std::vector<pid_t>& pids) {
  return wait_until([&] { return std::all_of(pids.begin(), pids.end(), ended); }, 5s);
}

// The System V segment named in data/postmaster.pid ("key id" on its 7th line), or -1.
int shared_memory_id(const std::filesystem::path& data_dir) {
  std::istringstream file(detail::read_file(data_dir / "postmaster.pid"));
  std::string line;
  for (int n = 0; n < 7 && std::getline(file, line); ++n) {
  }
  long long key = 0;
  int id = -1;
  return std::istringstream(line) >> key >> id ? id : -1;
}

// Removed, once the last process attached to it has ended.
bool segment_removed(int id) {
  shmid_ds info{};
  return wait_until([&] { return ::shmctl(id, IPC_STAT, &info) != 0 && errno != EFAULT; }, 5s);
}

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

TEST(PostgresServerTest, StartsAnswersSqlAndStopsWithoutLeavingAProcess) {
  PostgresServer server;
  auto before = Clock::now();
  server.start();
  const auto start_ms = ms_since(before);
  EXPECT_GT(server.port(), 0);
  EXPECT_GT(server.pid(), 0);
  EXPECT_EQ(server.host(), "127.0.0.1");
  EXPECT_EQ(server.dsn(), "postgresql://dlock@127.0.0.1:" + std::to_string(server.port()) +
                              "/postgres");
  EXPECT_EQ(server.exec("SELECT current_user, current_setting('fsync'), "
                        "current_setting('synchronous_commit'), "
                        "current_setting('full_page_writes'), current_setting('max_connections')"),
            (PostgresRows{{"dlock", "off", "off", "off", "200"}}));
  EXPECT_EQ(server.exec("SHOW data_directory"), (PostgresRows{{server.data_dir().string()}}));

  server.create_database("locks");
  server.exec("CREATE TABLE t (k text PRIMARY KEY, v int); INSERT INTO t VALUES ('a', 1), "
              "('b', NULL)",
              "locks");
  EXPECT_EQ(server.exec("SELECT k, v FROM t ORDER BY k", "locks"),
            (PostgresRows{{"a", "1"}, {"b", ""}}));
  PostgresClient client(server.dsn("locks"));
  EXPECT_EQ(client.exec("SELECT count(*) FROM t"), (PostgresRows{{"2"}}));

  const std::vector<pid_t> pids = server.process_ids();
  ASSERT_GE(pids.size(), 3u) << "the postmaster, its auxiliary processes and a backend";
  const int segment = shared_memory_id(server.data_dir());
  ASSERT_GE(segment, 0);
  before = Clock::now();
  server.stop();
  const auto stop_ms = ms_since(before);
  EXPECT_EQ(server.pid(), -1);
  EXPECT_FALSE(server.running());
  EXPECT_TRUE(all_ended(pids));
  EXPECT_TRUE(segment_removed(segment)) << "a killed postmaster leaves its segment";
  EXPECT_TRUE(live_child_pids().empty());
  std::cout << "[   TIME   ] first start (initdb + postgres) " << start_ms << " ms, stop "
            << stop_ms << " ms\n";
}

TEST(PostgresServerTest, ErrorsCarryTheServersMessageAndSqlstate) {
  PostgresServer server;
  server.start();
  try {
    server.exec("SELECT * FROM no_such_table");
    FAIL() << "a query of a missing table should fail";
  } catch (const PostgresError& error) {
    EXPECT_NE(std::string(error.what()).find("no_such_table\" does not exist"), std::string::npos)
        << error.what();
    EXPECT_EQ(error.sqlstate(), "42P01");
  }
  PostgresClient client(server.dsn());
  EXPECT_THROW(client.exec("SELECT 1/0"), PostgresError);
  EXPECT_EQ(client.exec("SELECT 2"), (PostgresRows{{"2"}})) << "the connection stays usable";
  EXPECT_THROW(PostgresClient(server.dsn("no_such_database")).exec("SELECT 1"), PostgresIoError);
}

TEST(PostgresServerTest, PausedServerTimesOutAndResumedServerAnswers) {
  PostgresServer server;
  server.start();
  PostgresClient client(server.dsn(), "probe", 500ms);
  ASSERT_TRUE(client.ping());

  server.pause();
  EXPECT_TRUE(server.paused());
  const std::vector<pid_t> pids = server.process_ids();
  ASSERT_GE(pids.size(), 3u);
  for (const pid_t pid : pids) EXPECT_TRUE(stopped_or_ended(pid)) << "process " << pid;
  auto before = Clock::now();
  EXPECT_THROW(client.exec("SELECT 1"), PostgresIoError);
  EXPECT_GE(Clock::now() - before, 450ms);
  EXPECT_LT(Clock::now() - before, 2s);
  before = Clock::now();
  EXPECT_FALSE(PostgresClient(server.dsn(), "newcomer", 500ms).ping()) << "a new connection";
  EXPECT_LT(Clock::now() - before, 2s);

  server.resume();
  EXPECT_FALSE(server.paused());
  for (const pid_t pid : pids) EXPECT_NE(process_state(pid), 'T') << "process " << pid;
  EXPECT_TRUE(client.ping()) << "reconnects after the timeout";
  EXPECT_TRUE(PostgresClient(server.dsn(), "newcomer", 500ms).ping());
}

TEST(PostgresServerTest, RestartKeepsPortAndDataAndRecoversLikeACrashedServer) {
  PostgresServer server;
  server.start();
  server.exec("CREATE TABLE kept (n int)");
  server.exec("SET synchronous_commit = on; INSERT INTO kept VALUES (7)");
  PostgresClient client(server.dsn());
  ASSERT_TRUE(client.ping());
  const int port = server.port();
  const std::vector<pid_t> old_pids = server.process_ids();

  const auto before = Clock::now();
  server.restart();
  std::cout << "[   TIME   ] restart (stop + start, crash recovery) " << ms_since(before)
            << " ms\n";

  EXPECT_EQ(server.port(), port);
  EXPECT_TRUE(all_ended(old_pids));
  EXPECT_EQ(server.exec("SELECT n FROM kept"), (PostgresRows{{"7"}}));
  EXPECT_NE(server.log_tail(100).find("automatic recovery in progress"), std::string::npos)
      << server.log_tail(100);
  EXPECT_EQ(client.exec("SELECT 1"), (PostgresRows{{"1"}})) << "a kept client reconnects";
}

TEST(PostgresServerTest, StopEndsAPausedServerAndAllItsProcesses) {
  PostgresServer server;
  server.start();
  PostgresClient first(server.dsn(), "first");
  PostgresClient second(server.dsn(), "second");
  ASSERT_TRUE(first.ping() && second.ping());
  server.pause();
  const std::vector<pid_t> pids = server.process_ids();
  EXPECT_GE(live_child_pids().size(), pids.size()) << "stopped children join the registry";
  server.stop();
  EXPECT_FALSE(server.paused());
  EXPECT_TRUE(all_ended(pids));
  EXPECT_TRUE(live_child_pids().empty());
  server.start();  // same directory: nothing of the killed server is in the way
  EXPECT_TRUE(first.ping());
}

TEST(PostgresServerTest, KillBackendsOfAnApplicationOrOfAll) {
  PostgresServer server;
  server.start();
  PostgresClient victim(server.dsn(), "victim");
  PostgresClient bystander(server.dsn(), "bystander");
  const int victim_pid = victim.backend_pid();
  const int bystander_pid = bystander.backend_pid();

  EXPECT_EQ(server.kill_backends_of("victim"), 1);
  EXPECT_EQ(server.exec("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                        std::to_string(victim_pid)),
            (PostgresRows{{"0"}}));
  EXPECT_EQ(bystander.backend_pid(), bystander_pid) << "another application's is left alone";
  EXPECT_NE(victim.backend_pid(), victim_pid) << "the client notices and connects again";
  EXPECT_EQ(server.kill_backends_of("nobody-uses-this"), 0);

  EXPECT_EQ(server.kill_all_backends(), 2);
  EXPECT_NE(bystander.backend_pid(), bystander_pid);
}

TEST(PostgresServerTest, FailedStartReportsTheLog) {
  PostgresServer::Options options;
  options.extra_config = {"no_such_setting=1"};
  PostgresServer server(options);
  try {
    server.start();
    FAIL() << "start() should have thrown";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("no_such_setting"), std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(server.running());
  EXPECT_TRUE(live_child_pids().empty());
}

TEST(PostgresServerTest, FixedPortThatStaysTakenFailsWithAClearError) {
  PostgresServer owner;
  owner.start();
  PostgresServer::Options options;
  options.port = owner.port();
  PostgresServer latecomer(options);
  try {
    latecomer.start();
    FAIL() << "start() on a taken port should have thrown";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("port taken"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(PostgresClient(owner.dsn()).ping());
  EXPECT_EQ(live_child_pids(), std::vector<pid_t>{owner.pid()});
}

TEST(PostgresServerTest, ServersStartedFromAShortLivedThreadOutliveItAndMoveIntoAContainer) {
  std::vector<PostgresServer> servers(2);
  std::thread([&] {
    for (auto& server : servers) server.start();
  }).join();
  std::this_thread::sleep_for(100ms);
  EXPECT_NE(servers[0].port(), servers[1].port());
  servers[0].exec("CREATE TABLE only_in_first (n int)");
  for (auto& server : servers) EXPECT_TRUE(server.running());
  EXPECT_EQ(servers[1].exec("SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_first'"),
            (PostgresRows{{"0"}}));
}

TEST(PostgresServerTest, DestructorRemovesTheDirectory) {
  std::filesystem::path dir;
  std::vector<pid_t> pids;
  {
    PostgresServer server;
    server.start();
    dir = server.dir();
    pids = server.process_ids();
    EXPECT_TRUE(std::filesystem::exists(server.data_dir() / "PG_VERSION"));
    EXPECT_TRUE(std::filesystem::exists(server.log_file()));
  }
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(all_ended(pids));
}

// A test program killed by SIGKILL runs no destructor and no safety net: its postmaster ends by
// its parent-death signal (set by setpriv after the change of user when run as root), the
// children by noticing, and stopped ones by the pause watchdog.
void expect_no_postgres_after_sigkill(bool paused) {
  std::vector<std::string> argv = {DLOCK_POSTGRES_HOLDER};
  if (paused) argv.emplace_back("--pause");
  ChildProcess holder(argv);
  const auto dir = holder.read_line(60s);
  const auto pid_line = holder.read_line(10s);
  ASSERT_TRUE(dir && pid_line) << holder.take_output();
  std::vector<pid_t> pids;
  std::istringstream in(*pid_line);
  for (pid_t pid = 0; in >> pid;) pids.push_back(pid);
  ASSERT_GE(pids.size(), 3u) << *pid_line;
  if (paused) {
    for (const pid_t pid : pids) EXPECT_TRUE(stopped_or_ended(pid)) << "process " << pid;
  }
  holder.signal(SIGKILL);
  EXPECT_EQ(holder.wait(5s), 128 + SIGKILL);
  EXPECT_TRUE(all_ended(pids)) << *pid_line;
  const int segment = shared_memory_id(std::filesystem::path(*dir) / "data");
  EXPECT_GE(segment, 0);
  remove_postgres_dir(*dir);
  EXPECT_TRUE(segment_removed(segment));
  EXPECT_FALSE(std::filesystem::exists(*dir));
}

TEST(PostgresServerTest, ATestProgramKilledBySigkillLeavesNoPostgres) {
  expect_no_postgres_after_sigkill(false);
}

TEST(PostgresServerTest, ATestProgramKilledBySigkillWhilePausedLeavesNoPostgres) {
  expect_no_postgres_after_sigkill(true);
}

}  // namespace
}  // namespace dlock::test
