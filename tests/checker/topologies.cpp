#include "topologies.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "postgres_server.hpp"
#include "zookeeper_ensemble.hpp"

namespace checker {

using namespace std::chrono_literals;

namespace {

using dlock::test::RedisAdmin;
using dlock::test::RedisServer;
using dlock::test::wait_until;

Node node_of(const RedisServer& server) { return Node{server.host(), server.port()}; }

// SIGSTOP of `server` (a RedisServer or a PostgresServer) for lease + 0.2 ... lease + 1 s,
// then SIGCONT: connections are accepted and requests queue up unanswered, unlike a killed
// server, which refuses at once.
template <class Server>
std::string stop_for_a_while(Server& server, std::chrono::milliseconds lease, std::mt19937& rng,
                             const std::string& what) {
  const auto stopped = lease + between(rng, 200ms, 1000ms);
  server.pause();
  std::this_thread::sleep_for(stopped);
  server.resume();
  return fmt::format("{} stopped (SIGSTOP) for {} ms", what, stopped.count());
}

// Servers whose wall clock the clock-step fault steps (checker.cpp).
dlock::test::RedisServerOptions clock_stepping() {
  dlock::test::RedisServerOptions options;
  options.clock_step = true;
  return options;
}

// ---------------------------------------------------------------------------------------
// single: one server, restarted without its data, stopped, or its clock stepped (the
// clock-step fault of checker.cpp); the clients reach it through a proxy that can hold, delay
// or reset their connections.
class Single final : public Topology {
 public:
  explicit Single(std::chrono::milliseconds lease) : lease_(lease) {}
  void start() override {
    server_.start();
    proxy_ = std::make_unique<dlock::test::TcpProxy>(server_.host(), server_.port());
  }
  std::string backend_yaml() override {
    return fmt::format("    topology: single\n    address: {}\n    connect_timeout: 500ms\n"
                       "    command_timeout: 1s\n    poll_interval: 100ms\n",
                       proxy_->address());
  }
  std::vector<std::string> fault_kinds() const override {
    std::vector<std::string> kinds{"restart-server", "stop-server"};
    kinds.insert(kinds.end(), kNetworkFaults.begin(), kNetworkFaults.end());
    return kinds;
  }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    if (kind == "stop-server") return stop_for_a_while(server_, lease_, rng, "the server");
    if (is_network_fault(kind)) return network_fault(kind, *proxy_, lease_, rng, "the server");
    if (kind != "restart-server") throw std::logic_error("single: no fault " + kind);
    server_.kill();                        // SIGKILL: no persistence, so every lock is forgotten
    std::this_thread::sleep_for(200ms);
    server_.start();
    return "killed and restarted empty";
  }
  bool steps_clocks() const override { return true; }
  RedisServer& clock_server(std::mt19937&) override { return server_; }
  Node lock_node(std::mt19937&) override { return node_of(server_); }
  std::vector<Node> pubsub_nodes() override { return {node_of(server_)}; }
  void wait_healthy() override {
    if (server_.paused()) server_.resume();
    if (!server_.running()) server_.start();
    proxy_->pass();
  }

