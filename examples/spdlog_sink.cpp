// Routes dlock's event lines to spdlog, levels mapped one to one.
//
//   dlock::set_log_sink(to_spdlog(spdlog::default_logger()));
//
// spdlog loggers are thread-safe (the _mt sinks), as dlock sinks must be: the watchdog,
// the subscriber and callers all log.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <thread>

#include "dlock/dlock.hpp"

namespace {

spdlog::level::level_enum to_spdlog(dlock::LogLevel level) {
  switch (level) {
    case dlock::LogLevel::kDebug: return spdlog::level::debug;
    case dlock::LogLevel::kInfo: return spdlog::level::info;
    case dlock::LogLevel::kWarn: return spdlog::level::warn;
    case dlock::LogLevel::kError: return spdlog::level::err;
    case dlock::LogLevel::kOff: break;
  }
  return spdlog::level::off;
}

dlock::LogSink to_spdlog(std::shared_ptr<spdlog::logger> logger) {
  return [logger = std::move(logger)](dlock::LogLevel level, std::string_view line) {
    logger->log(to_spdlog(level), "{}", line);
  };
}

}  // namespace

int main() {
  auto logger = spdlog::stdout_color_mt("dlock");
  logger->set_level(spdlog::level::debug);
  dlock::set_log_sink(to_spdlog(logger));
  dlock::set_log_level(dlock::LogLevel::kDebug);  // dlock filters first: nothing is formatted below it

  dlock::Config config;
  config.service = "spdlog-example";
  config.backends["default"].name = "default";
  config.backends["default"].topology = dlock::Topology::kMemory;
  dlock::init(config);

  using namespace std::chrono_literals;
  dlock::LockSettings s;
  s.lease = 300ms;
  s.wait = 0ms;
  s.min_hold = 50ms;
  { dlock::Lease lease = dlock::client().acquire("report:2026-11-21T07:00", s, "reports::daily"); }
  s.min_hold = 0ms;
  s.max_hold = 100ms;
  {
    dlock::Lease lease = dlock::client().acquire("order:7", s, "orders::place");
    std::this_thread::sleep_for(200ms);  // outlives max_hold: a warning
  }
  dlock::shutdown();
  dlock::set_log_sink({});
  return 0;
}
