// The lock core behind dlock::Client: backends, reentrancy, waiting, release.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <string>
#include <cstdint>

#include "dlock/client.hpp"
#include "engine.hpp"
#include "lease_state.hpp"
#include "metrics.hpp"
#include "watchdog.hpp"

namespace dlock::internal {

/// Leases of several keys are in several_keys.cpp.
class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  explicit ClientCore(Config config);
  ~ClientCore();

  Lease acquire(const Key& key, const LockSettings& settings, std::string_view name);
  Lease acquire(const std::vector<Key>& keys, const LockSettings& settings,
                std::string_view name);
  /// Whether release() waits for the backend's answer. kNo sends the release where the
  /// backend can (Backend::release_later) and reports its outcome when the answer comes;
  /// what it returns then is kReleased, or kStillHeld for an inner hold.
  enum class Wait { kYes, kNo };
  /// `keep_min_hold` false gives the key back at once whatever min_hold says (a lease of
  /// several keys that could not take them all).
  ReleaseStatus release(const std::shared_ptr<LeaseState>& lease, Wait wait,
                        bool keep_min_hold = true) noexcept;

  [[nodiscard]] const Config& config() const noexcept { return config_; }
  [[nodiscard]] Metrics& metrics() noexcept { return *metrics_; }
  [[nodiscard]] Watchdog& watchdog() noexcept { return *watchdog_; }
  /// Throws ConfigError for a backend name that is not configured.
  [[nodiscard]] const Engine& engine(const std::string& name) const;
  /// The lock seam of engine(name).
  [[nodiscard]] const std::shared_ptr<Backend>& backend(const std::string& name) const {
    return engine(name).lock;
  }

 private:
  class Acquisition;

  struct HoldKey {
    std::uint64_t thread;  ///< this_thread_token(): never reused, unlike std::thread::id
    std::string backend;
    std::string key;
    bool operator<(const HoldKey& o) const {
      return std::tie(thread, backend, key) < std::tie(o.thread, o.backend, o.key);
    }
  };

  /// The calling thread's own hold of `key`, if it may be entered again; or a refusal.
  struct Reentry {
    std::shared_ptr<LeaseState> held;
    std::string refusal;
    AcquireStatus status = AcquireStatus::kBusy;  ///< of the refusal
  };
  Reentry reenter(const Key& key, const LockSettings& settings);
  /// The calling thread's live, unmoved hold of `key` on `backend`, if any. Under
  /// holds_mutex_.
  std::shared_ptr<LeaseState> held_here(const Key& key, const std::string& backend);
  /// A lease of several keys whose keys this thread all holds: each entered again.
  Lease reenter_all(const std::vector<Key>& keys, const LockSettings& settings,
                    std::string_view name);
  /// A lease of several keys none of which this thread holds: taken in canonical order.
  Lease take_all(const std::vector<Key>& keys, const LockSettings& settings,
                 std::string_view name);
  /// What one atomic try for every key of a lease of several keys gave: the parts, or none;
  /// when none because a key was busy, which (an index into the keys) and its time left.
  struct Together {
    std::vector<std::shared_ptr<LeaseState>> parts;
    std::optional<std::size_t> busy_key;
    Millis holder_ttl{0};
    std::optional<std::size_t> refused_key;  ///< a key held as another kind of lock
    std::string refusal;
  };
  /// One atomic try for every key (Backend::acquire_together), where the engine can.
  Together take_together(const std::shared_ptr<Backend>& engine, const std::vector<Key>& keys,
                         const std::vector<std::size_t>& order, const LockSettings& settings,
                         std::string_view name);
  /// A lease of several distinct keys.
  Lease acquire_distinct(const std::vector<Key>& keys, const LockSettings& settings,
                         std::string_view name);
  /// The lease of several keys made of `parts` (one per distinct key, in the order given);
  /// `written` maps each key as given to its part, when some were given twice.
  Lease join(std::vector<std::shared_ptr<LeaseState>> parts, const LockSettings& settings,
             std::string_view name, std::vector<std::size_t> written = {});
  /// What ending a hold in this process leaves to tell the server: how long the key is kept
  /// (min_hold) and how long it was held.
  struct Ending {
    Millis keep_for{0};
    long long held_ms = 0;
  };
  /// Ends the hold here (reentrancy count, this thread's holds, the hold-time series);
  /// nothing when it was an inner hold, which nothing on the server ends.
  std::optional<Ending> end_here(const std::shared_ptr<LeaseState>& lease,
                                 bool keep_min_hold) noexcept;
  /// Tells the server of a hold ended here (release()).
  ReleaseStatus release_ended(const std::shared_ptr<LeaseState>& lease, const Ending& ending,
                              Wait wait) noexcept;
  /// Releases every part of a lease of several keys, last key first; in one request where
  /// the engine takes the keys together.
  ReleaseStatus release_parts(const std::shared_ptr<LeaseState>& lease, Wait wait) noexcept;
  /// Releases `parts` (ended here as `endings` say) in one request; each part's outcome is
  /// reported as release() reports one.
  std::vector<ReleaseStatus> release_together(const std::vector<std::shared_ptr<LeaseState>>& parts,
                                              const std::vector<Ending>& endings,
                                              Wait wait) noexcept;
  Lease grant(const std::shared_ptr<Backend>& backend, const Key& key,
              const LockSettings& settings, std::string_view name, const std::string& owner,
              std::uint64_t token, Clock::time_point sent, std::shared_ptr<NameMetrics> series,
              Clock::duration waited, Millis valid_for = Millis{0});

  static Millis queue_place(const LockSettings& settings, const BackendConfig& config);
  void leave_queue(const std::shared_ptr<Backend>& backend, const Key& key,
                   const std::string& owner, Clock::time_point until);

  /// Counts and logs what a release came to; a loss marks the lease lost.
  ReleaseStatus report_release(const std::shared_ptr<LeaseState>& lease, ReleaseOutcome outcome,
                               Millis keep_for, long long held_ms) noexcept;

  Lease refuse_late_grant(const std::shared_ptr<Backend>& backend, const Key& key,
                          const LockSettings& settings, std::string_view name,
                          const std::string& owner, Clock::time_point sent, Millis lease,
                          NameMetrics& series);

  const Config config_;
  const std::shared_ptr<Metrics> metrics_;
  std::map<std::string, Engine> engines_;
  std::shared_ptr<Watchdog> watchdog_;
  std::mutex holds_mutex_;
  std::map<HoldKey, std::weak_ptr<LeaseState>> holds_;
};

/// The innermost-lease stack of the calling thread.
void push_current(const std::shared_ptr<LeaseState>& lease);
void pop_current(const LeaseState* lease) noexcept;
[[nodiscard]] LeaseView current_lease_view();

}  // namespace dlock::internal