 private:
  RedisServer server_{clock_stepping()};
  std::unique_ptr<dlock::test::TcpProxy> proxy_;
  std::chrono::milliseconds lease_;
};

// ---------------------------------------------------------------------------------------
// sentinel: 1 master, 2 replicas, 3 sentinels; clients use wait_replicas (1 by default).
class Sentinel final : public Topology {
 public:
  Sentinel(int wait_replicas, std::chrono::milliseconds lease)
      : group_(options()), wait_replicas_(wait_replicas), lease_(lease) {}
  static dlock::test::SentinelGroup::Options options() {
    dlock::test::SentinelGroup::Options o;
    o.down_after = 1000ms;
    o.failover_timeout = 5000ms;
    return o;
  }
  void start() override { group_.start(); }
  std::string backend_yaml() override {
    return fmt::format("    topology: sentinel\n    master_name: {}\n    sentinels: {}\n"
                       "    wait_replicas: {}\n    connect_timeout: 500ms\n    command_timeout: 1s\n"
                       "    poll_interval: 100ms\n",
                       group_.options().master_name, yaml_list(group_.sentinel_endpoints()), wait_replicas_);
  }
  std::vector<std::string> fault_kinds() const override {
    return {"sentinel-failover", "kill-master", "stop-master"};
  }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    const int old = group_.master_index();
    if (old < 0) throw std::runtime_error("sentinel: no master named before " + kind);
    if (kind == "stop-master") {  // past down-after-milliseconds (1 s): a failover may start
      std::string detail = stop_for_a_while(group_.data(static_cast<std::size_t>(old)), lease_, rng,
                                            fmt::format("master {}", old));
      wait_healthy();
      return detail + fmt::format("; master now {}", group_.master_index());
    }
    if (kind == "sentinel-failover") {
      const int now = group_.failover(30s);
      wait_healthy();
      return fmt::format("SENTINEL FAILOVER: master {} -> {}", old, now);
    }
    if (kind != "kill-master") throw std::logic_error("sentinel: no fault " + kind);
    group_.data(static_cast<std::size_t>(old)).kill();
    if (!wait_until([&] { const int m = group_.master_index(); return m >= 0 && m != old; }, 30s, 50ms)) {
      throw std::runtime_error("sentinel: no new master within 30 s after killing the master");
    }
    const int now = group_.master_index();
    group_.data(static_cast<std::size_t>(old)).start();  // empty; the sentinels make it a replica
    wait_healthy();
    return fmt::format("master {} killed, {} promoted, {} restarted as a replica", old, now, old);
  }
  Node lock_node(std::mt19937&) override {
    const int m = group_.master_index();
    return node_of(group_.data(static_cast<std::size_t>(m < 0 ? 0 : m)));
  }
  std::vector<Node> pubsub_nodes() override {
    std::vector<Node> nodes;
    const int m = group_.master_index();
    if (m >= 0) nodes.push_back(node_of(group_.data(static_cast<std::size_t>(m))));
    for (std::size_t i = 0; i < 3; ++i) nodes.push_back(node_of(group_.sentinel(i)));
    return nodes;
  }
  void wait_healthy() override {
    for (std::size_t i = 0; i < group_.data_count(); ++i) {
      if (!group_.data(i).running()) group_.data(i).start();
    }
    // wait_replicas needs replicas that follow the master again.
    if (!group_.wait_stable(45s, std::max(1, wait_replicas_))) {
      throw std::runtime_error("sentinel: not stable within 45 s");
    }
  }

 private:
  dlock::test::SentinelGroup group_;
  int wait_replicas_;
  std::chrono::milliseconds lease_;
};

