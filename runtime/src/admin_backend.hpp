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

}  // namespace dlock::internal
