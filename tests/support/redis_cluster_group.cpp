// RedisClusterGroup: a Redis Cluster made and changed with redis-cli --cluster.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "redis_groups.hpp"
#include "test_pki.hpp"

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using detail::logs_of;
using std::chrono::milliseconds;

// Lines of CLUSTER NODES: "<id> <ip:port@cport> <flags> <master> ... <slots...>"
std::vector<std::vector<std::string>> cluster_nodes(RedisAdmin& admin) {
  std::vector<std::vector<std::string>> out;
  std::istringstream lines(admin.string({"CLUSTER", "NODES"}).value_or(""));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    std::string word;
    while (words >> word) w.push_back(word);
    if (w.size() >= 8) out.push_back(std::move(w));
  }
  return out;
}

int port_of(const std::string& address) {  // "127.0.0.1:7000@17000"
  const auto colon = address.rfind(':', address.find('@'));
  return std::atoi(address.substr(colon + 1).c_str());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// RedisClusterGroup.

RedisClusterGroup::RedisClusterGroup(Options options) : options_(options) {}

void RedisClusterGroup::start() {
  const int count = options_.masters * (1 + options_.replicas_per_master);
  std::vector<std::string> args;
  for (int i = 0; i < count; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("cluster-node{}", i);
    o.cluster = true;
    o.tls.enabled = options_.tls;
    o.tls.auth_clients = options_.tls_auth_clients;
    o.tls.replication = options_.tls;
    o.tls.cluster = options_.tls;
    o.extra_config = {fmt::format("cluster-node-timeout {}", options_.node_timeout.count())};
    nodes_.emplace_back(o);
    nodes_.back().start();
    args.push_back(nodes_.back().endpoint());
  }
  // Plaintext ports also with Options::tls: CLUSTER MEET needs only the bus port, and each
  // node then learns the others' TLS ports from the (TLS) bus.
  args.insert(args.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master),
                           "--cluster-yes"});
  const auto created = cluster_tool("create", args, 60s, false);
  if (created.status != 0) {
    throw std::runtime_error(
        fmt::format("redis-cli --cluster create failed ({}):\n{}", created.status, created.output));
  }
  if (!wait_ok(30s))
    throw std::runtime_error("the cluster did not reach cluster_state:ok\n" + logs_of(nodes_));
}

CommandResult RedisClusterGroup::cluster_tool(const std::string& subcommand,
                                              const std::vector<std::string>& args,
                                              milliseconds timeout, bool over_tls) {
  std::vector<std::string> argv = {redis_cli_program()};
  if (over_tls) {
    const auto tls = redis_cli_tls_arguments();
    argv.insert(argv.end(), tls.begin(), tls.end());
  }
  argv.insert(argv.end(), {"--cluster", subcommand});
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, timeout);
}

std::vector<std::size_t> RedisClusterGroup::master_indexes() {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].running()) continue;
    try {
      RedisAdmin admin(nodes_[i], 1s);
      if (admin.array({"ROLE"}).front() == "master") out.push_back(i);
    } catch (const std::exception&) {
    }
  }
  return out;
}

std::vector<std::string> RedisClusterGroup::master_endpoints() {
  std::vector<std::string> out;
  for (const std::size_t i : master_indexes()) out.push_back(nodes_[i].endpoint());
  return out;
}

std::vector<std::string> RedisClusterGroup::master_tls_endpoints() {
  std::vector<std::string> out;
  for (const std::size_t i : master_indexes()) out.push_back(nodes_[i].tls_endpoint());
  return out;
}