// ---------------------------------------------------------------------------------------
// cluster: 3 masters with a replica each; the lock's slot is migrated, failed over, and its
// master killed.
class Cluster final : public Topology {
 public:
  explicit Cluster(std::chrono::milliseconds lease) : group_(options()), lease_(lease) {}
  static dlock::test::RedisClusterGroup::Options options() {
    dlock::test::RedisClusterGroup::Options o;
    o.node_timeout = 2000ms;
    return o;
  }
  void start() override { group_.start(); }
  std::string backend_yaml() override {
    std::vector<std::string> seeds;
    for (std::size_t i = 0; i < group_.size(); ++i) seeds.push_back(group_.node(i).endpoint());
    return fmt::format("    topology: cluster\n    nodes: {}\n    connect_timeout: 500ms\n"
                       "    command_timeout: 3s\n    poll_interval: 100ms\n",
                       yaml_list(seeds));
  }
  std::vector<std::string> fault_kinds() const override {
    return {"migrate-slot", "cluster-failover", "kill-master", "stop-master"};
  }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    const int slot = lock_slot();
    const int master = group_.master_of_slot(slot);
    if (master < 0) throw std::runtime_error("cluster: no master serves the lock's slot");
    if (kind == "migrate-slot") return migrate(slot, static_cast<std::size_t>(master), rng);
    if (kind == "stop-master") {  // up to cluster-node-timeout (2 s): a failover may start
      std::string detail = stop_for_a_while(group_.node(static_cast<std::size_t>(master)), lease_, rng,
                                            fmt::format("slot {}: master {}", slot, master));
      wait_healthy();
      return detail + fmt::format("; slot master now {}", group_.master_of_slot(slot));
    }
    if (kind == "cluster-failover") {
      const int replica = group_.replica_of(static_cast<std::size_t>(master));
      if (replica < 0) return "skipped: the slot's master has no replica";
      group_.failover(static_cast<std::size_t>(replica), 30s);
      return fmt::format("CLUSTER FAILOVER of slot {}: node {} -> {}", slot, master, replica);
    }
    if (kind != "kill-master") throw std::logic_error("cluster: no fault " + kind);
    if (group_.replica_of(static_cast<std::size_t>(master)) < 0) return "skipped: no replica to promote";
    group_.node(static_cast<std::size_t>(master)).kill();
    const auto replaced = [&] {
      const int m = group_.master_of_slot(slot);
      return m >= 0 && m != master;
    };
    if (!wait_until(replaced, 30s, 100ms)) {
      throw std::runtime_error("cluster: the slot's master was not replaced within 30 s");
    }
    const int now = group_.master_of_slot(slot);
    group_.node(static_cast<std::size_t>(master)).start();  // keeps nodes.conf: rejoins as a replica
    wait_healthy();
    return fmt::format("slot {}: master {} killed, {} promoted, {} restarted", slot, master, now, master);
  }
  Node lock_node(std::mt19937&) override {
    const int m = group_.master_of_slot(lock_slot());
    return node_of(group_.node(static_cast<std::size_t>(m < 0 ? 0 : m)));
  }
  std::vector<Node> pubsub_nodes() override {
    std::vector<Node> nodes;
    for (std::size_t i = 0; i < group_.size(); ++i) {
      if (group_.node(i).running()) nodes.push_back(node_of(group_.node(i)));
    }
    return nodes;
  }
  void wait_healthy() override {
    for (std::size_t i = 0; i < group_.size(); ++i) {
      if (!group_.node(i).running()) group_.node(i).start();
    }
    if (!group_.wait_ok(45s)) throw std::runtime_error("cluster: not ok within 45 s");
    // A replica that has not synced since it rejoined refuses to take over: the next
    // failover fault would find nobody to promote.
    const bool synced = wait_until([&] {
      for (std::size_t i = 0; i < group_.size(); ++i) {
        RedisAdmin admin(group_.node(i));
        try {
          if (admin.info_field("replication", "role").value_or("") == "slave" &&
              admin.info_field("replication", "master_link_status").value_or("") != "up") {
            return false;
          }
        } catch (const std::exception&) {
          return false;
        }
      }
      return true;
    }, 45s, 100ms);
    if (!synced) throw std::runtime_error("cluster: a replica did not sync within 45 s");
  }

 private:
  int lock_slot() {
    if (slot_ < 0) {
      RedisAdmin admin(group_.node(0));
      slot_ = static_cast<int>(admin.integer({"CLUSTER", "KEYSLOT", lock_key_}));
    }
    return slot_;
  }

  bool is_master(std::size_t i) {
    if (!group_.node(i).running()) return false;
    RedisAdmin admin(group_.node(i));
    return admin.info_field("replication", "role").value_or("") == "master";
  }

  // The slot moves the way redis-cli --cluster reshard moves it: IMPORTING on the target,
  // MIGRATING on the source, MIGRATE of its keys, then SETSLOT NODE everywhere. Between the
  // first two steps and the end, clients get ASK and TRYAGAIN.
  std::string migrate(int slot, std::size_t from, std::mt19937& rng) {
    std::vector<std::size_t> targets;
    for (std::size_t i = 0; i < group_.size(); ++i) {
      if (i != from && is_master(i)) targets.push_back(i);
    }
    if (targets.empty()) return "skipped: no other master";
    const std::size_t to = targets[pick(rng, targets.size())];
    const std::string from_id = group_.node_id(from), to_id = group_.node_id(to);
    const std::string s = std::to_string(slot);
    RedisAdmin source(group_.node(from), 5s), target(group_.node(to), 5s);
    target.command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id});
    source.command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id});
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + pick(rng, 300)));
    int moved = 0;
    for (int round = 0; round < 100; ++round) {
      const auto keys = source.array({"CLUSTER", "GETKEYSINSLOT", s, "100"});
      if (keys.empty()) break;
      std::vector<std::string> migrate{"MIGRATE", group_.node(to).host(),
                                       std::to_string(group_.node(to).port()), "", "0", "5000", "KEYS"};
      migrate.insert(migrate.end(), keys.begin(), keys.end());
      source.command(migrate);
      moved += static_cast<int>(keys.size());
    }
    target.command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
    source.command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
    for (std::size_t i = 0; i < group_.size(); ++i) {
      if (i == from || i == to || !is_master(i)) continue;
      RedisAdmin other(group_.node(i), 5s);
      other.command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
    }
    wait_healthy();
    return fmt::format("slot {} with {} keys: node {} -> {}", slot, moved, from, to);
  }

  dlock::test::RedisClusterGroup group_;
  std::chrono::milliseconds lease_;
  int slot_ = -1;
};

