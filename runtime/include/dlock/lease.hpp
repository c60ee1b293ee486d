// dlock::Lease: a held lock, released when it goes out of scope.
//
//   dlock::Lease lease = dlock::client().acquire("invoice:42", settings);
//   if (!lease) return;                        // busy or unavailable: a value, not an error
//   write_invoice(42, lease.token());          // fencing token for the protected resource
//   lease.view().on_lost([](const dlock::LeaseView& l) { abort_work(l.key()); });
//   // ~Lease releases (owner-checked); release() reports what happened.
//
// A lease is renewed by the client's watchdog every lease/3 until it is released or reaches
// max_hold. If renewal finds the key gone or owned by someone else, the lease is marked lost,
// the loss is logged and counted, and on_lost callbacks run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/key.hpp"

namespace dlock {
namespace internal {
class ClientCore;
class LeaseState;
}

/// The outcome of an acquire call.
enum class AcquireStatus {
  kAcquired,     ///< the caller holds the lock
  kBusy,         ///< someone else held it for the whole wait
  kUnavailable,  ///< the backend could not be reached within its timeouts
  /// A rule refused the call without waiting: an exclusive hold asked inside this thread's
  /// shared hold of the key (an upgrade, which would deadlock), a key in use as another kind
  /// of lock (permits against a lock), or several keys of which this thread holds only some.
  kRefused,
};

/// The outcome of a release.
enum class ReleaseStatus {
  kReleased,        ///< the key was deleted and waiters were notified
  kKeptForMinHold,  ///< released early: the key now expires at acquisition + min_hold
  kStillHeld,       ///< a reentrant hold ended; an outer hold still owns the lock
  kLost,            ///< the lease had already been lost: the key was gone or taken
  kUnavailable,     ///< the backend was unreachable; the key expires with its lease
  kNotHeld,         ///< nothing to release (not acquired, moved from, or released before)
};

/// Why a lease stopped being valid.
enum class LossReason {
  kNone,
  kTaken,    ///< another owner holds the key
  kGone,     ///< the key vanished (deleted, flushed, server restarted empty)
  kExpired,  ///< renewals could not reach the backend before the lease ran out
  kMaxHold,  ///< max_hold was reached and the key was left to expire
};

[[nodiscard]] const char* to_string(AcquireStatus status) noexcept;
[[nodiscard]] const char* to_string(ReleaseStatus status) noexcept;
[[nodiscard]] const char* to_string(LossReason reason) noexcept;

/// A live, copyable view of a lease: what `current_lease()` returns. Empty when no lease.
class LeaseView {
 public:
  LeaseView() = default;
  explicit LeaseView(std::shared_ptr<internal::LeaseState> state) : state_(std::move(state)) {}

  explicit operator bool() const noexcept { return state_ != nullptr; }
  /// The key as the user wrote it; the first one, for a lease of several keys.
  [[nodiscard]] const Key& key() const;
  /// Every key of the lease, in the order written (one for most leases).
  [[nodiscard]] std::vector<Key> keys() const;
  /// Strictly increases for every grant of this key, across holders and processes; the
  /// first key's, for a lease of several keys. A shared hold and a permit have tokens of
  /// their own, which also increase but do not exclude one another.
  [[nodiscard]] std::uint64_t token() const;
  /// The token of keys()[index] (0 past the end).
  [[nodiscard]] std::uint64_t token(std::size_t index) const;
  /// Every key's token, in the order of keys().
  [[nodiscard]] std::vector<std::uint64_t> tokens() const;
  [[nodiscard]] LockMode mode() const;
  /// N for a permit of a semaphore of N (`permits=N`); 0 for a lock.
  [[nodiscard]] int permits() const;
  /// How long the lease is still known to be valid (0 once lost or released).
  [[nodiscard]] std::chrono::milliseconds remaining() const;
  [[nodiscard]] bool lost() const;
  [[nodiscard]] LossReason loss_reason() const;
  /// Nesting depth of reentrant holds on the owning thread.
  [[nodiscard]] int hold_count() const;
  /// The guard or lock name given at acquisition (may be empty).
  [[nodiscard]] const std::string& name() const;
  /// Runs `callback` once when the lease is lost (at once if it already is), on the
  /// watchdog thread, or on the dlock-settle thread when a release nobody waited for finds
  /// the lease lost, after the Lease is gone (so it must not refer to the Lease's scope).
  /// It must not block.
  void on_lost(std::function<void(const LeaseView&)> callback) const;

  /// For the runtime.
  [[nodiscard]] const std::shared_ptr<internal::LeaseState>& state() const noexcept {
    return state_;
  }

 private:
  std::shared_ptr<internal::LeaseState> state_;
};

/// A move-only handle on one hold of a lock. Destroying it releases that hold without waiting
/// for the server's answer (what happened is logged and counted, and a loss reaches on_lost);
/// release() waits and says what happened.
/// Moving it (to another thread, a container, a task) ends reentrancy for it: the acquiring
/// thread then counts as not holding the key, and acquiring it again goes to the server.
class [[nodiscard]] Lease {
 public:
  Lease() = default;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  ~Lease();

  [[nodiscard]] AcquireStatus status() const noexcept { return status_; }
  [[nodiscard]] bool acquired() const noexcept { return state_ != nullptr; }
  explicit operator bool() const noexcept { return acquired(); }
  /// Why the lock was not acquired (empty when acquired).
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

  [[nodiscard]] LeaseView view() const { return LeaseView(state_); }
  [[nodiscard]] const Key& key() const { return view().key(); }
  [[nodiscard]] std::vector<Key> keys() const { return view().keys(); }
  [[nodiscard]] std::uint64_t token() const { return view().token(); }
  [[nodiscard]] std::uint64_t token(std::size_t index) const { return view().token(index); }
  [[nodiscard]] std::vector<std::uint64_t> tokens() const { return view().tokens(); }
  [[nodiscard]] std::chrono::milliseconds remaining() const { return view().remaining(); }
  [[nodiscard]] bool lost() const { return view().lost(); }
  [[nodiscard]] int hold_count() const { return view().hold_count(); }

  /// Ends this hold and waits for the backend's answer. Owner-checked on the backend; never
  /// throws; idempotent.
  ReleaseStatus release() noexcept;

  /// For the runtime: a granted hold, or a refusal.
  static Lease granted(std::shared_ptr<internal::LeaseState> state);
  static Lease refused(AcquireStatus status, std::string error);

 private:
  friend class internal::ClientCore;  // takes the parts of a lease of several keys

  Lease(std::shared_ptr<internal::LeaseState> state, AcquireStatus status, std::string error);
  /// Ends this hold without waiting for the backend's answer.
  void let_go() noexcept;

  std::shared_ptr<internal::LeaseState> state_;
  AcquireStatus status_ = AcquireStatus::kBusy;
  std::string error_;
};

}  // namespace dlock
