// Where releases that nobody waits for are finished. A guarded call sends its release and
// goes on (Backend::release_later); its reply is read by whoever uses that connection next,
// and this process-wide thread makes sure it is read even when nobody does:
//
//   - Watched: a connection pool with replies owed on idle connections. Every kGrace the
//     settler reads the replies owed for longer than kGrace (so a thread that releases and
//     acquires in a loop finds its connection free and reads its own release's reply).
//   - Posted: work that must not run on the thread that happened to read a reply: a release
//     sent again after an unexpected answer, and loss reports (which call on_lost).
//
// It also counts releases still in flight, so that dlock::shutdown() and process exit can
// wait for them (flush()).
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "steady.hpp"

namespace dlock::internal {

/// Something with replies owed on idle connections (a connection pool).
class Settleable {
 public:
  virtual ~Settleable() = default;
  /// Reads the replies owed on idle connections since before `owed_before`, each up to its
  /// command timeout. Returns whether any reply is still owed (on loan or recent).
  virtual bool settle_idle(Clock::time_point owed_before) = 0;
};

namespace settler {

/// How long a reply may wait for the connection's next user before the settler reads it.
inline constexpr std::chrono::milliseconds kGrace{2};

/// Runs `job` on the settler's thread, after the jobs posted before it. Jobs must not throw
/// (what they throw is logged) and must be bounded.
void post(std::function<void()> job);
/// Runs `report` (what a release sent without waiting came to) here when `quiet`, else
/// posts it: a loss calls on_lost, on the settler's thread rather than on whichever caller
/// read the reply.
void report(bool quiet, std::function<void()> report);
/// Has `pool` settled every kGrace until it owes nothing.
void watch(std::weak_ptr<Settleable> pool);

/// A release was sent without waiting (begin) or its outcome is known (end). `bound` is how
/// long it can take at most, which flush() waits for.
void begin(Clock::duration bound);
void end() noexcept;
/// Waits until no release is in flight, for at most the longest bound given to begin().
/// Returns whether none is left.
bool flush();

}  // namespace settler
}  // namespace dlock::internal
