#include "client_core.hpp"

#include <algorithm>
#include <random>

#include "acquire_outcomes.hpp"
#include "log.hpp"
#include "owner.hpp"
#include "settler.hpp"

namespace dlock::internal {
namespace {

// Spreads retries of competing waiters so they do not all hit the server at once.
Clock::duration jittered(Clock::duration d) {
  thread_local std::minstd_rand rng{std::random_device{}()};
  std::uniform_real_distribution<double> factor(0.75, 1.0);
  return std::chrono::duration_cast<Clock::duration>(d * factor(rng));
}

// How long a waiter sleeps before it tries again: a jittered poll interval, never past the
// holder's key's expiry.
Clock::duration pause_before_retry(Millis poll, Millis holder_ttl) {
  Clock::duration pause = jittered(poll);
  // The holder's key expires after ttl; no point sleeping past that.
  if (holder_ttl > Millis{0}) pause = std::min<Clock::duration>(pause, holder_ttl + Millis{1});
  return pause;
}

thread_local std::vector<std::weak_ptr<LeaseState>> t_current;

}  // namespace

void push_current(const std::shared_ptr<LeaseState>& lease) { t_current.push_back(lease); }

void pop_current(const LeaseState* lease) noexcept {
  // From the innermost hold outwards; entries of leases already gone are dropped on the way.
  for (std::size_t i = t_current.size(); i-- > 0;) {
    auto held = t_current[i].lock();
    if (held && held.get() != lease) continue;
    t_current.erase(t_current.begin() + static_cast<std::ptrdiff_t>(i));
    if (held) return;
  }
}

LeaseView current_lease_view() {
  while (!t_current.empty()) {
    auto top = t_current.back().lock();
    if (top && !top->released()) return LeaseView(std::move(top));
    t_current.pop_back();
  }
  return {};
}

ClientCore::ClientCore(Config config)
    : config_(std::move(config)),
      metrics_(std::make_shared<Metrics>()),
      watchdog_(Watchdog::start(metrics_)) {
  for (const auto& [name, backend_config] : config_.backends) {
    engines_.emplace(name, make_engine(backend_config, config_.service, metrics_));
  }
}

ClientCore::~ClientCore() { watchdog_->stop(); }

const Engine& ClientCore::engine(const std::string& name) const {
  auto it = engines_.find(name);
  if (it == engines_.end()) {
    throw ConfigError(fmt::format("{}: no backend named '{}'", config_.source, name));
  }
  return it->second;
}

std::shared_ptr<LeaseState> ClientCore::held_here(const Key& key, const std::string& backend) {
  auto it = holds_.find(HoldKey{this_thread_token(), backend, key.str()});
  if (it == holds_.end()) return nullptr;
  auto held = it->second.lock();
  // A moved lease may be held on another thread now: letting this one in would run two
  // sections under one token.
  if (!held || held->released() || held->moved()) {
    holds_.erase(it);
    return nullptr;
  }
  return held;
}

ClientCore::Reentry ClientCore::reenter(const Key& key, const LockSettings& settings) {
  std::lock_guard lock(holds_mutex_);
  auto held = held_here(key, settings.backend);
  if (!held) return {};
  // DESIGN §7: shared inside exclusive is a downgrade, held as a reentrant hold of the
  // exclusive lease; exclusive inside shared would wait for this very thread's hold to end.
  const LockKind had = kind_of(held->settings);
  const LockKind asked = kind_of(settings);
  if (had == LockKind::kShared && asked == LockKind::kExclusive) {
    bump(metrics_->upgrades_refused);
    return {nullptr,
            "this thread holds the key shared: an exclusive hold inside it is an upgrade, which "
            "dlock refuses, as it would wait for this thread's own shared hold to end",
            AcquireStatus::kRefused};
  }
  const bool downgrade = had == LockKind::kExclusive && asked == LockKind::kShared;
  if (had != asked && !downgrade) {
    return {nullptr,
            fmt::format("this thread holds the key as a {} lock; it cannot enter it again as a "
                        "{} one",
                        to_string(had), to_string(asked)),
            AcquireStatus::kRefused};
  }
  if (held->lost()) {
    return {nullptr, fmt::format("this thread's outer hold of the key was lost ({})",
                                 to_string(held->loss_reason()))};
  }
  // Not marked lost yet (the watchdog may be waiting on a renewal), but no longer known to
  // be held: the key may have expired and been taken.
  if (LeaseView(held).remaining() <= Millis{0}) {
    return {nullptr, "this thread's outer hold of the key has no time left"};
  }
  held->holds.fetch_add(1);
  bump(metrics_->reentrant_acquisitions);
  if (downgrade) bump(metrics_->downgrades);
  push_current(held);
  return {std::move(held), {}};
}

Lease ClientCore::grant(const std::shared_ptr<Backend>& backend, const Key& key,
                        const LockSettings& settings, std::string_view name,
                        const std::string& owner, std::uint64_t token, Clock::time_point sent,
                        std::shared_ptr<NameMetrics> series, Clock::duration waited,
                        Millis valid_for) {
  if (const Millis lease = first_lease(settings); Clock::now() >= later(sent, lease)) {
    return refuse_late_grant(backend, key, settings, name, owner, sent, lease, *series);
  }
  auto state = std::make_shared<LeaseState>(shared_from_this(), backend, key, std::string(name),
                                            owner, token, settings, sent, std::move(series));
  // Granted now, on a key that expires sooner than the lease unless renewed.
  if (valid_for > Millis{0} && later(sent, valid_for) < state->valid_until()) {
    state->extend_validity(later(sent, valid_for));
  }
  {
    std::lock_guard lock(holds_mutex_);
    holds_[HoldKey{state->thread, settings.backend, key.str()}] = state;
  }
  bump(metrics_->acquisitions);
  bump(state->series->acquisitions);
  switch (kind_of(settings)) {
    case LockKind::kExclusive: break;
    case LockKind::kShared: bump(metrics_->shared_acquisitions); break;
    case LockKind::kPermit: bump(metrics_->permit_acquisitions); break;
  }
  if (settings.fair) bump(metrics_->fair_acquisitions);
  watchdog_->track(state);
  push_current(state);
  // Checked here too: the fields below are built before log() could check the level.
  if (log_enabled(LogLevel::kDebug)) {
    log(LogLevel::kDebug, "event=acquired name={} key={} token={} waited_ms={} lease_ms={}",
        name_field(name), printable(key.str()), token,
        std::chrono::duration_cast<Millis>(waited).count(), settings.lease.count());
  }
  return Lease::granted(std::move(state));
}

// One acquisition that may wait: its tries, its watch and its place in the key's queue.
class ClientCore::Acquisition {
 public:
  Acquisition(ClientCore& core, const Key& key, const LockSettings& settings,
              std::string_view name)
      : core_(core),
        key_(key),
        settings_(settings),
        name_(name),
        backend_(core.backend(settings.backend)),
        series_(core.metrics_->for_name(name)),
        started_(Clock::now()),
        deadline_(later(started_, settings.wait)),
        owner_(new_owner_id()),
        first_ttl_(first_lease(settings)),
        place_(backend_->queues() ? queue_place(settings, backend_->config()) : Millis{0}),
        kind_(kind_of(settings)) {}

