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

namespace dlock::internal {

/// A text[] literal: every element quoted, `"` and `\` escaped.
[[nodiscard]] std::string array_of(const std::vector<std::string>& items);

/// A row of the lock, run or audit columns (kLockColumns, kRunColumns, kHistory).
[[nodiscard]] LockInfo lock_info(const PgResult& result, int row);
[[nodiscard]] RunRecord run_record(const PgResult& result, int row, int first);
[[nodiscard]] AuditEntry audit_entry(const PgResult& result, int row);

/// The answers of kAcquire and kRelease.
[[nodiscard]] GrantReply grant_of(const PgResult& result);
[[nodiscard]] ReleaseOutcome release_outcome_of(const PgResult& result);
/// kAcquire answered that it arrived after its caller gave up.
[[nodiscard]] bool arrived_late(const PgResult& result);

/// Whether `service` can be PostgreSQL text: UTF-8 without NUL (libpq would cut the value
/// there, and two services would share their locks), at most 1024 bytes (a notification's
/// payload holds it).
[[nodiscard]] bool usable_service(std::string_view service);

}  // namespace dlock::internal
