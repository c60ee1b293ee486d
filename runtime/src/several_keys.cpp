// Leases of several keys (DESIGN §7): every key or none, taken in one canonical order so that
// two callers naming the same keys in any order never wait for each other. Each key is a lease
// of its own (renewed, released and counted as one); the lease the caller gets joins them.
#include <algorithm>

#include "acquire_outcomes.hpp"
#include "client_core.hpp"
#include "log.hpp"

namespace dlock::internal {

Lease ClientCore::acquire(const std::vector<Key>& given, const LockSettings& asked,
                          std::string_view name) {
  std::vector<Key> keys;  // distinct, in the order given
  for (const Key& key : given) {
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  if (keys.empty()) throw ConfigError("acquire: the list of keys is empty");
  if (keys.size() == 1) return acquire(keys.front(), asked, name);
  LockSettings settings = asked;
  settings.lease = std::min(settings.lease, backend(settings.backend)->lease_limit());
  refuse_short_lease(keys.front(), settings);
  refuse_unsupported_kind(*backend(settings.backend), keys.front(), settings);

  // Entered again only whole: taking a missing key while holding others out of the canonical
  // order could deadlock with a caller that holds it and waits for ours.
  std::size_t held = 0;
  std::size_t missing = keys.size();
  {
    std::lock_guard lock(holds_mutex_);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (held_here(keys[i], settings.backend)) {
        ++held;
      } else if (missing == keys.size()) {
        missing = i;
      }
    }
  }
  if (held == keys.size()) return reenter_all(keys, settings, name);
  if (held > 0) {
    return refuse_by_rule(
        *metrics_->for_name(name), name, keys[missing],
        fmt::format("this thread holds some of the keys of this lease but not '{}': a lease of "
                    "several keys enters all of them again or none, as taking one now, out of "
                    "order, could deadlock",
                    printable(keys[missing].str())));
  }
  return take_all(keys, settings, name);
}

Lease ClientCore::reenter_all(const std::vector<Key>& keys, const LockSettings& settings,
                              std::string_view name) {
  std::vector<std::shared_ptr<LeaseState>> parts(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    Reentry again = reenter(keys[i], settings);
    if (!again.held) {
      for (std::size_t j = i; j-- > 0;) {
        pop_current(parts[j].get());
        (void)release(parts[j], Wait::kYes);  // an inner hold: nothing goes to the server
      }
      if (again.status == AcquireStatus::kRefused) {
        return refuse_by_rule(*metrics_->for_name(name), name, keys[i], std::move(again.refusal));
      }
      return Lease::refused(again.status, std::move(again.refusal));
    }
    pop_current(again.held.get());
    parts[i] = std::move(again.held);
  }
  return join(std::move(parts), settings, name);
}

// The canonical order is the keys' bytes: every caller takes any two keys in the same order.
// The wait covers all the keys.
Lease ClientCore::take_all(const std::vector<Key>& keys, const LockSettings& settings,
                           std::string_view name) {
  std::vector<std::size_t> order(keys.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return keys[a] < keys[b]; });
  std::vector<std::shared_ptr<LeaseState>> parts(keys.size());
  const auto deadline = later(Clock::now(), settings.wait);
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t i = order[n];
    LockSettings one = settings;
    const auto left = deadline - Clock::now();
    one.wait = left > Clock::duration::zero() ? std::chrono::ceil<Millis>(left) : Millis{0};
    Lease lease = acquire(keys[i], one, name);  // none is held here: a first grant
    if (!lease.acquired()) {
      // All or nothing: the keys taken so far are given back, last first.
      for (std::size_t m = n; m-- > 0;) (void)release(parts[order[m]], Wait::kNo);
      if (n > 0) bump(metrics_->multi_key_rollbacks);
      return Lease::refused(lease.status(),
                            fmt::format("key '{}': {}", printable(keys[i].str()), lease.error()));
    }
    parts[i] = std::move(lease.state_);
    pop_current(parts[i].get());
  }
  bump(metrics_->multi_key_acquisitions);
  return join(std::move(parts), settings, name);
}

Lease ClientCore::join(std::vector<std::shared_ptr<LeaseState>> parts,
                       const LockSettings& settings, std::string_view name) {
  Clock::time_point acquired_at = parts.front()->acquired_at;
  for (const auto& part : parts) acquired_at = std::min(acquired_at, part->acquired_at);
  auto lease = std::make_shared<LeaseState>(
      shared_from_this(), parts.front()->backend, parts.front()->key, std::string(name),
      parts.front()->owner, parts.front()->token, settings, acquired_at, metrics_->for_name(name));
  lease->parts = std::move(parts);
  for (const auto& part : lease->parts) {
    part->add_on_lost([whole = std::weak_ptr<LeaseState>(lease)](const LeaseView& lost) {
      if (auto joined = whole.lock()) {
        joined->mark_lost(lost.loss_reason(), fmt::format("key '{}' of the lease was lost",
                                                          printable(lost.key().str())));
      }
    });
  }
  push_current(lease);
  return Lease::granted(std::move(lease));
}

ReleaseStatus ClientCore::release_parts(const std::shared_ptr<LeaseState>& lease,
                                        Wait wait) noexcept {
  lease->mark_released();
  // The worst of the parts' outcomes: a loss, then an unknown outcome, then a key kept for
  // min_hold; kStillHeld only when every part is an inner hold.
  const auto rank = [](ReleaseStatus status) {
    switch (status) {
      case ReleaseStatus::kLost: return 5;
      case ReleaseStatus::kUnavailable: return 4;
      case ReleaseStatus::kKeptForMinHold: return 3;
      case ReleaseStatus::kReleased: return 2;
      case ReleaseStatus::kStillHeld: return 1;
      case ReleaseStatus::kNotHeld: return 0;
    }
    return 0;
  };
  ReleaseStatus worst = ReleaseStatus::kNotHeld;
  for (auto part = lease->parts.rbegin(); part != lease->parts.rend(); ++part) {
    const ReleaseStatus status = release(*part, wait);
    if (rank(status) > rank(worst)) worst = status;
  }
  return worst;
}

}  // namespace dlock::internal
