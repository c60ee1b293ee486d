// Where a request stands in a lock's queue, for engines that keep one entry per hold or
// request in arrival order (a ZooKeeper key's sequential znodes, an etcd lock's keys by
// create revision): the read/write lock recipe, and a semaphore's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "backend.hpp"
#include "dlock/admin.hpp"

namespace dlock::internal {

/// What one entry of a queue asks for.
struct Queued {
  LockKind kind = LockKind::kExclusive;
  int permits = 0;  ///< kPermit: the semaphore's size; 0 otherwise
};

/// Where the entry at `place` of a queue stands.
struct Standing {
  enum class Is {
    kHolder,   ///< it waits for no entry before it
    kWaiter,   ///< it waits for `blocker`, or, a permit, for any of the entries before it
    kRefused,  ///< the first entry is of another kind of lock (a semaphore against a lock,
               ///< or of another size): the key is held so, and the request is refused
  };
  Is is = Is::kHolder;
  std::size_t blocker = 0;  ///< for a waiter: the entry it waits for (`place` for a permit)
};

/// An exclusive request waits for the entry just before it, a shared one for the last entry
/// before it that is not shared, and a permit of N holds while the entries before it are
/// fewer than N, all permits of its semaphore. A request of another kind than the first
/// entry is refused, unless `admitted` (it waits already: it was not refused when it came,
/// so the first entry now is one that was refused since, about to go, or one that came
/// after a refused one and holds; either way it waits). An entry of another kind before a
/// request is waited for like any other.
[[nodiscard]] Standing standing_of(const std::vector<Queued>& queue, std::size_t place,
                                   bool admitted = false);

/// Why a request is refused when the first entry of its queue is `first`.
[[nodiscard]] std::string held_as(const Queued& first);

/// What dlockctl shows of a queue whose entries, in order, ask for `kinds` and are each
/// described by `entries[i]` as if it held (key, owner, token, time left...): the first
/// entry's key, lease, mode and permits; every entry that holds among the holders, every
/// one that waits in the queue (`fair[i]`: it keeps its place), a refused one (about to go)
/// left out; the first holder describes the lock. `entries` is not empty.
[[nodiscard]] LockInfo lock_of_queue(const std::vector<LockInfo>& entries,
                                     const std::vector<Queued>& kinds,
                                     const std::vector<bool>& fair);

}  // namespace dlock::internal
