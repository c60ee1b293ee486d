// Test harness: groups of Redis processes for the high-availability topologies, built on
// RedisServer (so each runs on free loopback ports and is stopped by process id).
//
//   dlock::test::SentinelGroup ha;            // 1 master, 2 replicas, 3 sentinels
//   ha.start();                               // returns once the sentinels agree
//   int old_master = ha.master_index();
//   int new_master = ha.failover(std::chrono::seconds(20));   // SENTINEL FAILOVER
//
//   dlock::test::RedisClusterGroup cluster;   // 3 masters + 3 replicas
//   cluster.start();                          // redis-cli --cluster create, cluster_state:ok
//   cluster.reshard(0, 1, 1000);              // redis-cli --cluster reshard
//
//   dlock::test::RedlockGroup quorum(5);      // 5 independent instances
//   quorum.start();
//
// With `tls` each process also listens for TLS (RedisServerOptions::tls, test_pki()'s
// certificates) and the processes talk TLS among themselves: replication, sentinel links and
// the cluster bus. The plaintext ports stay for the harness's own checks; the *_tls_endpoints()
// lists give the TLS ports, which are also what the sentinels and CLUSTER SLOTS over TLS name.
//
// Every wait is bounded; a group that does not come up throws std::runtime_error with the
// logs of its processes.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "redis_process.hpp"

namespace dlock::test {

/// One master, its replicas and the sentinels that watch it.
class SentinelGroup {
 public:
  struct Options {
    std::string master_name = "mymaster";
    int replicas = 2;
    int sentinels = 3;
    int quorum = 2;
    /// How long a master must be silent before a sentinel calls it down.
    std::chrono::milliseconds down_after{2000};
    std::chrono::milliseconds failover_timeout{10000};
    /// Password of the data nodes (requirepass, masterauth, the sentinels' auth-pass).
    std::string password;
    /// Password of the sentinels themselves (requirepass, sentinel-pass).
    std::string sentinel_password;
    /// Data nodes and sentinels with TLS and tls-replication: replicas replicate from the
    /// master's TLS port and announce their own, the sentinels monitor the TLS port, so
    /// SENTINEL GET-MASTER-ADDR-BY-NAME and SENTINEL REPLICAS name TLS ports.
    bool tls = false;
    /// With `tls`: tls-auth-clients yes on every process (a TLS client needs a certificate).
    bool tls_auth_clients = false;
  };

  explicit SentinelGroup(Options options);
  SentinelGroup() : SentinelGroup(Options{}) {}

  /// Starts the data nodes, waits until the replicas are in sync, starts the sentinels and
  /// waits until every sentinel knows the replicas and the other sentinels.
  void start();

  [[nodiscard]] const Options& options() const { return options_; }
  /// Data node i; node 0 is the first master.
  [[nodiscard]] RedisServer& data(std::size_t i) { return data_.at(i); }
  [[nodiscard]] std::size_t data_count() const { return data_.size(); }
  [[nodiscard]] RedisServer& sentinel(std::size_t i) { return sentinels_.at(i); }
  /// "127.0.0.1:PORT" of every sentinel.
  [[nodiscard]] std::vector<std::string> sentinel_endpoints() const;
  /// "127.0.0.1:TLSPORT" of every sentinel (Options::tls).
  [[nodiscard]] std::vector<std::string> sentinel_tls_endpoints() const;
  /// An admin client for data node i, authenticated.
  [[nodiscard]] RedisAdmin data_admin(std::size_t i, std::chrono::milliseconds timeout = std::chrono::seconds(2));
  [[nodiscard]] RedisAdmin sentinel_admin(std::size_t i, std::chrono::milliseconds timeout = std::chrono::seconds(2));

  /// The data node that the first answering sentinel names as master; -1 if none does.
  [[nodiscard]] int master_index();
  /// Waits until every running sentinel names the same master, that node says it is a
  /// master and has at least `min_replicas` replicas online, and no failover is in progress.
  bool wait_stable(std::chrono::milliseconds timeout, int min_replicas);
  /// SENTINEL FAILOVER (retried while a sentinel answers INPROG or NOGOODSLAVE), then waits
  /// until the sentinels name another master and it answers as one. Returns the new
  /// master's index; throws on timeout.
  int failover(std::chrono::milliseconds timeout);
  /// Makes data node i a replica of the current master now, as an operator would after a
  /// failover (the sentinels demote a former master themselves only 8 s or more later).
  void demote(std::size_t i);

