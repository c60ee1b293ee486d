// What code woven by dlock-codegen calls: one Guard per call of a guarded function.
//
//   [[dlock::guard("order:<id>", lease=30s, wait=2s)]]
//   Receipt place_order(long id, const Cart& cart) { ... }
//
// becomes, at the top of the body (the generator writes this; users rarely do):
//
//   static const ::dlock::GuardSite dlock_site{"shop::place_order", "", {...}, false, __FILE__,
//   __LINE__};
//   ::dlock::Guard dlock_guard(dlock_site, ::fmt::format("order:{}", id));
//   if (!dlock_guard.entered()) return ...;   // only where on_busy=skip is allowed
//
// Settings are resolved per call with the YAML precedence (built-in, defaults, the guard's
// policy, the attribute, locks.<name>), so operators can retune a guard without a rebuild.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/key.hpp"
#include "dlock/lease.hpp"

namespace dlock {

/// A guarded function, as the generator describes it. Lives in static storage.
struct GuardSite {
  std::string_view name;    ///< `name=` or the qualified function name
  std::string_view policy;  ///< `policy=`, or empty
  LockOverrides attribute;  ///< the attribute's own options
  /// The return type allows skipping (void, bool, std::optional). When it does not, a busy
  /// lock always throws, even if the configuration says on_busy: skip.
  bool skippable = false;
  std::string_view file;
  int line = 0;
};

/// Holds the lock for the scope of one guarded call. Non-copyable, non-movable.
class Guard {
 public:
  /// Acquires `key` on the process-wide client. Throws LockNotAcquired when busy with
  /// on_busy=throw (or when skipping is impossible), BackendUnavailable when the backend
  /// cannot be reached, ConfigError when the guard names an unknown policy or backend.
  Guard(const GuardSite& site, Key key);
  /// Acquires every key of `keys` or none (Client::acquire with several keys). Throws
  /// LockNotAcquired also when the call is refused (an upgrade, say), whatever on_busy says.
  Guard(const GuardSite& site, std::vector<Key> keys);
  ~Guard() = default;  // the lease releases, never throwing
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  /// False when the lock was busy and the body must be skipped (on_busy=skip).
  [[nodiscard]] bool entered() const noexcept { return lease_.acquired(); }
  [[nodiscard]] const Lease& lease() const noexcept { return lease_; }

 private:
  struct Resolved;  // the client and the settings one call resolves to
  Guard(const GuardSite& site, const Key& key, const Resolved& resolved);
  Guard(const GuardSite& site, const std::vector<Key>& keys, const Resolved& resolved);
  /// Throws or counts the skip for a lease that was not acquired; `keys` names them.
  void settle(const GuardSite& site, const Resolved& resolved, const std::string& keys) const;

  Lease lease_;
};

}  // namespace dlock
