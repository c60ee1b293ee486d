// "Did you mean" suggestions, one rule for the YAML loader and the generator.
//
//   closest_match("leese", {"lease", "wait"})   // "lease"
//   closest_match("timeout", {"lease", "wait"}) // nullopt: nothing is close enough
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace dlock::common {

/// Words longer than this are never compared (the distance costs the product of the
/// lengths, and nobody mistypes a 100-letter name).
inline constexpr std::size_t kMaxSuggestLength = 64;

/// Optimal string alignment distance: an insertion, a deletion, a substitution or a swap of
/// two neighbouring letters each cost one.
[[nodiscard]] inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

/// The candidate nearest to `word` when it is close enough to be a typo: at least one edit
/// (an exact match is no typo), and at most a third of the longer word, rounded up, and
/// never more than three. The first of equally near candidates wins.
template <typename Candidates>
[[nodiscard]] std::optional<std::string_view> closest_match(std::string_view word,
                                                            const Candidates& candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  if (word.size() > kMaxSuggestLength) return best;
  for (const auto& entry : candidates) {
    const std::string_view candidate(entry);
    if (candidate.size() > kMaxSuggestLength) continue;
    const std::size_t distance = edit_distance(word, candidate);
    const std::size_t limit =
        std::min<std::size_t>(3, (std::max(word.size(), candidate.size()) + 2) / 3);
    if (distance == 0 || distance > limit) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace dlock::common
