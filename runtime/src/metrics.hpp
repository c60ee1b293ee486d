// Lock-free counters behind dlock::MetricsSnapshot.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "dlock/metrics.hpp"

namespace dlock::internal {

class LatencyRecorder {
 public:
  void record(std::chrono::nanoseconds value) noexcept;
  [[nodiscard]] LatencySummary summary() const noexcept;

 private:
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_us_{0};
  std::atomic<std::uint64_t> max_us_{0};
  std::array<std::atomic<std::uint64_t>, LatencySummary::kBuckets> buckets_{};
};

class Metrics {
 public:
  std::atomic<std::uint64_t> acquisitions{0};
  std::atomic<std::uint64_t> reentrant_acquisitions{0};
  std::atomic<std::uint64_t> acquire_busy{0};
  std::atomic<std::uint64_t> acquire_unavailable{0};
  std::atomic<std::uint64_t> waits{0};
  std::atomic<std::uint64_t> contention{0};
  std::atomic<std::uint64_t> wakeups{0};
  std::atomic<std::uint64_t> renewals{0};
  std::atomic<std::uint64_t> renewal_failures{0};
  std::atomic<std::uint64_t> losses{0};
  std::atomic<std::uint64_t> releases{0};
  std::atomic<std::uint64_t> release_failures{0};
  std::atomic<std::uint64_t> min_hold_kept{0};
  std::atomic<std::uint64_t> subscriber_reconnects{0};
  LatencyRecorder acquire_latency;
  LatencyRecorder renewal_lag;

  [[nodiscard]] MetricsSnapshot snapshot() const noexcept;
};

inline void bump(std::atomic<std::uint64_t>& counter) noexcept {
  counter.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace dlock::internal
