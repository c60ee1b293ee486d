// What an acquisition comes to when it does not simply succeed: the checks made before
// anything is sent, and the refusals, each counted and logged the same way wherever the core
// makes them (one key or several).
#pragma once

#include <string>
#include <string_view>

#include "backend.hpp"
#include "dlock/lease.hpp"
#include "metrics.hpp"

namespace dlock::internal {

/// Throws ConfigError for a lease the watchdog could not renew in time (every lease/3).
void refuse_short_lease(const Key& key, const LockSettings& settings);
/// Throws ConfigError for a kind of lock the backend does not offer.
void refuse_unsupported_kind(const Backend& backend, const Key& key,
                             const LockSettings& settings);
/// The lease of a first grant: max_hold when that is shorter.
[[nodiscard]] Millis first_lease(const LockSettings& settings);
/// Records the latency of one acquisition (in the wait time too when it met a busy lock).
void record_latency(Metrics& metrics, NameMetrics& series, Clock::time_point started,
                    bool met_busy);
/// The refusal of an acquisition that got no usable answer from the backend.
Lease refuse_unavailable(Metrics& metrics, NameMetrics& series, std::string_view name,
                         const Key& key, const LockSettings& settings, Clock::duration waited,
                         std::string error);
/// The refusal of a lock still busy after `waited`.
Lease refuse_busy(Metrics& metrics, NameMetrics& series, std::string_view name, const Key& key,
                  const LockSettings& settings, Clock::duration waited, Millis holder_ttl);
/// The refusal of a call that a rule of DESIGN §7 turns down at once.
Lease refuse_by_rule(NameMetrics& series, std::string_view name, const Key& key,
                     std::string reason);

}  // namespace dlock::internal
