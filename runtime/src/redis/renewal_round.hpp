// The parts of a renewal round that asks several servers at once (a cluster's masters, each
// on its renewal connection): how long the round may wait, sending the pipelines of the
// servers whose connections are in hand, and reading each server's replies into outcomes.
//
//   const RoundEnd end = RoundEnd::of(items, shortest.note(items, now), command_timeout, now);
//   ask_servers(requests, handles, in_hand, end.deadline);
//   ... take the connections still opening, until end.takes_until() ...
//   ask_servers(requests, handles, opening, end.after_takes());
//   const Heard heard =
//       settle_server(items, on_server, requests[m].replies, pool, !handles[m], unrouted);
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "backend.hpp"
#include "redis/fan_out.hpp"
#include "redis/pool.hpp"

namespace dlock::internal {

/// The shortest lease renewed within its own length: while it is held, it is renewed again
/// within a third of it, so a round that waits no longer than that never makes it late.
class ShortestLease {
 public:
  /// The shortest of the leases in `items` and those noted within their own length.
  Millis note(const std::vector<RenewItem>& items, Clock::time_point now);
  /// A lease granted now: rounds before its first renewal are bounded by it too.
  void granted(Millis lease, Clock::time_point now);

 private:
  void forget_if_stale(Clock::time_point now);
  void add(Millis ttl, Clock::time_point now);

  std::mutex mutex_;
  bool known_ = false;
  Millis shortest_{0};
  Clock::time_point seen_{};
};

/// When a renewal round stops waiting. Every server gets at least 50 ms to answer.
struct RoundEnd {
  /// For replies: a third of the shortest lease (at least 50 ms, at most a command
  /// timeout), and no later than `latest`.
  Clock::time_point deadline;
  /// Shortly before the first validity among the round's items (those with 50 ms or more
  /// left). A lease whose renewal a healthy server applied at once would otherwise be
  /// declared lost while the round still waits for a stopped one.
  Clock::time_point latest;

  static RoundEnd of(const std::vector<RenewItem>& items, Millis shortest, Millis command_timeout,
                     Clock::time_point now);
  /// Until when connections still being opened are waited for: early enough that their
  /// servers' replies still get 50 ms before `latest`.
  [[nodiscard]] Clock::time_point takes_until() const;
  /// For the replies on connections taken after the first ones were asked: a window of
  /// their own, so that a server whose open took the round's time is not judged silent
  /// without having been asked; past `latest` only as far as 50 ms from now.
  [[nodiscard]] Clock::time_point after_takes() const;
};

/// fan_out() for the requests numbered in `which`, each on its handle's connection (an
/// empty handle: not sent, every reply kNotSent).
void ask_servers(std::vector<FanOutRequest>& requests,
                 const std::vector<ConnectionPool::Handle>& handles,
                 const std::vector<std::size_t>& which, Clock::time_point deadline);

/// What a server did in a round, as settle_server() read it.
enum class Heard {
  kSilent,    ///< no answer in time, or still being reconnected after that
  kAnswered,  ///< its first reply came back
  kOther,     ///< refused, reset, or nothing asked
};

/// The outcomes of one server's items (`on_server`, indexes into `items`) from its replies,
/// noted on its pool. A server that did not answer in time (stopped, blackholed), or is
/// still being reconnected after that, fails all its items at once: one by one would cost a
/// timeout each. Items of other failures (refused, reset, moved) go to `unrouted`, to be
/// followed one by one.
Heard settle_server(std::vector<RenewItem>& items, const std::vector<std::size_t>& on_server,
                    const std::vector<Reply>& replies, ConnectionPool& pool, bool unconnected,
                    std::vector<std::size_t>& unrouted);

}  // namespace dlock::internal
