#include "queue_standing.hpp"

#include <fmt/format.h>

namespace dlock::internal {

Standing standing_of(const std::vector<Queued>& queue, std::size_t place) {
  // A lock's entries and a semaphore's, or two semaphores' of other sizes, are of other kinds.
  const int mine = queue[place].permits;
  if (queue.front().permits != mine) return {Standing::Is::kRefused, place};
  if (mine > 0) {
    int before = 0;
    for (std::size_t i = 0; i < place; ++i) before += queue[i].permits == mine ? 1 : 0;
    return {before < mine ? Standing::Is::kHolder : Standing::Is::kWaiter, place};
  }
  const bool shared = queue[place].kind == LockKind::kShared;
  for (std::size_t i = place; i-- > 0;) {
    if (queue[i].permits != 0 || (shared && queue[i].kind == LockKind::kShared)) continue;
    return {Standing::Is::kWaiter, i};
  }
  return {Standing::Is::kHolder, place};
}

std::string held_as(const Queued& first) {
  if (first.permits != 0) return fmt::format("the key is held as a semaphore of {} permits", first.permits);
  return fmt::format("the key is held as a {} lock, not as a semaphore", to_string(first.kind));
}

}  // namespace dlock::internal
