// The ZooKeeper backend against a real 3-member ensemble started once for this program: what
// the contract suite cannot show (the znodes, the czxid as token, leader changes, stalled
// members, an expired session, waiters that watch only their predecessor). Each test keeps
// to its own service namespace.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "fixtures.hpp"
#include "tcp_proxy.hpp"
#include "zookeeper_ensemble.hpp"

namespace dlock::test {
namespace {

constexpr Millis kSession = 4s;

ZookeeperEnsemble& ensemble() {
  static ZookeeperEnsemble& e = *[] {
    static ZookeeperEnsemble started;
    started.start();
    return &started;
  }();
  return e;
}

ZookeeperClient& inspector() {
  static ZookeeperClient client(ensemble().connect_string());
  return client;
}

Config config_with(std::vector<Endpoint> endpoints) {
  Config c;
  c.service = unique_service();
  BackendConfig b;
  b.name = "default";
  b.topology = Topology::kZookeeper;
  b.endpoints = std::move(endpoints);
  b.session_timeout = kSession;
  b.connect_timeout = 1s;
  b.command_timeout = 1s;
  c.backends["default"] = b;
  return c;
}

Config config() {
  std::vector<Endpoint> endpoints;
  for (int i = 0; i < ensemble().members(); ++i) {
    endpoints.push_back(Endpoint{"127.0.0.1", ensemble().client_port(i)});
  }
  return config_with(std::move(endpoints));
}

long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

/// The lock znodes of the one key a test of `service` uses, in queue order.
std::vector<std::string> lock_znodes(const std::string& service) {
  const std::string locks = "/dlock/" + service + "/locks";
  const auto dirs = inspector().children(locks);
  if (dirs.empty()) return {};
  EXPECT_EQ(dirs.size(), 1u);
  std::vector<std::string> names;
  for (const std::string& name : inspector().children(locks + "/" + dirs[0])) {
    names.push_back(locks + "/" + dirs[0] + "/" + name);
  }
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.substr(a.size() - 10) < b.substr(b.size() - 10);
  });
  return names;
}

// Restarts whatever a test stopped, so that the next one finds three members serving.
class Zookeeper : public ::testing::Test {
 protected:
  void TearDown() override {
    for (int i = 0; i < ensemble().members(); ++i) {
      if (ensemble().paused(i)) ensemble().resume(i);
      if (!ensemble().running(i)) ensemble().start_member(i);
    }
    ensemble().wait_serving();
  }
};

TEST_F(Zookeeper, TheTokenIsTheCzxidOfTheLockZnodeAndTheZnodeIsEphemeral) {
  Config c = config();
  Client client(c);
  Lease lease = client.acquire("order:1", settings(10s));
  ASSERT_TRUE(lease) << lease.error();
  const auto znodes = lock_znodes(c.service);
  ASSERT_EQ(znodes.size(), 1u);
  const auto stat = inspector().exists(znodes[0]);
  ASSERT_TRUE(stat);
  EXPECT_EQ(static_cast<std::uint64_t>(stat->czxid), lease.token());
  EXPECT_NE(stat->ephemeral_owner, 0);
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(lock_znodes(c.service).empty());
}

TEST_F(Zookeeper, ALeaseIsHeldToTheSessionTimeout) {
  Client client(config());
  Lease lease = client.acquire("k", settings(60s));
  ASSERT_TRUE(lease);
  EXPECT_LE(lease.remaining(), kSession);
  EXPECT_GT(lease.remaining(), kSession - 500ms);
}

