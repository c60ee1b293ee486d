// Internal logging front end: formats only when the level is enabled.
#pragma once

#include <fmt/format.h>

#include <string>

#include "dlock/log.hpp"

namespace dlock::internal {

[[nodiscard]] bool log_enabled(LogLevel level) noexcept;
void log_line(LogLevel level, const std::string& line) noexcept;

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) noexcept {
  if (!log_enabled(level)) return;
  try {
    log_line(level, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {
    // Logging must never take a lock operation down with it.
  }
}

/// A key made printable for logs: control and non-ASCII bytes as \xNN, long keys cut.
[[nodiscard]] std::string printable(std::string_view bytes);

/// A value for an event line's `field=value`: printable, and in double quotes (with `"` as
/// \x22) when empty or holding a space, `=` or `"`, so that lines split on spaces.
[[nodiscard]] std::string field(std::string_view bytes);

/// A lock name for event lines: "(unnamed)" for none.
[[nodiscard]] std::string name_field(std::string_view name);

}  // namespace dlock::internal
