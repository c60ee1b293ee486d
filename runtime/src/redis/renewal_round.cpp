#include "redis/renewal_round.hpp"

#include <algorithm>

#include "redis/lock_scripts.hpp"

namespace dlock::internal {
namespace {

// A renewal round waits at least this long, even for a lease cut short by max_hold.
constexpr Millis kShortestRound{50};
// A renewal round ends this long before the first validity among its items, for the
// outcome to reach the watchdog.
constexpr Millis kOutcomeMargin{25};

}  // namespace

Millis ShortestLease::note(const std::vector<RenewItem>& items, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  forget_if_stale(now);
  for (const auto& item : items) add(item.ttl, now);
  return known_ ? shortest_ : Millis{0};
}

void ShortestLease::granted(Millis lease, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  forget_if_stale(now);
  add(lease, now);
}

void ShortestLease::forget_if_stale(Clock::time_point now) {
  if (known_ && now - seen_ > shortest_) known_ = false;  // not renewed within its length
}

void ShortestLease::add(Millis ttl, Clock::time_point now) {
  if (!known_ || ttl <= shortest_) {
    shortest_ = ttl;
    seen_ = now;
    known_ = true;
  }
}

RoundEnd RoundEnd::of(const std::vector<RenewItem>& items, Millis shortest, Millis command_timeout,
                      Clock::time_point now) {
  // An item with less than the shortest round left cannot be helped by cutting the round
  // shorter still, and does not cut it for the others: every server gets that long.
  RoundEnd end{now, Clock::time_point::max()};
  for (const auto& item : items) {
    if (item.valid_until == Clock::time_point::max()) continue;
    const auto until = item.valid_until - kOutcomeMargin;
    if (until >= now + kShortestRound) end.latest = std::min(end.latest, until);
  }
  end.deadline =
      std::min(end.latest, now + std::clamp<Clock::duration>(
                                     shortest / 3, kShortestRound,
                                     std::max<Clock::duration>(kShortestRound, command_timeout)));
  return end;
}

Clock::time_point RoundEnd::takes_until() const {
  return std::min(deadline, latest - kShortestRound);
}

Clock::time_point RoundEnd::after_takes() const {
  return std::max(Clock::now() + kShortestRound, std::min(latest, deadline));
}

void ask_servers(std::vector<FanOutRequest>& requests,
                 const std::vector<ConnectionPool::Handle>& handles,
                 const std::vector<std::size_t>& which, Clock::time_point deadline) {
  if (which.empty()) return;
  std::vector<FanOutRequest> asked;
  asked.reserve(which.size());
  for (std::size_t m : which) {
    asked.push_back(std::move(requests[m]));
    asked.back().conn = handles[m] ? &*handles[m] : nullptr;
  }
  fan_out(asked, deadline);
  for (std::size_t k = 0; k < which.size(); ++k) requests[which[k]] = std::move(asked[k]);
}

Heard settle_server(std::vector<RenewItem>& items, const std::vector<std::size_t>& on_server,
                    const std::vector<Reply>& replies, ConnectionPool& pool, bool unconnected,
                    std::vector<std::size_t>& unrouted) {
  const bool timed_out = std::any_of(replies.begin(), replies.end(), [](const Reply& reply) {
    return reply.status() == Reply::Status::kTimeout;
  });
  const bool silent = timed_out || (unconnected && pool.silent());
  const Heard heard = silent                                     ? Heard::kSilent
                      : !replies.empty() && replies.front().ok() ? Heard::kAnswered
                                                                 : Heard::kOther;
  if (heard == Heard::kSilent) pool.note_silence();
  if (heard == Heard::kAnswered) pool.note_answer();
  for (std::size_t k = 0; k < on_server.size(); ++k) {
    const bool answered =
        k < replies.size() && replies[k].ok() && replies[k].server_error() == ServerError::kNone;
    if (answered) {
      items[on_server[k]].outcome = renew_outcome_of(replies[k]);
    } else if (silent) {
      items[on_server[k]].outcome = RenewOutcome::kUnavailable;
    } else {
      unrouted.push_back(on_server[k]);  // moved, migrating or refused: one by one
    }
  }
  return heard;
}

}  // namespace dlock::internal
