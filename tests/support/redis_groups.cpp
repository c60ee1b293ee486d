// SentinelGroup and RedlockGroup (RedisClusterGroup: redis_cluster_group.cpp).
#include "redis_groups.hpp"

#include <fmt/format.h>

#include <optional>
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

// Data-node and sentinel options for SentinelGroup::Options::tls: TLS for clients and for
// the links between the processes (replication, sentinel to data node, sentinel hellos).
RedisServerOptions::Tls group_tls(bool enabled, bool auth_clients) {
  RedisServerOptions::Tls tls;
  tls.enabled = enabled;
  tls.auth_clients = auth_clients;
  tls.replication = enabled;
  return tls;
}

}  // namespace

namespace detail {
std::string logs_of(std::vector<RedisServer>& servers) {
  std::string out;
  for (auto& s : servers) out += fmt::format("=== {} ===\n{}", s.options().name, s.log_tail(20));
  return out;
}
}  // namespace detail

using detail::logs_of;

// ---------------------------------------------------------------------------------------------
// SentinelGroup.

SentinelGroup::SentinelGroup(Options options) : options_(std::move(options)) {}

void SentinelGroup::start() {
  start_data_nodes();
  start_sentinels();
}

void SentinelGroup::start_data_nodes() {
  for (int i = 0; i <= options_.replicas; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("sentinel-group-data{}", i);
    o.password = options_.password;
    o.tls = group_tls(options_.tls, options_.tls_auth_clients);
    if (!options_.password.empty()) o.extra_config.push_back("masterauth " + options_.password);
    if (i > 0) o.extra_config.push_back(fmt::format("replicaof 127.0.0.1 {}", link_port(data_[0])));
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
}

void SentinelGroup::start_sentinels() {
  for (int i = 0; i < options_.sentinels; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("sentinel-group-sentinel{}", i);
    o.mode = RedisServerOptions::Mode::sentinel;
    o.password = options_.sentinel_password;
    o.tls = group_tls(options_.tls, options_.tls_auth_clients);
    const auto& name = options_.master_name;
    o.extra_config = {
        fmt::format("sentinel monitor {} 127.0.0.1 {} {}", name, link_port(data_[0]),
                    options_.quorum),
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

int SentinelGroup::link_port(const RedisServer& server) const {
  return options_.tls ? server.tls_port() : server.port();
}

int SentinelGroup::data_index_of_port(int port) const {
  for (std::size_t d = 0; d < data_.size(); ++d) {
    if (port != 0 && (data_[d].port() == port || data_[d].tls_port() == port)) {
      return static_cast<int>(d);
    }
  }
  return -1;
}

std::vector<std::string> SentinelGroup::sentinel_endpoints() const {
  std::vector<std::string> out;
  for (const auto& s : sentinels_) out.push_back(s.endpoint());
  return out;
}

std::vector<std::string> SentinelGroup::sentinel_tls_endpoints() const {
  std::vector<std::string> out;
  for (const auto& s : sentinels_) out.push_back(s.tls_endpoint());
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
      const int index = data_index_of_port(std::atoi(addr[1].c_str()));
      if (index >= 0) return index;
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
        const int index = data_index_of_port(agreed);
        if (index < 0) return false;
        try {
          auto admin = data_admin(static_cast<std::size_t>(index), 500ms);
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
  admin.command({"REPLICAOF", "127.0.0.1",
                 std::to_string(link_port(data_.at(static_cast<std::size_t>(master))))});
  admin.command({"CONFIG", "REWRITE"});
}

// ---------------------------------------------------------------------------------------------
// RedlockGroup.

RedlockGroup::RedlockGroup(std::size_t instances, bool clock_step)
    : RedlockGroup(instances,
                   Options{.clock_step = clock_step, .tls = false, .tls_auth_clients = false}) {}

RedlockGroup::RedlockGroup(std::size_t instances, Options options) {
  for (std::size_t i = 0; i < instances; ++i) {
    RedisServerOptions o;
    o.name = fmt::format("redlock{}", i);
    o.clock_step = options.clock_step;
    o.tls.enabled = options.tls;
    o.tls.auth_clients = options.tls_auth_clients;
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

std::vector<std::string> RedlockGroup::tls_endpoints() const {
  std::vector<std::string> out;
  for (const auto& instance : instances_) out.push_back(instance.tls_endpoint());
  return out;
}

}  // namespace dlock::test
