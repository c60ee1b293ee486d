#include "acquire_outcomes.hpp"

#include <fmt/format.h>

#include "log.hpp"

namespace dlock::internal {

// A lease the watchdog could not renew in time (it renews every lease/3) is refused before
// anything is sent, however the settings were made.
void refuse_short_lease(const Key& key, const LockSettings& settings) {
  if (settings.lease < kMinimumLease) {
    throw ConfigError(fmt::format("lock '{}': lease {}ms is too short: must be at least {}ms, as "
                                  "the watchdog renews a lease every lease/3",
                                  printable(key.str()), settings.lease.count(),
                                  kMinimumLease.count()));
  }
}

// With max_hold shorter than the lease, the first grant already ends at max_hold.
Millis first_lease(const LockSettings& settings) {
  return settings.max_hold ? std::min(settings.lease, *settings.max_hold) : settings.lease;
}

// The latency of one acquisition. A grant records it before its Lease is built, so that the
// Lease is returned without a move (a moved lease cannot be entered again).
void record_latency(Metrics& metrics, NameMetrics& series, Clock::time_point started,
                    bool met_busy) {
  const auto took = Clock::now() - started;
  metrics.acquire_latency.record(took);
  series.acquire_latency.record(took);
  if (met_busy) series.wait_time.record(took);
}

// The refusal of an acquisition that got no usable answer from the backend, counted and
// logged.
Lease refuse_unavailable(Metrics& metrics, NameMetrics& series, std::string_view name,
                         const Key& key, const LockSettings& settings, Clock::duration waited,
                         std::string error) {
  bump(metrics.acquire_unavailable);
  bump(series.unavailable);
  log(LogLevel::kWarn, "event=unavailable name={} key={} backend={} waited_ms={} error={}",
      name_field(name), printable(key.str()), field(settings.backend),
      std::chrono::duration_cast<Millis>(waited).count(), field(error));
  return Lease::refused(AcquireStatus::kUnavailable, std::move(error));
}

// The refusal of a lock still busy after `waited`, counted and logged.
Lease refuse_busy(Metrics& metrics, NameMetrics& series, std::string_view name, const Key& key,
                  const LockSettings& settings, Clock::duration waited, Millis holder_ttl) {
  bump(metrics.acquire_busy);
  bump(series.busy);
  const auto waited_ms = std::chrono::duration_cast<Millis>(waited).count();
  // Under on_busy=skip a busy lock is the expected way to lose the race: no warning.
  log(settings.on_busy == OnBusy::kSkip ? LogLevel::kInfo : LogLevel::kWarn,
      "event=busy name={} key={} waited_ms={} holder_ttl_ms={}", name_field(name),
      printable(key.str()), waited_ms, holder_ttl.count());
  return Lease::refused(AcquireStatus::kBusy,
                        fmt::format("held by another owner; waited {}ms", waited_ms));
}

// The refusal of a call that a rule of DESIGN §7 turns down at once, counted and logged.
Lease refuse_by_rule(NameMetrics& series, std::string_view name, const Key& key,
                     std::string reason) {
  bump(series.refused);
  log(LogLevel::kWarn, "event=refused name={} key={} detail={}", name_field(name),
      printable(key.str()), field(reason));
  return Lease::refused(AcquireStatus::kRefused, std::move(reason));
}

// A backend that cannot grant this kind of lock is a configuration to fix, not a busy lock.
void refuse_unsupported_kind(const Backend& backend, const Key& key,
                             const LockSettings& settings) {
  const LockKind kind = kind_of(settings);
  if (backend.supports(kind, settings.fair)) return;
  throw ConfigError(fmt::format(
      "lock '{}': backend '{}' ({}) does not offer {}{} locks yet; docs/TOPOLOGIES.md lists the "
      "kinds of lock each topology offers",
      printable(key.str()), backend.config().name, to_string(backend.config().topology),
      settings.fair ? "fair " : "", to_string(kind)));
}

}  // namespace dlock::internal
