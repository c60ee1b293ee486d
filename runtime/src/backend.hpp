// The seam between the lock core and a lock server. One Backend per `backends:` entry.
// Backends know keys, owners and time-to-live; reentrancy, waiting, the watchdog and
// min_hold arithmetic live in the core and are the same for every topology.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/admin.hpp"
#include "dlock/config.hpp"
#include "dlock/key.hpp"
#include "dlock/schedule.hpp"
#include "metrics.hpp"
#include "steady.hpp"

namespace dlock::internal {

/// One attempt to take a lock.
struct GrantRequest {
  const Key& key;
  std::string_view owner;  ///< unique per acquisition; the only proof of ownership
  Millis lease;
  std::string_view name;   ///< stored with the lock for tools
  Clock::time_point give_up_at;  ///< the caller treats any later answer as a failure
};

struct GrantReply {
  enum class Kind { kAcquired, kBusy, kUnavailable };
  Kind kind = Kind::kUnavailable;
  std::uint64_t token = 0;  ///< kAcquired: the fencing token
  Millis ttl{0};            ///< kBusy: time left on the holder's key, 0 when unknown
  bool outcome_unknown = false;  ///< kUnavailable: the request may still have been applied
  std::string error;
};

enum class RenewOutcome { kRenewed, kGone, kTaken, kUnavailable };

struct RenewItem {
  const Key* key;
  std::string_view owner;
  Millis ttl;
  RenewOutcome outcome = RenewOutcome::kUnavailable;
};

enum class ReleaseOutcome {
  kReleased,     ///< deleted, waiters notified
  kKept,         ///< left to expire after keep_for
  kGone,         ///< no key: expired or deleted
  kTaken,        ///< another owner holds it
  kUnavailable,  ///< unknown: the key expires with its lease
};

/// A waiter's interest in release notifications for one key, armed when created.
class ReleaseWatch {
 public:
  virtual ~ReleaseWatch() = default;
  /// Returns true when a release of the key was announced since the watch was armed (or
  /// since the previous true), false at `until`.
  virtual bool wait_until(Clock::time_point until) = 0;
};

/// What claim_run.lua (or the memory store) answered.
struct RunClaimReply {
  ClaimStatus status = ClaimStatus::kNotHeld;
  RunRecord record;  ///< kClaimed: ours, completed; kAlreadyRan: the earlier one
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual GrantReply acquire(const GrantRequest& request) = 0;
  /// Extends every item whose owner still holds its key to `ttl`; sets each outcome.
  virtual void renew(std::vector<RenewItem>& items) = 0;
  /// Owner-checked: deletes the key (keep_for == 0) or shortens it to keep_for.
  virtual ReleaseOutcome release(const Key& key, std::string_view owner,
                                 Millis keep_for) noexcept = 0;
  /// Arms a watch for releases of `key`. Never fails: without notifications the waiter
  /// falls back to polling.
  virtual std::unique_ptr<ReleaseWatch> watch(const Key& key) = 0;

  [[nodiscard]] virtual const BackendConfig& config() const = 0;

  // Scheduled runs (dlock/schedule.hpp). They throw BackendUnavailable when the servers
  // cannot be reached within the backend's timeouts.

  /// The server's clock, ms since the Unix epoch.
  virtual std::int64_t server_time_ms() = 0;
  /// Writes `mine` (key, owner, token, label, host and pid set; the name comes from the
  /// lock, the start time from the server) as the run record of `key`, kept for `keep`, if
  /// `mine.owner` holds the lock and no record exists.
  virtual RunClaimReply claim_run(const Key& key, const RunRecord& mine, Millis keep) = 0;
  /// Sets the finish time and `outcome` of the record of `key` if it is `owner`'s.
  virtual bool finish_run(const Key& key, std::string_view owner, std::string_view outcome) noexcept = 0;
  /// Run records whose key matches the glob `pattern`, in any order.
  virtual std::vector<RunRecord> admin_runs(std::string_view pattern) = 0;

  // Admin operations for tools (dlock::Admin, dlockctl). They throw BackendUnavailable
  // when the servers cannot be reached; the defaults throw AdminNotSupported.

  /// Locks held now whose user key matches the glob `pattern`, in any order.
  virtual std::vector<LockInfo> admin_list(std::string_view pattern) {
    (void)pattern;
    throw AdminNotSupported(unsupported("list"));
  }
  /// The lock on `key`, or nothing.
  virtual std::optional<LockInfo> admin_inspect(const Key& key) {
    (void)key;
    throw AdminNotSupported(unsupported("inspect"));
  }
  /// Deletes the lock on `key` whoever owns it, notifies waiters and records `who` (with
  /// the server's time and the removed owner) in the audit list. Returns what was removed.
  virtual std::optional<LockInfo> admin_force_release(const Key& key, const AuditEntry& who) {
    (void)key;
    (void)who;
    throw AdminNotSupported(unsupported("force release"));
  }
  /// Recorded forced releases, newest first.
  virtual std::vector<AuditEntry> admin_history(std::size_t limit) {
    (void)limit;
    throw AdminNotSupported(unsupported("history"));
  }

 private:
  std::string unsupported(std::string_view what) const {
    return std::string(what) + " is not supported by backend '" + config().name + "'";
  }
};

/// Builds the backend for one configuration entry. Throws ConfigError for a topology this
/// build does not support yet.
std::shared_ptr<Backend> make_backend(const BackendConfig& config, const std::string& service,
                                      std::shared_ptr<Metrics> metrics);

}  // namespace dlock::internal
