#include "redis_groups.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace dlock::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// A field of a flat field/value array (SENTINEL MASTER, SENTINEL REPLICAS).
std::optional<std::string> field(const std::vector<std::string>& flat, std::string_view name,
                                 std::size_t from = 0) {
  for (std::size_t i = from; i + 1 < flat.size(); i += 2) {
    if (flat[i] == name) return flat[i + 1];
  }
  return std::nullopt;
}

std::string logs_of(std::vector<RedisServer>& servers) {
  std::string out;
  for (auto& s : servers) out += fmt::format("=== {} ===\n{}", s.options().name, s.log_tail(20));
  return out;
}

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
// SentinelGroup.

SentinelGroup::SentinelGroup(Options options) : options_(std::move(options)) {}

void SentinelGroup::start() {
  for (int i = 0; i <= options_.replicas; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("sentinel-group-data{}", i);
    o.password = options_.password;
    if (!options_.password.empty()) o.extra_config.push_back("masterauth " + options_.password);
    if (i > 0) o.extra_config.push_back(fmt::format("replicaof 127.0.0.1 {}", data_[0].port()));
    data_.emplace_back(o);
    data_.back().start();
  }
  const bool synced = wait_until(
      [&] {
        try {
          const auto info = data_admin(0).string({"INFO", "replication"}).value_or("");
          std::size_t online = 0;
          for (std::size_t p = info.find("state=online"); p != std::string::npos;
               p = info.find("state=online", p + 1)) {
            ++online;
          }
          return online >= static_cast<std::size_t>(options_.replicas);
        } catch (const std::exception&) {
          return false;
        }
      },
      15s);
  if (!synced) throw std::runtime_error("sentinel group: replicas did not sync\n" + logs_of(data_));

  for (int i = 0; i < options_.sentinels; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("sentinel-group-sentinel{}", i);
    o.mode = RedisServerOptions::Mode::sentinel;
    o.password = options_.sentinel_password;
    const auto& name = options_.master_name;
    o.extra_config = {
        fmt::format("sentinel monitor {} 127.0.0.1 {} {}", name, data_[0].port(), options_.quorum),
        fmt::format("sentinel down-after-milliseconds {} {}", name, options_.down_after.count()),
        fmt::format("sentinel failover-timeout {} {}", name, options_.failover_timeout.count()),
        fmt::format("sentinel parallel-syncs {} {}", name, options_.replicas)};
    if (!options_.password.empty()) {
      o.extra_config.push_back(fmt::format("sentinel auth-pass {} {}", name, options_.password));
    }
    sentinels_.emplace_back(o);
    sentinels_.back().start();
  }
  const bool known = wait_until(
      [&] {
        for (std::size_t i = 0; i < sentinels_.size(); ++i) {
          try {
            const auto master = sentinel_admin(i).array({"SENTINEL", "MASTER", options_.master_name});
            if (field(master, "num-slaves") != std::to_string(options_.replicas) ||
                field(master, "num-other-sentinels") != std::to_string(options_.sentinels - 1)) {
              return false;
            }
          } catch (const std::exception&) {
            return false;
          }
        }
        return true;
      },
      30s, 50ms);
  if (!known || !wait_stable(10s, options_.replicas)) {
    throw std::runtime_error("sentinel group: the sentinels did not agree\n" + logs_of(sentinels_));
  }
}

std::vector<std::string> SentinelGroup::sentinel_endpoints() const {
  std::vector<std::string> out;
  for (const auto& s : sentinels_) out.push_back(s.endpoint());
  return out;
}

RedisAdmin SentinelGroup::data_admin(std::size_t i, milliseconds timeout) {
  RedisAdmin admin(data_.at(i), timeout);
  if (!options_.password.empty()) admin.set_auth("", options_.password);
  return admin;
}

RedisAdmin SentinelGroup::sentinel_admin(std::size_t i, milliseconds timeout) {
  RedisAdmin admin(sentinels_.at(i), timeout);
  if (!options_.sentinel_password.empty()) admin.set_auth("", options_.sentinel_password);
  return admin;
}

int SentinelGroup::master_index() {
  for (std::size_t s = 0; s < sentinels_.size(); ++s) {
    if (!sentinels_[s].running()) continue;
    try {
      const auto addr = sentinel_admin(s, 500ms).array({"SENTINEL", "GET-MASTER-ADDR-BY-NAME", options_.master_name});
      if (addr.size() != 2) continue;
      const int port = std::atoi(addr[1].c_str());
      for (std::size_t d = 0; d < data_.size(); ++d) {
        if (data_[d].port() == port) return static_cast<int>(d);
      }
    } catch (const std::exception&) {
    }
  }
  return -1;
}

bool SentinelGroup::wait_stable(milliseconds timeout, int min_replicas) {
  return wait_until(
      [&] {
        int agreed = -1;
        for (std::size_t s = 0; s < sentinels_.size(); ++s) {
          if (!sentinels_[s].running()) continue;
          try {
            auto admin = sentinel_admin(s, 500ms);
            const auto master = admin.array({"SENTINEL", "MASTER", options_.master_name});
            if (field(master, "flags") != "master") return false;  // down or failing over
            const int port = std::atoi(field(master, "port").value_or("0").c_str());
            if (agreed >= 0 && port != agreed) return false;
            agreed = port;
          } catch (const std::exception&) {
            return false;
          }
        }
        const auto it = std::find_if(data_.begin(), data_.end(), [&](const RedisServer& d) { return d.port() == agreed; });
        if (it == data_.end()) return false;
        try {
          auto admin = data_admin(static_cast<std::size_t>(it - data_.begin()), 500ms);
          if (admin.array({"ROLE"}).front() != "master") return false;
          const auto info = admin.string({"INFO", "replication"}).value_or("");
          int online = 0;
          for (std::size_t p = info.find("state=online"); p != std::string::npos; p = info.find("state=online", p + 1)) {
            ++online;
          }
          return online >= min_replicas;
        } catch (const std::exception&) {
          return false;
        }
      },
      timeout, 50ms);
}

