// dlock::prometheus_text: the metrics registry in the Prometheus text exposition format 0.0.4.
#include <fmt/format.h>

#include <array>
#include <string>

#include "dlock/client.hpp"
#include "dlock/metrics.hpp"

namespace dlock {
namespace {

// Cumulative upper bounds, as powers of two microseconds (64us .. ~67s): LatencySummary
// bucket i holds samples below 2^i us, so every bound is exact.
constexpr std::array<int, 11> kBoundExponents{6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26};

std::string escape_label(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

struct Counter {
  std::string_view name;
  std::string_view help;
  std::uint64_t LockMetrics::*field;
};

struct Histogram {
  std::string_view name;
  std::string_view help;
  LatencySummary LockMetrics::*field;
};

constexpr std::array<Counter, 8> kCounters{{
    {"dlock_acquisitions_total", "Locks granted by the backend (reentrant entries excluded).",
     &LockMetrics::acquisitions},
    {"dlock_releases_total", "Final releases that found the lease still held.", &LockMetrics::releases},
    {"dlock_busy_total", "Acquire calls that gave up because another owner held the lock.",
     &LockMetrics::busy},
    {"dlock_contention_total", "Busy answers from the backend, retries included.", &LockMetrics::contention},
    {"dlock_unavailable_total", "Acquire calls that failed because the backend was unreachable.",
     &LockMetrics::unavailable},
    {"dlock_lost_leases_total", "Leases found lost: taken, expired, gone or past max_hold.",
     &LockMetrics::losses},
    {"dlock_renewal_failures_total", "Renewals that did not reach the backend.",
     &LockMetrics::renewal_failures},
    {"dlock_skipped_runs_total", "Guarded calls skipped because the lock was busy (on_busy=skip).",
     &LockMetrics::skipped},
}};

constexpr std::array<Histogram, 4> kHistograms{{
    {"dlock_acquire_latency_seconds", "Whole acquire calls, waiting included.", &LockMetrics::acquire_latency},
    {"dlock_wait_seconds", "Acquire calls that met a busy lock: time until granted or given up.",
     &LockMetrics::wait_time},
    {"dlock_hold_seconds", "From the granting request to the final release.", &LockMetrics::hold_time},
    {"dlock_renewal_lag_seconds", "How late renewals started against their schedule.",
     &LockMetrics::renewal_lag},
}};

}  // namespace

std::string prometheus_text(const MetricsSnapshot& metrics) {
  std::string out;
  auto it = std::back_inserter(out);
  std::vector<std::string> labels;
  labels.reserve(metrics.by_name.size());
  for (const auto& lock : metrics.by_name) labels.push_back(escape_label(lock.name));

  for (const Counter& c : kCounters) {
    family(out, c.name, "counter", c.help);
    for (std::size_t i = 0; i < metrics.by_name.size(); ++i) {
      fmt::format_to(it, "{}{{name=\"{}\"}} {}\n", c.name, labels[i], metrics.by_name[i].*c.field);
    }
  }
  for (const Histogram& h : kHistograms) {
    family(out, h.name, "histogram", h.help);
    for (std::size_t i = 0; i < metrics.by_name.size(); ++i) {
      const LatencySummary& s = metrics.by_name[i].*h.field;
      std::uint64_t cumulative = 0;
      int next = 0;
      for (const int exponent : kBoundExponents) {
        for (; next <= exponent; ++next) cumulative += s.buckets[next];
        fmt::format_to(it, "{}_bucket{{name=\"{}\",le=\"{}\"}} {}\n", h.name, labels[i],
                       double(std::uint64_t{1} << exponent) / 1e6, cumulative);
      }
      // The buckets, not s.count, give the total: each field is read on its own, and a
      // sample recorded meanwhile must not make the +Inf bucket smaller than the last one.
      for (; next < LatencySummary::kBuckets; ++next) cumulative += s.buckets[next];
      fmt::format_to(it, "{}_bucket{{name=\"{}\",le=\"+Inf\"}} {}\n", h.name, labels[i], cumulative);
      fmt::format_to(it, "{}_sum{{name=\"{}\"}} {}\n", h.name, labels[i], double(s.sum_us) / 1e6);
      fmt::format_to(it, "{}_count{{name=\"{}\"}} {}\n", h.name, labels[i], cumulative);
    }
  }
  // Client-wide counters that belong to no single lock name.
  const std::array<std::pair<std::pair<std::string_view, std::string_view>, std::uint64_t>, 3> wide{{
      {{"dlock_renewals_total", "Lease renewals confirmed by the backend."}, metrics.renewals},
      {{"dlock_wakeups_total", "Waits ended early by a release notification."}, metrics.wakeups},
      {{"dlock_subscriber_reconnects_total", "Reconnections of release-notification subscribers."},
       metrics.subscriber_reconnects},
  }};
  for (const auto& [meta, value] : wide) {
    family(out, meta.first, "counter", meta.second);
    fmt::format_to(it, "{} {}\n", meta.first, value);
  }
  return out;
}

std::string prometheus_text(const Client& client) { return prometheus_text(client.metrics()); }

}  // namespace dlock
