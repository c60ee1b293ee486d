// The cluster backend against a real Redis Cluster (3 masters + 3 replicas): slot routing,
// and a lock loop over 1,000 keys that runs through a reshard and a manual failover without
// an error the library could have retried and without two holders of one key.
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "ha_fixtures.hpp"
#include "redis/crc16.hpp"
#include "redis/keys.hpp"

namespace dlock::test {
namespace {

TEST(ClusterSlots, Crc16MatchesKnownValuesAndClusterKeyslot) {
  EXPECT_EQ(internal::crc16("123456789"), 0x31C3);
  EXPECT_EQ(internal::key_slot("foo"), 12182);
  EXPECT_EQ(internal::key_slot("{user1000}.following"), internal::key_slot("{user1000}.followers"));
  EXPECT_EQ(internal::key_slot("foo{}{bar}"), internal::crc16("foo{}{bar}") & 16383);
  EXPECT_EQ(internal::key_slot("foo{{bar}}zap"), internal::crc16("{bar") & 16383);

  RedisServerOptions options;
  options.cluster = true;
  RedisServer node(options);
  node.start();
  RedisAdmin admin(node);
  std::vector<std::string> keys = {"", "a", "{", "}", "{}", "{a}", "a{b}c", "{a}{b}", "x{}y{z}",
                                   std::string("\0\xff{\x01}", 5), std::string(1000, 'k')};
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string key;
    const int length = static_cast<int>(rng() % 24);
    for (int c = 0; c < length; ++c) key.push_back(static_cast<char>("ab{}:%\x00\xfe"[rng() % 8]));
    keys.push_back(key);
  }
  for (const std::string service : {"shop", "a:b"}) {
    for (const std::string user_key : {"order:{7}", "", "}{", "x%3A"}) {
      const auto lock = internal::lock_keys(service, user_key);
      keys.insert(keys.end(), {lock.lock, lock.fence, lock.channel});
      EXPECT_EQ(internal::key_slot(lock.lock), internal::key_slot(lock.fence));
      EXPECT_EQ(internal::key_slot(lock.lock), internal::key_slot(lock.channel));
    }
  }
  for (const auto& key : keys) {
    EXPECT_EQ(internal::key_slot(key), admin.integer({"CLUSTER", "KEYSLOT", key})) << "key of " << key.size() << " bytes";
  }
}

class ClusterLoop {
 public:
  ClusterLoop(const Config& config, std::vector<std::string> keys, int threads)
      : keys_(std::move(keys)), holders_(keys_.size()) {
    for (int t = 0; t < threads; ++t) {
      clients_.push_back(std::make_unique<Client>(config));
      threads_.emplace_back([this, t] { run(*clients_[static_cast<std::size_t>(t)], static_cast<unsigned>(t)); });
    }
  }
  ~ClusterLoop() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  std::atomic<long> cycles{0}, violations{0}, busy{0}, unavailable{0}, bad_releases{0}, losses{0};
  std::string first_error;

 private:
  void run(Client& client, unsigned seed) {
    std::mt19937 rng(seed);
    while (!stop_) {
      const std::size_t k = rng() % keys_.size();
      Lease lease = client.acquire(keys_[k], settings(5s, 2s));
      if (!lease) {
        (lease.status() == AcquireStatus::kBusy ? busy : unavailable)++;
        record(lease.error());
        continue;
      }
      if (holders_[k].fetch_add(1) != 0) ++violations;
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
      if (lease.lost()) ++losses;
      holders_[k].fetch_sub(1);
      const auto released = lease.release();
      if (released != ReleaseStatus::kReleased) {
        ++bad_releases;
        record(std::string("release: ") + to_string(released));
      }
      ++cycles;
    }
  }
  void record(const std::string& error) {
    std::lock_guard lock(mutex_);
    if (first_error.empty()) first_error = error;
  }

