// The etcd backend at its edges, against a real 3-member cluster behind proxies: requests
// that reach a member late (a put, a delete, after the call went on to another), renewal
// rounds larger than one etcd transaction may be, waiters that only read while they wait,
// and a client that goes while the cluster is stopped.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend.hpp"
#include "dlock/dlock.hpp"
#include "engine.hpp"
#include "etcd_cluster.hpp"
#include "fixtures.hpp"
#include "tcp_proxy.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class EtcdEdges : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    EtcdClusterOptions options;
    options.proxies = true;
    cluster_ = new EtcdCluster(options);
    cluster_->start();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void TearDown() override { cluster_->pass_all(); }

  /// Member 0 through its proxy first (the member a new client talks to), the others
  /// directly.
  static Config config(Millis command_timeout = 1s) {
    Config c;
    c.service = "edges";
    BackendConfig& b = c.backends["default"];
    b.name = "default";
    b.topology = Topology::kEtcd;
    for (int i = 0; i < cluster_->members(); ++i) {
      const int port = i == 0 ? cluster_->proxy(0).port() : cluster_->client_port(i);
      b.endpoints.push_back(Endpoint{"127.0.0.1", port});
    }
    b.connect_timeout = 1s;
    b.command_timeout = command_timeout;
    return c;
  }
  static std::uint64_t raft_index() {
    return EtcdClient(cluster_->direct_endpoint(cluster_->wait_serving())).status().raft_index;
  }

  static EtcdCluster* cluster_;
};

EtcdCluster* EtcdEdges::cluster_ = nullptr;

// A try answered busy by another member, after member 0 sat on it past its half of the
// call's time: when member 0 applies it later, the lock it would then find free must not get
// a key that nobody owns (its lease is revoked, not reused by the process's next lock).
TEST_F(EtcdEdges, ALatePutLeavesNoKeyThatNobodyOwns) {
  Client holder(config()), late(config()), other(config());
  Lease held = holder.acquire("late", settings(10s));
  ASSERT_TRUE(held);
  // Connected to member 0 first: a request on a connection not yet made is never sent.
  ASSERT_TRUE(late.try_acquire("warm-up", settings(10s)));
  cluster_->proxy(0).delay(1500ms);
  // Member 0 gets its half (500 ms), then another member answers: busy.
  EXPECT_EQ(late.try_acquire("late", settings(10s)).status(), AcquireStatus::kBusy);
  cluster_->proxy(0).pass();
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  // The late copy reaches member 0 about 1.5 s after it was sent; the process takes other
  // locks meanwhile, on leases it would reuse.
  std::vector<Lease> more;
  for (int i = 0; i < 5; ++i) more.push_back(late.acquire("more:" + std::to_string(i), settings(10s)));
  std::this_thread::sleep_for(2500ms);
  Lease next = other.try_acquire("late", settings(10s));
  EXPECT_TRUE(next) << "the lock is held by a key nobody owns: " << next.error();
}

// A permit's try answered busy leaves the queue at once: its key's delete, sent to member 0
// right after the create's answer, sits there past its half of the call's time, and another
// member deletes the key. When member 0 applies the late copy, the key of the process's next
// permit of the lock (named by its lease, had that lease been reused) must stay.
TEST_F(EtcdEdges, ALateDeleteLeavesTheNextHoldsKeyAlone) {
  Client holder(config()), late(config()), other(config());
  LockSettings permit = settings(10s);
  permit.permits = 1;
  Lease held = holder.acquire("gone", permit);
  ASSERT_TRUE(held);
  ASSERT_TRUE(late.try_acquire("warm-up", settings(10s)));  // connected to member 0
  std::this_thread::sleep_for(200ms);  // the warm-up's release answered
  cluster_->proxy(0).delay_requests_after_reply(1500ms);
  EXPECT_EQ(late.try_acquire("gone", permit).status(), AcquireStatus::kBusy);
  ASSERT_EQ(cluster_->proxy(0).mode(), TcpProxy::Mode::kDelayRequests) << "member 0 answered nothing";
  cluster_->proxy(0).pass();
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  Lease mine = late.try_acquire("gone", permit);
  ASSERT_TRUE(mine) << mine.error();
  std::this_thread::sleep_for(2s);  // the late delete has reached member 0; no renewal yet
  Lease second = other.try_acquire("gone", permit);
  EXPECT_FALSE(second) << "a second holder of 1 permit (tokens " << mine.token() << ", "
                       << second.token() << ")";
  EXPECT_GT(mine.remaining(), 0ms);
}

