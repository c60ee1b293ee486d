// The admin seam (dlock::Admin, dlockctl): held locks, forced releases and their audit
// list. Reached only from admin.cpp, through admin_of() (engine.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/key.hpp"

namespace dlock::internal {

/// Every call throws BackendUnavailable when the servers cannot be reached within the
/// backend's timeouts. Calls may come from several threads at once.
class AdminBackend {
 public:
  virtual ~AdminBackend() = default;

  /// Locks held now whose user key matches the glob `pattern`, in any order.
  virtual std::vector<LockInfo> list(std::string_view pattern) = 0;
  /// The lock on `key`, or nothing.
  virtual std::optional<LockInfo> inspect(const Key& key) = 0;
  /// Deletes the lock on `key` whoever owns it, notifies waiters and records `who` (with
  /// the server's time and the removed owner) in the audit list. Returns what was removed.
  virtual std::optional<LockInfo> force_release(const Key& key, const AuditEntry& who) = 0;
  /// Recorded forced releases, newest first.
  virtual std::vector<AuditEntry> history(std::size_t limit) = 0;
};

/// The holder that `info`'s own fields describe (an engine that reads one holder at a time).
inline HolderInfo holder_described_by(const LockInfo& info) {
  return HolderInfo{info.owner, info.host,           info.pid, info.thread, info.name,
                    info.token, info.acquired_at_ms, info.ttl, info.min_hold};
}

/// A key of several holders is described, in LockInfo's own fields, by its first holder.
inline void describe_by_first_holder(LockInfo& info) {
  if (info.holders.empty()) return;
  const HolderInfo& first = info.holders.front();
  info.owner = first.owner;
  info.host = first.host;
  info.pid = first.pid;
  info.thread = first.thread;
  info.name = first.name;
  info.token = first.token;
  info.acquired_at_ms = first.acquired_at_ms;
  info.ttl = first.ttl;
  info.min_hold = first.min_hold;
}

}  // namespace dlock::internal
