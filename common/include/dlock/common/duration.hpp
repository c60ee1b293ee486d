// Durations, as the configuration file and the guard attribute both write them: a whole
// number and a unit, `250ms`, `30s`, `10m`, `1h`.
//
//   read_duration("30s").value   // 30000ms
//   read_duration("30").error    // DurationError::kNoUnit
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

namespace dlock::common {

/// Durations end up added to steady_clock (nanosecond) time points, so the largest accepted
/// one still fits in nanoseconds: 9223372036854ms, about 292 years.
inline constexpr std::int64_t kMaxDurationMillis =
    std::numeric_limits<std::int64_t>::max() / 1'000'000;

/// The units, for messages.
inline constexpr std::string_view kDurationUnits = "ms, s, m, h";

enum class DurationError { kNone, kNoNumber, kNoUnit, kUnknownUnit, kTooLarge };

struct DurationRead {
  std::optional<std::chrono::milliseconds> value;
  DurationError error = DurationError::kNone;
  std::string_view unit;  ///< what follows the digits (the unknown unit, for kUnknownUnit)
};

/// Milliseconds in one `unit`, 0 for none of ms, s, m, h.
[[nodiscard]] constexpr std::int64_t millis_per_unit(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 60 * 60 * 1000;
  return 0;
}

[[nodiscard]] constexpr DurationRead read_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  if (number.empty()) return {std::nullopt, DurationError::kNoNumber, unit};
  if (unit.empty()) return {std::nullopt, DurationError::kNoUnit, unit};
  const std::int64_t scale = millis_per_unit(unit);
  if (scale == 0) return {std::nullopt, DurationError::kUnknownUnit, unit};
  const std::int64_t max_count = kMaxDurationMillis / scale;
  std::int64_t count = 0;
  for (const char c : number) {
    const int digit = c - '0';
    if (count > (max_count - digit) / 10) return {std::nullopt, DurationError::kTooLarge, unit};
    count = count * 10 + digit;
  }
  return {std::chrono::milliseconds(count * scale), DurationError::kNone, unit};
}

}  // namespace dlock::common
