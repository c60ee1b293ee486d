// Leases of several keys (DESIGN §7): every key or none, taken in one canonical order so that
// two callers naming the same keys in any order never wait for each other. Each key is a lease
// of its own (renewed, released and counted as one); the lease the caller gets joins them.
#include <algorithm>

#include "acquire_outcomes.hpp"
#include "client_core.hpp"
#include "log.hpp"
#include "owner.hpp"
#include "settler.hpp"

namespace dlock::internal {

Lease ClientCore::acquire(const std::vector<Key>& given, const LockSettings& asked,
                          std::string_view name) {
  std::vector<Key> keys;              // distinct, in the order given
  std::vector<std::size_t> written;   // for each key given, its place in `keys`
  for (const Key& key : given) {
    const auto found = std::find(keys.begin(), keys.end(), key);
    written.push_back(static_cast<std::size_t>(found - keys.begin()));
    if (found == keys.end()) keys.push_back(key);
  }
  if (keys.empty()) throw ConfigError("acquire: the list of keys is empty");
  if (given.size() == 1) return acquire(keys.front(), asked, name);
  if (keys.size() == given.size()) return acquire_distinct(keys, asked, name);
  Lease lease =
      keys.size() == 1 ? acquire(keys.front(), asked, name) : acquire_distinct(keys, asked, name);
  if (!lease.acquired()) return lease;
  // One part per distinct key; token(i) and keys() follow the keys as given, repeats included.
  std::shared_ptr<LeaseState> state = std::move(lease.state_);
  pop_current(state.get());
  std::vector<std::shared_ptr<LeaseState>> parts =
      state->parts.empty() ? std::vector<std::shared_ptr<LeaseState>>{state} : state->parts;
  return join(std::move(parts), state->settings, name, std::move(written));
}

Lease ClientCore::acquire_distinct(const std::vector<Key>& keys, const LockSettings& asked,
                                   std::string_view name) {
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
  const std::shared_ptr<Backend>& engine = backend(settings.backend);
  if (kind_of(settings) == LockKind::kExclusive && !settings.fair) {
    const auto started = Clock::now();
    Together together = take_together(engine, keys, order, settings, name);
    if (!together.parts.empty()) {
      bump(metrics_->multi_key_acquisitions);
      return join(std::move(together.parts), settings, name);
    }
    if (together.refused_key) {
      // A rule, as for one key: no wait and no key taken one by one would change it.
      const Key& refused = keys[*together.refused_key];
      return refuse_by_rule(*metrics_->for_name(name), name, refused,
                            fmt::format("key '{}': {}", printable(refused.str()), together.refusal));
    }
    if (together.busy_key && settings.wait <= Millis{0}) {
      // A try that does not wait ends here, with nothing taken: one by one, it would take
      // the keys before the busy one only to give them back.
      const Key& busy = keys[*together.busy_key];
      NameMetrics& series = *metrics_->for_name(name);
      bump(metrics_->contention);
      bump(series.contention);
      record_latency(*metrics_, series, started, true);
      Lease refusal = refuse_busy(*metrics_, series, name, busy, settings,
                                  Clock::now() - started, together.holder_ttl);
      return Lease::refused(refusal.status(),
                            fmt::format("key '{}': {}", printable(busy.str()), refusal.error()));
    }
  }
  std::vector<std::shared_ptr<LeaseState>> parts(keys.size());
  const auto deadline = later(Clock::now(), settings.wait);
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t i = order[n];
    LockSettings one = settings;
    const auto left = deadline - Clock::now();
    one.wait = left > Clock::duration::zero() ? std::chrono::ceil<Millis>(left) : Millis{0};
    Lease lease = acquire(keys[i], one, name);  // none is held here: a first grant
    if (!lease.acquired()) {
      // All or nothing: the keys taken so far are given back, last first, and free when the
      // call returns.
      for (std::size_t m = n; m-- > 0;) (void)release(parts[order[m]], Wait::kYes, false);
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

// One atomic try for every key, where the engine can: one round trip for the whole lease when
// no key is busy. Empty when it did not take them (busy, refused, unavailable, too late).
ClientCore::Together ClientCore::take_together(const std::shared_ptr<Backend>& engine,
                                               const std::vector<Key>& keys,
                                               const std::vector<std::size_t>& order,
                                               const LockSettings& settings,
                                               std::string_view name) {
  std::vector<Key> sorted;
  sorted.reserve(keys.size());
  for (std::size_t i : order) sorted.push_back(keys[i]);
  if (!engine->takes_together(sorted)) return {};
  const std::string owner = new_owner_id();
  const Millis lease = first_lease(settings);
  const auto sent = Clock::now();
  const auto give_up_at = later(sent, engine->config().command_timeout);
  GrantReply reply =
      engine->acquire_together(sorted, GrantRequest{sorted.front(), owner, lease, name, give_up_at});
  if (reply.kind != GrantReply::Kind::kAcquired || reply.tokens.size() != sorted.size()) {
    // Applied unseen, perhaps: whatever it took is given back after it.
    if (reply.outcome_unknown) {
      for (const Key& key : sorted) {
        watchdog_->clean_up_after(engine, key, owner, later(give_up_at, lease));
      }
    }
    Together none;
    if (reply.kind == GrantReply::Kind::kBusy && reply.busy_index < order.size()) {
      none.busy_key = order[reply.busy_index];
      none.holder_ttl = reply.ttl;
    } else if (reply.kind == GrantReply::Kind::kRefused && reply.busy_index < order.size()) {
      none.refused_key = order[reply.busy_index];
      none.refusal = std::move(reply.error);
    }
    return none;
  }
  // Granted by an earlier attempt: the keys have only reply.ttl left.
  const bool earlier = reply.ttl > Millis{0} && reply.ttl < lease;
  const auto from = earlier ? sent - (lease - reply.ttl) : sent;
  const auto series = metrics_->for_name(name);
  std::vector<std::shared_ptr<LeaseState>> parts(keys.size());
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t i = order[n];
    Lease one = grant(engine, keys[i], settings, name, owner, reply.tokens[n], from, series,
                      Clock::now() - sent);
    if (!one.acquired()) {
      // Too late to use (grant() gave this key back): the others go too.
      for (std::size_t m = n; m-- > 0;) (void)release(parts[order[m]], Wait::kYes, false);
      for (std::size_t m = n + 1; m < order.size(); ++m) {
        if (engine->release(keys[order[m]], owner, Millis{0}) == ReleaseOutcome::kUnavailable) {
          watchdog_->clean_up_after(engine, keys[order[m]], owner, later(Clock::now(), lease));
        }
      }
      return {};
    }
    parts[i] = std::move(one.state_);
    pop_current(parts[i].get());
  }
  return Together{std::move(parts), std::nullopt, Millis{0}, std::nullopt, {}};
}

Lease ClientCore::join(std::vector<std::shared_ptr<LeaseState>> parts,
                       const LockSettings& settings, std::string_view name,
                       std::vector<std::size_t> written) {
  Clock::time_point acquired_at = parts.front()->acquired_at;
  for (const auto& part : parts) acquired_at = std::min(acquired_at, part->acquired_at);
  auto lease = std::make_shared<LeaseState>(
      shared_from_this(), parts.front()->backend, parts.front()->key, std::string(name),
      parts.front()->owner, parts.front()->token, settings, acquired_at, metrics_->for_name(name));
  lease->parts = std::move(parts);
  lease->written = std::move(written);
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
  const auto count = [&](ReleaseStatus status) {
    if (rank(status) > rank(worst)) worst = status;
  };
  // The parts this release ends (not inner holds), last key first.
  std::vector<std::shared_ptr<LeaseState>> ended;
  std::vector<Ending> endings;
  std::vector<Key> keys;
  for (auto part = lease->parts.rbegin(); part != lease->parts.rend(); ++part) {
    std::optional<Ending> ending = end_here(*part, true);
    if (!ending) {
      count(ReleaseStatus::kStillHeld);
      continue;
    }
    ended.push_back(*part);
    endings.push_back(*ending);
    keys.push_back((*part)->key);
  }
  const bool one_engine = std::all_of(ended.begin(), ended.end(), [&](const auto& part) {
    return part->backend == lease->backend;
  });
  if (ended.size() > 1 && one_engine && lease->backend->takes_together(keys)) {
    for (ReleaseStatus status : release_together(ended, endings, wait)) count(status);
    return worst;
  }
  for (std::size_t i = 0; i < ended.size(); ++i) count(release_ended(ended[i], endings[i], wait));
  return worst;
}

std::vector<ReleaseStatus> ClientCore::release_together(
    const std::vector<std::shared_ptr<LeaseState>>& parts, const std::vector<Ending>& endings,
    Wait wait) noexcept {
  const std::shared_ptr<Backend>& engine = parts.front()->backend;
  std::vector<ReleaseItem> items;
  items.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    items.push_back(ReleaseItem{parts[i]->key, parts[i]->owner, endings[i].keep_for});
  }
  if (wait == Wait::kNo) {
    const BackendConfig& config = engine->config();
    settler::begin(2 * (config.connect_timeout + config.command_timeout));
    const auto report = [parts, endings](const std::vector<ReleaseOutcome>& outcomes) {
      for (std::size_t i = 0; i < parts.size(); ++i) {
        parts[i]->core->report_release(parts[i], outcomes[i], endings[i].keep_for,
                                       endings[i].held_ms);
      }
      settler::end();
    };
    const auto done = [report](std::vector<ReleaseOutcome> outcomes) {
      const bool quiet = std::none_of(outcomes.begin(), outcomes.end(), is_loss_or_unknown);
      settler::report(quiet, [report, outcomes = std::move(outcomes)] { report(outcomes); });
    };
    if (engine->release_together_later(items, done)) {
      return std::vector<ReleaseStatus>(parts.size(), ReleaseStatus::kReleased);
    }
    settler::end();
  }
  const std::vector<ReleaseOutcome> outcomes = engine->release_together(items);
  std::vector<ReleaseStatus> statuses;
  statuses.reserve(parts.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    statuses.push_back(report_release(parts[i], outcomes[i], endings[i].keep_for,
                                      endings[i].held_ms));
  }
  return statuses;
}

}  // namespace dlock::internal
