#include "queue_standing.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "admin_backend.hpp"

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

LockInfo lock_of_queue(const std::vector<LockInfo>& entries, const std::vector<Queued>& kinds,
                       const std::vector<bool>& fair) {
  LockInfo info = entries.front();
  info.mode = to_string(kinds.front().kind);
  info.permits = std::max(0, kinds.front().permits);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Standing standing = standing_of(kinds, i);
    if (standing.is == Standing::Is::kHolder) {
      info.holders.push_back(holder_described_by(entries[i]));
    } else if (standing.is == Standing::Is::kWaiter) {
      info.queue.push_back(
          WaiterInfo{entries[i].owner, to_string(kinds[i].kind), fair[i], entries[i].ttl});
    }  // refused, about to go
  }
  describe_by_first_holder(info);
  return info;
}

std::string held_as(const Queued& first) {
  if (first.permits != 0) {
    return fmt::format("the key is held as a semaphore of {} permits", first.permits);
  }
  return fmt::format("the key is held as a {} lock, not as a semaphore", to_string(first.kind));
}

}  // namespace dlock::internal