// ---------------------------------------------------------------------------------------
// redlock: 5 independent instances. A killed instance comes back empty only after the lease
// and its drift allowance have passed (Redlock's delayed restart, docs/TOPOLOGIES.md); the
// clock-step fault steps one instance's clock.
class Redlock final : public Topology {
 public:
  explicit Redlock(std::chrono::milliseconds lease) : group_(5, true), lease_(lease) {}
  void start() override {
    group_.start();
    for (std::size_t i = 0; i < group_.size(); ++i) {
      proxies_.push_back(std::make_unique<dlock::test::TcpProxy>(group_.instance(i).host(), group_.instance(i).port()));
    }
  }
  std::string backend_yaml() override {
    std::vector<std::string> instances;  // every instance through its proxy
    for (const auto& proxy : proxies_) instances.push_back(proxy->endpoint());
    return fmt::format("    topology: redlock\n    instances: {}\n    connect_timeout: 500ms\n"
                       "    command_timeout: 500ms\n    poll_interval: 100ms\n",
                       yaml_list(instances));
  }
  std::vector<std::string> fault_kinds() const override {
    return {"restart-instance", "stop-instance", "net-blackhole", "net-delay", "net-reset"};
  }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    const std::size_t i = pick(rng, group_.size());
    RedisServer& instance = group_.instance(i);
    if (is_network_fault(kind)) return network_fault(kind, *proxies_[i], lease_, rng, fmt::format("instance {}", i));
    if (kind == "stop-instance") {  // SIGSTOP: requests queue up and are answered late
      const auto stopped = lease_ + std::chrono::milliseconds(pick(rng, 1000));
      instance.pause();
      std::this_thread::sleep_for(stopped);
      instance.resume();
      return fmt::format("instance {} stopped for {} ms", i, stopped.count());
    }
    if (kind != "restart-instance") throw std::logic_error("redlock: no fault " + kind);
    instance.kill();
    // The delayed restart: every key it had granted has expired everywhere before it returns.
    const auto down = lease_ + lease_ / 100 + std::chrono::milliseconds(200 + pick(rng, 500));
    std::this_thread::sleep_for(down);
    instance.start();
    return fmt::format("instance {} killed, restarted empty after {} ms", i, down.count());
  }
  bool steps_clocks() const override { return true; }
  RedisServer& clock_server(std::mt19937& rng) override {
    return group_.instance(pick(rng, group_.size()));
  }
  Node lock_node(std::mt19937& rng) override { return node_of(group_.instance(pick(rng, group_.size()))); }
  std::vector<Node> pubsub_nodes() override {
    std::vector<Node> nodes;
    for (std::size_t i = 0; i < group_.size(); ++i) nodes.push_back(node_of(group_.instance(i)));
    return nodes;
  }
  void wait_healthy() override {
    for (std::size_t i = 0; i < group_.size(); ++i) {
      if (group_.instance(i).paused()) group_.instance(i).resume();
      if (!group_.instance(i).running()) group_.instance(i).start();
    }
    for (auto& proxy : proxies_) proxy->pass();
  }

 private:
  dlock::test::RedlockGroup group_;
  std::vector<std::unique_ptr<dlock::test::TcpProxy>> proxies_;
  std::chrono::milliseconds lease_;
};

