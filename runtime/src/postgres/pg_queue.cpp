// A key's queue on PostgreSQL (pg_queue_sql.hpp): shared holds, fair locks, permits, and every
// request that waits. One statement puts the request in the queue and answers the queue as
// it is then; where the request stands there is queue_standing.hpp's rule, the same as on
// ZooKeeper and etcd, with the key's own holder (kAcquire's) counted first.
#include <fmt/format.h>

#include "postgres/pg_backend.hpp"
#include "postgres/pg_rows.hpp"
#include "queue_standing.hpp"

namespace dlock::internal {
namespace {

using Status = PgResult::Status;

}  // namespace

// Asked on every release and renewal: a process that locks only through the rows' own
// holders never takes the mutex for it.
bool PgBackend::queued(std::string_view owner) {
  if (queued_count_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard lock(queued_mutex_);
  return queued_.find(owner) != queued_.end();
}

void PgBackend::forget(std::string_view owner) {
  std::lock_guard lock(queued_mutex_);
  if (const auto it = queued_.find(owner); it != queued_.end()) queued_.erase(it);
  queued_count_.store(queued_.size(), std::memory_order_release);
}

GrantReply PgBackend::acquire_queued(const GrantRequest& request) {
  bool first = false;  // no earlier try of this owner has an entry
  {
    // Before it is sent: a release after a lost answer must look in the queue.
    std::lock_guard lock(queued_mutex_);
    first = queued_.emplace(request.owner).second;
    queued_count_.store(queued_.size(), std::memory_order_release);
  }
  const auto until = std::min(request.give_up_at, deadline());
  const int permits = request.kind == LockKind::kPermit ? request.permits : 0;
  bool resync = false;
  const Build build = [&](PgConnection& conn) {
    Params params = grant_params(conn, request, resync, until);
    params.push_back(number_text(kind_code(request.kind)));
    params.push_back(number_text(permits));
    params.push_back(request.fair ? "true" : "false");
    return params;
  };
  GrantReply reply;
  PgResult result;
  for (;;) {
    result = call(PgStatement::kQueueAcquire, build, until);
    if (result.status != Status::kOk) {
      reply.error = result.error;
      reply.outcome_unknown = result.status == Status::kUnknown;
      // Refused: nothing was applied. An earlier try's entry, if any, must still be left.
      if (!reply.outcome_unknown && first) forget(request.owner);
      return reply;
    }
    if (result.rows() > 0) break;
    // Nothing written: late by the connection's estimate of the server's clock. Read the
    // clock again and ask once more; late again, an earlier attempt's entry may be there.
    if (!resync && Clock::now() < request.give_up_at) {
      resync = true;
      continue;
    }
    release_queued(request.key, request.owner, Millis{0}, true);
    reply.error = "the database answered after the command timeout; nothing was taken";
    return reply;
  }
  return standing_in(request, queue_of(result));
}

// What the queue `answer` means for `request`: granted, busy (a try leaves the queue, a waiter
// keeps its place), or refused (it leaves the queue).
GrantReply PgBackend::standing_in(const GrantRequest& request, const QueueAnswer& answer) {
  std::vector<Queued> kinds;
  std::vector<Millis> left;
  if (answer.held) {  // the key's own holder comes first
    kinds.push_back(Queued{LockKind::kExclusive, 0});
    left.push_back(answer.held_for);
  }
  std::size_t place = 0;
  const QueueRow* mine = nullptr;
  for (const QueueRow& entry : answer.entries) {
    if (entry.owner == request.owner) {
      place = kinds.size();
      mine = &entry;
    }
    kinds.push_back(entry.kind);
    left.push_back(entry.left);
  }
  GrantReply reply;
  if (mine == nullptr) {
    reply.error = "the database answered a queue without the request's entry";
    return reply;
  }
  // Not refused once it waits: the entry came before, unrefused.
  const Standing standing = standing_of(kinds, place, mine->tries > 0 && request.waiting);
  switch (standing.is) {
    case Standing::Is::kHolder:
      reply.kind = GrantReply::Kind::kAcquired;
      reply.token = mine->token;
      return reply;  // its expiry is the lease from this statement on: ttl 0 says so
    case Standing::Is::kRefused:
      reply.kind = GrantReply::Kind::kRefused;
      reply.error = held_as(kinds.front());
      reply.outcome_unknown = !left_queue(request);
      return reply;
    case Standing::Is::kWaiter:
      break;
  }
  reply.kind = GrantReply::Kind::kBusy;
  // A permit waits for any entry before it: the first's time left stands for them.
  reply.ttl = left[standing.blocker < place ? standing.blocker : 0];
  // A try leaves no place behind; a waiter keeps its place until its next try.
  if (!request.waiting) reply.outcome_unknown = !left_queue(request);
  return reply;
}

// Takes the request's entry out of the queue again; false when that may have failed (the
// core then cleans up after the request: its entry could still hold the key once it came
// first).
bool PgBackend::left_queue(const GrantRequest& request) {
  const ReleaseOutcome outcome = release_queued(request.key, request.owner, Millis{0}, true);
  return outcome == ReleaseOutcome::kReleased || outcome == ReleaseOutcome::kGone;
}

ReleaseOutcome PgBackend::release_queued(const Key& key, std::string_view owner, Millis keep_for,
                                         bool wait) noexcept {
  try {
    const auto until = deadline();
    PgResult result = call(PgStatement::kQueueRelease, release_params(key, owner, keep_for),
                           until, PgPool::Lane::kShared, wait);
    // Refused (a lock or statement timeout): nothing was applied. Once more.
    if (result.status == Status::kRefused && wait) {
      result = call(PgStatement::kQueueRelease, release_params(key, owner, keep_for), until);
    }
    if (result.status != Status::kOk) return ReleaseOutcome::kUnavailable;
    forget(owner);
    return release_outcome_of(result);  // no row: gone
  } catch (...) {
    return ReleaseOutcome::kUnavailable;
  }
}

}  // namespace dlock::internal
