// Shared set-up for tests that run against a real redis-server.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

/// A test suite whose tests share one redis-server, started once for the whole program; each
/// test has a service (key prefix) of its own.
class OneServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new RedisServer;
    server_->start();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static inline RedisServer* server_ = nullptr;
};

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

/// Collects the log lines written while it lives; with `level`, also lowers the log level
/// to it meanwhile (kInfo again afterwards).
class LogCapture {
 public:
  explicit LogCapture(std::optional<LogLevel> level = std::nullopt) : level_(level) {
    if (level_) set_log_level(*level_);
    set_log_sink([this](LogLevel, std::string_view line) {
      std::lock_guard lock(mutex_);
      lines_.emplace_back(line);
    });
  }
  ~LogCapture() {
    set_log_sink(nullptr);
    if (level_) set_log_level(LogLevel::kInfo);
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string text() {
    std::lock_guard lock(mutex_);
    std::string all;
    for (const auto& line : lines_) all += line + "\n";
    return all;
  }

 private:
  std::optional<LogLevel> level_;
  std::mutex mutex_;
  std::vector<std::string> lines_;
};

}  // namespace dlock::test
