// Tests of the harness's etcd cluster and client on one shared cluster (with proxies): it
// starts with one leader, serves keys, ranges and leases, elects a new leader when the leader
// is killed and takes the old one back, carries on without a paused follower, lets a test cut
// one member's clients off at its proxy, stops members by pid and keeps its data across
// stop_all and start. Each test starts with every member running, every proxy forwarding and
// a quorum serving. The tests of clusters of their own are in etcd_alone_selftest.cpp.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "etcd_cluster.hpp"
#include "process_support.hpp"
#include "redis_process.hpp"
#include "selftest_support.hpp"
#include "tcp_proxy.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using namespace selftest;
using detail::process_state;

constexpr int kDeadlineExceeded = 4;  // grpc::StatusCode
constexpr int kNotFound = 5;

int count_role(const EtcdCluster& etcd, const std::string& wanted) {
  int n = 0;
  for (int i = 0; i < etcd.members(); ++i) n += etcd.role(i) == wanted ? 1 : 0;
  return n;
}

int some_follower(const EtcdCluster& etcd) {
  for (int i = 0; i < etcd.members(); ++i) {
    if (etcd.role(i) == "follower") return i;
  }
  return -1;
}

// A member's own store may lag behind the leader's commit for a moment: bounded.
bool eventually_reads(EtcdClient& client, const std::string& key, const std::string& value) {
  return wait_until(
      [&] {
        try {
          const auto kv = client.get(key, true);
          return kv && kv->value == value;
        } catch (const EtcdError&) {
          return false;
        }
      },
      5s);
}

// The error code of `call`, or -1 when it succeeds.
template <class Call>
int error_code(Call&& call) {
  try {
    call();
    return -1;
  } catch (const EtcdError& error) {
    return error.code();
  }
}

class EtcdClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EtcdClusterOptions options;
    options.proxies = true;
    etcd_ = new EtcdCluster(options);
    const auto before = Clock::now();
    etcd_->start();
    std::cout << "[   TIME   ] cluster start (3 members, election, all serving) "
              << ms_since(before) << " ms\n";
  }

  static void TearDownTestSuite() {
    std::vector<pid_t> pids;
    for (int i = 0; i < etcd_->members(); ++i) pids.push_back(etcd_->pid(i));
    const std::filesystem::path dir = etcd_->dir();
    const auto before = Clock::now();
    delete etcd_;
    etcd_ = nullptr;
    std::cout << "[   TIME   ] cluster destruction " << ms_since(before) << " ms\n";
    EXPECT_TRUE(all_ended(pids));
    EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
    EXPECT_TRUE(live_child_pids().empty());
  }

  // Whatever the test before left: every member running and unpaused, proxies forwarding, a
  // quorum serving.
  void SetUp() override {
    ASSERT_NE(etcd_, nullptr);
    etcd_->pass_all();
    for (int i = 0; i < etcd_->members(); ++i) {
      if (etcd_->paused(i)) etcd_->resume(i);
      if (!etcd_->running(i)) etcd_->start_member(i);
    }
    etcd_->wait_serving(30s);
  }

  static EtcdCluster* etcd_;
};

EtcdCluster* EtcdClusterTest::etcd_ = nullptr;

TEST_F(EtcdClusterTest, StartsOnFreePortsWithOneLeaderAndDistinctMembers) {
  EtcdCluster& etcd = *etcd_;
  ASSERT_EQ(etcd.members(), 3);
  std::set<int> ports;
  std::set<std::uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(etcd.running(i));
    EXPECT_TRUE(in_proc(etcd.pid(i)));
    EXPECT_TRUE(detail::child_pids_of(etcd.pid(i)).empty()) << "etcd forks no helper";
    ports.insert({etcd.client_port(i), etcd.peer_port(i), etcd.proxy(i).port()});
    ids.insert(etcd.member_id(i));
    EXPECT_EQ(etcd.direct_endpoint(i), "http://127.0.0.1:" + std::to_string(etcd.client_port(i)));
    EXPECT_EQ(etcd.endpoint(i), "http://127.0.0.1:" + std::to_string(etcd.proxy(i).port()));
    EXPECT_EQ(EtcdClient(etcd.endpoint(i)).status().member_id, etcd.member_id(i));
    EXPECT_TRUE(std::filesystem::is_directory(etcd.member_dir(i) / "data" / "member"));
    EXPECT_NE(detail::read_file(etcd.log_file(i))
                  .find("\"msg\":\"published local member to cluster through raft\""),
              std::string::npos)
        << "the server's log goes to " << etcd.log_file(i);
  }
  EXPECT_EQ(ports.size(), 9u) << "client, peer and proxy ports all differ";
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids.count(0), 0u);
  EXPECT_EQ(etcd.endpoints().size(), 3u);
  EXPECT_EQ(etcd.endpoints()[1], etcd.endpoint(1));
  EXPECT_EQ(etcd.direct_endpoints()[2], etcd.direct_endpoint(2));

  const int leader = etcd.leader();
  ASSERT_GE(leader, 0) << etcd.roles();
  EXPECT_EQ(etcd.role(leader), "leader");
  EXPECT_EQ(count_role(etcd, "leader"), 1) << etcd.roles();
  EXPECT_EQ(count_role(etcd, "follower"), 2) << etcd.roles();
  EXPECT_EQ(etcd.wait_serving(1s), leader);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(EtcdClient(etcd.direct_endpoint(i)).status().leader, etcd.member_id(leader));
  }
}

