#include "dlock/codegen/edit_distance.hpp"

#include <algorithm>
#include <numeric>

namespace dlock::codegen {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  // One row of the classic table is enough: row[j] is the distance between the current
  // prefix of `a` and the first j characters of `b`.
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitution});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::optional<std::string> closest_match(std::string_view word,
                                         const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    // A third of the longer word, as clang's typo correction: "idd" -> "id" but not "x" -> "id".
    const std::size_t limit = (std::max(word.size(), candidate.size()) + 2) / 3;
    if (distance == 0 || distance > limit) continue;
    if (!best || distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace dlock::codegen
