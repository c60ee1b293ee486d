// The lock servers of one checker run and the faults that only make sense for them.
#pragma once

#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "redis_groups.hpp"
#include "redis_process.hpp"
#include "tcp_proxy.hpp"

namespace checker {

/// "127.0.0.1" and a port.
struct Node {
  std::string host;
  int port = 0;
};

class Topology {
 public:
  virtual ~Topology() = default;
  /// Starts the servers; returns once they serve.
  virtual void start() = 0;
  /// The `backends.default` block of the YAML configuration (indented by 4 spaces).
  [[nodiscard]] virtual std::string backend_yaml() = 0;
  /// More entries of `backends:` (each `  name:` and its block), or nothing.
  [[nodiscard]] virtual std::string other_backends_yaml() { return ""; }
  /// A backend that stalls under the faults while leases on `default` must stay renewed:
  /// the checker then holds a lease on each through the whole run (the bystander) and
  /// measures how late the one on `default` is renewed. Empty: none.
  [[nodiscard]] virtual std::string stalling_backend() const { return ""; }
  /// The server of `default` that holds `redis_key`, for the bystander's TTL samples.
  [[nodiscard]] virtual Node default_node() { return Node{}; }
  /// Fault kinds of this topology, besides the ones every topology has.
  [[nodiscard]] virtual std::vector<std::string> fault_kinds() const = 0;
  /// Runs one fault of a kind from fault_kinds(), including its repair; returns a detail
  /// for the log. Bounded; throws std::runtime_error when the servers do not recover.
  virtual std::string inject(const std::string& kind, std::mt19937& rng) = 0;
  /// Whether the lock's servers are Redis servers: only then do the common faults that speak
  /// Redis to them (client-pause, drop-pubsub) run, and lock_node(), pubsub_nodes() and
  /// set_lock_key() mean anything.
  [[nodiscard]] virtual bool speaks_redis() const { return true; }
  /// Whether the servers run with RedisServerOptions::clock_step, for the clock-step fault.
  [[nodiscard]] virtual bool steps_clocks() const { return false; }
  /// The server whose clock the next clock-step fault steps (steps_clocks() only): the lock's
  /// server, for Redlock one instance.
  virtual dlock::test::RedisServer& clock_server(std::mt19937&) {
    throw std::logic_error("this topology steps no clock");
  }
  /// The node that holds the lock key now (for CLIENT PAUSE); for Redlock one instance.
  /// speaks_redis() only.
  [[nodiscard]] virtual Node lock_node(std::mt19937&) {
    throw std::logic_error("this topology has no Redis node");
  }
  /// Every node a client may hold a pub/sub connection to. speaks_redis() only.
  [[nodiscard]] virtual std::vector<Node> pubsub_nodes() {
    throw std::logic_error("this topology has no Redis node");
  }
  /// Returns once every server is up and the topology is stable again.
  virtual void wait_healthy() = 0;
  /// What the servers hold for the lock (one line per key: owner, token, lease, TTL), for the
  /// report when the workers are stuck; empty when the topology cannot tell.
  [[nodiscard]] virtual std::string lock_state() { return ""; }
  /// The Redis key of the lock's fencing counter, set once the lock has been taken.
  void set_lock_key(std::string key) { lock_key_ = std::move(key); }

 protected:
  std::string lock_key_;
};

/// single, sentinel (clients use `wait_replicas`, ignored by the others), cluster, redlock,
/// two-backends (a single server for the lock, and a second single server that stalls),
/// postgres (one PostgreSQL server), zookeeper (a 3-member ensemble) or etcd (a 3-member
/// cluster); throws on another name.
std::unique_ptr<Topology> make_topology(const std::string& name, std::chrono::milliseconds lease,
                                        int wait_replicas);

/// etcd: a 3-member cluster, each member behind a proxy (etcd_topology.cpp).
std::unique_ptr<Topology> make_etcd(std::chrono::milliseconds lease);

// Shared by the topologies' files (topology_support.cpp).

/// "[a, b, c]": a YAML flow list of `items` as they are.
[[nodiscard]] std::string yaml_list(const std::vector<std::string>& items);
/// A uniform pick in 0 .. n - 1.
[[nodiscard]] std::size_t pick(std::mt19937& rng, std::size_t n);
/// A uniform duration in low .. high.
[[nodiscard]] std::chrono::milliseconds between(std::mt19937& rng, std::chrono::milliseconds low,
                                                std::chrono::milliseconds high);

/// The network faults of a proxy between the clients and one server: net-blackhole,
/// net-delay, net-reset.
extern const std::vector<std::string> kNetworkFaults;
[[nodiscard]] bool is_network_fault(const std::string& kind);
/// Runs one of kNetworkFaults on `proxy` (`what` names its server in the detail returned);
/// the proxy forwards again when it returns.
std::string network_fault(const std::string& kind, dlock::test::TcpProxy& proxy,
                          std::chrono::milliseconds lease, std::mt19937& rng, const std::string& what);
/// The faults of a 3-member quorum group whose members each have a proxy (zookeeper, etcd):
/// kill-leader, stop-member, restart-ensemble, net-all-blackhole, then kNetworkFaults on one
/// member's proxy.
[[nodiscard]] std::vector<std::string> quorum_group_faults();

}  // namespace checker
