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

#include <fmt/format.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "admin_backend.hpp"
#include "log.hpp"
#include "lua_scripts.hpp"
#include "redis/connection.hpp"
#include "redis/keys.hpp"
#include "redis/scripts.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal::admin {

inline constexpr long kAuditCap = 1000;
inline constexpr const char* kScanCount = "500";

inline const Script& force_release_script() {
  // Never destroyed, like the other scripts: background threads may use it during exit.
  static const Script* s = new Script{"force_release", lua::kForceReleaseLua, sha1_hex(lua::kForceReleaseLua)};
  return *s;
}

inline ScriptCall force_release_call(const LockKeys& keys) {
  return ScriptCall{&force_release_script(), {keys.lock}, {keys.channel}};
}

/// Escapes the glob characters of SCAN's MATCH.
inline std::string glob_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\' || c == '^' || c == '-') out += '\\';
    out += c;
  }
  return out;
}

/// MATCH pattern for every lock key (`kind` "lock") or run record (`kind` "run") of
/// `service`.
inline std::string scan_match(std::string_view service, std::string_view kind = "lock") {
  return "dlock:{" + glob_escape(escape_key_part(service)) + ":*}:" + std::string(kind);
}

inline std::string audit_key(std::string_view service) {
  return "dlock:{" + escape_key_part(service) + ":audit}";
}