// ---------------------------------------------------------------------------------------
// two-backends: the lock on one single server (`default`), and a second single server
// (`other`, reached through a proxy) that is stopped or cut off for longer than a lease.
// The checker holds a lease on each the whole run; the one on `default` must stay renewed.
class TwoBackends final : public Topology {
 public:
  explicit TwoBackends(std::chrono::milliseconds lease) : lease_(lease) {}
  void start() override {
    server_.start();
    other_.start();
    proxy_ = std::make_unique<dlock::test::TcpProxy>(other_.host(), other_.port());
  }
  std::string backend_yaml() override {
    return fmt::format("    topology: single\n    address: {}\n    connect_timeout: 500ms\n"
                       "    command_timeout: 1s\n    poll_interval: 100ms\n",
                       server_.address());
  }
  std::string other_backends_yaml() override {
    return fmt::format("  other:\n    topology: single\n    address: {}\n    connect_timeout: 500ms\n"
                       "    command_timeout: 1s\n    poll_interval: 100ms\n",
                       proxy_->address());
  }
  std::string stalling_backend() const override { return "other"; }
  Node default_node() override { return node_of(server_); }
  std::vector<std::string> fault_kinds() const override { return {"stop-other", "blackhole-other"}; }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    // Two to three leases: the bystander's lease on `default` is renewed several times meanwhile.
    const auto stalled = 2 * lease_ + between(rng, 0ms, lease_);
    if (kind == "stop-other") {
      other_.pause();
      std::this_thread::sleep_for(stalled);
      other_.resume();
      return fmt::format("the other backend's server stopped (SIGSTOP) for {} ms", stalled.count());
    }
    if (kind != "blackhole-other") throw std::logic_error("two-backends: no fault " + kind);
    proxy_->blackhole();
    std::this_thread::sleep_for(stalled);
    proxy_->pass();
    return fmt::format("connections to the other backend held (blackhole) for {} ms", stalled.count());
  }
  // CLIENT PAUSE goes to the other backend too: one more way for it to stall.
  Node lock_node(std::mt19937&) override { return node_of(other_); }
  std::vector<Node> pubsub_nodes() override { return {node_of(server_), node_of(other_)}; }
  void wait_healthy() override {
    for (RedisServer* server : {&server_, &other_}) {
      if (server->paused()) server->resume();
      if (!server->running()) server->start();
    }
    proxy_->pass();
  }

 private:
  RedisServer server_;
  RedisServer other_;
  std::unique_ptr<dlock::test::TcpProxy> proxy_;
  std::chrono::milliseconds lease_;
};