int RedisClusterGroup::index_of_port(int port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (port != 0 && (nodes_[i].port() == port || nodes_[i].tls_port() == port)) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

std::string RedisClusterGroup::node_id(std::size_t i) {
  RedisAdmin admin(nodes_.at(i));
  return admin.string({"CLUSTER", "MYID"}).value_or("");
}

int RedisClusterGroup::master_of_slot(int slot) {
  for (auto& node : nodes_) {
    if (!node.running()) continue;
    try {
      RedisAdmin admin(node, 1s);
      for (const auto& w : cluster_nodes(admin)) {
        if (w[2].find("master") == std::string::npos) continue;
        for (std::size_t k = 8; k < w.size(); ++k) {
          if (w[k].front() == '[') continue;  // migrating/importing marker
          const auto dash = w[k].find('-');
          const int first = std::atoi(w[k].c_str());
          const int last = dash == std::string::npos ? first : std::atoi(w[k].c_str() + dash + 1);
          if (slot >= first && slot <= last) return index_of_port(port_of(w[1]));
        }
      }
      return -1;
    } catch (const std::exception&) {
    }
  }
  return -1;
}

int RedisClusterGroup::replica_of(std::size_t master) {
  // Each replica's own word (ROLE: slave, master host, master port, ...).
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (i == master || !nodes_[i].running()) continue;
    try {
      RedisAdmin admin(nodes_[i], 1s);
      const auto role = admin.array({"ROLE"});
      // With tls-replication the replica names the master's TLS port.
      if (role.size() >= 3 && role[0] == "slave" &&
          index_of_port(std::atoi(role[2].c_str())) == static_cast<int>(master)) {
        return static_cast<int>(i);
      }
    } catch (const std::exception&) {
    }
  }
  return -1;
}

bool RedisClusterGroup::wait_ok(milliseconds timeout) {
  return wait_until(
      [&] {
        std::optional<std::string> first_map;
        for (auto& node : nodes_) {
          if (!node.running()) continue;
          try {
            RedisAdmin admin(node, 1s);
            if (admin.info_field("cluster", "cluster_enabled") != "1") return false;
            const auto info = admin.string({"CLUSTER", "INFO"}).value_or("");
            if (info.find("cluster_state:ok") == std::string::npos) return false;
            // Every node must see the same owner for every slot range.
            std::vector<std::string> ranges;
            for (const auto& w : cluster_nodes(admin)) {
              if (w[2].find("master") == std::string::npos ||
                  w[2].find("fail") != std::string::npos)
                continue;
              for (std::size_t k = 8; k < w.size(); ++k) {
                if (w[k].front() == '[') return false;  // a migration is in progress
                ranges.push_back(w[k] + "@" + std::to_string(port_of(w[1])));
              }
            }
            std::sort(ranges.begin(), ranges.end());
            std::string map;
            for (const auto& r : ranges) map += r + ",";
            if (first_map && *first_map != map) return false;
            first_map = map;
          } catch (const std::exception&) {
            return false;
          }
        }
        return first_map.has_value();
      },
      timeout, 50ms);
}

CommandResult RedisClusterGroup::reshard(std::size_t from, std::size_t to, int slots,
                                         milliseconds timeout) {
  // Over TLS with Options::tls: redis-cli hands MIGRATE the ports it learnt, and a node with
  // tls-cluster opens its MIGRATE connection with TLS (to a plaintext port, that hangs until
  // MIGRATE's timeout and leaves the slot half moved).
  const auto& node = nodes_.at(from);
  return cluster_tool(
      "reshard",
      {options_.tls ? node.tls_endpoint() : node.endpoint(), "--cluster-from", node_id(from),
       "--cluster-to", node_id(to), "--cluster-slots", std::to_string(slots), "--cluster-yes"},
      timeout, options_.tls);
}

void RedisClusterGroup::failover(std::size_t replica, milliseconds timeout) {
  RedisAdmin admin(nodes_.at(replica));
  // A manual failover gives up after 5 s unless the replica has caught up with its master;
  // a replica still in its first full sync (which a master delays by 5 s) may not make it.
  const bool synced = wait_until(
      [&] {
        try {
          const std::string info = admin.command({"INFO", "replication"});
          return info.find("master_link_status:up") != std::string::npos &&
                 info.find("master_sync_in_progress:0") != std::string::npos;
        } catch (const std::exception&) {
          return false;
        }
      },
      timeout, 50ms);
  if (!synced) throw std::runtime_error("the replica did not finish syncing\n" + logs_of(nodes_));
  if (!admin.ok({"CLUSTER", "FAILOVER"})) throw std::runtime_error("CLUSTER FAILOVER was refused");
  const bool promoted = wait_until(
      [&] {
        try {
          return admin.array({"ROLE"}).front() == "master";
        } catch (const std::exception&) {
          return false;
        }
      },
      timeout, 20ms);
  if (!promoted || !wait_ok(timeout)) {
    throw std::runtime_error("CLUSTER FAILOVER did not complete in time\n" + logs_of(nodes_));
  }
}

}  // namespace dlock::test
