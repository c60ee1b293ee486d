// The backends of the contract suites, each started as its tests need it (server groups once
// per test program), and the fixture those suites share: one parameter per topology.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/dlock.hpp"
#include "endpoints.hpp"
#include "postgres_server.hpp"
#include "etcd_cluster.hpp"
#include "zookeeper_ensemble.hpp"
#include "redis_groups.hpp"
#include "redis_process.hpp"

namespace dlock::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline LockSettings settings(Millis lease, Millis wait = 0ms) {
  LockSettings s;
  s.lease = lease;
  s.wait = wait;
  return s;
}

inline long long ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

/// Starts whatever the backend needs and describes it as a Config.
class Topo {
 public:
  virtual ~Topo() = default;
  virtual Config config() = 0;
  /// How long a lease lasts at most without renewal, when the engine decides that (a
  /// ZooKeeper session) rather than the lease asked for.
  [[nodiscard]] virtual Millis lease_limit() const { return Millis::max(); }
};

class MemoryTopo : public Topo {
 public:
  Config config() override {
    Config c;
    c.service = service();
    BackendConfig b;
    b.name = "default";
    b.topology = Topology::kMemory;
    b.poll_interval = 250ms;
    c.backends["default"] = b;
    return c;
  }
  static std::string service() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(info->test_suite_name()) + "." + info->name();
  }
};

class SingleTopo : public Topo {
 public:
  SingleTopo() { server_.start(); }
  Config config() override {
    Config c = MemoryTopo().config();
    BackendConfig& b = c.backends["default"];
    b.topology = Topology::kSingle;
    b.endpoints = {Endpoint{server_.host(), server_.port()}};
    b.connect_timeout = 500ms;
    b.command_timeout = 500ms;
    return c;
  }

 private:
  RedisServer server_;
};

// The server groups are started once per test program, on first use, and stopped at exit;
// each test keeps to its own service namespace.
inline Config group_config(Topology topology, std::vector<Endpoint> endpoints) {
  Config c = MemoryTopo().config();
  BackendConfig& b = c.backends["default"];
  b.topology = topology;
  b.endpoints = std::move(endpoints);
  b.connect_timeout = 500ms;
  b.command_timeout = 500ms;
  return c;
}

class SentinelTopo : public Topo {
 public:
  Config config() override {
    static SentinelGroup& group = *[] {
      SentinelGroup::Options o;
      o.password = "data-secret";
      o.sentinel_password = "sentinel-secret";
      static SentinelGroup g(o);
      g.start();
      return &g;
    }();
    Config c = group_config(Topology::kSentinel, endpoints_of(group.sentinel_endpoints()));
    BackendConfig& b = c.backends["default"];
    b.master_name = group.options().master_name;
    b.password = group.options().password;
    b.sentinel_password = group.options().sentinel_password;
    b.wait_replicas = 1;
    return c;
  }
};

class ClusterTopo : public Topo {
 public:
  Config config() override {
    static RedisClusterGroup& group = *[] {
      static RedisClusterGroup g;
      g.start();
      return &g;
    }();
    return group_config(Topology::kCluster, endpoints_of({group.node(0).endpoint()}));
  }
};

class RedlockTopo : public Topo {
 public:
  Config config() override {
    static RedlockGroup& group = *[] {
      static RedlockGroup g(5);
      g.start();
      return &g;
    }();
    return group_config(Topology::kRedlock, endpoints_of(group.endpoints()));
  }
};

class PostgresTopo : public Topo {
 public:
  Config config() override {
    static PostgresServer& server = *[] {
      static PostgresServer s;
      s.start();
      return &s;
    }();
    Config c = MemoryTopo().config();
    BackendConfig& b = c.backends["default"];
    b.topology = Topology::kPostgres;
    b.dsn = server.dsn();
    b.connect_timeout = 500ms;
    b.command_timeout = 500ms;
    return c;
  }
};

class ZookeeperTopo : public Topo {
 public:
  Config config() override {
    static ZookeeperEnsemble& ensemble = *[] {
      static ZookeeperEnsemble e;
      e.start();
      return &e;
    }();
    Config c = MemoryTopo().config();
    BackendConfig& b = c.backends["default"];
    b.topology = Topology::kZookeeper;
    for (int i = 0; i < ensemble.members(); ++i) {
      b.endpoints.push_back(Endpoint{"127.0.0.1", ensemble.client_port(i)});
    }
    b.session_timeout = 4s;
    b.connect_timeout = 1s;
    b.command_timeout = 1s;
    return c;
  }
  [[nodiscard]] Millis lease_limit() const override { return 4s; }
};

class EtcdTopo : public Topo {
 public:
  Config config() override {
    static EtcdCluster& cluster = *[] {
      static EtcdCluster c;
      c.start();
      return &c;
    }();
    Config c = MemoryTopo().config();
    BackendConfig& b = c.backends["default"];
    b.topology = Topology::kEtcd;
    for (int i = 0; i < cluster.members(); ++i) {
      b.endpoints.push_back(Endpoint{"127.0.0.1", cluster.client_port(i)});
    }
    b.connect_timeout = 1s;
    b.command_timeout = 1s;
    return c;
  }
};

// Joins a test's thread on every way out of the test: a failed ASSERT returns early, and a
// joinable std::thread's destructor would end the whole program. The thread ends by itself
// (its wait is bounded), once the test's leases are released.
struct JoinOnExit {
  std::thread& thread;
  ~JoinOnExit() {
    if (thread.joinable()) thread.join();
  }
};

class LockContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") topo_ = std::make_unique<MemoryTopo>();
    if (GetParam() == "single") topo_ = std::make_unique<SingleTopo>();
    if (GetParam() == "sentinel") topo_ = std::make_unique<SentinelTopo>();
    if (GetParam() == "cluster") topo_ = std::make_unique<ClusterTopo>();
    if (GetParam() == "redlock") topo_ = std::make_unique<RedlockTopo>();
    if (GetParam() == "postgres") topo_ = std::make_unique<PostgresTopo>();
    if (GetParam() == "zookeeper") topo_ = std::make_unique<ZookeeperTopo>();
    if (GetParam() == "etcd") topo_ = std::make_unique<EtcdTopo>();
    ASSERT_TRUE(topo_) << GetParam();
  }
  Client make_client() { return Client(topo_->config()); }
  /// What remains of a fresh lease of `lease`, at least.
  [[nodiscard]] Millis fresh(Millis lease) const {
    return std::min(lease, topo_->lease_limit()) * 9 / 10;
  }

  std::unique_ptr<Topo> topo_;
};

/// Every topology the contract suites run on, by the name of its test parameter.
inline const std::vector<std::string>& topologies() {
  static const std::vector<std::string> names{"memory", "single",    "sentinel", "cluster",
                                              "redlock", "postgres", "zookeeper", "etcd"};
  return names;
}

}  // namespace dlock::test
