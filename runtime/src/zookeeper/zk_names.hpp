// The names and data of dlock's znodes (zookeeper_backend.hpp has the tree): sequence
// numbers, owners in lock znode names, fields of znode data, and service names as znode names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::internal::zk {

inline constexpr std::size_t kSequenceDigits = 10;  // ZooKeeper's suffix of a sequential znode
inline constexpr std::string_view kLockPrefix = "l-";    ///< an exclusive hold or request
inline constexpr std::string_view kSharedPrefix = "s-";  ///< a shared one
inline constexpr std::string_view kAuditPrefix = "a-";

/// The sequence number ZooKeeper appended to a sequential znode's name; -1 when none.
[[nodiscard]] std::int64_t sequence_of(std::string_view name);
/// The owner in a lock znode's name `l-<owner>-<sequence>` (exclusive) or
/// `s-<owner>-<sequence>` (shared); empty when it is not one.
[[nodiscard]] std::string_view owner_in(std::string_view name);
/// Whether a lock znode's name is a shared hold's or request's.
[[nodiscard]] inline bool is_shared(std::string_view name) {
  return name.substr(0, kSharedPrefix.size()) == kSharedPrefix;
}
/// In `queue` (queue_of), the place of the znode that the one at `place` waits for: the one
/// just before it for an exclusive request, the last exclusive one before it for a shared
/// request. `place` itself when it waits for none: it holds the lock.
[[nodiscard]] std::size_t blocker_of(const std::vector<std::string>& queue, std::size_t place);
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
