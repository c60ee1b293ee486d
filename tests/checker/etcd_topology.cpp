// The checker's etcd topology: a 3-member cluster, each member behind a proxy, and its faults.
#include <fmt/format.h>

#include <chrono>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "etcd_cluster.hpp"
#include "topologies.hpp"

namespace checker {
namespace {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// "ab:1" for "61623a31"; what is not hex is left as it is.
std::string from_hex(const std::string& text) {
  if (text.size() % 2 != 0 || text.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return text;
  }
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    out += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
  }
  return out;
}

Millis since(std::chrono::steady_clock::time_point begun) {
  return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - begun);
}

// ---------------------------------------------------------------------------------------
// etcd: 3 members with a heartbeat of 100 ms and an election timeout of 600 ms, so that an
// election takes about a second and etcd grants a lease of 1 s as asked (its shortest TTL is
// 1.5 election timeouts rounded up to whole seconds: 2 s with etcd's defaults, which a holder
// stopped for up to two leases would outlive). The clients reach every member through its
// proxy (the YAML's endpoints are the proxies'); the harness asks the members directly. Each
// hold's key lives on a lease of its own, so a holder stopped past its lease (pause-holder)
// loses its key when etcd expires the lease, and its write when it resumes must be refused by
// fencing; tokens are the keys' create revisions, which must keep growing across leader
// changes and restarts. Faults: the leader killed and started again, a member stopped
// (SIGSTOP), every member killed and started again on its data, and the proxies of one member
// or of all of them holding, delaying or resetting connections (all of them for longer than a
// lease: the cluster expires the leases of the clients behind them).
class Etcd final : public Topology {
 public:
  explicit Etcd(Millis lease) : cluster_(options()), lease_(lease) {}
  static dlock::test::EtcdClusterOptions options() {
    dlock::test::EtcdClusterOptions o;
    o.name = "checker-etcd";
    o.heartbeat_interval = 100ms;
    o.election_timeout = 600ms;
    o.proxies = true;
    return o;
  }
  void start() override { cluster_.start(); }
  std::string backend_yaml() override {
    return fmt::format("    topology: etcd\n    endpoints: {}\n    connect_timeout: 500ms\n"
                       "    command_timeout: 1s\n    poll_interval: 100ms\n",
                       yaml_list(cluster_.endpoints()));
  }
  bool speaks_redis() const override { return false; }
  std::vector<std::string> fault_kinds() const override { return quorum_group_faults(); }
  std::string inject(const std::string& kind, std::mt19937& rng) override {
    if (kind == "kill-leader") return kill_leader(rng);
    if (kind == "stop-member") return stop_member(rng);
    if (kind == "restart-ensemble") return restart_all(rng);
    if (kind == "net-all-blackhole") return blackhole_all(rng);
    if (!is_network_fault(kind)) throw std::logic_error("etcd: no fault " + kind);
    const int member = static_cast<int>(pick(rng, static_cast<std::size_t>(cluster_.members())));
    return network_fault(kind, cluster_.proxy(member), lease_, rng,
                         fmt::format("member {}", member + 1));
  }
  void wait_healthy() override {
    for (int i = 0; i < cluster_.members(); ++i) {
      if (cluster_.paused(i)) cluster_.resume(i);
    }
    for (int i = 0; i < cluster_.members(); ++i) {
      if (!cluster_.running(i)) cluster_.start_member(i);
    }
    cluster_.pass_all();
    cluster_.wait_serving();
  }
  // The keys under the checker's lock prefixes (root /dlock, service checker), in queue order
  // (the first holds the lock), asked of a member directly.
  std::string lock_state() override {
    const int leader = cluster_.leader();
    dlock::test::EtcdClient client(cluster_.direct_endpoint(leader < 0 ? 0 : leader), 2s);
    std::string out;
    for (const auto& kv : client.range("/dlock/checker/locks/")) {
      // The value: lease in ms, process id, thread id, host, name, key and owner (the last
      // three in hex); the key's last segment names the hold.
      std::istringstream value(kv.value);
      std::string lease_ms, pid, thread, host, name, key, owner;
      value >> lease_ms >> pid >> thread >> host >> name >> key >> owner;
      out += fmt::format("    {} owner {} token {} lease {:x} ({} s left) pid {} thread {}\n",
                         kv.key.substr(kv.key.rfind('/') + 1), from_hex(owner),
                         kv.create_revision, kv.lease, client.time_to_live(kv.lease), pid, thread);
    }
    return out.empty() ? "    (no key)\n" : out;
  }

