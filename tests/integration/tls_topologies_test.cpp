// TLS beyond a single server, against real groups that ask for client certificates: a
// sentinel group (sentinels on TLS too) through a SENTINEL FAILOVER, a cluster with
// tls-cluster through a reshard, Redlock with an instance whose certificate does not verify,
// and dlockctl reading a `tls:` block. Each group starts once for its test suite.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ha_fixtures.hpp"
#include "redis/crc16.hpp"
#include "redis/keys.hpp"
#include "tls_fixtures.hpp"

namespace dlock::test {
namespace {

/// `topology` over `endpoints` (TLS ports), with test_pki()'s CA and client certificate.
Config tls_topology_config(Topology topology, const std::vector<std::string>& endpoints) {
  Config config = topology_config(topology, endpoints_of(endpoints));
  use_test_tls(config.backends["default"], /*client_cert=*/true);
  return config;
}

std::string lock_key(const std::string& key) {
  return internal::lock_keys(unique_service(), key).lock;
}

/// Whether the server `admin` talks to holds the lock key of `key`.
bool holds(RedisAdmin admin, const std::string& key) {
  return admin.integer({"EXISTS", lock_key(key)}) == 1;
}

/// Clients of `server` connected to its TLS port (CLIENT LIST's laddr, asked over plaintext
/// with `admin`).
int clients_on_tls_port(const RedisServer& server, RedisAdmin admin) {
  const std::string list = admin.command({"CLIENT", "LIST"});
  const std::string laddr = "laddr=" + server.tls_endpoint() + " ";
  int n = 0;
  for (auto at = list.find(laddr); at != std::string::npos; at = list.find(laddr, at + 1)) ++n;
  return n;
}

// ---------------------------------------------------------------------------------------
// Sentinel: data nodes and sentinels on TLS, tls-auth-clients on every process.

class TlsSentinel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SentinelGroup::Options options = fast_sentinel_group();
    options.tls = true;
    options.tls_auth_clients = true;
    group_ = std::make_unique<SentinelGroup>(options);
    group_->start();
  }
  static void TearDownTestSuite() { group_.reset(); }

  static Config config(int wait_replicas) {
    Config config = sentinel_config(*group_, wait_replicas);
    BackendConfig& backend = config.backends["default"];
    backend.endpoints = endpoints_of(group_->sentinel_tls_endpoints());
    use_test_tls(backend, /*client_cert=*/true);
    return config;
  }

  static std::unique_ptr<SentinelGroup> group_;
};

std::unique_ptr<SentinelGroup> TlsSentinel::group_;

TEST_F(TlsSentinel, LocksOnTheMasterTheSentinelsNameAndRefusesWithoutAClientCertificate) {
  Client client(config(1));
  Lease lease = client.acquire("order:1", settings(5s));
  ASSERT_TRUE(lease) << lease.error();
  const auto master = static_cast<std::size_t>(group_->master_index());
  EXPECT_TRUE(holds(group_->data_admin(master), "order:1"));
  EXPECT_GE(clients_on_tls_port(group_->data(master), group_->data_admin(master)), 1);
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);

  Config without = config(1);
  without.backends["default"].tls.cert_file.clear();
  without.backends["default"].tls.key_file.clear();
  Lease refused = Client(without).acquire("order:1", settings(5s));
  EXPECT_EQ(refused.status(), AcquireStatus::kUnavailable);
  EXPECT_NE(refused.error().find("TLS"), std::string::npos) << refused.error();
  EXPECT_TRUE(names_missing_client_certificate(refused.error())) << refused.error();
}

TEST_F(TlsSentinel, FollowsASentinelFailoverToTheNewMastersTlsPortWithAHigherToken) {
  LogCapture log;
  Client client(config(1));
  std::uint64_t before = 0;
  {
    Lease lease = client.acquire("fenced", settings(5s));
    ASSERT_TRUE(lease) << lease.error();
    before = lease.token();
  }
  const auto first = static_cast<std::size_t>(group_->master_index());
  const auto second = static_cast<std::size_t>(group_->failover(30s));
  ASSERT_NE(second, first);
  // The sentinels name the promoted replica while the failover is still in progress; the
  // client moves at the +switch-master that ends it (the old master stays writable until
  // the sentinels demote it).
  const std::string moved = "moved from " + group_->data(first).tls_endpoint() + " to " +
                            group_->data(second).tls_endpoint();
  ASSERT_TRUE(wait_until([&] { return log.text().find(moved) != std::string::npos; }, 10s))
      << "no '" << moved << "' in:\n"
      << log.text();
  // Until the replica left behind resyncs with the new master, WAIT may fall short.
  Lease after;
  EXPECT_TRUE(wait_until(
      [&] {
        after = client.acquire("fenced", settings(5s));
        return static_cast<bool>(after);
      },
      20s, 100ms))
      << after.error();
  ASSERT_TRUE(after);
  EXPECT_GT(after.token(), before);
  EXPECT_TRUE(holds(group_->data_admin(second), "fenced"));
  EXPECT_GE(clients_on_tls_port(group_->data(second), group_->data_admin(second)), 1);
  EXPECT_EQ(after.release(), ReleaseStatus::kReleased);
}

