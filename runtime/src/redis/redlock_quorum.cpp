#include "redis/redlock_quorum.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "dlock/errors.hpp"
#include "log.hpp"
#include "redis/crc16.hpp"
#include "redis/reply.hpp"

namespace dlock::internal {
namespace {

// After a failed connect an instance is skipped (counted as failed at once) for this long,
// so that a dead instance does not cost every call a connect timeout.
constexpr Millis kReconnectPause{100};

const Reply& no_connection() {
  static const Reply* reply = new Reply(Reply::failed(Reply::Status::kNotSent, "no connection"));
  return *reply;
}

}  // namespace

// Connections opened for one borrow(), handed over by the background openers while the
// borrower still waits; after that an opened connection goes to the pool as an idle one.
struct RedlockQuorum::Delivery {
  std::mutex mutex;
  std::condition_variable arrived;
  std::vector<ConnectionPool::Handle> handles;
  std::size_t pending = 0;   // openers not yet done
  std::size_t required = 0;  // of those, instances not known to fail: always waited for
  std::size_t opened = 0;    // connections handed over
  ConnectionPool::Lane lane = ConnectionPool::Lane::kShared;
  bool closed = false;       // the borrower stopped waiting
};

struct RedlockQuorum::Instance {
  Instance(const Endpoint& endpoint, const BackendConfig& config) : pool(endpoint, config) {}
  ~Instance() {
    std::lock_guard lock(openers_mutex);
    for (auto& opener : openers) opener.thread.join();  // bounded by the open's timeouts
  }
  ConnectionPool pool;
  std::atomic<Clock::rep> skip_until{0};
  // The last open or call failed (refused, timed out): not waited for until an open works,
  // and opened by one thread at a time.
  std::atomic<bool> failing{false};

  struct Opener {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex openers_mutex;
  std::list<Opener> openers;  // running or finished, not yet joined