// ---------------------------------------------------------------------------------------
// postgres: one PostgreSQL server with synchronous_commit on (a primary whose commits survive
// a crash), reached by the clients through a proxy. It is killed and started again on its
// data, stopped, its client connections (the LISTEN ones too) terminated, and the proxy holds,
// delays or resets the connections. No Redis, so no CLIENT PAUSE and no pub/sub; its clock is
// the machine's, so no clock step.
class Postgres final : public Topology {
 public:
  explicit Postgres(std::chrono::milliseconds lease) : server_(options()), lease_(lease) {}
  static dlock::test::PostgresServer::Options options() {
    dlock::test::PostgresServer::Options o;
    o.name = "checker-postgres";
    o.extra_config = {"synchronous_commit=on"};
    return o;
  }
  void start() override {
    server_.start();
    proxy_ = std::make_unique<dlock::test::TcpProxy>(server_.host(), server_.port());
  }
  std::string backend_yaml() override {
    return fmt::format(
        "    topology: postgres\n    dsn: \"postgresql://{}@{}/postgres\"\n"
        "    connect_timeout: 500ms\n    command_timeout: 1s\n    poll_interval: 100ms\n",
        server_.user(), proxy_->endpoint());
  }
  bool speaks_redis() const override { return false; }
  std::vector<std::string> fault_kinds() const override {
    std::vector<std::string> kinds{"restart-server", "stop-server", "terminate-backends"};
    kinds.insert(kinds.end(), kNetworkFaults.begin(), kNetworkFaults.end());
    return kinds;
  }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    if (kind == "stop-server") {
      return stop_for_a_while(server_, lease_, rng, "the server and its backends");
    }
    if (is_network_fault(kind)) return network_fault(kind, *proxy_, lease_, rng, "the server");
    if (kind == "terminate-backends") {
      return fmt::format("pg_terminate_backend of every client connection: {} ended",
                         server_.kill_all_backends());
    }
    if (kind != "restart-server") throw std::logic_error("postgres: no fault " + kind);
    const auto begun = std::chrono::steady_clock::now();
    server_.restart();  // SIGKILL of the postmaster and its backends; recovery from the WAL
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - begun);
    return fmt::format("killed (SIGKILL) and started again on its data, serving after {} ms",
                       took.count());
  }
  void wait_healthy() override {
    if (server_.paused()) server_.resume();
    if (!server_.running()) server_.start();
    proxy_->pass();
  }

 private:
  dlock::test::PostgresServer server_;
  std::unique_ptr<dlock::test::TcpProxy> proxy_;
  std::chrono::milliseconds lease_;
};