// ---------------------------------------------------------------------------------------
// Cluster: tls-cluster, 3 masters without replicas, the client seeded with one TLS port.

class TlsCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = std::make_unique<RedisClusterGroup>(RedisClusterGroup::Options{
        .masters = 3, .replicas_per_master = 0, .tls = true, .tls_auth_clients = true});
    cluster_->start();
  }
  static void TearDownTestSuite() { cluster_.reset(); }

  static Config config() {
    Config config = tls_topology_config(Topology::kCluster, {cluster_->node(0).tls_endpoint()});
    config.backends["default"].command_timeout = 5000ms;  // the budget for redirects
    return config;
  }
  /// A key whose lock key lies in slots [low, high].
  static std::string key_in_slots(const std::string& prefix, int low, int high) {
    for (int i = 0;; ++i) {
      const std::string key = prefix + std::to_string(i);
      const int slot = internal::key_slot(lock_key(key));
      if (slot >= low && slot <= high) return key;
    }
  }

  static std::unique_ptr<RedisClusterGroup> cluster_;
};

std::unique_ptr<RedisClusterGroup> TlsCluster::cluster_;

TEST_F(TlsCluster, LocksOnKeysOfEveryMasterFollowTheSlotMapToTlsPorts) {
  Client client(config());
  // redis-cli gives three masters 0-5460, 5461-10922 and 10923-16383.
  const std::vector<std::pair<int, int>> thirds = {{0, 5000}, {6000, 10000}, {11000, 16383}};
  std::map<int, Lease> held;  // by master
  for (const auto& [low, high] : thirds) {
    const std::string key = key_in_slots("spread:", low, high);
    const int master = cluster_->master_of_slot(internal::key_slot(lock_key(key)));
    Lease lease = client.acquire(key, settings(5s));
    ASSERT_TRUE(lease) << key << ": " << lease.error();
    EXPECT_TRUE(holds(RedisAdmin(cluster_->node(static_cast<std::size_t>(master))), key)) << key;
    held.emplace(master, std::move(lease));
  }
  EXPECT_EQ(held.size(), 3u) << "the keys did not land on three masters";
  for (auto& [master, lease] : held) {
    RedisServer& node = cluster_->node(static_cast<std::size_t>(master));
    EXPECT_GE(clients_on_tls_port(node, RedisAdmin(node)), 1);
    EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  }
}

TEST_F(TlsCluster, AHeldLockWhoseSlotMovesIsReleasedAndTakenAgainThroughMovedToATlsPort) {
  const int from = cluster_->master_of_slot(0);  // the reshard takes the source's lowest slots
  const int to = cluster_->master_of_slot(16383);
  ASSERT_GE(from, 0);
  ASSERT_GE(to, 0);
  const std::string key = key_in_slots("moving:", 0, 0);
  LogCapture log(LogLevel::kDebug);
  Client holder(config()), rival(config());
  Lease held = holder.acquire(key, settings(20s));
  ASSERT_TRUE(held) << held.error();
  EXPECT_EQ(rival.try_acquire(key, settings(5s)).status(), AcquireStatus::kBusy);

  const auto reshard =
      cluster_->reshard(static_cast<std::size_t>(from), static_cast<std::size_t>(to), 1, 30s);
  ASSERT_EQ(reshard.status, 0) << reshard.output;
  ASSERT_TRUE(cluster_->wait_ok(15s));
  ASSERT_TRUE(holds(RedisAdmin(cluster_->node(static_cast<std::size_t>(to))), key))
      << "the lock did not move with its slot";

  Lease refused = rival.try_acquire(key, settings(5s));
  EXPECT_EQ(refused.status(), AcquireStatus::kBusy) << refused.error();
  const std::uint64_t token = held.token();
  EXPECT_EQ(held.release(), ReleaseStatus::kReleased);
  Lease again = rival.try_acquire(key, settings(5s));
  ASSERT_TRUE(again) << again.error();
  EXPECT_GT(again.token(), token);
  EXPECT_EQ(again.release(), ReleaseStatus::kReleased);
  const std::string moved =
      "MOVED 0 " + cluster_->node(static_cast<std::size_t>(to)).tls_endpoint();
  EXPECT_NE(log.text().find(moved), std::string::npos) << "no '" << moved << "' in:\n"
                                                       << log.text();
}

// ---------------------------------------------------------------------------------------
// Redlock: three instances with tls-auth-clients.

