// What dlock's statements answer (pg_statements.cpp), read into dlock's types, and the
// text forms the statements take: bytes as hex, arrays as text[] literals.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "dlock/admin.hpp"
#include "postgres/pg_connection.hpp"

namespace dlock::internal {

/// Bytes as lower-case hex, and back (`unhex` reads what `encode(..., 'hex')` writes).
[[nodiscard]] std::string hex(std::string_view bytes);
[[nodiscard]] std::string unhex(std::string_view text);
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

/// The first 128 bits of the key's SHA-256, in hex: notification payloads have a size limit
/// and keys do not.
[[nodiscard]] std::string key_digest(std::string_view key);
/// Whether `service` can be PostgreSQL text: UTF-8 without NUL (libpq would cut the value
/// there, and two services would share their locks), at most 1024 bytes (a notification's
/// payload holds it).
[[nodiscard]] bool usable_service(std::string_view service);

}  // namespace dlock::internal
