// Shared set-up for the sentinel, cluster and Redlock tests: configurations for the server
// groups of tests/support/redis_groups.hpp, in code and as YAML for worker processes.
#pragma once

#include <string>
#include <vector>

#include "endpoints.hpp"
#include "fixtures.hpp"
#include "redis_groups.hpp"

namespace dlock::test {

/// A group that fails over quickly, with separate passwords for the data nodes and the
/// sentinels.
inline SentinelGroup::Options fast_sentinel_group() {
  SentinelGroup::Options o;
  o.down_after = 1000ms;
  o.failover_timeout = 5000ms;
  o.password = "data-secret";
  o.sentinel_password = "sentinel-secret";
  return o;
}

inline Config topology_config(Topology topology, std::vector<Endpoint> endpoints) {
  Config config;
  config.service = unique_service();
  BackendConfig backend;
  backend.name = "default";
  backend.topology = topology;
  backend.endpoints = std::move(endpoints);
  backend.connect_timeout = 500ms;
  backend.command_timeout = 1000ms;
  backend.poll_interval = 250ms;
  config.backends["default"] = backend;
  return config;
}

inline Config sentinel_config(SentinelGroup& group, int wait_replicas) {
  Config config = topology_config(Topology::kSentinel, endpoints_of(group.sentinel_endpoints()));
  BackendConfig& b = config.backends["default"];
  b.master_name = group.options().master_name;
  b.password = group.options().password;
  b.sentinel_password = group.options().sentinel_password;
  b.wait_replicas = wait_replicas;
  return config;
}

inline std::string yaml_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out + "]";
}

/// The sentinel backend of sentinel_config() as a YAML file.
inline std::string sentinel_yaml(SentinelGroup& group, int wait_replicas) {
  return "service: \"" + unique_service() + "\"\nbackends:\n  default:\n    topology: sentinel\n" +
         "    master_name: " + group.options().master_name + "\n    sentinels: " +
         yaml_list(group.sentinel_endpoints()) + "\n    password: \"" + group.options().password +
         "\"\n    sentinel_password: \"" + group.options().sentinel_password +
         "\"\n    wait_replicas: " + std::to_string(wait_replicas) +
         "\n    connect_timeout: 500ms\n    command_timeout: 1s\n    poll_interval: 100ms\n";
}

}  // namespace dlock::test