TEST_F(EtcdClusterTest, AClientPutsGetsRangesAndRemovesKeys) {
  EtcdCluster& etcd = *etcd_;
  EtcdClient writer(etcd.endpoint(0));
  EtcdClient reader(etcd.endpoint(1));
  const std::int64_t first = writer.put("/kv/b", "1");
  const std::int64_t second = writer.put("/kv/a", "2");
  const std::int64_t third = writer.put("/kv/c", "3");
  EXPECT_GT(first, 0);
  EXPECT_EQ(second, first + 1);
  EXPECT_EQ(third, second + 1);
  writer.put("/kv-other", "not in the prefix");

  const auto b = reader.get("/kv/b");  // linearizable: sees the write at once
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->key, "/kv/b");
  EXPECT_EQ(b->value, "1");
  EXPECT_EQ(b->create_revision, first);
  EXPECT_EQ(b->mod_revision, first);
  EXPECT_EQ(b->version, 1);
  EXPECT_EQ(b->lease, 0);
  const std::int64_t again = reader.put("/kv/b", "changed");
  const auto changed = writer.get("/kv/b");
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->value, "changed");
  EXPECT_EQ(changed->create_revision, first);
  EXPECT_EQ(changed->mod_revision, again);
  EXPECT_EQ(changed->version, 2);
  EXPECT_EQ(reader.get("/kv/none"), std::nullopt);

  const auto all = reader.range("/kv/");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].key, "/kv/b") << "sorted by create revision, not by key";
  EXPECT_EQ(all[1].key, "/kv/a");
  EXPECT_EQ(all[2].key, "/kv/c");
  EtcdClient third_member(etcd.endpoint(2));
  EXPECT_TRUE(eventually_reads(third_member, "/kv/c", "3"));
  EXPECT_EQ(third_member.range("/kv/", true).size(), 3u);
  EXPECT_GE(reader.range("").size(), 4u) << "an empty prefix is every key";

  EXPECT_EQ(writer.remove("/kv/a"), 1);
  EXPECT_EQ(writer.remove("/kv/a"), 0);
  EXPECT_EQ(reader.get("/kv/a"), std::nullopt);
  EXPECT_EQ(writer.remove_prefix("/kv/"), 2);
  EXPECT_TRUE(reader.range("/kv/").empty());
  EXPECT_EQ(writer.remove("/kv-other"), 1);
  EXPECT_GE(writer.status().revision, again);
}