// One renewal round of more leases than etcd takes in one transaction (128 operations).
TEST_F(EtcdEdges, ARenewalRoundOfHundredsOfLeasesRenewsThemAll) {
  const Config c = config();
  auto metrics = std::make_shared<internal::Metrics>();
  const internal::Engine engine =
      internal::make_engine(c.backends.at("default"), c.service, metrics);
  std::vector<Key> keys;
  std::vector<std::string> owners;
  for (int i = 0; i < 300; ++i) {
    keys.emplace_back("round:" + std::to_string(i));
    owners.push_back("owner-" + std::to_string(i));
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const internal::GrantRequest request{keys[i], owners[i], 10s, "", Clock::now() + 5s};
    ASSERT_EQ(engine.lock->acquire(request).kind, internal::GrantReply::Kind::kAcquired) << i;
  }
  std::vector<internal::RenewItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) items.push_back({&keys[i], owners[i], 10s});
  engine.lock->renew(items);
  int renewed = 0;
  for (const auto& item : items) renewed += item.outcome == internal::RenewOutcome::kRenewed;
  EXPECT_EQ(renewed, 300);
  for (std::size_t i = 0; i < keys.size(); ++i) engine.lock->release(keys[i], owners[i], 0ms);
}

// Waiters queued behind a holder only read while they wait (a poll every poll_interval):
// raft's log grows by no entry of theirs.
TEST_F(EtcdEdges, QueuedWaitersWriteNothingWhileTheyWait) {
  Config c = config();
  c.backends["default"].poll_interval = 100ms;
  Client holder(c);
  Lease held = holder.acquire("queue", settings(10s));
  ASSERT_TRUE(held);
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Client>(c));
    waiters.emplace_back([&, i] { (void)clients[i]->acquire("queue", settings(10s, 3s)); });
  }
  std::this_thread::sleep_for(700ms);  // all queued
  const std::uint64_t before = raft_index();
  std::this_thread::sleep_for(1500ms);  // 15 polls each
  const std::uint64_t after = raft_index();
  for (auto& waiter : waiters) waiter.join();
  std::printf("figure: raft entries while 5 waiters polled every 100 ms for 1.5 s: %llu\n",
              static_cast<unsigned long long>(after - before));
  EXPECT_LE(after - before, 5u);  // 75 polls: a write each would add 75
}

// Keys kept for min_hold while the cluster is stopped: a client that goes does not wait for
// each of their deletes in turn.
TEST_F(EtcdEdges, AClientGoesPromptlyWhileTheClusterIsStopped) {
  auto client = std::make_unique<Client>(config());
  std::vector<Lease> leases;
  for (int i = 0; i < 10; ++i) {
    LockSettings s = settings(10s);
    s.min_hold = 1s;
    leases.push_back(client->acquire("kept:" + std::to_string(i), s));
    ASSERT_TRUE(leases.back());
  }
  for (Lease& lease : leases) EXPECT_EQ(lease.release(), ReleaseStatus::kKeptForMinHold);
  for (int i = 0; i < cluster_->members(); ++i) cluster_->pause(i);
  std::this_thread::sleep_for(1200ms);  // min_hold over: the keeper tries the deletes
  const auto start = Clock::now();
  client.reset();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  for (int i = 0; i < cluster_->members(); ++i) cluster_->resume(i);
  cluster_->wait_serving();
  std::printf("figure: client destroyed in %lld ms with 10 deletes due and no member answering\n",
              static_cast<long long>(took.count()));
  EXPECT_LT(took, 3s);
}

}  // namespace
}  // namespace dlock::test