/// The user key of a lock key (`kind` "lock") or run record (`kind` "run") of `service`,
/// or nothing if it is not one.
inline std::optional<std::string> user_key_of(std::string_view service, std::string_view redis_key,
                                              std::string_view kind = "lock") {
  const std::string prefix = "dlock:{" + escape_key_part(service) + ":";
  const std::string suffix = "}:" + std::string(kind);
  if (redis_key.size() < prefix.size() + suffix.size() || redis_key.substr(0, prefix.size()) != prefix ||
      redis_key.substr(redis_key.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  return unescape_key_part(redis_key.substr(prefix.size(), redis_key.size() - prefix.size() - suffix.size()));
}

inline std::string_view str_of(const redisReply* r) {
  return r != nullptr && r->str != nullptr ? std::string_view(r->str, r->len) : std::string_view{};
}

inline long long to_ll(std::string_view text) {
  return std::strtoll(std::string(text).c_str(), nullptr, 10);
}

/// Fills `info` from a flat field/value array starting at element `first`.
inline void apply_fields(LockInfo& info, const redisReply* array, std::size_t first) {
  if (array == nullptr || array->type != REDIS_REPLY_ARRAY) return;
  for (std::size_t i = first; i + 1 < array->elements; i += 2) {
    const std::string_view field = str_of(array->element[i]);
    const std::string_view value = str_of(array->element[i + 1]);
    if (field == "owner") info.owner = value;
    else if (field == "token") info.token = std::strtoull(std::string(value).c_str(), nullptr, 10);
    else if (field == "host") info.host = value;
    else if (field == "pid") info.pid = to_ll(value);
    else if (field == "thread") info.thread = to_ll(value);
    else if (field == "name") info.name = value;
    else if (field == "acquired_at_ms") info.acquired_at_ms = to_ll(value);
    else if (field == "lease_ms") info.lease = Millis{to_ll(value)};
    else if (field == "released") info.min_hold = value == "1";
  }
}

/// Sends `commands` as one pipeline, each preceded by ASKING when `asking`; one reply per
/// command. After a failed read the remaining replies carry that failure.
inline std::vector<Reply> pipeline(Connection& conn, const std::vector<std::vector<std::string_view>>& commands,
                                   bool asking = false) {
  for (const auto& command : commands) {
    if (asking) conn.append({"ASKING"});
    conn.append(command);
  }
  std::vector<Reply> replies;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (asking) {
      Reply ok = conn.read_reply();
      if (!ok.ok()) {
        while (replies.size() < commands.size()) replies.push_back(Reply::failed(ok.status(), ok.error()));
        return replies;
      }
    }
    Reply reply = conn.read_reply();
    if (!reply.ok()) {
      while (replies.size() < commands.size()) replies.push_back(Reply::failed(reply.status(), reply.error()));
      return replies;
    }
    replies.push_back(std::move(reply));
  }
  return replies;
}

/// SCAN with MATCH `match` to the end; appends every key found (there may be duplicates).
/// Returns the failing reply, or an ok one.
inline Reply scan_lock_keys(Connection& conn, const std::string& match, std::vector<std::string>& out) {
  std::string cursor = "0";
  do {
    Reply reply = conn.command({"SCAN", cursor, "MATCH", match, "COUNT", kScanCount});
    if (!reply.ok() || reply.is_error()) return reply;
    const redisReply* raw = reply.get();
    if (raw == nullptr || raw->type != REDIS_REPLY_ARRAY || raw->elements != 2 ||
        raw->element[1]->type != REDIS_REPLY_ARRAY) {
      return Reply::failed(Reply::Status::kBroken, "unexpected reply to SCAN");
    }
    cursor = std::string(str_of(raw->element[0]));
    const redisReply* keys = raw->element[1];
    for (std::size_t i = 0; i < keys->elements; ++i) out.emplace_back(str_of(keys->element[i]));
  } while (cursor != "0");
  return Reply::ok(nullptr);
}

/// scan_lock_keys, then sorted with each key once.
inline Reply scan_keys_sorted(Connection& conn, const std::string& match, std::vector<std::string>& out) {
  out.clear();
  Reply reply = scan_lock_keys(conn, match, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return reply;
}

/// HGETALL and PTTL of one lock key: sets `out` when the key exists. Returns the first
/// failing reply (which may be a redirect), or the HGETALL reply.
inline Reply read_lock(Connection& conn, const std::string& lock_key, const std::string& user_key,
                       std::optional<LockInfo>& out, bool asking = false) {
  out.reset();
  std::vector<Reply> replies = pipeline(conn, {{"HGETALL", lock_key}, {"PTTL", lock_key}}, asking);
  for (auto& reply : replies) {
    if (!reply.ok() || reply.is_error()) return std::move(reply);
  }
  const redisReply* fields = replies[0].get();
  if (fields == nullptr || fields->type != REDIS_REPLY_ARRAY || fields->elements == 0) return std::move(replies[0]);
  LockInfo info;
  info.key = user_key;
  apply_fields(info, fields, 0);
  const long long pttl = replies[1].is_integer() ? replies[1].integer() : 0;
  if (pttl == -2) return std::move(replies[0]);  // expired between the two commands
  info.ttl = Millis{pttl};
  out = std::move(info);
  return std::move(replies[0]);
}

/// What force_release.lua removed (nothing when there was no lock); `now_ms` the server
/// time. False when the reply is not one of the script's.
inline bool removed_of(const Reply& reply, const std::string& user_key, std::optional<LockInfo>& removed,
                       std::int64_t& now_ms) {
  removed.reset();
  const redisReply* raw = reply.get();
  if (!reply.ok() || reply.is_error() || raw == nullptr || raw->type != REDIS_REPLY_ARRAY || raw->elements < 2) {
    return false;
  }
  now_ms = to_ll(str_of(raw->element[0]));
  const long long pttl = raw->element[1]->type == REDIS_REPLY_INTEGER ? raw->element[1]->integer : -2;
  if (pttl == -2 || raw->elements < 3) return true;
  LockInfo info;
  info.key = user_key;
  info.ttl = Millis{pttl};
  apply_fields(info, raw, 2);
  removed = std::move(info);
  return true;
}

inline std::string audit_escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '%' || c < 0x20 || c == 0x7f) {
      out += fmt::format("%{:02X}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

inline std::string audit_unescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out += static_cast<char>(std::strtol(std::string(text.substr(i + 1, 2)).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

inline std::string encode_audit(const AuditEntry& e) {
  std::string out;
  auto field = [&](std::string_view name, std::string_view value) {
    out += name;
    out += '=';
    out += audit_escape(value);
    out += '\n';
  };
  field("id", e.id);
  field("at_ms", std::to_string(e.at_ms));
  field("user", e.user);
  field("host", e.host);
  field("pid", std::to_string(e.pid));
  field("note", e.note);
  field("key", e.key);
  field("owner", e.owner);
  field("token", std::to_string(e.token));
  field("owner_host", e.owner_host);
  field("owner_pid", std::to_string(e.owner_pid));
  field("owner_name", e.owner_name);
  return out;
}

inline std::optional<AuditEntry> decode_audit(std::string_view text) {
  AuditEntry e;
  bool any = false;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = line.substr(0, eq);
    const std::string value = audit_unescape(line.substr(eq + 1));
    any = true;
    if (name == "id") e.id = value;
    else if (name == "at_ms") e.at_ms = to_ll(value);
    else if (name == "user") e.user = value;
    else if (name == "host") e.host = value;
    else if (name == "pid") e.pid = to_ll(value);
    else if (name == "note") e.note = value;
    else if (name == "key") e.key = value;
    else if (name == "owner") e.owner = value;
    else if (name == "token") e.token = std::strtoull(value.c_str(), nullptr, 10);
    else if (name == "owner_host") e.owner_host = value;
    else if (name == "owner_pid") e.owner_pid = to_ll(value);
    else if (name == "owner_name") e.owner_name = value;
  }
  if (!any) return std::nullopt;
  return e;
}

/// The audit entry of a forced release: `who` plus when and what was removed.
inline AuditEntry complete_audit(const AuditEntry& who, const LockInfo& removed, std::int64_t now_ms) {
  AuditEntry e = who;
  e.at_ms = now_ms;
  e.key = removed.key;
  e.owner = removed.owner;
  e.token = removed.token;
  e.owner_host = removed.host;
  e.owner_pid = removed.pid;
  e.owner_name = removed.name;
  return e;
}

inline void log_forced(const std::string& backend, const AuditEntry& e) {
  log(LogLevel::kWarn,
      "forced release: backend={} key={} owner={} token={} holder={}:{} name={} by {}@{} pid {} note=\"{}\"",
      backend, printable(e.key), e.owner, e.token, e.owner_host, e.owner_pid, printable(e.owner_name),
      e.user, e.host, e.pid, printable(e.note));
}

/// LPUSH + LTRIM of one entry.
inline Reply push_audit(Connection& conn, const std::string& key, const AuditEntry& e, bool asking = false) {
  const std::string text = encode_audit(e);
  const std::string last = std::to_string(kAuditCap - 1);
  std::vector<Reply> replies = pipeline(conn, {{"LPUSH", key, text}, {"LTRIM", key, "0", last}}, asking);
  for (auto& reply : replies) {
    if (!reply.ok() || reply.is_error()) return std::move(reply);
  }
  return std::move(replies[0]);
}

/// LRANGE of the newest `limit` entries, appended to `out`.
inline Reply read_audit(Connection& conn, const std::string& key, std::size_t limit,
                        std::vector<AuditEntry>& out, bool asking = false) {
  if (limit == 0) return Reply::ok(nullptr);
  std::vector<Reply> replies =
      pipeline(conn, {{"LRANGE", key, "0", std::to_string(limit - 1)}}, asking);
  Reply& reply = replies[0];
  if (!reply.ok() || reply.is_error()) return std::move(reply);
  const redisReply* raw = reply.get();
  if (raw != nullptr && raw->type == REDIS_REPLY_ARRAY) {
    for (std::size_t i = 0; i < raw->elements; ++i) {
      if (auto e = decode_audit(str_of(raw->element[i]))) out.push_back(std::move(*e));
    }
  }
  return std::move(reply);
}

/// Throws BackendUnavailable for a failed reply (no reply, or an error reply).
inline void require(const Reply& reply, const std::string& backend, std::string_view what) {
  if (!reply.ok()) {
    throw BackendUnavailable(fmt::format("backend '{}': {}: {}", backend, what, reply.error()));
  }
  if (reply.is_error()) {
    throw BackendUnavailable(fmt::format("backend '{}': {}: {}", backend, what, reply.text()));
  }
}

}  // namespace dlock::internal::admin
