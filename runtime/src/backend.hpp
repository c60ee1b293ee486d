// The lock seam between the lock core and a lock server: acquire, renew, release, watch.
// One Backend per `backends:` entry (engine.hpp). Backends know keys, owners and
// time-to-live; reentrancy, waiting, the watchdog and min_hold arithmetic live in the core
// and are the same for every topology.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/key.hpp"
#include "metrics.hpp"
#include "steady.hpp"

namespace dlock::internal {

/// What one grant is (DESIGN §7): the only holder of its key, one of its shared holders, or
/// one of at most `permits` holders of a semaphore.
enum class LockKind : std::uint8_t { kExclusive, kShared, kPermit };

[[nodiscard]] inline LockKind kind_of(const LockSettings& settings) noexcept {
  if (settings.permits > 0) return LockKind::kPermit;
  return settings.mode == LockMode::kShared ? LockKind::kShared : LockKind::kExclusive;
}

[[nodiscard]] inline const char* to_string(LockKind kind) noexcept {
  switch (kind) {
    case LockKind::kExclusive: return "exclusive";
    case LockKind::kShared: return "shared";
    case LockKind::kPermit: return "permits";
  }
  return "unknown";
}

/// One attempt to take a lock.
struct GrantRequest {
  const Key& key;
  std::string_view owner;  ///< unique per acquisition; the only proof of ownership
  Millis lease;
  std::string_view name;   ///< stored with the lock for tools
  Clock::time_point give_up_at;  ///< the caller treats any later answer as a failure
  /// > 0: the caller waits for the lock. Where the engine hands a released lock to a waiter
  /// (Backend::hands_off), a busy answer also gives it a place in the key's queue for this
  /// long; a later attempt of the same owner renews it.
  Millis place{0};
  /// The caller waits for the lock and its watch is armed. An engine that announces
  /// releases only while someone waits (postgres) notes the waiter with a busy answer; a
  /// later attempt renews it.
  bool waiting = false;
  /// The caller's armed watch (from Backend::watch, for this key), when it waits: an engine
  /// whose wake-up depends on where this attempt stands (ZooKeeper watches the node just
  /// before the caller's own) arms it here.
  class ReleaseWatch* watch = nullptr;
  LockKind kind = LockKind::kExclusive;
  int permits = 0;    ///< kPermit: how many holders the key may have
  /// Grants go in the order in which requests reached the server: a request with a live
  /// waiter ahead of it waits. Backends that queue (Backend::queues) keep waiters' places.
  bool fair = false;
  /// Waiting with its watch armed: how long its claim lasts, which a later attempt renews:
  /// its place in a fair queue and, for kExclusive, its claim on a lock held shared (no new
  /// shared hold starts meanwhile).
  Millis claim{0};
};

struct GrantReply {
  /// kRefused: the key is held as another kind of lock (permits against a lock, or the
  /// reverse); `error` says which. Waiting would not help.
  enum class Kind { kAcquired, kBusy, kUnavailable, kRefused };
  Kind kind = Kind::kUnavailable;
  std::uint64_t token = 0;  ///< kAcquired: the fencing token
  /// kBusy: time left on the holder's key; kAcquired: time left on ours when the server
  /// answered, less than the lease when an earlier attempt or a release granted it. 0 when
  /// unknown.
  Millis ttl{0};
  bool outcome_unknown = false;  ///< kUnavailable: the request may still have been applied
  std::string error;
  /// kBusy: the key's last fencing token; a release that grants the lock to this waiter later
  /// issues a higher one.
  std::uint64_t last_token = 0;
  /// kAcquired, granted by this request on a key whose expiry the engine could not set to
  /// the lease (etcd: a lease reused from an earlier lock, with less than `lease` left): how
  /// long after the request was sent the grant stays valid unless renewed. 0: the lease (or
  /// `ttl`, for an earlier grant).
  Millis valid_for{0};
  /// Backend::acquire_together: kAcquired, every key's token, in the order of the keys
  /// (`token` is the first); kBusy or kRefused, the index of a key that was busy or refused.
  std::vector<std::uint64_t> tokens;
  std::size_t busy_index = 0;
};

enum class RenewOutcome { kRenewed, kGone, kTaken, kUnavailable };

struct RenewItem {
  const Key* key;
  std::string_view owner;
  Millis ttl;
  RenewOutcome outcome = RenewOutcome::kUnavailable;
  /// The lease's fencing token: a renewal raises the server's token counter to at least
  /// this, so that a server that lost the counter (a replica promoted before the grant
  /// reached it) hands out higher tokens whatever its clock says. 0: not raised.
  std::uint64_t token = 0;
  /// When the holder's validity ends unless this renewal's outcome is known: a round that
  /// returns later has its lease declared lost although the renewal may have got through.
  Clock::time_point valid_until = Clock::time_point::max();
};

/// How long a renewal round of `items` started at `sent` may take: until `deadline`, and no
/// later than the first validity among them ends (less 25 ms, but at least 50 ms after
/// `sent`), whose outcome would come too late to count.
inline Clock::time_point renewal_until(const std::vector<RenewItem>& items, Clock::time_point sent,
                                       Clock::time_point deadline) {
  for (const RenewItem& item : items) {
    if (item.valid_until != Clock::time_point::max()) {
      deadline = std::min(deadline,
                          std::max(item.valid_until - Millis{25}, later(sent, Millis{50})));
    }
  }
  return deadline;
}

enum class ReleaseOutcome {
  kReleased,     ///< deleted, waiters notified
  kKept,         ///< left to expire after keep_for
  kGone,         ///< no key: expired or deleted
  kTaken,        ///< another owner holds it
  kUnavailable,  ///< unknown: the key expires with its lease
};

/// Whether a release's outcome is anything but released or kept: what on_lost or a warning
/// may have to hear of.
[[nodiscard]] inline bool is_loss_or_unknown(ReleaseOutcome outcome) noexcept {
  return outcome != ReleaseOutcome::kReleased && outcome != ReleaseOutcome::kKept;
}

/// One key of a release of several (Backend::release_together): what release() takes.
struct ReleaseItem {
  Key key;
  std::string owner;
  Millis keep_for{0};
};

/// A waiter's interest in release notifications for one key, armed when created.
class ReleaseWatch {
 public:
  enum class Wake {
    kTimeout,   ///< `until` came
    kReleased,  ///< a release was announced: worth trying again
    kGranted,   ///< a release handed the lock to the owner given to expect_grant()
  };
  virtual ~ReleaseWatch() = default;
  /// Waits for a release of the key announced since the watch was armed (or since the
  /// previous wake-up), a grant to the expected owner, or `until`.
  virtual Wake wait_until(Clock::time_point until) = 0;
  /// From now on, a release that grants the lock to `owner` with a fencing token above
  /// `above` (the highest given for that owner so far) wakes the waiter with kGranted; grants
  /// to other owners wake nobody.
  virtual void expect_grant(std::string_view /*owner*/, std::uint64_t /*above*/) {}
  /// The token of the grant kGranted reported.
  [[nodiscard]] virtual std::uint64_t granted_token() const { return 0; }
};

/// The lock seam: what the lock core (ClientCore, Watchdog, Lease) asks of a lock server.
/// Every engine implements it; scheduled runs (run_store.hpp) and admin
/// (admin_backend.hpp) are seams of their own, which an engine offers where it can.
class Backend {
 public:
  virtual ~Backend() = default;

