// The sentinel backend against a real group (1 master, 2 replicas, 3 sentinels, separate
// passwords for the data nodes and the sentinels): failovers by SENTINEL FAILOVER and by
// killing the master, with and without wait_replicas.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "ha_fixtures.hpp"
#include "redis/keys.hpp"

namespace dlock::test {
namespace {

// Locks and unlocks in a loop on its own thread and remembers the longest stretch without
// a successful cycle: the outage a user of the lock would see.
class LockLoop {
 public:
  explicit LockLoop(const Config& config) : client_(config), thread_([this] { run(); }) {}
  ~LockLoop() {
    stop_ = true;
    thread_.join();
  }
  [[nodiscard]] long cycles() const { return cycles_.load(); }
  [[nodiscard]] long failures() const { return failures_.load(); }
  /// Longest gap between two successful cycles since the last call, in ms.
  long long take_longest_gap() {
    std::lock_guard lock(mutex_);
    return std::exchange(longest_gap_ms_, 0);
  }
  bool wait_for_cycles(long more, std::chrono::milliseconds timeout) {
    const long target = cycles() + more;
    return wait_until([&] { return cycles() >= target; }, timeout, 5ms);
  }

 private:
  void run() {
    auto last = Clock::now();
    for (long i = 0; !stop_; ++i) {
      Lease lease = client_.try_acquire("loop-" + std::to_string(i % 50), settings(5s));
      if (lease && lease.release() == ReleaseStatus::kReleased) {
        const auto now = Clock::now();
        std::lock_guard lock(mutex_);
        longest_gap_ms_ = std::max<long long>(
            longest_gap_ms_, std::chrono::duration_cast<std::chrono::milliseconds>(now - last).count());
        last = now;
        ++cycles_;
      } else {
        ++failures_;
        std::this_thread::sleep_for(10ms);
      }
    }
  }