TEST_F(Zookeeper, AHeldLockSurvivesALeaderChangeAndTokensKeepIncreasing) {
  Config c = config();
  Client a(c), b(c);
  Lease first = a.acquire("k", settings(10s));
  ASSERT_TRUE(first);
  const std::uint64_t before = first.token();
  const int leader = ensemble().leader();
  ASSERT_GE(leader, 0);
  const auto killed = Clock::now();
  ensemble().kill(leader);
  // Calls during the election wait for it or answer unavailable within their timeouts.
  long long first_grant = -1;
  for (int i = 0; i < 100 && first_grant < 0; ++i) {
    if (b.try_acquire(fmt::format("other:{}", i), settings(10s))) first_grant = ms_since(killed);
  }
  ensemble().wait_serving();
  std::printf("[ measured ] leader killed: another key granted after %lld ms\n", first_grant);
  EXPECT_GE(first_grant, 0);
  // Past a session timeout: the session moved to a live member and renewals went on.
  std::this_thread::sleep_for(kSession + 1s);
  EXPECT_FALSE(first.lost()) << to_string(first.view().loss_reason());
  EXPECT_EQ(b.try_acquire("k", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(first.release(), ReleaseStatus::kReleased);
  Lease second = b.acquire("k", settings(10s, 2s));
  ASSERT_TRUE(second) << second.error();
  EXPECT_GT(second.token(), before);
  // A new leader starts a new epoch: the high 32 bits of every zxid after it are higher.
  EXPECT_GT(second.token() >> 32, before >> 32);
}

TEST_F(Zookeeper, AStalledFollowerDoesNotCostAHolderItsLock) {
  Config c = config();
  Client a(c), b(c);
  Lease lease = a.acquire("k", settings(10s));
  ASSERT_TRUE(lease);
  // Whichever follower the session is on, stalling each in turn moves it at least once: the
  // client gives a server up after two thirds of the session timeout without an answer.
  // (A stalled leader stops the followers too, after syncLimit ticks, and costs an election:
  // the checker's stop-member fault covers that.)
  Millis least = lease.remaining();
  const int leader = ensemble().leader();
  ASSERT_GE(leader, 0);
  for (int i = 0; i < ensemble().members(); ++i) {
    if (i == leader) continue;
    ensemble().pause(i);
    const auto until = Clock::now() + kSession * 3 / 4;
    while (Clock::now() < until) {
      least = std::min(least, lease.remaining());
      std::this_thread::sleep_for(10ms);
    }
    ensemble().resume(i);
    ensemble().wait_serving();
    // A resumed follower still says "follower" before the leader, which dropped it after
    // syncLimit, has it back: stalling the other one before then leaves no quorum.
    ASSERT_TRUE(wait_until(
        [&] {
          const auto mntr = zookeeper_four_letter_word(ensemble().client_port(leader), "mntr");
          return mntr && mntr->find("zk_synced_followers\t2") != std::string::npos;
        },
        20s, 50ms))
        << "follower " << i << " did not sync again; " << ensemble().modes();
  }
  std::printf("[ measured ] followers stalled in turn: the lease's validity fell to %lld ms of "
              "%lld at the least\n",
              static_cast<long long>(least.count()), static_cast<long long>(kSession.count()));
  EXPECT_FALSE(lease.lost()) << to_string(lease.view().loss_reason());
  EXPECT_EQ(b.try_acquire("k", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
}

TEST_F(Zookeeper, WaitersAreGrantedInArrivalOrderAndOnlyTheNextOneWakes) {
  Config c = config();
  c.backends["default"].poll_interval = 30s;  // no polling: only watches wake anyone
  Client holder(c);
  Lease held = holder.acquire("k", settings(10s));
  ASSERT_TRUE(held);
  constexpr int kWaiters = 3;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<std::thread> threads;
  std::vector<std::uint64_t> tokens(kWaiters, 0);
  std::atomic<int> order{0};
  std::vector<int> place(kWaiters, -1);
  std::atomic<int> release_next{-1};
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(std::make_unique<Client>(c));
    threads.emplace_back([&, i] {
      Lease lease = clients[i]->acquire("k", settings(10s, 15s));
      tokens[i] = lease.token();
      place[i] = order++;
      while (release_next.load() != i) std::this_thread::sleep_for(1ms);
      lease.release();
      release_next = i + 1;
    });
    // Queued before the next one arrives: a znode of its own behind the others.
    ASSERT_TRUE(wait_until([&] { return lock_znodes(c.service).size() == 2u + i; }, 5s, 5ms));
  }
  held.release();
  ASSERT_TRUE(wait_until([&] { return order.load() == 1; }, 5s, 1ms));
  std::this_thread::sleep_for(200ms);
  // The release woke the first waiter only: the others watch the znode before their own.
  EXPECT_EQ(clients[0]->metrics().wakeups, 1u);
  EXPECT_EQ(clients[1]->metrics().wakeups, 0u);
  EXPECT_EQ(clients[2]->metrics().wakeups, 0u);
  release_next = 0;
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(place[i], i);
    EXPECT_GT(tokens[i], 0u);
  }
  EXPECT_LT(tokens[0], tokens[1]);
  EXPECT_LT(tokens[1], tokens[2]);
}

TEST_F(Zookeeper, ABusyTryAndAWaiterThatGivesUpLeaveNoZnodeBehind) {
  Config c = config();
  Client a(c), b(c);
  Lease held = a.acquire("k", settings(10s));
  ASSERT_TRUE(held);
  EXPECT_EQ(b.try_acquire("k", settings(10s)).status(), AcquireStatus::kBusy);
  EXPECT_EQ(b.acquire("k", settings(10s, 300ms)).status(), AcquireStatus::kBusy);
  EXPECT_TRUE(wait_until([&] { return lock_znodes(c.service).size() == 1u; }, 2s, 5ms));
  // The waiter's znode went: the next one in line is not stuck behind a waiter that left.
  Client d(c);
  std::thread next([&] { EXPECT_TRUE(d.acquire("k", settings(10s, 5s))); });
  ASSERT_TRUE(wait_until([&] { return lock_znodes(c.service).size() == 2u; }, 2s, 1ms));
  const auto released = Clock::now();
  held.release();
  next.join();
  EXPECT_LT(ms_since(released), 1000);
}

TEST_F(Zookeeper, AnExpiredSessionLosesTheLeaseAndTheNextOwnerHasAHigherToken) {
  std::vector<std::unique_ptr<TcpProxy>> proxies;
  std::vector<Endpoint> through;
  for (int i = 0; i < ensemble().members(); ++i) {
    proxies.push_back(std::make_unique<TcpProxy>("127.0.0.1", ensemble().client_port(i)));
    through.push_back(Endpoint{"127.0.0.1", proxies.back()->port()});
  }
  Config cut = config_with(through);
  Config direct = config();
  direct.service = cut.service;
  Client a(cut), b(direct);
  Lease lease = a.acquire("k", settings(30s));
  ASSERT_TRUE(lease) << lease.error();
  std::atomic<bool> told{false};
  lease.view().on_lost([&](const LeaseView&) { told = true; });
  const auto cut_at = Clock::now();
  for (auto& proxy : proxies) proxy->blackhole();
  // The ensemble expires the session a session timeout after it last heard from it; the
  // holder stops trusting its lease no later than that.
  std::atomic<long long> told_at{-1};
  lease.view().on_lost([&](const LeaseView&) { told_at = ms_since(cut_at); });
  Lease next = b.acquire("k", settings(10s, 15s));
  ASSERT_TRUE(next) << next.error();
  const long long granted_after = ms_since(cut_at);
  EXPECT_GE(granted_after, kSession.count() - 1000);
  EXPECT_TRUE(wait_until([&] { return told.load(); }, 1s, 5ms));
  std::printf("[ measured ] holder cut off: told lost after %lld ms, next owner granted after "
              "%lld ms (session timeout %lld ms)\n",
              told_at.load(), granted_after, static_cast<long long>(kSession.count()));
  EXPECT_LE(told_at.load(), granted_after);
  EXPECT_TRUE(lease.lost());
  EXPECT_GT(next.token(), lease.token());
  for (auto& proxy : proxies) proxy->pass();
  // The old session is expired for good; the next call starts another.
  EXPECT_EQ(lease.release(), ReleaseStatus::kLost);
  EXPECT_TRUE(next.release() == ReleaseStatus::kReleased);
  Lease again = a.acquire("k", settings(10s, 10s));
  EXPECT_TRUE(again) << again.error();
  EXPECT_GT(again.token(), next.token());
}

TEST_F(Zookeeper, AdminListsForcesAndRecordsAndTheForcedHolderFindsItsLeaseGone) {
  Config c = config();
  Client a(c), b(c);
  Lease held = a.acquire("invoice:7", settings(3s), "billing");
  ASSERT_TRUE(held);
  Admin admin(b);
  const auto locks = admin.list("invoice:*");
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(locks[0].key, "invoice:7");
  EXPECT_EQ(locks[0].name, "billing");
  EXPECT_EQ(locks[0].token, held.token());
  EXPECT_EQ(locks[0].pid, static_cast<long long>(::getpid()));
  EXPECT_EQ(locks[0].ttl, Millis{-1});
  EXPECT_TRUE(admin.list("order:*").empty());
  std::thread waiter([&] { EXPECT_TRUE(b.acquire("invoice:7", settings(10s, 5s))); });
  ASSERT_TRUE(wait_until([&] { return lock_znodes(c.service).size() == 2u; }, 2s, 1ms));
  const auto removed = admin.force_release("invoice:7", "stuck");
  ASSERT_TRUE(removed);
  EXPECT_EQ(removed->owner, locks[0].owner);
  waiter.join();
  EXPECT_TRUE(wait_until([&] { return held.lost(); }, 3s, 10ms));
  EXPECT_EQ(held.view().loss_reason(), LossReason::kGone);
  const auto history = admin.history(10);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].key, "invoice:7");
  EXPECT_EQ(history[0].note, "stuck");
  EXPECT_EQ(history[0].token, held.token());
  EXPECT_GT(history[0].at_ms, 0);
}

