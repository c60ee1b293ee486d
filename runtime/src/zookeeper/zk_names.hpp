// The names and data of dlock's znodes (zookeeper_backend.hpp has the tree): sequence
// numbers, owners in lock znode names, fields of znode data, and service names as znode names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <optional>
#include <vector>

#include "backend.hpp"
#include "queue_standing.hpp"

namespace dlock::internal::zk {

inline constexpr std::size_t kSequenceDigits = 10;  // ZooKeeper's suffix of a sequential znode
inline constexpr std::string_view kLockPrefix = "l-";    ///< an exclusive hold or request
inline constexpr std::string_view kSharedPrefix = "s-";  ///< a shared one
inline constexpr char kPermitMark = 'p';  ///< "p<permits>-": a permit of that many
inline constexpr std::string_view kAuditPrefix = "a-";

/// The sequence number ZooKeeper appended to a sequential znode's name; -1 when none.
[[nodiscard]] std::int64_t sequence_of(std::string_view name);

/// What a lock znode's name `<mark>-<owner>-<sequence>` says: its mark is `l` (exclusive),
/// `s` (shared) or `p<permits>` (a permit of a semaphore of that many).
struct LockName {
  LockKind kind = LockKind::kExclusive;
  int permits = 0;  ///< 0 unless a permit
  std::string_view owner;
};
/// Nothing when `name` is not a lock znode's.
[[nodiscard]] std::optional<LockName> lock_name_of(std::string_view name);
/// The start of the names of an owner's lock znodes of one kind: `<mark>-<owner>-`.
[[nodiscard]] std::string name_prefix(LockKind kind, int permits, std::string_view owner);
/// The owner in a lock znode's name; empty when it is not one.
[[nodiscard]] inline std::string_view owner_in(std::string_view name) {
  const auto parsed = lock_name_of(name);
  return parsed ? parsed->owner : std::string_view{};
}

/// What each znode of `queue` asks for (each a lock znode's name).
[[nodiscard]] std::vector<Queued> kinds_in(const std::vector<std::string>& queue);
/// Lock znodes in queue order (their sequence numbers), others left out.
[[nodiscard]] std::vector<std::string> queue_of(std::vector<std::string> children);
/// Sequential znodes' names by sequence number, oldest first (newest first if `newest_first`).
void sort_by_sequence(std::vector<std::string>& names, bool newest_first = false);

/// Znode data: fields separated by single spaces; text fields are hex.
[[nodiscard]] std::vector<std::string> fields_of(std::string_view text);
[[nodiscard]] long long number_in(const std::vector<std::string>& fields, std::size_t index);
[[nodiscard]] std::string text_in(const std::vector<std::string>& fields, std::size_t index);

/// Whether a C client error code leaves the request's outcome unknown.
[[nodiscard]] bool connection_trouble(int rc);
/// `text` as one znode name: '/', '%', bytes outside printable ASCII, and the names "", "."
/// and "..", which ZooKeeper refuses, written as %XX.
[[nodiscard]] std::string znode_name(std::string_view text);

}  // namespace dlock::internal::zk
