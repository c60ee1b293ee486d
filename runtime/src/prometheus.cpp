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

#define DLOCK_COUNTER_ENTRY(field, family, help) Counter{family, help, &LockMetrics::field},
#define DLOCK_HISTOGRAM_ENTRY(field, family, help) Histogram{family, help, &LockMetrics::field},
constexpr Counter kCounters[] = {DLOCK_LOCK_COUNTERS(DLOCK_COUNTER_ENTRY)};
constexpr Histogram kHistograms[] = {DLOCK_LOCK_LATENCIES(DLOCK_HISTOGRAM_ENTRY)};
#undef DLOCK_COUNTER_ENTRY
#undef DLOCK_HISTOGRAM_ENTRY

// Client-wide counters that belong to no single lock name: those the list gives a family.
struct WideCounter {
  std::string_view name;
  std::string_view help;
  std::uint64_t MetricsSnapshot::*field;
};
#define DLOCK_WIDE_ENTRY(field, family, help) WideCounter{family, help, &MetricsSnapshot::field},
constexpr WideCounter kWideCounters[] = {DLOCK_CLIENT_COUNTERS(DLOCK_WIDE_ENTRY)};
#undef DLOCK_WIDE_ENTRY

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
      fmt::format_to(it, "{}_bucket{{name=\"{}\",le=\"+Inf\"}} {}\n", h.name, labels[i],
                     cumulative);
      fmt::format_to(it, "{}_sum{{name=\"{}\"}} {}\n", h.name, labels[i], double(s.sum_us) / 1e6);
      fmt::format_to(it, "{}_count{{name=\"{}\"}} {}\n", h.name, labels[i], cumulative);
    }
  }
  for (const WideCounter& c : kWideCounters) {
    if (c.name.empty()) continue;
    family(out, c.name, "counter", c.help);
    fmt::format_to(it, "{} {}\n", c.name, metrics.*c.field);
  }
  return out;
}

std::string prometheus_text(const Client& client) { return prometheus_text(client.metrics()); }

}  // namespace dlock
