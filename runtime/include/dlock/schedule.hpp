// Scheduled tasks that run once per period across every instance of a service.
//
//   [[dlock::guard("report:<slot>", on_busy=skip, min_hold=2s, max_hold=50s)]]
//   void send_report(std::int64_t slot) {
//     dlock::RunClaim run = dlock::claim_run();   // records who runs this slot
//     if (!run) return;                           // it already ran (see docs/SCHEDULING.md)
//     ...
//   }
//
//   for (;;) {                                   // each instance, on its own timer
//     sleep_until_the_next_minute();
//     send_report(dlock::nearest_slot(std::chrono::minutes(1)).index);
//   }
//
// Slots are named from the lock server's clock (Redis TIME), so instances whose own clocks
// disagree still name the same slot. The run record is written next to the lock, atomically
// with a check that the caller still holds it, and at most one record exists per key: a
// second run of the same slot is refused even after the lock itself has expired.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "dlock/client.hpp"
#include "dlock/lease.hpp"

namespace dlock {

/// One period of a fixed-rate schedule on the lock server's clock. Slot `index` covers
/// server times [index * period, (index + 1) * period), in ms since the Unix epoch.
struct Slot {
  std::int64_t index = 0;
  std::chrono::milliseconds period{0};
  std::int64_t starts_at_ms = 0;   ///< index * period, server clock
  std::int64_t server_now_ms = 0;  ///< the server's clock when it was read
  /// When the next slot (index + 1) starts, on this process's steady clock.
  std::chrono::steady_clock::time_point next_starts_at{};
};

/// The slot whose start is nearest to the lock server's clock now. Instances that fire at
/// the same boundary name the same slot as long as each fires less than period/2 away from
/// the server's clock: firing 300 ms early or late at a 1 s boundary gives the same slot.
/// Throws BackendUnavailable (within the backend's timeouts) and std::invalid_argument for
/// a period that is not positive (and NotSupported for a backend whose topology keeps no
/// run records; every topology of this release keeps them).
[[nodiscard]] Slot nearest_slot(std::chrono::milliseconds period,
                                const std::string& backend = "default");
[[nodiscard]] Slot nearest_slot(const Client& client, std::chrono::milliseconds period,
                                const std::string& backend = "default");

/// The slot in progress on the lock server's clock now (the one whose start is at or
/// before it).
[[nodiscard]] Slot current_slot(std::chrono::milliseconds period,
                                const std::string& backend = "default");
[[nodiscard]] Slot current_slot(const Client& client, std::chrono::milliseconds period,
                                const std::string& backend = "default");

/// The lock server's clock now, in ms since the Unix epoch (Redis TIME; the memory
/// backend: this host's clock).
[[nodiscard]] std::int64_t server_time_ms(const Client& client,
                                          const std::string& backend = "default");

/// A recorded run, as stored next to the lock (`dlock:{<service>:<key>}:run`).
struct RunRecord {
  std::string key;            ///< the lock's user key, e.g. "report:29511234"
  std::string name;           ///< the lock (guard) name
  std::string label;          ///< free text given to claim_run (e.g. the instance)
  std::string owner;          ///< owner id of the lease that ran it
  std::uint64_t token = 0;    ///< its fencing token
  std::string host;
  long long pid = 0;
  std::int64_t started_at_ms = 0;   ///< server clock
  std::int64_t finished_at_ms = 0;  ///< server clock; 0 while running (or never finished)
  /// "running", "ok", "failed" (the body threw), "lost" (the lease was lost during the
  /// run), or what was passed to RunClaim::finish.
  std::string outcome;
  std::chrono::milliseconds ttl{0};  ///< time left before the record is dropped
};

struct RunOptions {
  std::string label;  ///< stored with the record
  /// How long the record is kept. While it exists, the key cannot run again. At least the
  /// longest time an instance may be late for a slot; records cost about 300 bytes each.
  std::chrono::milliseconds keep = std::chrono::hours(24);
};

/// The outcome of claim_run.
enum class ClaimStatus {
  kClaimed,     ///< this is the key's first run: do the work
  kAlreadyRan,  ///< a run of this key is recorded: record() says whose
  kNotHeld,     ///< the lease is not held (any more): the lock was lost or released
};

[[nodiscard]] const char* to_string(ClaimStatus status) noexcept;

/// A claimed (or refused) run. When a claimed run ends, its record gets the finish time
/// and an outcome: "ok", "failed" when an exception is leaving the scope, "lost" when the
/// lease was lost meanwhile; or the outcome given to finish(). Move-only; never throws
/// when it finishes.
class [[nodiscard]] RunClaim {
 public:
  RunClaim() = default;
  RunClaim(RunClaim&& other) noexcept;
  RunClaim& operator=(RunClaim&& other) noexcept;
  RunClaim(const RunClaim&) = delete;
  RunClaim& operator=(const RunClaim&) = delete;
  ~RunClaim();

  [[nodiscard]] ClaimStatus status() const noexcept { return status_; }
  explicit operator bool() const noexcept { return status_ == ClaimStatus::kClaimed; }
  /// Ours when claimed; the earlier run's when kAlreadyRan; empty when kNotHeld.
  [[nodiscard]] const RunRecord& record() const noexcept { return record_; }

  /// Records the end of a claimed run now with `outcome`. Idempotent; false when the
  /// record could not be updated (unreachable server, record dropped).
  bool finish(std::string_view outcome = "ok") noexcept;

  /// For the runtime.
  RunClaim(ClaimStatus status, RunRecord record, LeaseView lease);

 private:
  ClaimStatus status_ = ClaimStatus::kNotHeld;
  RunRecord record_;
  LeaseView lease_;
  int exceptions_ = 0;
  bool finished_ = true;
};

/// Records that the work protected by `lease` (default: the innermost lease of this
/// thread, i.e. inside a guarded function, its lock) runs now, unless a run of the same key
/// is already recorded. Throws BackendUnavailable when the server cannot be reached and
/// std::logic_error when `lease` is empty.
RunClaim claim_run(const LeaseView& lease, const RunOptions& options = {});
RunClaim claim_run(const RunOptions& options = {});

}  // namespace dlock