  std::vector<std::string> keys_;
  std::vector<std::atomic<int>> holders_;
  std::vector<std::unique_ptr<Client>> clients_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
};

// Finding: the pool of a node that left the slot map was never dropped, so its connections
// stayed open for the client's lifetime. Node `gone` gives all its slots away; the next
// refresh drops its pool, which closes our connection to it.
TEST(Cluster, ANodeThatLeftTheSlotMapKeepsNoConnectionOfOurs) {
  RedisClusterGroup::Options options;
  options.replicas_per_master = 0;
  RedisClusterGroup cluster(options);
  cluster.start();
  const int stay = cluster.master_of_slot(0);
  const int gone = cluster.master_of_slot(16383);
  ASSERT_GE(stay, 0);
  ASSERT_GE(gone, 0);
  ASSERT_NE(stay, gone);
  Config config = topology_config(Topology::kCluster, endpoints_of({cluster.node(static_cast<std::size_t>(stay)).endpoint()}));
  config.backends["default"].command_timeout = 5000ms;
  std::string key;
  for (int i = 0; key.empty(); ++i) {
    const std::string k = "departing:" + std::to_string(i);
    if (internal::key_slot(internal::lock_keys(config.service, k).lock) == 16383) key = k;
  }
  RedisAdmin gone_admin(cluster.node(static_cast<std::size_t>(gone)));
  // Connections to `gone` other than this admin's own.
  const auto ours_on_gone = [&] {
    const std::string list = gone_admin.command({"CLIENT", "LIST"});
    std::size_t n = 0;
    for (std::size_t at = 0; (at = list.find("cmd=", at)) != std::string::npos; ++at) {
      n += list.compare(at, 10, "cmd=client") != 0;
    }
    return n;
  };
  Client client(config);
  ASSERT_TRUE(client.try_acquire(key, settings(5s)));  // routed to `gone`, pooled
  ASSERT_GE(ours_on_gone(), 1u);
  // All of its slots go to `stay` (CLUSTER NODES: "... myself,master ... 10923-16383").
  int slots = 0;
  {
    const std::string nodes = gone_admin.command({"CLUSTER", "NODES"});
    const auto line_at = nodes.find("myself");
    const std::string line = nodes.substr(line_at, nodes.find('\n', line_at) - line_at);
    std::size_t at = line.find("connected");
    for (std::size_t next; at != std::string::npos && (next = line.find(' ', at)) != std::string::npos; at = next + 1) {
      const std::string range = line.substr(next + 1, line.find(' ', next + 1) - next - 1);
      const auto dash = range.find('-');
      if (range.empty() || !std::isdigit(static_cast<unsigned char>(range[0]))) continue;
      slots += dash == std::string::npos ? 1 : std::stoi(range.substr(dash + 1)) - std::stoi(range.substr(0, dash)) + 1;
    }
  }
  ASSERT_GT(slots, 0);
  const auto reshard = cluster.reshard(static_cast<std::size_t>(gone), static_cast<std::size_t>(stay), slots, 120s);
  ASSERT_EQ(reshard.status, 0) << reshard.output;
  ASSERT_TRUE(cluster.wait_ok(30s));
  ASSERT_TRUE(client.try_acquire(key, settings(5s)));  // MOVED, then a refresh without `gone`
  EXPECT_TRUE(wait_until([&] { return ours_on_gone() == 0; }, 3s))
      << ours_on_gone() << " connection(s) of ours still open to a node without slots";
}

TEST(Cluster, LockLoopOverAThousandKeysSurvivesAReshardAndAManualFailover) {
  RedisClusterGroup cluster;
  cluster.start();
  const int from = cluster.master_of_slot(0);
  const int to = cluster.master_of_slot(16383);
  ASSERT_GE(from, 0);
  ASSERT_GE(to, 0);
  ASSERT_NE(from, to);

  Config config = topology_config(Topology::kCluster, endpoints_of({cluster.node(static_cast<std::size_t>(from)).endpoint()}));
  // The budget for redirects and retries, and for a write parked on the old master while
  // CLUSTER FAILOVER pauses it (until the replica has taken over; seconds under load).
  config.backends["default"].command_timeout = 5000ms;
  // 1,000 keys, all in the slots the reshard moves (it takes the source's lowest slots).
  constexpr int kMovedSlots = 1000;
  std::vector<std::string> keys;
  for (int i = 0; keys.size() < 1000; ++i) {
    const std::string key = "item:" + std::to_string(i);
    if (internal::key_slot(internal::lock_keys(config.service, key).lock) < kMovedSlots) keys.push_back(key);
  }
  // Count the redirects the library followed (it logs each at debug level).
  static std::atomic<long> moved{0}, ask{0}, try_again{0};
  set_log_level(LogLevel::kDebug);
  set_log_sink([](LogLevel level, std::string_view line) {
    if (level >= LogLevel::kWarn) std::fprintf(stderr, "dlock: %.*s\n", static_cast<int>(line.size()), line.data());
    if (line.find(": MOVED ") != std::string_view::npos) ++moved;
    if (line.find(": ASK ") != std::string_view::npos) ++ask;
    if (line.find(": TRYAGAIN") != std::string_view::npos) ++try_again;
  });
  ClusterLoop loop(config, keys, 4);
  ASSERT_TRUE(wait_until([&] { return loop.cycles >= 200; }, 20s));

  const auto reshard_start = Clock::now();
  const long before_reshard = loop.cycles;
  const auto reshard = cluster.reshard(static_cast<std::size_t>(from), static_cast<std::size_t>(to), kMovedSlots, 120s);
  ASSERT_EQ(reshard.status, 0) << reshard.output;
  ASSERT_TRUE(cluster.wait_ok(30s));
  EXPECT_EQ(cluster.master_of_slot(0), to);
  const long long reshard_ms = elapsed_ms(reshard_start);
  const long during_reshard = loop.cycles - before_reshard;

  const int replica = cluster.replica_of(static_cast<std::size_t>(to));
  ASSERT_GE(replica, 0);
  const auto failover_start = Clock::now();
  const long before_failover = loop.cycles;
  cluster.failover(static_cast<std::size_t>(replica), 30s);
  EXPECT_EQ(cluster.master_of_slot(0), replica);
  ASSERT_TRUE(wait_until([&] { return loop.cycles >= before_failover + 500; }, 20s));
  const long long failover_ms = elapsed_ms(failover_start);
  loop.stop();

  set_log_sink(nullptr);
  set_log_level(LogLevel::kInfo);
  std::printf("[ measure ] cluster: reshard of %d slots took %lld ms (%ld lock cycles meanwhile); "
              "CLUSTER FAILOVER and 500 cycles took %lld ms; %ld cycles in all, %ld busy; followed "
              "%ld MOVED, %ld ASK, %ld TRYAGAIN\n",
              kMovedSlots, reshard_ms, during_reshard, failover_ms, loop.cycles.load(), loop.busy.load(),
              moved.load(), ask.load(), try_again.load());
  EXPECT_GT(moved.load(), 0);
  EXPECT_EQ(loop.violations, 0) << "two holders of one key at once";
  EXPECT_EQ(loop.unavailable, 0) << loop.first_error;
  EXPECT_EQ(loop.bad_releases, 0) << loop.first_error;
  EXPECT_EQ(loop.losses, 0);
  EXPECT_GT(during_reshard, 0);
}

// Stops `servers` (SIGSTOP) for `length` or until `told_lost`, sampling the TTL of `lock_key`
// on `admin`'s server every 20 ms, and resumes them (on a failed assertion too). Returns the
// lowest TTL seen.
long long lowest_ttl_while_paused(const std::vector<RedisServer*>& servers, RedisAdmin& admin,
                                  const std::string& lock_key, Clock::duration length,
                                  const std::atomic<bool>& told_lost) {
  struct Resume {
    std::vector<RedisServer*> paused;
    ~Resume() {
      for (auto* server : paused) server->resume();
    }
  } resume;
  for (auto* server : servers) {
    server->pause();
    resume.paused.push_back(server);
  }
  long long lowest_ttl = 1'000'000;
  const auto until = Clock::now() + length;
  while (Clock::now() < until && !told_lost) {
    lowest_ttl = std::min(lowest_ttl, admin.integer({"PTTL", lock_key}));
    std::this_thread::sleep_for(20ms);
  }
  return lowest_ttl;
}

// Three masters without replicas, and a node timeout no test outlasts: a stopped master stays
// the master of its slots.
struct ClusterWithoutFailover {
  ClusterWithoutFailover() {
    cluster.start();
    config = topology_config(Topology::kCluster, endpoints_of(cluster.master_endpoints()));
  }
  static RedisClusterGroup::Options options() {
    RedisClusterGroup::Options options;
    options.replicas_per_master = 0;
    options.node_timeout = 30s;
    return options;
  }
  // The index of the node serving the lock of `key`.
  int master_of(const std::string& key) {
    return cluster.master_of_slot(
        internal::key_slot(internal::lock_keys(config.service, key).lock));
  }