  virtual GrantReply acquire(const GrantRequest& request) = 0;
  /// Extends every item whose owner still holds its key to `ttl`; sets each outcome.
  virtual void renew(std::vector<RenewItem>& items) = 0;
  /// Owner-checked: deletes the key (keep_for == 0) or shortens it to keep_for.
  virtual ReleaseOutcome release(const Key& key, std::string_view owner,
                                 Millis keep_for) noexcept = 0;
  /// release() without waiting for the answer: sends it on a connection that keeps order for
  /// the calling thread (the thread's next command to that server is applied after it) and
  /// returns; `done` gets the outcome once, on some other thread or later on this one, and
  /// must not throw. Returns false when the engine cannot release this way now (no such
  /// path, no connection to be had): nothing was applied, and `done` is not called.
  virtual bool release_later(const Key& /*key*/, std::string_view /*owner*/, Millis /*keep_for*/,
                             std::function<void(ReleaseOutcome)> /*done*/) noexcept {
    return false;
  }
  /// Releases the keys of `items`, which takes_together() accepts, in one request where the
  /// engine can; one outcome per item, in order, each as release() would give it.
  virtual std::vector<ReleaseOutcome> release_together(
      const std::vector<ReleaseItem>& items) noexcept {
    std::vector<ReleaseOutcome> outcomes;
    outcomes.reserve(items.size());
    for (const ReleaseItem& item : items) {
      outcomes.push_back(release(item.key, item.owner, item.keep_for));
    }
    return outcomes;
  }
  /// release_together() without waiting for the answer, as release_later() releases one key.
  /// Returns false when the engine cannot release this way now: nothing was applied, and
  /// `done` is not called.
  virtual bool release_together_later(
      const std::vector<ReleaseItem>& /*items*/,
      std::function<void(std::vector<ReleaseOutcome>)> /*done*/) noexcept {
    return false;
  }
  /// Arms a watch for releases of `key`. Never fails: without notifications the waiter
  /// falls back to polling.
  virtual std::unique_ptr<ReleaseWatch> watch(const Key& key) = 0;
  /// Whether a watch costs nothing until a try arms it (zookeeper): the core then has one
  /// from the first try of a call that may wait, so that a busy first try keeps its place in
  /// the queue instead of leaving it and queueing again.
  [[nodiscard]] virtual bool watch_is_free() const { return false; }
  /// Whether a release hands the lock to a queued waiter (GrantRequest::place) and says so
  /// in its notification, which the waiter's watch then reports as kGranted.
  [[nodiscard]] virtual bool hands_off() const { return false; }
  /// Whether the engine keeps waiters' places (GrantRequest::place) in a queue per key, for
  /// handoff, fair order or the writer preference of shared locks. A release may then wake
  /// only the waiter whose turn it is ("turn <owner>", release_signals.hpp).
  [[nodiscard]] virtual bool queues() const { return hands_off(); }
  /// Whether acquire_together() can take these keys in one atomic request.
  [[nodiscard]] virtual bool takes_together(const std::vector<Key>& /*keys*/) const {
    return false;
  }
  /// Takes the exclusive, not fair, lock of every key of `keys` for `request.owner` at once,
  /// or none (`request.key` is keys.front(); the rest of the request applies to each). Busy
  /// when any key is held or has waiters queued fairly: nothing is taken then, and the
  /// caller takes the keys one by one.
  virtual GrantReply acquire_together(const std::vector<Key>& /*keys*/,
                                      const GrantRequest& /*request*/) {
    return GrantReply{};
  }
  /// Whether the engine grants locks of `kind`, and in arrival order when `fair`.
  [[nodiscard]] virtual bool supports(LockKind kind, bool fair) const {
    return kind == LockKind::kExclusive && !fair;
  }
  /// The longest a lock outlives its holder's last contact with the engine, when the engine
  /// decides that rather than the lease (a ZooKeeper session's timeout): the core holds its
  /// leases to at most this, so that validity, renewal and loss detection follow it.
  [[nodiscard]] virtual Millis lease_limit() const { return Millis::max(); }
  /// How often the watchdog renews a lease of `lease`: a third by default. An engine whose
  /// client gives a silent server up only late in a lease (ZooKeeper's, after two thirds of
  /// the session timeout) renews more often, so that a renewal confirmed shortly before a
  /// server stalled keeps the lease valid until the client has moved to another.
  [[nodiscard]] virtual Clock::duration renew_every(Millis lease) const { return lease / 3; }

  [[nodiscard]] virtual const BackendConfig& config() const = 0;
};

}  // namespace dlock::internal
