#include "dlock/codegen/duration.hpp"

#include "dlock/common/duration.hpp"

namespace dlock::codegen {

DurationParse parse_duration(std::string_view text) {
  const common::DurationRead read = common::read_duration(text);
  switch (read.error) {
    case common::DurationError::kNone: return {read.value, {}};
    case common::DurationError::kNoNumber:
      return {std::nullopt, "a duration starts with a whole number"};
    case common::DurationError::kNoUnit: return {std::nullopt, "missing unit"};
    case common::DurationError::kUnknownUnit:
      return {std::nullopt, "unknown unit '" + std::string(read.unit) + "'"};
    case common::DurationError::kTooLarge: return {std::nullopt, "too large"};
  }
  return {std::nullopt, "not a duration"};
}

}  // namespace dlock::codegen
