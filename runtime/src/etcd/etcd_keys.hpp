// How the etcd engine names and reads the keys of a lock (etcd_backend.hpp has the tree):
// the range of a prefix, a lock's queue in create order, and what kind each key holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "etcd/etcd_channel.hpp"
#include "queue_standing.hpp"

namespace dlock::internal {

/// The end of the range of keys that start with `prefix` (etcd's range_end).
[[nodiscard]] std::string prefix_end(std::string prefix);

/// The name of a hold's key under its lock's `prefix`, by its lease: hex digits for an
/// exclusive hold, "s<hex>" for a shared one, "p<permits>-<hex>" for a permit.
[[nodiscard]] std::string hold_key(const std::string& prefix, LockKind kind, int permits,
                                   std::int64_t lease);

/// What a lock's key under its `prefix` asks for (hold_key).
[[nodiscard]] Queued kind_of_key(std::string_view key, std::string_view prefix);

/// Whether a lock's key under its `prefix` is a shared hold's ("s<lease>").
[[nodiscard]] inline bool is_shared_key(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && key[prefix.size()] == 's';
}

/// The end of the range of a lock's exclusive keys: theirs are hex digits after `prefix`,
/// and shared ones and permits start with 's' and 'p', so [prefix, writers_end(prefix))
/// holds them alone.
[[nodiscard]] inline std::string writers_end(const std::string& prefix) { return prefix + "g"; }

/// Deletes `key` if it is still the one created at `revision` (0: whichever is there). A
/// hold's key is named by its lease, which the process's next lock may reuse: a copy of the
/// delete that reaches a member late then finds another key of that name, and leaves it.
[[nodiscard]] pb::TxnRequest delete_of(const std::string& key, std::int64_t revision);

/// The one key `key`.
[[nodiscard]] pb::RangeRequest only(const std::string& key);

/// Every key under `prefix`.
[[nodiscard]] pb::RangeRequest under(const std::string& prefix);

/// A lock's keys in create order, names only, at most `limit` (0: all).
[[nodiscard]] pb::RangeRequest queue_range(const std::string& prefix, std::int64_t limit);

}  // namespace dlock::internal