TEST_F(Zookeeper, AnUnreachableEnsembleAnswersUnavailableWithinTheTimeouts) {
  Config c = config_with({Endpoint{"127.0.0.1", 1}, Endpoint{"127.0.0.1", 2}});
  Client client(c);
  const auto start = Clock::now();
  Lease lease = client.acquire("k", settings(10s, 0ms));
  EXPECT_EQ(lease.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(lease.error().find("127.0.0.1:1"), std::string::npos) << lease.error();
  const long long took = ms_since(start);
  std::printf("[ measured ] no member reachable: unavailable after %lld ms\n", took);
  EXPECT_LE(took, 1500);
}

TEST_F(Zookeeper, AYamlFileWithOnlyTheBackendChangedRunsTheSameCodeAndDlockctlWorksOnIt) {
  std::string hosts;
  for (int i = 0; i < ensemble().members(); ++i) {
    hosts += (i ? ", " : "") + ensemble().endpoint(i);
  }
  // A service that no znode name can be as it is: the backend writes it %XX.
  const std::string service = "shop/" + unique_service();
  YamlFile file(fmt::format(R"(service: {}
backends:
  default:
    topology: zookeeper
    hosts: [{}]
    session_timeout: 4s
    root: /apps/dlock
)",
                            service, hosts));
  const auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {DLOCK_CTL, "--config", file.path()});
    return run_command(args, 15s);
  };
  Client client(load_config(file.path()));
  Lease held = client.acquire("order:7", settings(10s));
  ASSERT_TRUE(held) << held.error();
  EXPECT_EQ(inspector().children("/apps/dlock/shop%2F" + service.substr(5) + "/locks").size(), 1u);
  EXPECT_EQ(ctl({"check-config"}).status, 0);
  const CommandResult list = ctl({"list", "order:*"});
  EXPECT_EQ(list.status, 0);
  EXPECT_NE(list.output.find("order:7"), std::string::npos) << list.output;
  const CommandResult inspect = ctl({"--json", "inspect", "order:7"});
  EXPECT_EQ(inspect.status, 0);
  EXPECT_NE(inspect.output.find(std::to_string(held.token())), std::string::npos)
      << inspect.output;
  EXPECT_EQ(ctl({"release", "order:7", "--force", "--note", "stuck"}).status, 0);
  EXPECT_EQ(ctl({"inspect", "order:7"}).status, 1);
  const CommandResult history = ctl({"history"});
  EXPECT_NE(history.output.find("stuck"), std::string::npos) << history.output;
}

TEST(ZookeeperGrant, ALeaseIsNeverLongerThanTheSessionTimeoutTheEnsembleGranted) {
  // The ensemble grants at most 2 s, whatever is asked; the client asks 10 s.
  ZookeeperEnsemble::Options options;
  options.members = 1;
  options.extra_config = {"maxSessionTimeout=2000"};
  ZookeeperEnsemble capped(options);
  capped.start();
  Config c = config_with({Endpoint{"127.0.0.1", capped.client_port(0)}});
  c.backends["default"].session_timeout = 10s;
  Client client(c);
  // The first call may come before the session is granted: it is then refused, not held to
  // the 10 s asked.
  Lease first = client.acquire("k", settings(30s));
  if (!first) {
    EXPECT_NE(first.error().find("granted a session timeout of 2000 ms"), std::string::npos)
        << first.error();
    first = client.acquire("k", settings(30s));
  }
  ASSERT_TRUE(first) << first.error();
  EXPECT_LE(first.remaining(), 2s);
  Lease second = client.acquire("other", settings(30s));
  ASSERT_TRUE(second);
  EXPECT_LE(second.remaining(), 2s);
}

}  // namespace
}  // namespace dlock::test