  // Joins the finished openers; returns how many still run. Under openers_mutex.
  std::size_t reap() {
    for (auto it = openers.begin(); it != openers.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = openers.erase(it);
      } else {
        ++it;
      }
    }
    return openers.size();
  }
};

RedlockQuorum::RedlockQuorum(BackendConfig config)
    : config_(std::move(config)), quorum_(config_.endpoints.size() / 2 + 1) {
  for (const auto& endpoint : config_.endpoints) {
    instances_.push_back(std::make_unique<Instance>(endpoint, config_));
    by_address_.push_back(by_address_.size());
  }
  std::sort(by_address_.begin(), by_address_.end(), [&](std::size_t a, std::size_t b) {
    return to_string(endpoint(a)) < to_string(endpoint(b));
  });
}

RedlockQuorum::~RedlockQuorum() = default;

void RedlockQuorum::Round::ask(std::size_t i, const ScriptCall* call) {
  if (!handles[i]) return;
  requests[i].conn = &*handles[i];
  requests[i].calls.push_back(call);
}

bool RedlockQuorum::Round::usable(std::size_t i) const {
  return handles[i] && !handles[i]->broken();
}

const Reply& RedlockQuorum::Round::reply(std::size_t i, std::size_t k) const {
  return k < requests[i].replies.size() ? requests[i].replies[k] : no_connection();
}

std::size_t RedlockQuorum::quorum_for(int permits) const noexcept {
  if (permits <= 1) return quorum_;
  const auto p = static_cast<std::size_t>(permits);
  return std::min(size(), p * size() / (p + 1) + 1);
}

std::size_t RedlockQuorum::order_instance(std::string_view lock_key) const noexcept {
  return by_address_[static_cast<std::size_t>(key_slot(lock_key)) % by_address_.size()];
}

RedlockQuorum::Round RedlockQuorum::borrow(Clock::duration wait, Clock::duration open_wait,
                                           ConnectionPool::Lane lane, std::size_t needed) {
  if (needed == 0) needed = quorum_;
  Round round;
  round.lane = lane;
  round.handles.resize(size());
  round.requests.resize(size());
  const auto now = Clock::now();
  auto delivery = std::make_shared<Delivery>();
  delivery->handles.resize(size());
  delivery->lane = lane;
  std::vector<bool> opened(size(), false);
  std::size_t in_hand = 0;
  for (std::size_t i = 0; i < size(); ++i) {
    round.handles[i] = instances_[i]->pool.take_idle(lane);
    // A renewal round takes an idle shared connection while its own is not there.
    if (!round.handles[i] && lane == ConnectionPool::Lane::kRenewal) {
      round.handles[i] = instances_[i]->pool.take_idle();
    }
    if (round.handles[i]) ++in_hand;
    if (round.handles[i] || now.time_since_epoch().count() < instances_[i]->skip_until.load())
      continue;
    const bool failing = instances_[i]->failing.load();
    {
      std::lock_guard lock(delivery->mutex);
      ++delivery->pending;
      delivery->required += failing ? 0 : 1;
    }
    if (start_open(i, delivery, !failing)) {
      opened[i] = true;
    } else {  // an open is under way already (for another round): not waited for
      std::lock_guard lock(delivery->mutex);
      --delivery->pending;
      delivery->required -= failing ? 0 : 1;
    }
  }
  // Instances not known to fail are waited for up to `open_wait` (a reconnect of a healthy
  // one takes a few round trips, more on a loaded host); failing ones only up to `wait`, and
  // not at all once a quorum of connections is in hand.
  const auto short_deadline = now + wait;
  const auto long_deadline = now + std::max(wait, open_wait);
  std::unique_lock lock(delivery->mutex);
  for (;;) {
    if (delivery->pending == 0) break;
    const bool optional_only = delivery->required == 0;
    if (optional_only && in_hand + delivery->opened >= needed) break;
    const auto at = Clock::now();
    if (at >= long_deadline || (optional_only && at >= short_deadline)) break;
    delivery->arrived.wait_until(
        lock, optional_only ? std::min(short_deadline, long_deadline) : long_deadline);
  }
  delivery->closed = true;
  for (std::size_t i = 0; i < size(); ++i) {
    if (opened[i]) round.handles[i] = std::move(delivery->handles[i]);
  }
  return round;
}

bool RedlockQuorum::start_open(std::size_t i, std::shared_ptr<Delivery> delivery, bool required) {
  Instance& instance = *instances_[i];
  std::lock_guard lock(instance.openers_mutex);
  // A healthy instance gets an open per round that needs one (as many rounds as run at once
  // need connections); a failing one a single open at a time, whoever asks.
  if (instance.reap() > 0 && !required) return false;
  auto done = std::make_shared<std::atomic<bool>>(false);
  try {
    instance.openers.push_back(Instance::Opener{
        std::thread([this, &instance, i, required, done, delivery = std::move(delivery)] {
          open_in_background(instance, i, *delivery, required);
          *done = true;
        }),
        done});
  } catch (const std::system_error& e) {  // no thread to be had: not opened this round
    log(LogLevel::kWarn, "redlock: cannot start a thread to connect to {}: {}",
        to_string(endpoint(i)), e.what());
    return false;
  }
  return true;
}

void RedlockQuorum::open_in_background(Instance& instance, std::size_t i, Delivery& delivery,
                                       bool required) {
  std::string error;
  ConnectionPool::Handle handle =
      instance.pool.take(Clock::now() + config_.command_timeout, error, delivery.lane);
  if (handle) {
    instance.failing = false;
  } else {
    instance.failing = true;
    instance.skip_until = (Clock::now() + kReconnectPause).time_since_epoch().count();
    log(LogLevel::kDebug, "redlock: {}", error);
  }
  std::lock_guard lock(delivery.mutex);
  if (delivery.closed) return;  // the handle goes back to the pool, idle
  delivery.opened += handle ? 1 : 0;
  delivery.handles[i] = std::move(handle);
  --delivery.pending;
  delivery.required -= required ? 1 : 0;
  delivery.arrived.notify_all();
}

void RedlockQuorum::send(Round& round, Clock::time_point deadline, const FanOutEnough& enough) {
  fan_out(round.requests, deadline, enough);
  for (std::size_t i = 0; i < size(); ++i) {
    auto& handle = round.handles[i];
    auto& request = round.requests[i];
    if (!request.replies.empty() && request.replies[0].status() == Reply::Status::kTimeout &&
        Clock::now() >= deadline) {
      instances_[i]->failing = true;  // silent for the whole round (not cut off at quorum)
    }
    const bool stale = handle && handle.reused() && !request.replies.empty() &&
                       request.replies[0].status() == Reply::Status::kBroken;
    if (!stale || Clock::now() >= deadline) continue;
    instances_[i]->pool.clear();
    handle = ConnectionPool::Handle();
    std::string error;
    handle = instances_[i]->pool.take(deadline, error, round.lane);
    std::vector<FanOutRequest> retry(1);
    retry[0].calls = request.calls;
    retry[0].conn = handle ? &*handle : nullptr;
    fan_out(retry, deadline);
    request.conn = retry[0].conn;
    request.replies = std::move(retry[0].replies);
  }
}

OwnerVerdict RedlockQuorum::verdict(const OwnerTally& tally, std::size_t needed) const noexcept {
  if (needed == 0) needed = quorum_;
  const std::size_t unknown = size() - tally.ours - tally.gone - tally.taken;
  if (tally.ours >= needed) return OwnerVerdict::kOurs;
  if (tally.ours + unknown >= needed) return OwnerVerdict::kUnknown;
  return tally.taken > 0 ? OwnerVerdict::kTaken : OwnerVerdict::kGone;
}

Reply RedlockQuorum::run_on(std::size_t i, const std::function<Reply(Connection&)>& call) const {
  return instances_[i]->pool.run(call);
}

bool RedlockQuorum::note(const Reply& reply, std::size_t i, std::string& first_error) const {
  const bool ok = answered(reply);
  if (!ok && first_error.empty()) {
    first_error = fmt::format("{}: {}", to_string(endpoint(i)), describe(reply));
  }
  return ok;
}

void RedlockQuorum::require(std::size_t answered, std::size_t needed,
                            const std::string& first_error, std::string_view what) const {
  if (answered >= needed) return;
  if (answered == 0 && needed == 1) {
    throw BackendUnavailable(
        fmt::format("backend '{}': {}: no instance answered: {}", config_.name, what, first_error));
  }
  throw BackendUnavailable(
      fmt::format("backend '{}': {}: only {} of {} instances answered; a quorum is {} ({})",
                  config_.name, what, answered, size(), quorum_, first_error));
}

}  // namespace dlock::internal
