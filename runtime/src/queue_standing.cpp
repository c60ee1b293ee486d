#include "queue_standing.hpp"

#include <fmt/format.h>

namespace dlock::internal {

// An entry of another kind than the request's never lets it by: it holds the key, or it was
// refused and is about to go (its delete not yet applied), and passing over it would let
// two kinds hold at once once the entries before it go.
Standing standing_of(const std::vector<Queued>& queue, std::size_t place, bool admitted) {
  // A lock's entries and a semaphore's, or two semaphores' of other sizes, are of other kinds.
  const int mine = queue[place].permits;
  if (queue.front().permits != mine && !admitted) return {Standing::Is::kRefused, place};
  if (mine > 0) {
    for (std::size_t i = 0; i < place; ++i) {
      if (queue[i].permits != mine) return {Standing::Is::kWaiter, place};
    }
    // Every entry before it is a permit of its semaphore.
    const bool free = place < static_cast<std::size_t>(mine);
    return {free ? Standing::Is::kHolder : Standing::Is::kWaiter, place};
  }
  if (queue[place].kind == LockKind::kExclusive) {
    return place == 0 ? Standing{Standing::Is::kHolder, place}
                      : Standing{Standing::Is::kWaiter, place - 1};
  }
  for (std::size_t i = place; i-- > 0;) {
    if (queue[i].kind != LockKind::kShared) return {Standing::Is::kWaiter, i};
  }
  return {Standing::Is::kHolder, place};
}

std::string held_as(const Queued& first) {
  if (first.permits != 0) {
    return fmt::format("the key is held as a semaphore of {} permits", first.permits);
  }
  return fmt::format("the key is held as a {} lock, not as a semaphore", to_string(first.kind));
}

}  // namespace dlock::internal
