#include "log.hpp"

#include <dlock/common/text.hpp>

#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>

#include "metrics.hpp"

namespace dlock {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_sink_mutex;
std::shared_ptr<const LogSink> g_sink;  // null: the default stderr sink

}  // namespace

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "unknown";
}

void set_log_sink(LogSink sink) {
  std::lock_guard lock(g_sink_mutex);
  g_sink = sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr;
}

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

namespace internal {

bool log_enabled(LogLevel level) noexcept {
  return level != LogLevel::kOff &&
         static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

void log_line(LogLevel level, const std::string& line) noexcept {
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard lock(g_sink_mutex);
    sink = g_sink;
  }
  try {
    if (sink) {
      (*sink)(level, line);
    } else {
      fmt::print(stderr, "dlock {}: {}\n", to_string(level), line);
    }
  } catch (...) {
  }
}

std::string printable(std::string_view bytes) { return common::printable(bytes, common::kLogText); }

std::string field(std::string_view bytes) {
  std::string value = printable(bytes);
  if (!value.empty() && value.find_first_of(" =\"") == std::string::npos) return value;
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"') {
      quoted += "\\x22";
    } else {
      quoted.push_back(c);
    }
  }
  quoted.push_back('"');
  return quoted;
}

std::string name_field(std::string_view name) { return field(name.empty() ? kUnnamed : name); }

}  // namespace internal
}  // namespace dlock
