#include "metrics.hpp"

#include <bit>

namespace dlock {

std::uint64_t LatencySummary::percentile_us(double q) const {
  if (count == 0) return 0;
  const auto rank = static_cast<std::uint64_t>(q * double(count - 1)) + 1;
  std::uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets[i];
    if (seen >= rank) return i == 0 ? 1 : std::min<std::uint64_t>(std::uint64_t{1} << i, max_us);
  }
  return max_us;
}

namespace internal {

void LatencyRecorder::record(std::chrono::nanoseconds value) noexcept {
  const auto us = static_cast<std::uint64_t>(std::max<std::int64_t>(
      0, std::chrono::duration_cast<std::chrono::microseconds>(value).count()));
  const int bucket = std::min<int>(LatencySummary::kBuckets - 1, std::bit_width(us));
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(us, std::memory_order_relaxed);
  auto prev = max_us_.load(std::memory_order_relaxed);
  while (us > prev && !max_us_.compare_exchange_weak(prev, us, std::memory_order_relaxed)) {
  }
}

LatencySummary LatencyRecorder::summary() const noexcept {
  LatencySummary s;
  s.count = count_.load(std::memory_order_relaxed);
  s.sum_us = sum_us_.load(std::memory_order_relaxed);
  s.max_us = max_us_.load(std::memory_order_relaxed);
  for (int i = 0; i < LatencySummary::kBuckets; ++i) {
    s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
  }
  return s;
}

// Each field of a snapshot from the live field of the same name, as the lists give them.
#define DLOCK_COPY_COUNTER(field, family, help) s.field = field.load(std::memory_order_relaxed);
#define DLOCK_COPY_LATENCY(field, family, help) s.field = field.summary();

LockMetrics NameMetrics::snapshot() const {
  LockMetrics s;
  s.name = name;
  DLOCK_LOCK_COUNTERS(DLOCK_COPY_COUNTER)
  DLOCK_LOCK_LATENCIES(DLOCK_COPY_LATENCY)
  return s;
}

std::shared_ptr<NameMetrics> Metrics::for_name(std::string_view name) {
  if (name.empty()) name = kUnnamed;
  std::lock_guard lock(names_mutex_);
  auto it = names_.find(name);
  if (it == names_.end()) {
    it = names_.emplace(std::string(name), std::make_shared<NameMetrics>(std::string(name))).first;
  }
  return it->second;
}

MetricsSnapshot Metrics::snapshot() const {
  MetricsSnapshot s;
  DLOCK_CLIENT_COUNTERS(DLOCK_COPY_COUNTER)
  DLOCK_CLIENT_LATENCIES(DLOCK_COPY_LATENCY)
  std::vector<std::shared_ptr<NameMetrics>> names;
  {
    std::lock_guard lock(names_mutex_);
    names.reserve(names_.size());
    for (const auto& [name, series] : names_) names.push_back(series);
  }
  s.by_name.reserve(names.size());
  for (const auto& series : names) s.by_name.push_back(series->snapshot());  // map order: sorted
  return s;
}

#undef DLOCK_COPY_COUNTER
#undef DLOCK_COPY_LATENCY

}  // namespace internal
}  // namespace dlock
