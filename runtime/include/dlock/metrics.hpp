// dlock counters: what every lock client has done since it started.
//
//   dlock::MetricsSnapshot m = dlock::client().metrics();
//   fmt::print("acquired {} times, lost {}, renewal lag p99 {}us\n",
//              m.acquisitions, m.losses, m.renewal_lag.percentile_us(0.99));
//   for (const dlock::LockMetrics& lock : m.by_name) fmt::print("{}: {}\n", lock.name, lock.skipped);
//   std::string scrape = dlock::prometheus_text(dlock::client());  // text format 0.0.4
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

/// What one lock name (the `name` given to acquire, the guard name for woven guards,
/// "(unnamed)" for none) has done since its client started.
struct LockMetrics {
  std::string name;
  std::uint64_t acquisitions = 0;      ///< grants from the backend (not reentrant entries)
  std::uint64_t releases = 0;          ///< final releases that found the lease still held
  std::uint64_t busy = 0;              ///< acquire calls that gave up: lock held elsewhere
  std::uint64_t contention = 0;        ///< busy answers seen, including retries
  std::uint64_t unavailable = 0;       ///< acquire calls that failed: backend unreachable
  std::uint64_t losses = 0;            ///< leases found lost (taken, expired, gone, max_hold)
  std::uint64_t renewal_failures = 0;  ///< renewals that did not reach the backend
  std::uint64_t skipped = 0;           ///< guarded calls skipped with on_busy=skip, and runs claim_run found already recorded
  LatencySummary acquire_latency;      ///< whole acquire call, waiting included
  LatencySummary wait_time;            ///< acquire calls that met a busy lock: time until done
  LatencySummary hold_time;            ///< grant request sent to final release
  LatencySummary renewal_lag;          ///< how late renewals started against schedule
};

/// A consistent-enough copy of the counters (each field is read atomically).
struct MetricsSnapshot {
  std::uint64_t acquisitions = 0;         ///< grants from the backend (not reentrant entries)
  std::uint64_t reentrant_acquisitions = 0;
  std::uint64_t acquire_busy = 0;         ///< acquire calls that gave up: lock held elsewhere
  std::uint64_t acquire_unavailable = 0;  ///< acquire calls that failed: backend unreachable
  std::uint64_t waits = 0;                ///< acquire calls that had to wait at least once
  std::uint64_t contention = 0;           ///< busy answers seen, including retries
  std::uint64_t wakeups = 0;              ///< release notifications that woke a waiter
  std::uint64_t renewals = 0;
  std::uint64_t renewal_failures = 0;     ///< renewals that did not reach the backend
  std::uint64_t losses = 0;               ///< leases found lost (taken, expired, gone)
  std::uint64_t releases = 0;
  std::uint64_t release_failures = 0;     ///< releases that found the lease already lost
  std::uint64_t min_hold_kept = 0;        ///< releases that left the key to expire at min_hold
  std::uint64_t subscriber_reconnects = 0;
  LatencySummary acquire_latency;         ///< whole acquire call, waiting included
  LatencySummary renewal_lag;             ///< how late renewals started against schedule
  std::vector<LockMetrics> by_name;       ///< per lock name, sorted by name
};

/// The snapshot in the Prometheus text exposition format 0.0.4: per-name counters
/// (`dlock_acquisitions_total{name="..."}`, ...) and histograms in seconds.
[[nodiscard]] std::string prometheus_text(const MetricsSnapshot& metrics);
/// Same, for a client's current counters.
[[nodiscard]] std::string prometheus_text(const Client& client);

}  // namespace dlock
