// dlock::Client: acquires leases on the configured backends.
//
//   dlock::Client locks(dlock::load_config("dlock.yaml"));
//   dlock::LockSettings s = locks.config().resolve("billing", "", {});
//   s.wait = std::chrono::seconds(2);
//   if (dlock::Lease lease = locks.acquire("invoice:42", s, "billing")) {
//     ...                                   // held, renewed by the watchdog
//   }
//
// Most programs use the process-wide client from `dlock::client()` (see dlock.hpp). A Client
// is a cheap handle: copies share one set of connections, one watchdog thread and one
// subscriber connection per backend. Leases keep what they need alive.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/config.hpp"
#include "dlock/key.hpp"
#include "dlock/lease.hpp"
#include "dlock/metrics.hpp"

namespace dlock {
namespace internal {
class ClientCore;
}

class Client {
 public:
  /// Validates the configuration; connects lazily. Throws ConfigError for a topology this
  /// build does not support.
  explicit Client(Config config);

  /// Acquires `key`, waiting up to `settings.wait` for a busy lock (woken by release
  /// notifications, with polling as a fallback). A thread that already holds `key` through
  /// this client gets a reentrant hold at once; a shared hold asked inside an exclusive one
  /// is a reentrant hold of it (a downgrade), an exclusive one inside a shared one is
  /// refused at once (an upgrade would deadlock). `settings.mode`, `fair` and `permits` pick
  /// the kind of lock (DESIGN §7). Never throws for busy, unavailable or refused: see
  /// Lease::status(). `name` is stored with the lock for tools and logs. Throws ConfigError
  /// for a backend that is not configured or a lease under kMinimumLease.
  Lease acquire(const Key& key, const LockSettings& settings, std::string_view name = {});

  /// One attempt, no waiting.
  Lease try_acquire(const Key& key, LockSettings settings, std::string_view name = {});

  /// Acquires every key of `keys` or none (DESIGN §7): they are taken in one canonical order
  /// whatever order they are given in, so that two callers naming the same keys cannot
  /// deadlock, and a key given twice counts once. The wait covers them all; a key still
  /// busy at its end gives back those already taken. The lease's token(i) is keys[i]'s.
  /// A thread that holds every key already re-enters them; one that holds only some is
  /// refused (kRefused). Throws ConfigError for an empty list.
  Lease acquire(const std::vector<Key>& keys, const LockSettings& settings,
                std::string_view name = {});
  Lease try_acquire(const std::vector<Key>& keys, LockSettings settings,
                    std::string_view name = {});

  [[nodiscard]] const Config& config() const;
  [[nodiscard]] MetricsSnapshot metrics() const;

  /// For the runtime and tests.
  [[nodiscard]] const std::shared_ptr<internal::ClientCore>& core() const { return core_; }

 private:
  std::shared_ptr<internal::ClientCore> core_;
};

}  // namespace dlock
