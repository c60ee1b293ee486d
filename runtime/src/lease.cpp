#include <algorithm>

#include "client_core.hpp"
#include "lease_state.hpp"
#include "log.hpp"

namespace dlock {

const char* to_string(AcquireStatus status) noexcept {
  switch (status) {
    case AcquireStatus::kAcquired: return "acquired";
    case AcquireStatus::kBusy: return "busy";
    case AcquireStatus::kUnavailable: return "unavailable";
    case AcquireStatus::kRefused: return "refused";
  }
  return "unknown";
}

const char* to_string(ReleaseStatus status) noexcept {
  switch (status) {
    case ReleaseStatus::kReleased: return "released";
    case ReleaseStatus::kKeptForMinHold: return "kept for min_hold";
    case ReleaseStatus::kStillHeld: return "still held";
    case ReleaseStatus::kLost: return "lost";
    case ReleaseStatus::kUnavailable: return "unavailable";
    case ReleaseStatus::kNotHeld: return "not held";
  }
  return "unknown";
}

const char* to_string(LossReason reason) noexcept {
  switch (reason) {
    case LossReason::kNone: return "none";
    case LossReason::kTaken: return "taken by another owner";
    case LossReason::kGone: return "key gone";
    case LossReason::kExpired: return "expired without renewal";
    case LossReason::kMaxHold: return "max_hold reached";
  }
  return "unknown";
}

namespace internal {
namespace {

// One word per reason, for event lines.
std::string_view event_reason(LossReason reason) noexcept {
  switch (reason) {
    case LossReason::kNone: return "none";
    case LossReason::kTaken: return "taken";
    case LossReason::kGone: return "gone";
    case LossReason::kExpired: return "expired";
    case LossReason::kMaxHold: return "max_hold";
  }
  return "unknown";
}

}  // namespace

std::uint64_t this_thread_token() noexcept {
  static std::atomic<std::uint64_t> next{1};
  thread_local const std::uint64_t token = next.fetch_add(1);
  return token;
}

LeaseState::LeaseState(std::shared_ptr<ClientCore> core_in, std::shared_ptr<Backend> backend_in,
                       Key key_in, std::string name_in, std::string owner_in,
                       std::uint64_t token_in, LockSettings settings_in,
                       Clock::time_point acquired_at_in, std::shared_ptr<NameMetrics> series_in)
    : core(std::move(core_in)),
      backend(std::move(backend_in)),
      key(std::move(key_in)),
      name(std::move(name_in)),
      owner(std::move(owner_in)),
      token(token_in),
      settings(std::move(settings_in)),
      acquired_at(acquired_at_in),
      thread(this_thread_token()),
      series(std::move(series_in)),
      valid_until_(
          later(acquired_at, std::min(settings.lease, settings.max_hold.value_or(settings.lease)))
              .time_since_epoch()
              .count()) {}

Clock::time_point LeaseState::valid_until() const noexcept {
  return Clock::time_point(Clock::duration(valid_until_.load()));
}

void LeaseState::extend_validity(Clock::time_point until) noexcept {
  valid_until_.store(until.time_since_epoch().count());
}

Clock::time_point LeaseState::hold_deadline() const noexcept {
  return settings.max_hold ? later(acquired_at, *settings.max_hold) : Clock::time_point::max();
}

void LeaseState::mark_lost(LossReason reason, std::string_view detail) noexcept {
  LossReason expected = LossReason::kNone;
  if (!loss_.compare_exchange_strong(expected, reason)) return;
  // A lease of several keys is lost through one of its parts, which counted and logged it.
  if (parts.empty()) {
    bump(core->metrics().losses);
    bump(series->losses);
    // Reaching max_hold is the configured outcome, so a warning; any other loss is an error.
    log(reason == LossReason::kMaxHold ? LogLevel::kWarn : LogLevel::kError,
        "event=lost name={} key={} token={} reason={} held_ms={} detail={}", name_field(name),
        printable(key.str()), token, event_reason(reason),
        std::chrono::duration_cast<Millis>(Clock::now() - acquired_at).count(), field(detail));
  }
  std::vector<std::function<void(const LeaseView&)>> callbacks;
  {
    std::lock_guard lock(callbacks_mutex_);
    callbacks.swap(on_lost_);
  }
  const LeaseView view(shared_from_this());
  for (auto& callback : callbacks) {
    try {
      callback(view);
    } catch (...) {
      log(LogLevel::kError, "event=on_lost_threw name={} key={} token={}", name_field(name),
          printable(key.str()), token);
    }
  }
}

void LeaseState::add_on_lost(std::function<void(const LeaseView&)> callback) {
  {
    std::lock_guard lock(callbacks_mutex_);
    if (!lost()) {
      on_lost_.push_back(std::move(callback));
      return;
    }
  }
  callback(LeaseView(shared_from_this()));
}

}  // namespace internal

namespace {
const Key kNoKey;
const std::string kNoName;
}  // namespace

const Key& LeaseView::key() const { return state_ ? state_->key : kNoKey; }
std::uint64_t LeaseView::token() const { return state_ ? state_->token : 0; }

std::vector<Key> LeaseView::keys() const {
  if (!state_) return {};
  if (state_->parts.empty()) return {state_->key};
  std::vector<Key> out;
  for (std::size_t i = 0; i < state_->keys_written(); ++i) out.push_back(state_->part_written(i)->key);
  return out;
}

std::uint64_t LeaseView::token(std::size_t index) const {
  if (!state_) return 0;
  if (state_->parts.empty()) return index == 0 ? state_->token : 0;
  const internal::LeaseState* part = state_->part_written(index);
  return part != nullptr ? part->token : 0;
}

std::vector<std::uint64_t> LeaseView::tokens() const {
  if (!state_) return {};
  if (state_->parts.empty()) return {state_->token};
  std::vector<std::uint64_t> out;
  for (std::size_t i = 0; i < state_->keys_written(); ++i) {
    out.push_back(state_->part_written(i)->token);
  }
  return out;
}

LockMode LeaseView::mode() const {
  return state_ ? state_->settings.mode : LockMode::kExclusive;
}

int LeaseView::permits() const { return state_ ? state_->settings.permits : 0; }

std::chrono::milliseconds LeaseView::remaining() const {
  if (!state_ || state_->lost() || state_->released()) return Millis{0};
  if (!state_->parts.empty()) {
    auto least = std::chrono::milliseconds::max();
    for (const auto& part : state_->parts) least = std::min(least, LeaseView(part).remaining());
    return least;
  }
  const auto left = std::min(state_->valid_until(), state_->hold_deadline()) -
                    internal::Clock::now();
  return std::max(Millis{0}, std::chrono::floor<Millis>(left));
}

bool LeaseView::lost() const { return loss_reason() != LossReason::kNone; }

LossReason LeaseView::loss_reason() const {
  if (!state_) return LossReason::kNone;
  // A lease of several keys is lost when any of its keys is.
  for (const auto& part : state_->parts) {
    if (part->lost()) return part->loss_reason();
  }
  return state_->loss_reason();
}
int LeaseView::hold_count() const {
  if (!state_ || state_->released()) return 0;
  return state_->parts.empty() ? state_->holds.load() : state_->parts.front()->holds.load();
}
const std::string& LeaseView::name() const { return state_ ? state_->name : kNoName; }

void LeaseView::on_lost(std::function<void(const LeaseView&)> callback) const {
  if (!state_) return;
  if (state_->parts.empty()) {
    state_->add_on_lost(std::move(callback));
    return;
  }
  // Once, with a view of the whole lease, for the first of its keys to be lost.
  auto once = std::make_shared<std::atomic<bool>>(false);
  std::weak_ptr<internal::LeaseState> whole = state_;
  for (const auto& part : state_->parts) {
    part->add_on_lost([once, callback, whole](const LeaseView& lost) {
      if (once->exchange(true)) return;
      auto joined = whole.lock();
      callback(joined ? LeaseView(joined) : lost);
    });
  }
}

Lease::Lease(std::shared_ptr<internal::LeaseState> state, AcquireStatus status, std::string error)
    : state_(std::move(state)), status_(status), error_(std::move(error)) {}

// The runtime hands out leases without moving them (guaranteed copy elision), so every move
// is the user's, and may take the lease to another thread.
Lease::Lease(Lease&& other) noexcept
    : state_(std::move(other.state_)), status_(other.status_), error_(std::move(other.error_)) {
  if (state_) state_->mark_moved();
}

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    let_go();
    state_ = std::move(other.state_);
    status_ = other.status_;
    error_ = std::move(other.error_);
    if (state_) state_->mark_moved();
  }
  return *this;
}

Lease::~Lease() { let_go(); }

ReleaseStatus Lease::release() noexcept {
  if (!state_) return ReleaseStatus::kNotHeld;
  auto state = std::move(state_);
  if (state->thread == internal::this_thread_token()) internal::pop_current(state.get());
  return state->core->release(state, internal::ClientCore::Wait::kYes);
}

void Lease::let_go() noexcept {
  if (!state_) return;
  auto state = std::move(state_);
  if (state->thread == internal::this_thread_token()) internal::pop_current(state.get());
  state->core->release(state, internal::ClientCore::Wait::kNo);
}

Lease Lease::granted(std::shared_ptr<internal::LeaseState> state) {
  return Lease(std::move(state), AcquireStatus::kAcquired, {});
}

Lease Lease::refused(AcquireStatus status, std::string error) {
  return Lease(nullptr, status, std::move(error));
}

}  // namespace dlock