// ---------------------------------------------------------------------------------------
// zookeeper: a 3-member ensemble (ticks of 200 ms, so that elections take well under a
// second), each member behind a proxy. The session timeout is the lease: a holder stopped past
// its lease (pause-holder) loses its session and its znode, and its write when it resumes must
// be refused by fencing. Faults: the leader killed and started again, a member stopped
// (SIGSTOP), every member killed and started again on its data, and the proxies of one member
// or of all of them holding, delaying or resetting connections (all of them for longer than a
// session: the ensemble expires the sessions behind them).
class Zookeeper final : public Topology {
 public:
  explicit Zookeeper(std::chrono::milliseconds lease) : ensemble_(options()), lease_(lease) {}
  static dlock::test::ZookeeperEnsemble::Options options() {
    dlock::test::ZookeeperEnsemble::Options o;
    o.name = "checker-zookeeper";
    o.tick = 200ms;
    return o;
  }
  void start() override {
    ensemble_.start();
    for (int i = 0; i < ensemble_.members(); ++i) {
      proxies_.push_back(
          std::make_unique<dlock::test::TcpProxy>("127.0.0.1", ensemble_.client_port(i)));
    }
  }
  std::string backend_yaml() override {
    std::vector<std::string> hosts;
    for (const auto& proxy : proxies_) hosts.push_back(proxy->endpoint());
    // The lease is the session: the shortest the ensemble grants is two ticks (400 ms).
    const auto session = std::max(lease_, 1000ms);
    return fmt::format(
        "    topology: zookeeper\n    hosts: {}\n    session_timeout: {}ms\n"
        "    connect_timeout: 500ms\n    command_timeout: {}ms\n    poll_interval: 100ms\n",
        yaml_list(hosts), session.count(), session.count() * 2 / 5);
  }
  bool speaks_redis() const override { return false; }
  std::vector<std::string> fault_kinds() const override { return quorum_group_faults(); }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    if (kind == "kill-leader") {
      const int leader = ensemble_.leader();
      if (leader < 0) return "skipped: no leader to kill";
      ensemble_.kill(leader);
      const auto begun = std::chrono::steady_clock::now();
      ensemble_.wait_serving();
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - begun);
      std::this_thread::sleep_for(between(rng, 200ms, lease_));
      ensemble_.start_member(leader);
      ensemble_.wait_serving();
      return fmt::format("leader {} killed (SIGKILL), a new one served after {} ms; restarted",
                         leader + 1, took.count());
    }
    if (kind == "stop-member") {
      const int member = static_cast<int>(pick(rng, ensemble_.members()));
      const auto stopped = lease_ + between(rng, 200ms, 1000ms);
      const bool was_leader = ensemble_.leader() == member;
      ensemble_.pause(member);
      std::this_thread::sleep_for(stopped);
      ensemble_.resume(member);
      ensemble_.wait_serving();
      return fmt::format("member {}{} stopped (SIGSTOP) for {} ms", member + 1,
                         was_leader ? " (the leader)" : "", stopped.count());
    }
    if (kind == "restart-ensemble") {
      for (int i = 0; i < ensemble_.members(); ++i) ensemble_.kill(i);
      const auto down = between(rng, 100ms, lease_ / 2);
      std::this_thread::sleep_for(down);
      const auto begun = std::chrono::steady_clock::now();
      for (int i = 0; i < ensemble_.members(); ++i) ensemble_.start_member(i);
      ensemble_.wait_serving();
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
          std::chrono::steady_clock::now() - begun);
      return fmt::format("every member killed (SIGKILL), down {} ms, started again on its "
                         "data and serving after {} ms",
                         down.count(), took.count());
    }
    if (kind == "net-all-blackhole") {
      const auto held = lease_ + between(rng, 200ms, 1000ms);
      for (auto& proxy : proxies_) proxy->blackhole();
      std::this_thread::sleep_for(held);
      for (auto& proxy : proxies_) proxy->pass();
      return fmt::format("connections to every member held (blackhole) for {} ms, past the "
                         "session timeout",
                         held.count());
    }
    if (!is_network_fault(kind)) throw std::logic_error("zookeeper: no fault " + kind);
    const std::size_t member = pick(rng, proxies_.size());
    return network_fault(kind, *proxies_[member], lease_, rng,
                         fmt::format("member {}", member + 1));
  }
  void wait_healthy() override {
    for (int i = 0; i < ensemble_.members(); ++i) {
      if (ensemble_.paused(i)) ensemble_.resume(i);
      if (!ensemble_.running(i)) ensemble_.start_member(i);
    }
    for (auto& proxy : proxies_) proxy->pass();
    ensemble_.wait_serving();
  }

 private:
  dlock::test::ZookeeperEnsemble ensemble_;
  std::vector<std::unique_ptr<dlock::test::TcpProxy>> proxies_;
  std::chrono::milliseconds lease_;
};

}  // namespace

std::unique_ptr<Topology> make_topology(const std::string& name, std::chrono::milliseconds lease,
                                        int wait_replicas) {
  if (name == "single") return std::make_unique<Single>(lease);
  if (name == "sentinel") return std::make_unique<Sentinel>(wait_replicas, lease);
  if (name == "cluster") return std::make_unique<Cluster>(lease);
  if (name == "redlock") return std::make_unique<Redlock>(lease);
  if (name == "two-backends") return std::make_unique<TwoBackends>(lease);
  if (name == "postgres") return std::make_unique<Postgres>(lease);
  if (name == "zookeeper") return std::make_unique<Zookeeper>(lease);
  if (name == "etcd") return make_etcd(lease);
  throw std::invalid_argument(
      "--topology: unknown topology '" + name +
      "' (single, sentinel, cluster, redlock, two-backends, postgres, zookeeper or etcd)");
}

}  // namespace checker
