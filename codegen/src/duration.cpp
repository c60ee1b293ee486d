#include "dlock/codegen/duration.hpp"

#include <cstdint>
#include <limits>

namespace dlock::codegen {
namespace {

// The configuration's bound: durations are added to steady_clock (nanosecond) time points,
// so the largest one still fits in nanoseconds, about 292 years.
constexpr std::int64_t kMaxDurationMillis = std::numeric_limits<std::int64_t>::max() / 1'000'000;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::int64_t millis_per_unit(std::string_view unit) {
  if (unit == "ms") return 1;
  if (unit == "s") return 1000;
  if (unit == "m") return 60 * 1000;
  if (unit == "h") return 60 * 60 * 1000;
  return 0;
}

}  // namespace

DurationParse parse_duration(std::string_view text) {
  std::size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) ++digits;
  const std::string_view number = text.substr(0, digits);
  const std::string_view unit = text.substr(digits);
  if (number.empty()) return {std::nullopt, "a duration starts with a whole number"};
  if (unit.empty()) return {std::nullopt, "missing unit"};
  const std::int64_t scale = millis_per_unit(unit);
  if (scale == 0) {
    return {std::nullopt, "unknown unit '" + std::string(unit) + "'"};
  }
  std::int64_t count = 0;
  const std::int64_t max_count = kMaxDurationMillis / scale;
  for (char c : number) {
    const int digit = c - '0';
    if (count > (max_count - digit) / 10) return {std::nullopt, "too large"};
    count = count * 10 + digit;
  }
  return {Millis{count * scale}, {}};
}

}  // namespace dlock::codegen
