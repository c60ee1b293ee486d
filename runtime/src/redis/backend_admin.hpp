// The admin operations of the Redis backends (dlock::Admin, dlockctl), as pieces every
// topology combines: which keys a SCAN looks at, how a lock hash reads back, the forced
// release script (runtime/lua/force_release.lua) and the audit list.
//
//   std::vector<std::string> found;
//   Reply r = scan_lock_keys(conn, scan_match(service), found);
//   for (auto& k : found) if (auto key = user_key_of(service, k)) ... read_lock(conn, k, ...)
//
// Audit entries live in a capped list `dlock:{<service>:audit}` (one key, so one cluster
// slot), newest first, each entry `name=value` lines with control bytes and '%' as %XX.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_backend.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"
#include "redis/scripts.hpp"

namespace dlock::internal::admin {

/// force_release.lua on the lock of `keys`.
[[nodiscard]] ScriptCall force_release_call(const LockKeys& keys);

/// MATCH pattern for every lock key (`kind` "lock") or run record (`kind` "run") of
/// `service`.
[[nodiscard]] std::string scan_match(std::string_view service, std::string_view kind = "lock");
[[nodiscard]] std::string audit_key(std::string_view service);
/// The user key of a lock key (`kind` "lock") or run record (`kind` "run") of `service`,
/// or nothing if it is not one.
[[nodiscard]] std::optional<std::string> user_key_of(std::string_view service,
                                                     std::string_view redis_key,
                                                     std::string_view kind = "lock");

/// SCAN with MATCH `match` to the end; appends every key found (there may be duplicates).
/// Returns the failing reply, or an ok one.
Reply scan_lock_keys(Connection& conn, const std::string& match, std::vector<std::string>& out);
/// scan_lock_keys, then sorted with each key once.
Reply scan_keys_sorted(Connection& conn, const std::string& match, std::vector<std::string>& out);

/// HGETALL and PTTL of one lock key: sets `out` when the key exists. Returns the first
/// failing reply (which may be a redirect), or the HGETALL reply.
Reply read_lock(Connection& conn, const std::string& lock_key, const std::string& user_key,
                std::optional<LockInfo>& out, bool asking = false);
/// What force_release.lua removed (nothing when there was no lock); `now_ms` the server
/// time. False when the reply is not one of the script's.
bool removed_of(const Reply& reply, const std::string& user_key, std::optional<LockInfo>& removed,
                std::int64_t& now_ms);

/// The audit entry of a forced release: `who` plus when and what was removed.
[[nodiscard]] AuditEntry complete_audit(const AuditEntry& who, const LockInfo& removed,
                                        std::int64_t now_ms);
/// Logs a forced release at warn level.
void log_forced(const std::string& backend, const AuditEntry& e);
/// LPUSH + LTRIM of one entry.
Reply push_audit(Connection& conn, const std::string& key, const AuditEntry& e,
                 bool asking = false);
/// LRANGE of the newest `limit` entries, appended to `out`.
Reply read_audit(Connection& conn, const std::string& key, std::size_t limit,
                 std::vector<AuditEntry>& out, bool asking = false);

}  // namespace dlock::internal::admin
