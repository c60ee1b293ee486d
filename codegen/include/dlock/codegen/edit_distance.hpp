// "Did you mean" suggestions for misspelt parameters, options and members.
//
//   closest_match("idd", {"id", "cart"});      // "id"
//   closest_match("timeout", {"lease", "wait"});  // nullopt: nothing is close enough
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::codegen {

/// Optimal string alignment distance: insertions, deletions, substitutions and swaps of two
/// neighbouring letters each cost one (dlock::common::edit_distance, as the YAML loader).
[[nodiscard]] std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate nearest to `word`, if it is close enough to be a likely typo (at least one
/// edit, at most a third of the longer word and at most three; dlock::common::closest_match).
/// The first candidate wins a tie.
[[nodiscard]] std::optional<std::string> closest_match(std::string_view word,
                                                       const std::vector<std::string>& candidates);

}  // namespace dlock::codegen
