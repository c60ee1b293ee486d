// What dlock's statements answer (pg_statements.cpp), read into dlock's types, and the
// text forms the statements take: bytes as hex, arrays as text[] literals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "bytes.hpp"
#include "dlock/admin.hpp"
#include "postgres/pg_connection.hpp"
#include "queue_standing.hpp"

namespace dlock::internal {

/// A number as a statement's parameter.
[[nodiscard]] inline std::string number_text(std::int64_t value) { return std::to_string(value); }

/// A lock kind as the queue's entries store it (`k`), and back.
[[nodiscard]] int kind_code(LockKind kind);
[[nodiscard]] LockKind lock_kind(std::int64_t code);

/// A text[] literal: every element quoted, `"` and `\` escaped.
[[nodiscard]] std::string array_of(const std::vector<std::string>& items);

/// A row of the lock, run or audit columns (kLockColumns, kRunColumns, kHistory).
[[nodiscard]] LockInfo lock_info(const PgResult& result, int row);
[[nodiscard]] RunRecord run_record(const PgResult& result, int row, int first);
[[nodiscard]] AuditEntry audit_entry(const PgResult& result, int row);

/// kInspect's or kList's rows: one lock per key, its holders (the row's own, or its queue's
/// by queue_standing.hpp's rule) and its queue.
[[nodiscard]] std::vector<LockInfo> locks_of(const PgResult& result);

/// One entry of a key's queue as kQueueAcquire answers it.
struct QueueRow {
  std::string owner;
  Queued kind;
  std::uint64_t token = 0;
  std::int64_t tries = 0;  ///< tries after the one that queued it
  Millis left{0};
};
/// kQueueAcquire's answer: whether the row's own holder holds the key (then `held_for` is
/// its time left), and the queue in order.
struct QueueAnswer {
  bool held = false;
  Millis held_for{0};
  std::vector<QueueRow> entries;
};
[[nodiscard]] QueueAnswer queue_of(const PgResult& result);

/// kAcquire's answer: kAcquired with its row, kBusy without one (not granted, and not
/// known why until kBusy is asked), kUnavailable when it failed.
[[nodiscard]] GrantReply grant_of(const PgResult& result);

/// What kBusy found.
struct BusyAnswer {
  bool known = false;  ///< false: the statement failed
  bool late = false;   ///< the request arrived after its caller gave up
  std::uint64_t last_token = 0;
  Millis ttl{0};       ///< the holder's time left; 0: the key is free
  int first_permits = 0;  ///< the permits of the key's first queued entry (0: a lock)
};
[[nodiscard]] BusyAnswer busy_of(const PgResult& result);

/// kRelease's answer: kReleased or kKept; kGone when nothing was released (kReleaseMissed
/// then tells gone from taken); kUnavailable when it failed.
[[nodiscard]] ReleaseOutcome release_outcome_of(const PgResult& result);
/// kReleaseMissed's answer: kTaken, or kGone (also when it failed: the lease is lost either
/// way).
[[nodiscard]] ReleaseOutcome missed_outcome_of(const PgResult& result);

/// Whether `service` can be PostgreSQL text: UTF-8 without NUL (libpq would cut the value
/// there, and two services would share their locks), at most 1024 bytes (a notification's
/// payload holds it).
[[nodiscard]] bool usable_service(std::string_view service);

}  // namespace dlock::internal