  Lease run() {
    if (settings_.wait > Millis{0} && backend_->watch_is_free()) {
      watch_ = backend_->watch(key_);
    } else if (settings_.wait > Millis{0} && settings_.fair) {
      // The first try takes a place in the queue: arrival at the server is what orders a
      // fair lock, so its watch is armed before it.
      watch_ = backend_->watch(key_);
      watch_->expect_grant(owner_, 0);  // also wakes it for its turn
    }
    for (;;) {
      const auto sent = Clock::now();
      const auto give_up_at = later(sent, backend_->config().command_timeout);
      // A place is asked for once the watch is armed, so that the grant's notice is not missed.
      const Millis asked = watch_ ? place_ : Millis{0};
      // A waiting writer claims the lock from readers, and a waiter its place in a fair
      // queue, for as long as a place would last.
      const Millis claim = watch_ ? queue_place(settings_, backend_->config()) : Millis{0};
      GrantReply reply = backend_->acquire(GrantRequest{key_, owner_, first_ttl_, name_,
                                                        give_up_at, asked, watch_ != nullptr,
                                                        watch_.get(), kind_, settings_.permits,
                                                        settings_.fair, claim});
      maybe_applied_ = maybe_applied_ || reply.outcome_unknown;
      switch (reply.kind) {
        case GrantReply::Kind::kAcquired: {
          // Granted earlier (a lost reply, or a release while we were queued): the key has
          // only reply.ttl left, counted from no later than this request.
          const bool earlier = reply.ttl > Millis{0} && reply.ttl < first_ttl_;
          return granted(reply.token, earlier ? sent - (first_ttl_ - reply.ttl) : sent,
                         sent - started_, reply.valid_for);
        }
        case GrantReply::Kind::kUnavailable:
          return give_up(give_up_at, refuse_unavailable(*core_.metrics_, *series_, name_, key_,
                                                        settings_, Clock::now() - started_,
                                                        std::move(reply.error)));
        case GrantReply::Kind::kRefused:
          return give_up(give_up_at,
                         refuse_by_rule(*series_, name_, key_, std::move(reply.error)));
        case GrantReply::Kind::kBusy:
          break;
      }
      // Each Lease is returned as made, never moved: a moved lease is not entered again.
      switch (wait_after_busy(reply, sent, asked)) {
        case Next::kTry:
          break;
        case Next::kGranted:
          return granted(watch_->granted_token(), queued_at_, Clock::now() - started_);
        case Next::kGiveUp:
          return give_up(give_up_at, refuse_busy(*core_.metrics_, *series_, name_, key_, settings_,
                                                 Clock::now() - started_, reply.ttl));
      }
    }
  }