 private:
  // SIGKILL of the leader; once the other two have elected one and serve, it starts again
  // (lease/5 ... lease later) on its data and rejoins as a follower.
  std::string kill_leader(std::mt19937& rng) {
    const int leader = cluster_.leader();
    if (leader < 0) return "skipped: no leader to kill";
    cluster_.kill(leader);
    const auto begun = std::chrono::steady_clock::now();
    const int now = cluster_.wait_serving();
    const Millis took = since(begun);
    std::this_thread::sleep_for(between(rng, lease_ / 5, lease_));
    cluster_.start_member(leader);
    cluster_.wait_serving();
    return fmt::format("leader {} killed (SIGKILL), member {} led and served after {} ms; "
                       "restarted", leader + 1, now + 1, took.count());
  }

  // SIGSTOP of one member (the leader a third of the time) for lease + 0.2 ... lease + 1 s:
  // longer than the election timeout, so a stopped leader is replaced meanwhile.
  std::string stop_member(std::mt19937& rng) {
    const int leader = cluster_.leader();
    const int member = static_cast<int>(pick(rng, static_cast<std::size_t>(cluster_.members())));
    const Millis stopped = lease_ + between(rng, 200ms, 1000ms);
    cluster_.pause(member);
    std::this_thread::sleep_for(stopped);
    cluster_.resume(member);
    const int now = cluster_.wait_serving();
    return fmt::format("member {}{} stopped (SIGSTOP) for {} ms; leader now {}", member + 1,
                       member == leader ? " (the leader)" : "", stopped.count(), now + 1);
  }

  // SIGKILL of every member, 0.1 ... lease/2 down, then all start again on their data: the
  // keys and leases survive (etcd keeps them on disk, and the new leader gives every lease its
  // TTL again), so holds whose clients renew soon enough after it serves again survive too.
  std::string restart_all(std::mt19937& rng) {
    for (int i = 0; i < cluster_.members(); ++i) cluster_.kill(i);
    const Millis down = between(rng, 100ms, std::max<Millis>(lease_ / 2, 100ms));
    std::this_thread::sleep_for(down);
    const auto begun = std::chrono::steady_clock::now();
    cluster_.start();
    cluster_.wait_serving();
    return fmt::format("every member killed (SIGKILL), down {} ms, started again on its data "
                       "and serving after {} ms", down.count(), since(begun).count());
  }

  // Every proxy holds everything for lease + 0.2 ... lease + 1 s: no keep-alive reaches the
  // cluster, which expires the leases of the clients (all of them are behind the proxies).
  std::string blackhole_all(std::mt19937& rng) {
    const Millis held = lease_ + between(rng, 200ms, 1000ms);
    for (int i = 0; i < cluster_.members(); ++i) cluster_.proxy(i).blackhole();
    std::this_thread::sleep_for(held);
    cluster_.pass_all();
    return fmt::format("connections to every member held (blackhole) for {} ms, past the "
                       "leases' TTL", held.count());
  }

  dlock::test::EtcdCluster cluster_;
  Millis lease_;
};

}  // namespace

std::unique_ptr<Topology> make_etcd(std::chrono::milliseconds lease) {
  return std::make_unique<Etcd>(lease);
}

}  // namespace checker
