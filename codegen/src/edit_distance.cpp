// The generator's suggestions follow the configuration's: one rule, in common/.
#include "dlock/codegen/edit_distance.hpp"

#include "dlock/common/suggest.hpp"

namespace dlock::codegen {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  return common::edit_distance(a, b);
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  const auto best = common::closest_match(word, candidates);
  if (!best) return std::nullopt;
  return std::string(*best);
}

}  // namespace dlock::codegen
