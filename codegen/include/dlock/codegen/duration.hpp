// Durations in guard options: an integer and a unit, `250ms`, `30s`, `10m`, `1h`.
//
//   parse_duration("30s").value;   // 30000ms
//   parse_duration("30").error;    // "missing unit"
//
// The grammar and the upper bound are those of the YAML configuration: both read with
// dlock::common::read_duration, so an attribute accepts exactly what a configuration file
// accepts; this version also says what is wrong, for the diagnostic.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace dlock::codegen {

using Millis = std::chrono::milliseconds;

/// A duration, or why the text is not one.
struct DurationParse {
  std::optional<Millis> value;
  std::string error;  ///< empty when `value` is set
};

/// Parses the spelling of one option value, e.g. the pp-number token `30s`.
[[nodiscard]] DurationParse parse_duration(std::string_view text);

}  // namespace dlock::codegen
