// Shared set-up for tests that run against a real redis-server.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dlock/dlock.hpp"
#include "redis_process.hpp"
#include "yaml_file.hpp"

namespace dlock::test {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

inline std::string unique_service() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

/// One `single` backend on `server`, with short timeouts so failure tests stay quick.
inline Config single_node_config(const RedisServer& server) {
  Config config;
  config.service = unique_service();
  BackendConfig backend;
  backend.name = "default";
  backend.topology = Topology::kSingle;
  backend.endpoints = {Endpoint{server.host(), server.port()}};
  backend.connect_timeout = 500ms;
  backend.command_timeout = 500ms;
  backend.poll_interval = 250ms;
  config.backends["default"] = backend;
  return config;
}

inline LockSettings settings(Millis lease, Millis wait = 0ms) {
  LockSettings s;
  s.lease = lease;
  s.wait = wait;
  return s;
}

/// The configuration of a single redis-server as a YAML file for worker processes.
class ConfigFile : public YamlFile {
 public:
  ConfigFile(const RedisServer& server, const std::string& service)
      : YamlFile("service: \"" + service + "\"\nbackends:\n  default:\n    topology: single\n    address: " +
                 server.address() + "\n    poll_interval: 250ms\n") {}
};

inline std::string worker_program() { return DLOCK_TEST_WORKER; }

inline long long elapsed_ms(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

}  // namespace dlock::test