int SentinelGroup::failover(milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const int old = master_index();
  std::string last_error;
  bool started = false;
  for (std::size_t attempt = 0; !started && Clock::now() < deadline; ++attempt) {
    const std::size_t s = attempt % sentinels_.size();
    if (!sentinels_[s].running()) continue;
    try {
      started = sentinel_admin(s).ok({"SENTINEL", "FAILOVER", options_.master_name});
    } catch (const std::exception& e) {
      last_error = e.what();  // INPROG, NOGOODSLAVE: a replica is not ready yet
      std::this_thread::sleep_for(100ms);
    }
  }
  if (!started) throw std::runtime_error("SENTINEL FAILOVER was refused until the timeout: " + last_error);
  int now_master = -1;
  const bool moved = wait_until(
      [&] {
        now_master = master_index();
        if (now_master < 0 || now_master == old) return false;
        try {
          return data_admin(static_cast<std::size_t>(now_master), 500ms).array({"ROLE"}).front() == "master";
        } catch (const std::exception&) {
          return false;
        }
      },
      std::chrono::duration_cast<milliseconds>(deadline - Clock::now()), 20ms);
  if (!moved) throw std::runtime_error("the sentinels did not switch to another master in time\n" + logs_of(sentinels_));
  return now_master;
}

void SentinelGroup::demote(std::size_t i) {
  const int master = master_index();
  if (master < 0 || static_cast<std::size_t>(master) == i) {
    throw std::runtime_error("demote: node is the master, or no master is known");
  }
  auto admin = data_admin(i);
  admin.command({"REPLICAOF", "127.0.0.1", std::to_string(data_.at(static_cast<std::size_t>(master)).port())});
  admin.command({"CONFIG", "REWRITE"});
}

// ---------------------------------------------------------------------------------------------
// RedisClusterGroup.

RedisClusterGroup::RedisClusterGroup(Options options) : options_(options) {}

void RedisClusterGroup::start() {
  const int count = options_.masters * (1 + options_.replicas_per_master);
  std::vector<std::string> argv = {redis_cli_program(), "--cluster", "create"};
  for (int i = 0; i < count; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("cluster-node{}", i);
    o.cluster = true;
    o.extra_config = {fmt::format("cluster-node-timeout {}", options_.node_timeout.count())};
    nodes_.emplace_back(o);
    nodes_.back().start();
    argv.push_back(nodes_.back().endpoint());
  }
  argv.insert(argv.end(), {"--cluster-replicas", std::to_string(options_.replicas_per_master), "--cluster-yes"});
  const auto created = run_command(argv, 60s);
  if (created.status != 0) {
    throw std::runtime_error(fmt::format("redis-cli --cluster create failed ({}):\n{}", created.status,
                                         created.output));
  }
  if (!wait_ok(30s)) throw std::runtime_error("the cluster did not reach cluster_state:ok\n" + logs_of(nodes_));
}

std::vector<std::string> RedisClusterGroup::master_endpoints() {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].running()) continue;
    try {
      RedisAdmin admin(nodes_[i], 1s);
      if (admin.array({"ROLE"}).front() == "master") out.push_back(nodes_[i].endpoint());
    } catch (const std::exception&) {
    }
  }
  return out;
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
          if (slot >= first && slot <= last) {
            const int port = port_of(w[1]);
            for (std::size_t i = 0; i < nodes_.size(); ++i) {
              if (nodes_[i].port() == port) return static_cast<int>(i);
            }
          }
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
      if (role.size() >= 3 && role[0] == "slave" && std::atoi(role[2].c_str()) == nodes_.at(master).port()) {
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
              if (w[2].find("master") == std::string::npos || w[2].find("fail") != std::string::npos) continue;
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

CommandResult RedisClusterGroup::reshard(std::size_t from, std::size_t to, int slots, milliseconds timeout) {
  return run_command({redis_cli_program(), "--cluster", "reshard", nodes_.at(from).endpoint(), "--cluster-from",
                      node_id(from), "--cluster-to", node_id(to), "--cluster-slots", std::to_string(slots),
                      "--cluster-yes"},
                     timeout);
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

// ---------------------------------------------------------------------------------------------
// RedlockGroup.

RedlockGroup::RedlockGroup(std::size_t instances, bool clock_step) {
  for (std::size_t i = 0; i < instances; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("redlock{}", i);
    o.clock_step = clock_step;
    instances_.emplace_back(o);
  }
}

void RedlockGroup::start() {
  for (auto& instance : instances_) instance.start();
}

std::vector<std::string> RedlockGroup::endpoints() const {
  std::vector<std::string> out;
  for (const auto& instance : instances_) out.push_back(instance.endpoint());
  return out;
}

}  // namespace dlock::test