class TlsRedlock : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    group_ = std::make_unique<RedlockGroup>(
        3, RedlockGroup::Options{.tls = true, .tls_auth_clients = true});
    group_->start();
  }
  static void TearDownTestSuite() { group_.reset(); }

  static std::size_t holders(const std::string& key) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < group_->size(); ++i) {
      if (!group_->instance(i).running()) continue;
      n += holds(RedisAdmin(group_->instance(i)), key) ? 1 : 0;
    }
    return n;
  }

  static std::unique_ptr<RedlockGroup> group_;
};

std::unique_ptr<RedlockGroup> TlsRedlock::group_;

TEST_F(TlsRedlock, AQuorumGrantsOverMutualTlsAndStillDoesWithOneInstanceStopped) {
  Client client(tls_topology_config(Topology::kRedlock, group_->tls_endpoints()));
  {
    Lease lease = client.acquire("all-up", settings(5s));
    ASSERT_TRUE(lease) << lease.error();
    EXPECT_EQ(holders("all-up"), 3u);
    EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
  }
  group_->instance(2).stop();
  Lease lease = client.acquire("one-down", settings(5s));
  const bool granted = static_cast<bool>(lease);
  const std::size_t on = holders("one-down");
  const auto released = granted ? lease.release() : ReleaseStatus::kNotHeld;
  group_->instance(2).start();
  ASSERT_TRUE(granted) << lease.error();
  EXPECT_EQ(on, 2u);
  EXPECT_EQ(released, ReleaseStatus::kReleased);
}

TEST_F(TlsRedlock, AnInstanceWhoseCertificateDoesNotVerifyIsLeftOutAndNamedInTheLog) {
  RedisServer stranger(tls_server(test_pki().stranger_cert, test_pki().stranger_key,
                                  /*auth_clients=*/true));
  stranger.start();
  std::vector<std::string> endpoints = group_->tls_endpoints();
  endpoints.back() = stranger.tls_endpoint();
  LogCapture log(LogLevel::kDebug);
  Client client(tls_topology_config(Topology::kRedlock, endpoints));
  Lease lease = client.acquire("stranger", settings(5s));
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_FALSE(holds(RedisAdmin(stranger), "stranger"));
  const std::string named =
      "TLS: the certificate of " + stranger.tls_endpoint() + " did not verify";
  EXPECT_TRUE(wait_until([&] { return log.text().find(named) != std::string::npos; }, 3s))
      << "no '" << named << "' in:\n"
      << log.text();
  EXPECT_EQ(lease.release(), ReleaseStatus::kReleased);
}

// ---------------------------------------------------------------------------------------
// dlockctl with a `tls:` block, against one server with tls-auth-clients.

class TlsDlockctl : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<RedisServer>(good_server(/*auth_clients=*/true));
    server_->start();
  }
  static void TearDownTestSuite() { server_.reset(); }

  /// A configuration of the server's TLS port that trusts `ca_file`.
  std::string write_config(const std::string& ca_file) {
    const TestPki& pki = test_pki();
    files_.push_back(std::make_unique<YamlFile>(
        "service: \"" + unique_service() + "\"\nbackends:\n  default:\n    topology: single\n" +
        "    address: " + server_->tls_address() +
        "\n    connect_timeout: 500ms\n    command_timeout: 500ms\n    tls:\n      ca_file: " +
        ca_file + "\n      cert_file: " + pki.client_cert + "\n      key_file: " + pki.client_key +
        "\n"));
    return files_.back()->path();
  }
  static CommandResult ctl(const std::vector<std::string>& args) {
    std::vector<std::string> argv{DLOCK_CTL};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, 15s);
  }

  static std::unique_ptr<RedisServer> server_;
  std::vector<std::unique_ptr<YamlFile>> files_;
};

std::unique_ptr<RedisServer> TlsDlockctl::server_;

TEST_F(TlsDlockctl, ListAndInspectShowALockHeldOverTls) {
  const std::string config = write_config(test_pki().ca_file);
  Client client(load_config(config));
  Lease lease = client.try_acquire("order:{7}", settings(30s));
  ASSERT_TRUE(lease) << lease.error();
  const std::string token = std::to_string(lease.token());
  const auto list = ctl({"--config", config, "list"});
  EXPECT_EQ(list.status, 0) << list.output;
  EXPECT_NE(list.output.find("order:{7}"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find(token), std::string::npos) << list.output;
  const auto inspect = ctl({"--config", config, "inspect", "order:{7}"});
  EXPECT_EQ(inspect.status, 0) << inspect.output;
  EXPECT_NE(inspect.output.find(token), std::string::npos) << inspect.output;
}

TEST_F(TlsDlockctl, AServerCertificateOfAnotherCaFailsNamingTlsWithinTheTimeouts) {
  const std::string config = write_config(test_pki().other_ca_file);
  const auto started = Clock::now();
  const auto r = ctl({"--config", config, "list"});
  EXPECT_LT(elapsed_ms(started), 3000);
  EXPECT_EQ(r.status, 4) << r.output;  // the lock server unreachable (docs/CLI.md)
  EXPECT_NE(r.output.find("TLS"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("did not verify"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace dlock::test
