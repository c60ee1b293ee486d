// dlock logging: one line per event, through a replaceable sink.
//
//   dlock::set_log_sink([](dlock::LogLevel level, std::string_view line) {
//     my_logger.log(to_my_level(level), line);
//   });
//   dlock::set_log_level(dlock::LogLevel::kDebug);
//
// The default sink writes `dlock <level>: <line>` to stderr. Sinks may be called from any
// thread (the watchdog, the subscriber, callers) and must be thread-safe.
#pragma once

#include <functional>
#include <string_view>

namespace dlock {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

/// Receives one formatted event line without a trailing newline.
using LogSink = std::function<void(LogLevel, std::string_view)>;

/// Replaces the sink; an empty function restores the default stderr sink.
void set_log_sink(LogSink sink);

/// Events below `level` are dropped before they are formatted. Default: kInfo.
void set_log_level(LogLevel level);

/// `debug`, `info`, `warn`, `error`, `off`.
[[nodiscard]] std::string_view to_string(LogLevel level);

}  // namespace dlock