 private:
  enum class Next { kTry, kGranted, kGiveUp };

  // After a busy answer: gives up at the deadline, arms the watch after the first one, else
  // sleeps until a release, a grant to us or the time for the next try.
  Next wait_after_busy(const GrantReply& reply, Clock::time_point sent, Millis asked) {
    bump(core_.metrics_->contention);
    bump(series_->contention);
    met_busy_ = true;
    if (asked > Millis{0} || (settings_.fair && watch_)) {
      // In the queue now. A grant to us from here on carries a token above the key's last
      // one, and the release that makes it runs after this request was sent.
      queued_ = true;
      queued_at_ = sent;
      watch_->expect_grant(owner_, reply.last_token);
    }
    const auto now = Clock::now();
    if (now >= deadline_) return Next::kGiveUp;
    if (!waits_) {
      waits_ = true;
      bump(core_.metrics_->waits);
    }
    if (!watch_) {
      // Arm the watch, then try again at once: a release between our try and the watch
      // would otherwise go unnoticed until the next poll. A grant can come as soon as that
      // try has queued us, before its answer is read: it is expected from now on.
      watch_ = backend_->watch(key_);
      if (place_ > Millis{0}) watch_->expect_grant(owner_, 0);
      return Next::kTry;
    }
    auto pause = pause_before_retry(backend_->config().poll_interval, reply.ttl);
    // Our place lapses unless a later try renews it.
    if (queued_) {
      pause = std::min<Clock::duration>(pause, queue_place(settings_, backend_->config()) / 3);
    }
    switch (watch_->wait_until(std::min(deadline_, later(now, pause)))) {
      case ReleaseWatch::Wake::kGranted:
        bump(core_.metrics_->wakeups);
        bump(core_.metrics_->handoffs);
        return Next::kGranted;
      case ReleaseWatch::Wake::kReleased:
        bump(core_.metrics_->wakeups);
        break;
      case ReleaseWatch::Wake::kTimeout:
        break;
    }
    return Next::kTry;
  }

  Lease granted(std::uint64_t token, Clock::time_point granted_from, Clock::duration waited,
                Millis valid_for = Millis{0}) {
    record_latency(*core_.metrics_, *series_, started_, met_busy_);
    return core_.grant(backend_, key_, settings_, name_, owner_, token, granted_from, series_,
                       waited, valid_for);
  }

  // A try may have been applied unseen (a lost reply, a timeout), or a release may have
  // granted us the lock while queued: giving up must not leave that key behind.
  Lease give_up(Clock::time_point give_up_at, Lease refusal) {
    if (queued_) core_.leave_queue(backend_, key_, owner_, later(give_up_at, first_ttl_));
    // A try that may still be on its way is released again after it, whatever leaving the
    // queue found.
    if (maybe_applied_) {
      core_.watchdog_->clean_up_after(backend_, key_, owner_, later(give_up_at, first_ttl_));
    }
    record_latency(*core_.metrics_, *series_, started_, met_busy_);
    return refusal;  // holds no state, so the move marks nothing
  }

