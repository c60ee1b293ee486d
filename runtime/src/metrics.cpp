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

LockMetrics NameMetrics::snapshot() const {
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  LockMetrics s;
  s.name = name;
  s.acquisitions = get(acquisitions);
  s.releases = get(releases);
  s.busy = get(busy);
  s.contention = get(contention);
  s.unavailable = get(unavailable);
  s.losses = get(losses);
  s.renewal_failures = get(renewal_failures);
  s.skipped = get(skipped);
  s.acquire_latency = acquire_latency.summary();
  s.wait_time = wait_time.summary();
  s.hold_time = hold_time.summary();
  s.renewal_lag = renewal_lag.summary();
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
  auto get = [](const std::atomic<std::uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  MetricsSnapshot s;
  s.acquisitions = get(acquisitions);
  s.reentrant_acquisitions = get(reentrant_acquisitions);
  s.acquire_busy = get(acquire_busy);
  s.acquire_unavailable = get(acquire_unavailable);
  s.waits = get(waits);
  s.contention = get(contention);
  s.wakeups = get(wakeups);
  s.renewals = get(renewals);
  s.renewal_failures = get(renewal_failures);
  s.losses = get(losses);
  s.releases = get(releases);
  s.release_failures = get(release_failures);
  s.min_hold_kept = get(min_hold_kept);
  s.subscriber_reconnects = get(subscriber_reconnects);
  s.acquire_latency = acquire_latency.summary();
  s.renewal_lag = renewal_lag.summary();
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

}  // namespace internal
}  // namespace dlock