  Client client_;
  std::atomic<bool> stop_{false};
  std::atomic<long> cycles_{0};
  std::atomic<long> failures_{0};
  std::mutex mutex_;
  long long longest_gap_ms_ = 0;
  std::thread thread_;
};

TEST(Sentinel, LockLoopResumesAfterSentinelFailoverAndAfterTheMasterIsKilled) {
  SentinelGroup group(fast_sentinel_group());
  group.start();

  {  // The sentinels' own credentials are checked, and never echoed.
    Config bad = sentinel_config(group, 1);
    bad.backends["default"].sentinel_password = "not-the-sentinel-password";
    Client client(bad);
    Lease lease = client.try_acquire("k", settings(5s));
    EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
    EXPECT_EQ(lease.error().find("not-the-sentinel-password"), std::string::npos) << lease.error();
  }

  const Config config = sentinel_config(group, 1);
  LockLoop loop(config);
  ASSERT_TRUE(loop.wait_for_cycles(100, 10s));
  loop.take_longest_gap();

  // SENTINEL FAILOVER.
  const int first = group.master_index();
  const auto failover_started = Clock::now();
  const int second = group.failover(30s);
  ASSERT_NE(second, first);
  ASSERT_TRUE(loop.wait_for_cycles(100, 20s)) << "the loop did not resume after SENTINEL FAILOVER";
  const long long failover_gap = loop.take_longest_gap();
  std::printf("[ measure ] SENTINEL FAILOVER: switch took %lld ms; longest pause of the lock loop %lld ms\n",
              elapsed_ms(failover_started), failover_gap);
  EXPECT_LT(failover_gap, 10000);

  {  // The release-notification subscriber followed the master.
    ASSERT_TRUE(group.wait_stable(30s, 1));  // with wait_replicas, a grant needs a replica back
    Config slow_poll = config;
    slow_poll.backends["default"].poll_interval = 3s;
    Client holder(slow_poll), waiter(slow_poll);
    // Right after a failover WAIT may still fall short while the replica resyncs; this block
    // is about notifications following the master, so give the grant a few tries.
    Lease held = holder.acquire("handoff", settings(10s));
    for (int attempt = 0; attempt < 40 && !held; ++attempt) {
      std::this_thread::sleep_for(250ms);
      held = holder.acquire("handoff", settings(10s));
    }
    ASSERT_TRUE(held) << held.error();
    Clock::time_point acquired;
    std::thread t([&] {
      Lease lease = waiter.acquire("handoff", settings(10s, 8s));
      acquired = Clock::now();
      EXPECT_TRUE(lease);
    });
    ASSERT_TRUE(wait_until([&] { return waiter.metrics().waits == 1; }, 5s, 1ms));
    std::this_thread::sleep_for(100ms);
    const auto released = Clock::now();
    held.release();
    t.join();
    // Polling every 3 s (x0.75..1) could not hand over before 2.25 s: under that, a
    // notification did it.
    EXPECT_LT(std::chrono::duration_cast<std::chrono::milliseconds>(acquired - released).count(), 1500);
  }

  // The master dies.
  ASSERT_TRUE(group.wait_stable(20s, 1));
  loop.take_longest_gap();
  const auto killed_at = Clock::now();
  group.data(static_cast<std::size_t>(second)).kill();
  ASSERT_TRUE(wait_until([&] { const int m = group.master_index(); return m >= 0 && m != second; }, 30s, 50ms));
  const long long switched_ms = elapsed_ms(killed_at);
  ASSERT_TRUE(loop.wait_for_cycles(100, 20s)) << "the loop did not resume after the master died";
  const long long kill_gap = loop.take_longest_gap();
  std::printf("[ measure ] master killed: sentinels switched after %lld ms; longest pause of the lock "
              "loop %lld ms (down-after-milliseconds %lld)\n",
              switched_ms, kill_gap, static_cast<long long>(group.options().down_after.count()));
  EXPECT_LT(kill_gap, 20000);
  EXPECT_GT(loop.failures(), 0) << "a dead master must show as failures while no master is known";
}

TEST(Sentinel, WaitReplicasUnmetReleasesTheKeyAndFailsAsUnavailable) {
  SentinelGroup group(fast_sentinel_group());
  group.start();
  const Config config = sentinel_config(group, 1);
  Client client(config);
  ASSERT_TRUE(client.try_acquire("warm-up", settings(5s)));
  for (std::size_t i = 1; i < group.data_count(); ++i) group.data(i).kill();
  const auto start = Clock::now();
  Lease lease = client.try_acquire("unreplicated", settings(30s));
  const auto took = elapsed_ms(start);
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(lease.error().find("replicas confirmed"), std::string::npos) << lease.error();
  EXPECT_LE(took, 2 * 1000 + 500);
  auto admin = group.data_admin(0);
  EXPECT_EQ(admin.integer({"EXISTS", internal::lock_keys(config.service, "unreplicated").lock}), 0)
      << "an unreplicated grant must be released";
}

TEST(Sentinel, WaitReplicasAboveTheReplicaCountIsWarnedAbout) {
  SentinelGroup group(fast_sentinel_group());
  group.start();
  const int replicas = static_cast<int>(group.data_count()) - 1;
  std::mutex mutex;
  std::vector<std::string> warnings;
  set_log_sink([&](LogLevel level, std::string_view line) {
    std::lock_guard lock(mutex);
    if (level == LogLevel::kWarn) warnings.emplace_back(line);
  });
  {
    Client client(sentinel_config(group, replicas + 1));
    (void)client.try_acquire("never-replicated-enough", settings(5s));
  }
  set_log_sink({});
  const std::string expected =
      fmt::format("wait_replicas {} but master '{}' has {} replicas", replicas + 1,
                  group.options().master_name, replicas);
  bool warned = false;
  for (const auto& line : warnings) warned = warned || line.find(expected) != std::string::npos;
  EXPECT_TRUE(warned) << "no warning containing: " << expected;
}

// Finding: a +switch-master for any master the sentinels monitor woke the lookup of ours.
// The sentinels here also monitor `ours`, a standalone server; the group's own master fails
// over, and the client of `ours` must not look its master up for that.
TEST(Sentinel, ASwitchOfAnotherMasterTriggersNoLookup) {
  SentinelGroup group(fast_sentinel_group());
  group.start();
  RedisServer::Options standalone;
  standalone.password = group.options().password;
  standalone.name = "ours";
  RedisServer ours(standalone);
  ours.start();
  for (std::size_t i = 0; i < 3; ++i) {
    auto admin = group.sentinel_admin(i);
    ASSERT_TRUE(admin.ok({"SENTINEL", "MONITOR", "ours", "127.0.0.1", std::to_string(ours.port()), "2"}));
    ASSERT_TRUE(admin.ok({"SENTINEL", "SET", "ours", "auth-pass", group.options().password}));
  }
  Config config = sentinel_config(group, 0);
  config.backends["default"].master_name = "ours";
  std::mutex mutex;
  std::vector<std::string> lookups;
  set_log_level(LogLevel::kDebug);
  set_log_sink([&](LogLevel, std::string_view line) {
    std::lock_guard lock(mutex);
    if (line.find("looking up master") != std::string_view::npos) lookups.emplace_back(line);
  });
  std::size_t seen = 0;
  {
    Client client(config);
    ASSERT_TRUE(client.try_acquire("ours", settings(5s)));  // finds the master, starts the monitor
    std::this_thread::sleep_for(500ms);                        // subscribed to +switch-master
    {
      std::lock_guard lock(mutex);
      lookups.clear();
    }
    (void)group.failover(20s);           // "+switch-master mymaster ..." on every sentinel
    std::this_thread::sleep_for(1500ms);  // the monitor wakes within its 1 s wait
    std::lock_guard lock(mutex);
    seen = lookups.size();
    for (const auto& line : lookups) std::printf("%s\n", line.c_str());
  }
  set_log_sink({});
  set_log_level(LogLevel::kInfo);
  EXPECT_EQ(seen, 0u) << "the switch of another master triggered a lookup of ours";
}

TEST(Sentinel, NoReachableSentinelFailsWithinTheTimeouts) {
  Config config = topology_config(Topology::kSentinel,
                                  {Endpoint{"127.0.0.1", free_loopback_port()},
                                   Endpoint{"127.0.0.1", free_loopback_port()}});
  config.backends["default"].master_name = "mymaster";
  Client client(config);
  const auto start = Clock::now();
  Lease lease = client.acquire("k", settings(5s, 5s));
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(lease.error().find("no master"), std::string::npos) << lease.error();
  EXPECT_LE(elapsed_ms(start), 2 * 500 + 300);
}

struct CounterRun {
  int failovers = 0;
  long expected = 0;  // increments the workers made under the lock
  long actual = 0;    // what the file says
  long unavailable = 0;
  long lost = 0;
  long overlaps = 0;  // times a worker found another inside the critical section
  long long ms = 0;
};

// 8 worker processes increment a counter file under one lock while the master fails over
// again and again (SENTINEL FAILOVER, or killing the master and restarting it).
CounterRun run_counter_through_failovers(SentinelGroup& group, int wait_replicas, int max_failovers,
                                         std::chrono::seconds budget, bool kill, bool demote_old) {
  // demote_old: once the failover is over (the sentinels agree, a replica follows the new
  // master) and clients had a moment to follow +switch-master, the old master is made a
  // replica at once, so that it can be promoted again by the next failover. Demoting it while
  // clients may still hold locks granted by it would lose them: see docs/TOPOLOGIES.md.
  YamlFile yaml(sentinel_yaml(group, wait_replicas));
  const auto base = std::filesystem::temp_directory_path() /
                    ("dlock-ha-counter-" + std::to_string(::getpid()) + "-" + std::to_string(wait_replicas));
  const std::string counter = base.string() + ".txt", stop = base.string() + ".stop";
  std::filesystem::remove(stop);
  { std::ofstream(counter) << 0 << '\n'; }
  std::filesystem::remove(counter + ".inside");

  std::vector<ChildProcess> workers;
  for (int i = 0; i < 8; ++i) {
    workers.emplace_back(std::vector<std::string>{worker_program(), yaml.path(), "ha-counter", "shared-counter",
                                                  counter, stop, "100"});
  }
  for (auto& w : workers) EXPECT_EQ(w.read_line(20s).value_or("timeout"), "started");
  CounterRun run;
  const auto start = Clock::now();
  std::this_thread::sleep_for(500ms);
  while (run.failovers < max_failovers && Clock::now() - start < budget) {
    if (kill) {
      const int master = group.master_index();
      group.data(static_cast<std::size_t>(master)).kill();
      if (!wait_until([&] { const int m = group.master_index(); return m >= 0 && m != master; }, 30s, 50ms)) break;
      group.data(static_cast<std::size_t>(master)).start();
    } else {
      const int old = group.master_index();
      group.failover(30s);
      if (!group.wait_stable(30s, 1)) break;
      if (demote_old) {
        std::this_thread::sleep_for(500ms);
        group.demote(static_cast<std::size_t>(old));
      }
    }
    ++run.failovers;
    if (!group.wait_stable(30s, 1)) break;
  }
  std::this_thread::sleep_for(500ms);
  { std::ofstream(stop) << "stop\n"; }
  for (auto& w : workers) {
    const auto line = w.read_line(30s).value_or("timeout");
    long count = 0, unavailable = 0, lost = 0, overlaps = 0;
    EXPECT_EQ(std::sscanf(line.c_str(), "done count=%ld unavailable=%ld lost=%ld overlaps=%ld", &count,
                          &unavailable, &lost, &overlaps),
              4)
        << line;
    run.expected += count;
    run.unavailable += unavailable;
    run.lost += lost;
    run.overlaps += overlaps;
    EXPECT_EQ(w.wait(10s), 0);
  }
  run.ms = elapsed_ms(start);
  std::ifstream(counter) >> run.actual;
  std::filesystem::remove(counter);
  std::filesystem::remove(counter + ".inside");
  std::filesystem::remove(stop);
  return run;
}

// How many failovers fit: a SENTINEL FAILOVER and the reconfiguration after it take 5-7 s
// here, so the default budget of 45 s gives about 7. DLOCK_SENTINEL_FAILOVER_BUDGET_S=200
// runs the 20 failovers of the issue (outside ctest's 120 s limit).
std::chrono::seconds failover_budget() {
  const char* text = std::getenv("DLOCK_SENTINEL_FAILOVER_BUDGET_S");
  return std::chrono::seconds(text != nullptr ? std::atoi(text) : 45);
}

TEST(Sentinel, WithWaitReplicasFailoversDuringAnEightProcessCounterLoseNoUpdate) {
  SentinelGroup group(fast_sentinel_group());
  group.start();
  const CounterRun run = run_counter_through_failovers(group, 1, 20, failover_budget(), false, true);
  std::printf("[ measure ] wait_replicas=1: %d failovers in %lld ms; %ld increments, counter %ld; "
              "%ld overlapping holders; %ld unavailable acquisitions, %ld releases found the lease lost\n",
              run.failovers, run.ms, run.expected, run.actual, run.overlaps, run.unavailable, run.lost);
  EXPECT_GE(run.failovers, 5);
  EXPECT_GT(run.expected, 0);
  EXPECT_EQ(run.overlaps, 0) << "two processes held the lock at once";
  EXPECT_EQ(run.actual, run.expected) << "an update was lost: two processes held the lock at once";
}

// Not run by default: the measurement behind docs/TOPOLOGIES.md ("failover without
// wait_replicas"). Run with --gtest_also_run_disabled_tests.
TEST(Sentinel, DISABLED_MeasureTheCounterThroughFailoversWithoutWaitReplicas) {
  for (const bool kill : {false, true}) {
    SentinelGroup group(fast_sentinel_group());
    group.start();
    const CounterRun run = run_counter_through_failovers(group, 0, kill ? 5 : 10, 60s, kill, false);
    std::printf("[ measure ] wait_replicas=0, %s: %d failovers in %lld ms; %ld increments, counter %ld "
                "(%ld lost updates); %ld overlapping holders; %ld unavailable acquisitions, %ld releases "
                "found the lease lost\n",
                kill ? "master killed" : "SENTINEL FAILOVER", run.failovers, run.ms, run.expected,
                run.actual, run.expected - run.actual, run.overlaps, run.unavailable, run.lost);
  }
}

}  // namespace
}  // namespace dlock::test
