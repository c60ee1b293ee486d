#include "redis/redlock_quorum.hpp"

#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "dlock/errors.hpp"
#include "log.hpp"
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

struct RedlockQuorum::Instance {
  Instance(const Endpoint& endpoint, const BackendConfig& config) : pool(endpoint, config) {}
  ConnectionPool pool;
  std::atomic<Clock::rep> skip_until{0};
};

RedlockQuorum::RedlockQuorum(BackendConfig config)
    : config_(std::move(config)), quorum_(config_.endpoints.size() / 2 + 1) {
  for (const auto& endpoint : config_.endpoints) {
    instances_.push_back(std::make_unique<Instance>(endpoint, config_));
  }
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

RedlockQuorum::Round RedlockQuorum::borrow() {
  Round round;
  round.handles.resize(size());
  round.requests.resize(size());
  std::vector<std::size_t> missing;
  const auto now = Clock::now();
  for (std::size_t i = 0; i < size(); ++i) {
    round.handles[i] = instances_[i]->pool.take_idle();
    if (!round.handles[i] && now.time_since_epoch().count() >= instances_[i]->skip_until.load()) {
      missing.push_back(i);
    }
  }
  auto open = [&](std::size_t i) {
    std::string error;
    round.handles[i] = instances_[i]->pool.take(Clock::now() + config_.command_timeout, error);
    if (!round.handles[i]) {
      instances_[i]->skip_until = (Clock::now() + kReconnectPause).time_since_epoch().count();
      log(LogLevel::kDebug, "redlock: {}", error);
    }
  };
  if (missing.size() == 1) {
    open(missing[0]);
  } else if (!missing.empty()) {
    std::vector<std::thread> openers;
    for (std::size_t i : missing) openers.emplace_back(open, i);
    for (auto& t : openers) t.join();
  }
  return round;
}

void RedlockQuorum::send(Round& round, Clock::time_point deadline) {
  fan_out(round.requests, deadline);
  for (std::size_t i = 0; i < size(); ++i) {
    auto& handle = round.handles[i];
    auto& request = round.requests[i];
    const bool stale = handle && handle.reused() && !request.replies.empty() &&
                       request.replies[0].status() == Reply::Status::kBroken;
    if (!stale || Clock::now() >= deadline) continue;
    instances_[i]->pool.clear();
    handle = ConnectionPool::Handle();
    std::string error;
    handle = instances_[i]->pool.take(deadline, error);
    std::vector<FanOutRequest> retry(1);
    retry[0].calls = request.calls;
    retry[0].conn = handle ? &*handle : nullptr;
    fan_out(retry, deadline);
    request.conn = retry[0].conn;
    request.replies = std::move(retry[0].replies);
  }
}

OwnerVerdict RedlockQuorum::verdict(const OwnerTally& tally) const noexcept {
  const std::size_t unknown = size() - tally.ours - tally.gone - tally.taken;
  if (tally.ours >= quorum_) return OwnerVerdict::kOurs;
  if (tally.ours + unknown >= quorum_) return OwnerVerdict::kUnknown;
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