  ClientCore& core_;
  const Key& key_;
  const LockSettings& settings_;
  const std::string_view name_;
  const std::shared_ptr<Backend>& backend_;
  // Looked up once per acquire; the lease keeps it for renewals, losses and release.
  const std::shared_ptr<NameMetrics> series_;
  const Clock::time_point started_;
  const Clock::time_point deadline_;
  // Every try uses the same owner, so a grant settles any earlier try that was applied.
  const std::string owner_;
  const Millis first_ttl_;
  const Millis place_;  // 0: the backend keeps no queue
  const LockKind kind_;
  std::unique_ptr<ReleaseWatch> watch_;
  bool waits_ = false;  // counted among the waits
  bool met_busy_ = false;
  bool maybe_applied_ = false;
  bool queued_ = false;
  Clock::time_point queued_at_{};  // when the last try that kept our place was sent
};

Lease ClientCore::acquire(const Key& key, const LockSettings& asked, std::string_view name) {
  // Held to the engine's limit (a ZooKeeper session): validity and renewals follow it.
  LockSettings bounded;
  const LockSettings* use = &asked;
  if (const Millis limit = backend(asked.backend)->lease_limit(); limit < asked.lease) {
    bounded = asked;
    bounded.lease = limit;
    use = &bounded;
  }
  const LockSettings& settings = *use;
  refuse_short_lease(key, settings);
  refuse_unsupported_kind(*backend(settings.backend), key, settings);
  Reentry again = reenter(key, settings);
  if (again.held) return Lease::granted(std::move(again.held));
  if (again.status == AcquireStatus::kRefused) {
    return refuse_by_rule(*metrics_->for_name(name), name, key, std::move(again.refusal));
  }
  if (!again.refusal.empty()) return Lease::refused(again.status, std::move(again.refusal));
  return Acquisition(*this, key, settings, name).run();
}

// How long a waiter's place in the queue lasts without being renewed: four polls, within
// [1 s, lease]. A waiter that dies keeps its place that long, and a release in that time
// grants it the lock, which then expires with the waiter's lease.
Millis ClientCore::queue_place(const LockSettings& settings, const BackendConfig& config) {
  return std::min(first_lease(settings), std::max(Millis{1000}, 4 * config.poll_interval));
}

// A waiter that gives up after queueing: a release may have granted it the lock unseen, so it
// releases whatever it holds and leaves the queue, without waiting for the answer.
void ClientCore::leave_queue(const std::shared_ptr<Backend>& backend, const Key& key,
                             const std::string& owner, Clock::time_point until) {
  const BackendConfig& config = backend->config();
  settler::begin(2 * (config.connect_timeout + config.command_timeout));
  auto watchdog = watchdog_;
  auto done = [watchdog, backend, key, owner, until](ReleaseOutcome outcome) {
    if (outcome == ReleaseOutcome::kUnavailable) {
      try {
        watchdog->clean_up_after(backend, key, owner, until);
      } catch (...) {  // out of memory: the key, if it is ours, expires with its lease
      }
    }
    settler::end();
  };
  if (!backend->release_later(key, owner, Millis{0}, std::move(done))) {
    settler::end();
    // No release that keeps this thread's order (Redlock, etcd): leaving a queue needs none,
    // as this owner takes nothing more. Sent at once from the watchdog's cleanup worker, so
    // that whoever is next in a fair queue is not kept behind this place until it lapses.
    watchdog_->clean_up_after(backend, key, owner, until, true);
  }
}

// The server may have granted at any moment after `sent`, so the lease is only known to run
// until sent + lease; a reply later than that grants nothing usable, and the key may already
// be someone else's. Whatever is still ours is given back at once.
Lease ClientCore::refuse_late_grant(const std::shared_ptr<Backend>& backend, const Key& key,
                                    const LockSettings& settings, std::string_view name,
                                    const std::string& owner, Clock::time_point sent,
                                    Millis lease, NameMetrics& series) {
  const auto took_ms = std::chrono::duration_cast<Millis>(Clock::now() - sent).count();
  bump(metrics_->acquire_unavailable);
  bump(series.unavailable);
  if (backend->release(key, owner, Millis{0}) == ReleaseOutcome::kUnavailable) {
    watchdog_->clean_up_after(backend, key, owner, later(Clock::now(), lease));
  }
  log(LogLevel::kWarn,
      "event=grant_too_late name={} key={} backend={} lease_ms={} took_ms={} "
      "detail=\"the grant arrived after its lease had run out; released\"",
      name_field(name), printable(key.str()), field(settings.backend), lease.count(), took_ms);
  return Lease::refused(AcquireStatus::kUnavailable,
                        fmt::format("the grant arrived {}ms after the request, after its lease of "
                                    "{}ms had run out; nothing is held",
                                    took_ms, lease.count()));
}

ReleaseStatus ClientCore::release(const std::shared_ptr<LeaseState>& lease, Wait wait,
                                  bool keep_min_hold) noexcept {
  if (!lease->parts.empty()) return release_parts(lease, wait);
  const std::optional<Ending> ending = end_here(lease, keep_min_hold);
  if (!ending) return ReleaseStatus::kStillHeld;
  return release_ended(lease, *ending, wait);
}

ReleaseStatus ClientCore::release_ended(const std::shared_ptr<LeaseState>& lease,
                                        const Ending& ending, Wait wait) noexcept {
  if (wait == Wait::kNo) {
    const BackendConfig& config = lease->backend->config();
    settler::begin(2 * (config.connect_timeout + config.command_timeout));
    const auto report = [lease, ending](ReleaseOutcome outcome) {
      lease->core->report_release(lease, outcome, ending.keep_for, ending.held_ms);
      settler::end();
    };
    const auto done = [report](ReleaseOutcome outcome) {
      settler::report(!is_loss_or_unknown(outcome), [report, outcome] { report(outcome); });
    };
    if (lease->backend->release_later(lease->key, lease->owner, ending.keep_for, done)) {
      return ReleaseStatus::kReleased;
    }
    settler::end();
  }
  return report_release(lease, lease->backend->release(lease->key, lease->owner, ending.keep_for),
                        ending.keep_for, ending.held_ms);
}

std::optional<ClientCore::Ending> ClientCore::end_here(const std::shared_ptr<LeaseState>& lease,
                                                       bool keep_min_hold) noexcept {
  {
    std::lock_guard lock(holds_mutex_);
    if (lease->holds.fetch_sub(1) > 1) return std::nullopt;
    auto it = holds_.find(HoldKey{lease->thread, lease->settings.backend, lease->key.str()});
    if (it != holds_.end() && it->second.lock() == lease) holds_.erase(it);
    lease->mark_released();
  }
  const auto now = Clock::now();
  lease->series->hold_time.record(now - lease->acquired_at);
  const auto keep_until = later(lease->acquired_at, lease->settings.min_hold);
  return Ending{keep_min_hold && keep_until > now ? std::chrono::ceil<Millis>(keep_until - now)
                                                  : Millis{0},
                std::chrono::duration_cast<Millis>(now - lease->acquired_at).count()};
}

ReleaseStatus ClientCore::report_release(const std::shared_ptr<LeaseState>& lease,
                                         ReleaseOutcome outcome, Millis keep_for,
                                         long long held_ms) noexcept {
  if (lease->lost()) {
    bump(metrics_->release_failures);
    return ReleaseStatus::kLost;
  }
  switch (outcome) {
    case ReleaseOutcome::kReleased:
      bump(metrics_->releases);
      bump(lease->series->releases);
      if (log_enabled(LogLevel::kDebug)) {
        log(LogLevel::kDebug, "event=released name={} key={} token={} held_ms={}",
            name_field(lease->name), printable(lease->key.str()), lease->token, held_ms);
      }
      return ReleaseStatus::kReleased;
    case ReleaseOutcome::kKept:
      bump(metrics_->releases);
      bump(lease->series->releases);
      bump(metrics_->min_hold_kept);
      log(LogLevel::kInfo, "event=min_hold_kept name={} key={} token={} held_ms={} kept_ms={}",
          name_field(lease->name), printable(lease->key.str()), lease->token, held_ms,
          keep_for.count());
      return ReleaseStatus::kKeptForMinHold;
    case ReleaseOutcome::kGone:
      lease->mark_lost(LossReason::kGone, "the key was gone at release");
      bump(metrics_->release_failures);
      return ReleaseStatus::kLost;
    case ReleaseOutcome::kTaken:
      lease->mark_lost(LossReason::kTaken, "another owner held the key at release");
      bump(metrics_->release_failures);
      return ReleaseStatus::kLost;
    case ReleaseOutcome::kUnavailable:
      log(LogLevel::kWarn,
          "event=release_unavailable name={} key={} token={} held_ms={} backend={} "
          "detail=\"the key expires with its lease\"",
          name_field(lease->name), printable(lease->key.str()), lease->token, held_ms,
          field(lease->settings.backend));
      return ReleaseStatus::kUnavailable;
  }
  return ReleaseStatus::kUnavailable;
}

}  // namespace dlock::internal