 private:
  void start_data_nodes();
  void start_sentinels();
  /// The port the processes link to: the TLS port with Options::tls.
  [[nodiscard]] int link_port(const RedisServer& server) const;
  /// The data node listening on `port` (plaintext or TLS); -1 if none.
  [[nodiscard]] int data_index_of_port(int port) const;

  Options options_;
  std::vector<RedisServer> data_;
  std::vector<RedisServer> sentinels_;
};

/// A Redis Cluster of masters with replicas, made with `redis-cli --cluster create`.
class RedisClusterGroup {
 public:
  struct Options {
    int masters = 3;
    int replicas_per_master = 1;
    std::chrono::milliseconds node_timeout{5000};
    /// Nodes with TLS, tls-cluster and tls-replication: the bus and replication speak TLS,
    /// and CLUSTER SLOTS / CLUSTER NODES asked over TLS name TLS ports (over plaintext,
    /// plaintext ports). redis-cli creates the cluster over the plaintext ports and
    /// reshards it over TLS (MIGRATE from a tls-cluster node speaks TLS to the port it is given).
    bool tls = false;
    /// With `tls`: tls-auth-clients yes on every node (a TLS client needs a certificate).
    bool tls_auth_clients = false;
  };

  explicit RedisClusterGroup(Options options);
  RedisClusterGroup() : RedisClusterGroup(Options{}) {}

  /// Starts the nodes, creates the cluster and waits until every node says cluster_state:ok
  /// and all of them agree on the slot map.
  void start();

  [[nodiscard]] RedisServer& node(std::size_t i) { return nodes_.at(i); }
  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  /// "127.0.0.1:PORT" of every node that is a master now.
  [[nodiscard]] std::vector<std::string> master_endpoints();
  /// "127.0.0.1:TLSPORT" of every node that is a master now (Options::tls).
  [[nodiscard]] std::vector<std::string> master_tls_endpoints();
  [[nodiscard]] std::string node_id(std::size_t i);
  /// Index of the node serving `slot`, per node 0 (or the first node that answers).
  [[nodiscard]] int master_of_slot(int slot);
  /// Index of a replica of node `master`; -1 if there is none.
  [[nodiscard]] int replica_of(std::size_t master);
  /// cluster_state:ok on every running node and one slot map on all of them.
  bool wait_ok(std::chrono::milliseconds timeout);
  /// `redis-cli --cluster reshard` of `slots` slots from node `from` to node `to`.
  CommandResult reshard(std::size_t from, std::size_t to, int slots, std::chrono::milliseconds timeout);
  /// Waits until replica `replica` has finished syncing with its master, then CLUSTER
  /// FAILOVER on it; waits until it is a master and the cluster is ok.
  void failover(std::size_t replica, std::chrono::milliseconds timeout);

 private:
  /// Indexes of the running nodes that say they are masters.
  [[nodiscard]] std::vector<std::size_t> master_indexes();
  /// The node listening on `port` (plaintext or TLS); -1 if none.
  [[nodiscard]] int index_of_port(int port) const;
  /// `redis-cli [TLS arguments] --cluster SUBCOMMAND ARGS...`.
  static CommandResult cluster_tool(const std::string& subcommand,
                                    const std::vector<std::string>& args,
                                    std::chrono::milliseconds timeout, bool over_tls);

  Options options_;
  std::vector<RedisServer> nodes_;
};

/// Independent Redis instances for Redlock; with `clock_step`, each runs with
/// RedisServerOptions::clock_step (RedisServer::step_clock).
class RedlockGroup {
 public:
  struct Options {
    bool clock_step = false;
    /// Each instance also listens for TLS (tls_endpoints()).
    bool tls = false;
    /// With `tls`: tls-auth-clients yes (a TLS client needs a certificate).
    bool tls_auth_clients = false;
  };

  explicit RedlockGroup(std::size_t instances, bool clock_step = false);
  RedlockGroup(std::size_t instances, Options options);
  void start();
  [[nodiscard]] RedisServer& instance(std::size_t i) { return instances_.at(i); }
  [[nodiscard]] std::size_t size() const { return instances_.size(); }
  /// "127.0.0.1:PORT" of every instance.
  [[nodiscard]] std::vector<std::string> endpoints() const;
  /// "127.0.0.1:TLSPORT" of every instance (Options::tls).
  [[nodiscard]] std::vector<std::string> tls_endpoints() const;

 private:
  std::vector<RedisServer> instances_;
};

namespace detail {
/// The log tails of `servers`, for a group's error messages.
std::string logs_of(std::vector<RedisServer>& servers);
}  // namespace detail

}  // namespace dlock::test
