// Lock-free counters behind dlock::MetricsSnapshot, client-wide and per lock name.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

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

/// The series of one lock name. Looked up once per acquire and then shared by the lease.
class NameMetrics {
 public:
  explicit NameMetrics(std::string name_in) : name(std::move(name_in)) {}
  const std::string name;
#define DLOCK_LIVE_COUNTER(field, family, help) std::atomic<std::uint64_t> field{0};
#define DLOCK_LIVE_LATENCY(field, family, help) LatencyRecorder field;
  DLOCK_LOCK_COUNTERS(DLOCK_LIVE_COUNTER)
  DLOCK_LOCK_LATENCIES(DLOCK_LIVE_LATENCY)

  [[nodiscard]] LockMetrics snapshot() const;
};

/// The series name of locks acquired without a name (in metrics and in log lines).
inline constexpr std::string_view kUnnamed = "(unnamed)";

class Metrics {
 public:
  DLOCK_CLIENT_COUNTERS(DLOCK_LIVE_COUNTER)
  DLOCK_CLIENT_LATENCIES(DLOCK_LIVE_LATENCY)
#undef DLOCK_LIVE_COUNTER
#undef DLOCK_LIVE_LATENCY

  /// The series for `name` ("" is "(unnamed)"), created on first use. Never null.
  [[nodiscard]] std::shared_ptr<NameMetrics> for_name(std::string_view name);

  [[nodiscard]] MetricsSnapshot snapshot() const;

 private:
  mutable std::mutex names_mutex_;
  std::map<std::string, std::shared_ptr<NameMetrics>, std::less<>> names_;
};

inline void bump(std::atomic<std::uint64_t>& counter) noexcept {
  counter.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace dlock::internal