TEST_F(EtcdClusterTest, RevokingALeaseDeletesItsKeysAndShortLeasesExpire) {
  EtcdClient client(etcd_->endpoint(etcd_->leader()));
  const std::int64_t lease = client.grant(30);
  EXPECT_NE(lease, 0);
  EXPECT_EQ(client.granted_ttl(lease), 30);
  const auto left = client.time_to_live(lease);
  EXPECT_GT(left, 25);
  EXPECT_LE(left, 30);
  client.put("/lease/a", "x", lease);
  client.put("/lease/b", "y", lease);
  const auto a = client.get("/lease/a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->lease, lease);

  client.revoke(lease);
  EXPECT_EQ(client.get("/lease/a"), std::nullopt);
  EXPECT_TRUE(client.range("/lease/").empty());
  EXPECT_EQ(client.time_to_live(lease), -1);
  EXPECT_EQ(client.granted_ttl(lease), -1);
  EXPECT_EQ(error_code([&] { client.revoke(lease); }), kNotFound);
  EXPECT_EQ(error_code([&] { client.put("/lease/c", "z", lease); }), kNotFound);

  // etcd's minimum TTL: 1.5 election timeouts, rounded up to seconds (2 s here).
  const std::int64_t short_lease = client.grant(1);
  EXPECT_EQ(client.granted_ttl(short_lease), 2);
  client.put("/lease/short", "s", short_lease);
  const auto granted = Clock::now();
  EXPECT_TRUE(wait_until([&] { return !client.get("/lease/short").has_value(); }, 10s));
  const auto expiry_ms = ms_since(granted);
  EXPECT_GE(expiry_ms, 1000);
  EXPECT_EQ(client.time_to_live(short_lease), -1);
  std::cout << "[   TIME   ] a lease granted for 1 s (2 s granted) deleted its key after "
            << expiry_ms << " ms\n";
}

TEST_F(EtcdClusterTest, KillingTheLeaderElectsANewOneAndTheOldMemberRejoins) {
  EtcdCluster& etcd = *etcd_;
  const int old_leader = etcd.leader();
  ASSERT_GE(old_leader, 0) << etcd.roles();
  const pid_t old_pid = etcd.pid(old_leader);
  const std::uint64_t old_id = etcd.member_id(old_leader);
  const int survivor = (old_leader + 1) % 3;
  EtcdClient client(etcd.endpoint(survivor));
  client.put("/failover/before", "kept");

  auto before = Clock::now();
  etcd.kill(old_leader);
  EXPECT_FALSE(in_proc(old_pid));
  EXPECT_EQ(etcd.pid(old_leader), -1);
  EXPECT_EQ(etcd.role(old_leader), "down");
  const int new_leader = etcd.wait_serving(15s);
  const auto election_ms = ms_since(before);
  EXPECT_NE(new_leader, old_leader);
  EXPECT_EQ(etcd.leader(), new_leader);
  client.put("/failover/during", "x");
  const auto write_ms = ms_since(before);
  EXPECT_EQ(client.get("/failover/before")->value, "kept");

  before = Clock::now();
  etcd.start_member(old_leader);
  const auto rejoin_ms = ms_since(before);
  EXPECT_TRUE(etcd.running(old_leader));
  EXPECT_NE(etcd.pid(old_leader), old_pid);
  EXPECT_EQ(etcd.role(old_leader), "follower") << etcd.roles();
  EXPECT_EQ(etcd.member_id(old_leader), old_id) << "the same member, from its data";
  EXPECT_EQ(etcd.wait_serving(15s), new_leader);
  EtcdClient on_old(etcd.direct_endpoint(old_leader));
  EXPECT_EQ(on_old.status().leader, etcd.member_id(new_leader));
  EXPECT_TRUE(eventually_reads(on_old, "/failover/during", "x")) << "it caught up";
  EXPECT_EQ(client.remove_prefix("/failover/"), 2);
  std::cout << "[   TIME   ] leader killed -> new leader, quorum serving " << election_ms
            << " ms, a write through a survivor " << write_ms
            << " ms; old leader restarted -> follower " << rejoin_ms << " ms\n";
}

TEST_F(EtcdClusterTest, APausedFollowerAnswersNothingAndCatchesUpWhenResumed) {
  EtcdCluster& etcd = *etcd_;
  const int follower = some_follower(etcd);
  ASSERT_GE(follower, 0) << etcd.roles();
  const int leader = etcd.leader();
  EtcdClient on_leader(etcd.endpoint(leader));

  etcd.pause(follower);
  EXPECT_TRUE(etcd.paused(follower));
  EXPECT_EQ(process_state(etcd.pid(follower)), 'T');
  EXPECT_EQ(etcd.role(follower), "paused");
  EtcdClient on_paused(etcd.direct_endpoint(follower), 300ms);
  const auto before = Clock::now();
  EXPECT_EQ(error_code([&] { on_paused.status(); }), kDeadlineExceeded);
  EXPECT_LT(Clock::now() - before, 2s);
  EXPECT_EQ(etcd.wait_serving(5s), leader) << "two of three still serve";
  on_leader.put("/paused/key", "w");

  etcd.resume(follower);
  EXPECT_FALSE(etcd.paused(follower));
  EXPECT_NE(process_state(etcd.pid(follower)), 'T');
  EXPECT_EQ(etcd.wait_serving(15s), leader);
  EXPECT_EQ(etcd.role(follower), "follower") << etcd.roles();
  on_paused.set_timeout(2s);
  EXPECT_TRUE(eventually_reads(on_paused, "/paused/key", "w"));
  on_leader.remove("/paused/key");
}

TEST_F(EtcdClusterTest, ABlackholedProxyCutsOffOneMembersClientsOnly) {
  EtcdCluster& etcd = *etcd_;
  const int cut = some_follower(etcd);
  ASSERT_GE(cut, 0) << etcd.roles();
  EtcdClient through_cut(etcd.endpoint(cut), 500ms);
  through_cut.put("/proxy/before", "1");  // a connection made before the fault

  etcd.proxy(cut).blackhole();
  auto before = Clock::now();
  EXPECT_EQ(error_code([&] { through_cut.get("/proxy/before"); }), kDeadlineExceeded);
  EXPECT_LT(Clock::now() - before, 3s);
  EXPECT_EQ(error_code([&] { EtcdClient(etcd.endpoint(cut), 500ms).status(); }), kDeadlineExceeded)
      << "a new connection hangs as well";
  for (int i = 0; i < 3; ++i) {
    if (i == cut) continue;
    EtcdClient other(etcd.endpoint(i));
    other.put("/proxy/other-" + std::to_string(i), "served");
  }
  EXPECT_EQ(EtcdClient(etcd.direct_endpoint(cut)).range("/proxy/").size(), 3u)
      << "the member itself still serves";
  EXPECT_GE(etcd.wait_serving(5s), 0) << "the harness asks the members directly";

  etcd.proxy(cut).delay(300ms);
  through_cut.set_timeout(5s);
  EXPECT_TRUE(wait_until([&] { return error_code([&] { through_cut.status(); }) == -1; }, 10s));
  before = Clock::now();
  EXPECT_EQ(through_cut.range("/proxy/").size(), 3u);
  EXPECT_GE(Clock::now() - before, 550ms) << "300 ms each way";

  etcd.proxy(cut).pass();
  before = Clock::now();
  through_cut.get("/proxy/before");
  EXPECT_LT(Clock::now() - before, 500ms);
  EXPECT_EQ(through_cut.remove_prefix("/proxy/"), 3);
}

TEST_F(EtcdClusterTest, StopByPidLeavesNoProcessBehind) {
  EtcdCluster& etcd = *etcd_;
  const int follower = some_follower(etcd);
  ASSERT_GE(follower, 0) << etcd.roles();
  const pid_t pid = etcd.pid(follower);
  const auto live = live_child_pids();
  EXPECT_NE(std::find(live.begin(), live.end(), pid), live.end()) << "a registered child";

  const auto before = Clock::now();
  etcd.stop(follower);
  const auto stop_ms = ms_since(before);
  EXPECT_FALSE(in_proc(pid));
  EXPECT_EQ(etcd.pid(follower), -1);
  EXPECT_FALSE(etcd.running(follower));
  EXPECT_EQ(etcd.role(follower), "down");
  const auto after = live_child_pids();
  EXPECT_EQ(std::find(after.begin(), after.end(), pid), after.end());
  EXPECT_GE(etcd.wait_serving(15s), 0) << "two of three serve";
  etcd.stop(follower);  // no-op when down
  etcd.kill(follower);

  // A paused member too: SIGTERM alone would stay pending.
  const int other = some_follower(etcd);
  ASSERT_GE(other, 0) << etcd.roles();
  const pid_t other_pid = etcd.pid(other);
  etcd.pause(other);
  etcd.stop(other);
  EXPECT_FALSE(in_proc(other_pid));
  EXPECT_THROW(etcd.wait_serving(1s), std::logic_error) << "one of three cannot serve";
  EXPECT_EQ(count_role(etcd, "down"), 2) << etcd.roles();
  std::cout << "[   TIME   ] stop (SIGTERM) of a member " << stop_ms << " ms\n";
}

TEST_F(EtcdClusterTest, StopAllAndStartKeepPortsProxiesAndData) {
  EtcdCluster& etcd = *etcd_;
  EtcdClient(etcd.endpoint(0)).put("/survives", "restart");
  const auto urls = etcd.endpoints();
  const auto direct = etcd.direct_endpoints();
  std::vector<pid_t> pids;
  for (int i = 0; i < etcd.members(); ++i) pids.push_back(etcd.pid(i));
  etcd.stop_all();
  for (const pid_t pid : pids) EXPECT_FALSE(in_proc(pid)) << pid;
  EXPECT_EQ(count_role(etcd, "down"), 3);
  EXPECT_THROW(etcd.start_member(3), std::out_of_range);

  const auto before = Clock::now();
  etcd.start();
  std::cout << "[   TIME   ] cluster restart with its data " << ms_since(before) << " ms\n";
  EXPECT_EQ(etcd.endpoints(), urls);
  EXPECT_EQ(etcd.direct_endpoints(), direct);
  EXPECT_EQ(count_role(etcd, "leader"), 1) << etcd.roles();
  EXPECT_THROW(etcd.start(), std::logic_error);
  EtcdClient client(etcd.endpoint(1));
  EXPECT_EQ(client.get("/survives")->value, "restart");
  client.remove("/survives");
}

}  // namespace
}  // namespace dlock::test