  RedisClusterGroup cluster{options()};
  Config config;
};

// One master stopped (SIGSTOP: connections are accepted, nothing is answered) with several
// leases on it. Their renewals must fail together, not one by one at a timeout each, so that
// a lease on another master is still renewed in time and never expires.
TEST(Cluster, AStoppedMasterDoesNotDelayRenewalsOfLeasesOnTheOthers) {
  ClusterWithoutFailover group;  // no failover while the master is stopped
  RedisClusterGroup& cluster = group.cluster;
  const Config& config = group.config;
  const std::string service = config.service;
  const auto master_of = [&](const std::string& key) { return group.master_of(key); };
  const int stalled = master_of("on-the-stalled-master-0");
  ASSERT_GE(stalled, 0);
  std::vector<std::string> stalled_keys;
  std::string healthy_key;
  constexpr std::size_t kOnStalled = 20;
  for (int i = 0; i < 400 && (stalled_keys.size() < kOnStalled || healthy_key.empty()); ++i) {
    const std::string key = "key-" + std::to_string(i);
    const int master = master_of(key);
    if (master == stalled && stalled_keys.size() < kOnStalled) stalled_keys.push_back(key);
    if (master >= 0 && master != stalled && healthy_key.empty()) healthy_key = key;
  }
  ASSERT_EQ(stalled_keys.size(), kOnStalled);
  ASSERT_FALSE(healthy_key.empty());

  Client client(config);
  std::vector<Lease> on_stalled;
  for (const auto& key : stalled_keys) {
    on_stalled.push_back(client.acquire(key, settings(4s)));
    ASSERT_TRUE(on_stalled.back()) << on_stalled.back().error();
  }
  Lease healthy = client.acquire(healthy_key, settings(3s));
  ASSERT_TRUE(healthy) << healthy.error();
  std::atomic<bool> told_lost{false};
  healthy.view().on_lost([&](const LeaseView&) { told_lost = true; });

  RedisAdmin admin(cluster.node(static_cast<std::size_t>(master_of(healthy_key))));
  const long long lowest_ttl =  // for twice the healthy lease
      lowest_ttl_while_paused({&cluster.node(static_cast<std::size_t>(stalled))}, admin,
                              internal::lock_keys(service, healthy_key).lock, 6s, told_lost);
  const auto metrics = client.metrics();
  std::printf("[ measure ] cluster, one of 3 masters stopped for 6 s with 20 leases on it: lowest TTL of "
              "the 3 s lease on another master %lld ms; renewal lag max %llu ms; %llu renewal failures\n",
              lowest_ttl, static_cast<unsigned long long>(metrics.renewal_lag.max_us / 1000),
              static_cast<unsigned long long>(metrics.renewal_failures));
  EXPECT_FALSE(told_lost.load()) << "on_lost ran for the lease on a healthy master";
  EXPECT_FALSE(healthy.lost()) << to_string(healthy.view().loss_reason());
  EXPECT_GT(lowest_ttl, 0) << "the key on the healthy master expired while another was stopped";
  EXPECT_EQ(healthy.release(), ReleaseStatus::kReleased);
}

// Two of three masters stopped, each with leases on it and its renewal connection open.
// Their renewals are sent at once and a round waits about a third of the shortest lease
// renewed lately, so a lease on the third master, shorter than a command timeout plus its
// renewal period, is still renewed in time. (Asked one master after the other, or each
// waited for a whole command timeout, the lease expired.) Once resumed, the stopped masters
// renew leases again.
TEST(Cluster, StoppedMastersAreAskedAtOnceSoALeaseOnAHealthyOneOutlivesTheirTimeouts) {
  ClusterWithoutFailover group;  // no failover while the masters are stopped
  RedisClusterGroup& cluster = group.cluster;
  const Config& config = group.config;
  ASSERT_EQ(config.backends.at("default").command_timeout, 1000ms);
  const std::string service = config.service;
  const auto master_of = [&](const std::string& key) { return group.master_of(key); };
  // The healthy key on the master with the highest node index, stopped keys on the two
  // others, and a spare key per stopped master for after the resume.
  std::map<int, std::vector<std::string>> by_master;
  for (int i = 0; i < 400; ++i) {
    const std::string key = "key-" + std::to_string(i);
    const int master = master_of(key);
    if (master >= 0 && by_master[master].size() < 6) by_master[master].push_back(key);
  }
  ASSERT_EQ(by_master.size(), 3U);
  const int healthy_master = by_master.rbegin()->first;
  const std::string healthy_key = by_master.rbegin()->second.front();

  Client client(config);
  std::vector<Lease> on_stopped;
  std::vector<RedisServer*> stopped;
  for (const auto& [master, keys] : by_master) {
    if (master == healthy_master) continue;
    stopped.push_back(&cluster.node(static_cast<std::size_t>(master)));
    for (std::size_t k = 0; k + 1 < keys.size(); ++k) {
      on_stopped.push_back(client.acquire(keys[k], settings(3s)));
      ASSERT_TRUE(on_stopped.back()) << on_stopped.back().error();
    }
  }
  std::this_thread::sleep_for(1200ms);  // one renewal each: renewal connections are open
  Lease healthy = client.acquire(healthy_key, settings(1200ms));
  ASSERT_TRUE(healthy) << healthy.error();
  std::atomic<bool> told_lost{false};
  healthy.view().on_lost([&](const LeaseView&) { told_lost = true; });

  RedisAdmin admin(cluster.node(static_cast<std::size_t>(healthy_master)));
  const long long lowest_ttl =  // for four times the healthy lease
      lowest_ttl_while_paused(stopped, admin, internal::lock_keys(service, healthy_key).lock,
                              4800ms, told_lost);
  const auto metrics = client.metrics();
  std::printf("[ measure ] cluster, 2 of 3 masters stopped for 4.8 s (command_timeout 1 s): lowest "
              "TTL of the 1.2 s lease on the third %lld ms; renewal lag max %llu ms\n",
              lowest_ttl, static_cast<unsigned long long>(metrics.renewal_lag.max_us / 1000));
  EXPECT_FALSE(told_lost.load()) << "on_lost ran for the lease on the healthy master";
  EXPECT_FALSE(healthy.lost()) << to_string(healthy.view().loss_reason());
  EXPECT_GT(lowest_ttl, 0) << "the key on the healthy master expired while the others stopped";
  EXPECT_EQ(healthy.release(), ReleaseStatus::kReleased);

  for (const auto& [master, keys] : by_master) {
    if (master == healthy_master) continue;
    Lease after = client.acquire(keys.back(), settings(1200ms));
    ASSERT_TRUE(after) << after.error();
    std::this_thread::sleep_for(1500ms);  // renewed three times, or lost
    EXPECT_FALSE(after.lost()) << "master " << master << " renews no lease after its resume: "
                               << to_string(after.view().loss_reason());
  }
}

// Review finding: after a master stopped (SIGSTOP) and its replica took over, calls kept
// timing out on the stopped node, since only a renewal round that found a master silent
// read the slot map again, and no lease was renewed on it. A call that timed out now has
// the map read again in the background, without the silent node: the next call reaches
// the new master.
TEST(Cluster, AnAcquireAfterATimeoutFollowsTheFailoverOfAStoppedMaster) {
  RedisClusterGroup cluster;  // a replica per master
  cluster.start();
  Config config = topology_config(Topology::kCluster, endpoints_of(cluster.master_endpoints()));
  ASSERT_EQ(config.backends["default"].command_timeout, 1000ms);
  const std::string key = "follows-the-failover";
  const int slot = internal::key_slot(internal::lock_keys(config.service, key).lock);
  const int stopped = cluster.master_of_slot(slot);
  ASSERT_GE(stopped, 0);
  Client client(config);
  {
    Lease first = client.acquire(key, settings(2s));  // the map and a connection to it
    ASSERT_TRUE(first) << first.error();
    ASSERT_EQ(first.release(), ReleaseStatus::kReleased);
  }
  RedisServer& master = cluster.node(static_cast<std::size_t>(stopped));
  master.pause();
  struct Resume {
    RedisServer& server;
    ~Resume() { server.resume(); }
  } resume{master};
  const int replica = cluster.replica_of(static_cast<std::size_t>(stopped));
  ASSERT_GE(replica, 0);
  RedisAdmin replica_admin(cluster.node(static_cast<std::size_t>(replica)));
  ASSERT_TRUE(replica_admin.ok({"CLUSTER", "FAILOVER", "TAKEOVER"}));
  ASSERT_TRUE(wait_until([&] { return cluster.master_of_slot(slot) == replica; }, 30s))
      << "the replica of the stopped master did not take over";

  int attempts = 0;
  bool acquired = false;
  const auto start = Clock::now();
  while (!acquired && attempts < 6) {  // each attempt on the stopped node costs 1 s
    ++attempts;
    Lease lease = client.acquire(key, settings(2s));
    acquired = static_cast<bool>(lease);
  }
  std::printf("[ measure ] cluster: %s after %d attempt(s), %lld ms\n",
              acquired ? "acquired on the new master" : "not acquired", attempts,
              static_cast<long long>(elapsed_ms(start)));
  EXPECT_TRUE(acquired) << "every attempt went to the stopped master";
}

}  // namespace
}  // namespace dlock::test
