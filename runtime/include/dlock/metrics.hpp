// dlock counters: what every lock client has done since it started.
//
//   dlock::MetricsSnapshot m = dlock::client().metrics();
//   fmt::print("acquired {} times, lost {}, renewal lag p99 {}us\n",
//              m.acquisitions, m.losses, m.renewal_lag.percentile_us(0.99));
//   for (const dlock::LockMetrics& lock : m.by_name) fmt::print("{}: {}\n", lock.name,
//   lock.skipped); std::string scrape = dlock::prometheus_text(dlock::client());  // text format
//   0.0.4
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace dlock {

class Client;

/// A latency distribution in power-of-two microsecond buckets: bucket i counts samples in
/// [2^(i-1), 2^i) us (bucket 0 counts samples under 1 us).
struct LatencySummary {
  static constexpr int kBuckets = 40;
  std::uint64_t count = 0;
  std::uint64_t sum_us = 0;
  std::uint64_t max_us = 0;
  std::array<std::uint64_t, kBuckets> buckets{};

  /// Upper bound of the bucket holding quantile `q` (0..1); 0 when empty.
  [[nodiscard]] std::uint64_t percentile_us(double q) const;
  [[nodiscard]] double mean_us() const { return count ? double(sum_us) / double(count) : 0.0; }
};

// The counters, listed once: LockMetrics and MetricsSnapshot below, the runtime's live
// counters behind them and prometheus_text() are all made from these lists. Each entry is
// X(field, Prometheus family, what it counts); client-wide entries with an empty family are
// not exported to Prometheus.

/// Per lock name, counters (Prometheus: `family{name="..."}`).
#define DLOCK_LOCK_COUNTERS(X)                                                                    \
  X(acquisitions, "dlock_acquisitions_total",                                                     \
    "Locks granted by the backend (reentrant entries excluded).")                                 \
  X(releases, "dlock_releases_total", "Final releases that found the lease still held.")          \
  X(busy, "dlock_busy_total", "Acquire calls that gave up because another owner held the lock.")  \
  X(contention, "dlock_contention_total", "Busy answers from the backend, retries included.")     \
  X(unavailable, "dlock_unavailable_total",                                                       \
    "Acquire calls that failed because the backend was unreachable.")                             \
  X(losses, "dlock_lost_leases_total",                                                            \
    "Leases found lost: taken, expired, gone or past max_hold.")                                  \
  X(renewal_failures, "dlock_renewal_failures_total", "Renewals that did not reach the backend.") \
  /* also the runs claim_run found already recorded */                                            \
  X(skipped, "dlock_skipped_runs_total",                                                          \
    "Guarded calls skipped because the lock was busy (on_busy=skip).")                            \
  X(refused, "dlock_refused_total",                                                               \
    "Acquire calls refused at once: an upgrade, a key held as another kind, a partial reentry.")

/// Per lock name, latency distributions (Prometheus histograms in seconds).
#define DLOCK_LOCK_LATENCIES(X)                                                                   \
  X(acquire_latency, "dlock_acquire_latency_seconds", "Whole acquire calls, waiting included.")   \
  X(wait_time, "dlock_wait_seconds",                                                              \
    "Acquire calls that met a busy lock: time until granted or given up.")                        \
  X(hold_time, "dlock_hold_seconds", "From the granting request to the final release.")           \
  X(renewal_lag, "dlock_renewal_lag_seconds", "How late renewals started against their schedule.")

/// Client-wide counters.
#define DLOCK_CLIENT_COUNTERS(X)                                                                  \
  X(acquisitions, "", "Grants from the backend (not reentrant entries).")                         \
  X(reentrant_acquisitions, "", "Reentrant entries of a lock the thread already held.")           \
  X(acquire_busy, "", "Acquire calls that gave up: lock held elsewhere.")                         \
  X(acquire_unavailable, "", "Acquire calls that failed: backend unreachable.")                   \
  X(waits, "", "Acquire calls that had to wait at least once.")                                   \
  X(contention, "", "Busy answers seen, including retries.")                                      \
  X(wakeups, "dlock_wakeups_total", "Waits ended early by a release notification.")               \
  X(handoffs, "dlock_handoffs_total",                                                             \
    "Grants made by the holder's release to this waiting client, without a request of its own.")  \
  X(renewals, "dlock_renewals_total", "Lease renewals confirmed by the backend.")                 \
  X(renewal_failures, "", "Renewals that did not reach the backend.")                             \
  X(losses, "", "Leases found lost (taken, expired, gone).")                                      \
  X(releases, "", "Final releases.")                                                              \
  X(release_failures, "", "Releases that found the lease already lost.")                          \
  X(min_hold_kept, "", "Releases that left the key to expire at min_hold.")                       \
  X(subscriber_reconnects, "dlock_subscriber_reconnects_total",                                   \
    "Reconnections of release-notification subscribers.")                                         \
  X(shared_acquisitions, "dlock_shared_acquisitions_total", "Shared holds granted (mode=shared).")  \
  X(permit_acquisitions, "dlock_permit_acquisitions_total", "Permits granted (permits=N).")        \
  X(fair_acquisitions, "dlock_fair_acquisitions_total", "Grants of fair locks (fair=true).")      \
  X(multi_key_acquisitions, "dlock_multi_key_acquisitions_total",                                 \
    "Leases of several keys granted (each key also counts as a grant).")                          \
  X(multi_key_rollbacks, "dlock_multi_key_rollbacks_total",                                       \
    "Leases of several keys given up with some keys taken: those were given back.")               \
  X(downgrades, "dlock_downgrades_total",                                                          \
    "Shared holds entered inside the thread's exclusive hold of the key (reentrant).")             \
  X(upgrades_refused, "dlock_upgrades_refused_total",                                             \
    "Exclusive holds refused inside the thread's shared hold of the key.")

/// Client-wide latency distributions (not exported to Prometheus).
#define DLOCK_CLIENT_LATENCIES(X)                                                                 \
  X(acquire_latency, "", "Whole acquire calls, waiting included.")                                \
  X(renewal_lag, "", "How late renewals started against their schedule.")

#define DLOCK_METRICS_COUNTER_FIELD(field, family, help) std::uint64_t field = 0;
#define DLOCK_METRICS_LATENCY_FIELD(field, family, help) LatencySummary field;

/// What one lock name (the `name` given to acquire, the guard name for woven guards,
/// "(unnamed)" for none) has done since its client started: DLOCK_LOCK_COUNTERS and
/// DLOCK_LOCK_LATENCIES.
struct LockMetrics {
  std::string name;
  DLOCK_LOCK_COUNTERS(DLOCK_METRICS_COUNTER_FIELD)
  DLOCK_LOCK_LATENCIES(DLOCK_METRICS_LATENCY_FIELD)
};

/// A consistent-enough copy of the counters (each field is read atomically):
/// DLOCK_CLIENT_COUNTERS and DLOCK_CLIENT_LATENCIES, then the series of each lock name.
struct MetricsSnapshot {
  DLOCK_CLIENT_COUNTERS(DLOCK_METRICS_COUNTER_FIELD)
  DLOCK_CLIENT_LATENCIES(DLOCK_METRICS_LATENCY_FIELD)
  std::vector<LockMetrics> by_name;  ///< per lock name, sorted by name
};

#undef DLOCK_METRICS_COUNTER_FIELD
#undef DLOCK_METRICS_LATENCY_FIELD

/// The snapshot in the Prometheus text exposition format 0.0.4: per-name counters
/// (`dlock_acquisitions_total{name="..."}`, ...) and histograms in seconds.
[[nodiscard]] std::string prometheus_text(const MetricsSnapshot& metrics);
/// Same, for a client's current counters.
[[nodiscard]] std::string prometheus_text(const Client& client);

}  // namespace dlock
