#include "redis/backend_admin.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "log.hpp"
#include "lua_scripts.hpp"
#include "redis/reply.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal::admin {
namespace {

constexpr long kAuditCap = 1000;
constexpr const char* kScanCount = "500";

const Script& force_release_script() {
  // Never destroyed, like the other scripts: background threads may use it during exit.
  static const Script* s =
      new Script{"force_release", lua::kForceReleaseLua, sha1_hex(lua::kForceReleaseLua)};
  return *s;
}

/// Escapes the glob characters of SCAN's MATCH.
std::string glob_escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\' || c == '^' || c == '-')
      out += '\\';
    out += c;
  }
  return out;
}

constexpr FieldReader<LockInfo> kLockFields[] = {
    {"owner", [](LockInfo& l, std::string_view v) { l.owner = v; }},
    {"token", [](LockInfo& l, std::string_view v) { l.token = to_ull(v); }},
    {"host", [](LockInfo& l, std::string_view v) { l.host = v; }},
    {"pid", [](LockInfo& l, std::string_view v) { l.pid = to_ll(v); }},
    {"thread", [](LockInfo& l, std::string_view v) { l.thread = to_ll(v); }},
    {"name", [](LockInfo& l, std::string_view v) { l.name = v; }},
    {"acquired_at_ms", [](LockInfo& l, std::string_view v) { l.acquired_at_ms = to_ll(v); }},
    {"lease_ms", [](LockInfo& l, std::string_view v) { l.lease = Millis{to_ll(v)}; }},
    {"released", [](LockInfo& l, std::string_view v) { l.min_hold = v == "1"; }},
};

// The lines of an audit entry, `name=value` each (encode_audit).
constexpr FieldReader<AuditEntry> kAuditFields[] = {
    {"id", [](AuditEntry& e, std::string_view v) { e.id = v; }},
    {"at_ms", [](AuditEntry& e, std::string_view v) { e.at_ms = to_ll(v); }},
    {"user", [](AuditEntry& e, std::string_view v) { e.user = v; }},
    {"host", [](AuditEntry& e, std::string_view v) { e.host = v; }},
    {"pid", [](AuditEntry& e, std::string_view v) { e.pid = to_ll(v); }},
    {"note", [](AuditEntry& e, std::string_view v) { e.note = v; }},
    {"key", [](AuditEntry& e, std::string_view v) { e.key = v; }},
    {"owner", [](AuditEntry& e, std::string_view v) { e.owner = v; }},
    {"token", [](AuditEntry& e, std::string_view v) { e.token = to_ull(v); }},
    {"owner_host", [](AuditEntry& e, std::string_view v) { e.owner_host = v; }},
    {"owner_pid", [](AuditEntry& e, std::string_view v) { e.owner_pid = to_ll(v); }},
    {"owner_name", [](AuditEntry& e, std::string_view v) { e.owner_name = v; }},
};

std::string audit_escape(std::string_view text) {
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

std::string audit_unescape(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      out +=
          static_cast<char>(std::strtol(std::string(text.substr(i + 1, 2)).c_str(), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string encode_audit(const AuditEntry& e) {
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

std::optional<AuditEntry> decode_audit(std::string_view text) {
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
    read_field(kAuditFields, name, value, e);
  }
  if (!any) return std::nullopt;
  return e;
}

// "<token> <lease ms> <acquired ms> <host> <pid> <thread> <name>" (holders.lua).
HolderInfo holder_of(std::string_view owner, std::string_view record) {
  std::string_view parts[6];
  for (std::string_view& part : parts) {
    const std::size_t space = record.find(' ');
    part = record.substr(0, space);
    record = space == std::string_view::npos ? std::string_view{} : record.substr(space + 1);
  }
  HolderInfo holder;
  holder.owner = owner;
  holder.token = to_ull(parts[0]);
  holder.acquired_at_ms = to_ll(parts[2]);
  holder.host = parts[3];
  holder.pid = to_ll(parts[4]);
  holder.thread = to_ll(parts[5]);
  holder.name = record;
  return holder;
}

// A place in the hand-off queue: "<place ends, us> <lease ms> <owner> ..." (acquire.lua); its
// ttl is set once the server's time is known.
WaiterInfo handoff_waiter_of(std::string_view record) {
  WaiterInfo waiter;
  waiter.mode = "exclusive";
  const std::size_t first = record.find(' ');
  const std::size_t second = record.find(' ', first == std::string_view::npos ? first : first + 1);
  if (second != std::string_view::npos) {
    const std::string_view rest = record.substr(second + 1);
    waiter.owner = rest.substr(0, rest.find(' '));
  }
  waiter.ttl = Millis{to_ll(record.substr(0, first))};  // ends, us: made a ttl below
  return waiter;
}

std::string mode_of_place(std::string_view kind) {
  if (kind == "S") return "shared";
  if (kind == "P") return "permits";
  return "exclusive";
}

// The holders' ends and the fair queue of the lock at `lock_key`, read with the server's time:
// the holders' ttls, and the waiters after those of the hand-off queue already in `info`.
Reply read_holders_and_queue(Connection& conn, const std::string& lock_key, LockInfo& info,
                             bool asking) {
  const std::string base = lock_key.substr(0, lock_key.size() - std::string_view("lock").size());
  const std::string holders = base + "holders", queue = base + "queue", places = base + "places";
  std::vector<Reply> replies = pipeline(conn,
                                        {{"TIME"},
                                         {"ZRANGE", holders, "0", "-1", "WITHSCORES"},
                                         {"ZRANGE", queue, "0", "-1"},
                                         {"HGETALL", places}},
                                        asking);
  for (Reply& reply : replies) {
    if (!answered(reply)) return std::move(reply);
  }
  const ReplyView time(replies[0]);
  const long long now_us = to_ll(time[0].text()) * 1000000 + to_ll(time[1].text());
  const auto left = [now_us](long long ends_us) {
    return Millis{std::max(0LL, (ends_us - now_us + 999) / 1000)};
  };
  for (WaiterInfo& waiter : info.queue) waiter.ttl = left(waiter.ttl.count());
  const ReplyView ends(replies[1]);
  for (std::size_t i = 0; i + 1 < ends.size(); i += 2) {
    for (HolderInfo& holder : info.holders) {
      if (holder.owner == ends[i].text()) holder.ttl = left(to_ll(ends[i + 1].text()));
    }
  }
  const ReplyView order(replies[2]), place(replies[3]);
  for (std::size_t i = 0; i < order.size(); ++i) {
    WaiterInfo waiter;
    waiter.owner = order[i].text();
    waiter.fair = true;
    for (std::size_t j = 0; j + 1 < place.size(); j += 2) {
      if (place[j].text() != waiter.owner) continue;
      const std::string_view record = place[j + 1].text();
      const std::size_t space = record.find(' ');
      waiter.ttl = left(to_ll(record.substr(0, space)));
      if (space != std::string_view::npos) waiter.mode = mode_of_place(record.substr(space + 1));
    }
    info.queue.push_back(std::move(waiter));
  }
  // The hash's ttl stays the lock's: the last hold's end.
  const Millis ttl = info.ttl;
  if (info.mode != "exclusive") describe_by_first_holder(info);
  info.ttl = ttl;
  return Reply::ok(nullptr);
}

}  // namespace

ScriptCall force_release_call(const LockKeys& keys) {
  return ScriptCall{&force_release_script(), {keys.lock, keys.holders}, {keys.channel}};
}

std::string scan_match(std::string_view service, std::string_view kind) {
  // Both layouts of lock_keys(): "...:<key>}:<kind>" and, with a hash tag, "...:<tag>}:<key>:<kind>".
  return "dlock:{" + glob_escape(escape_key_part(service)) + ":*:" + std::string(kind);
}

std::string audit_key(std::string_view service) {
  return "dlock:{" + escape_key_part(service) + ":audit}";
}

std::optional<std::string> user_key_of(std::string_view service, std::string_view redis_key,
                                       std::string_view kind) {
  // "dlock:{<service>:<key>}:<kind>", or "dlock:{<service>:<tag>}:<key>:<kind>" for a key
  // with a hash tag of its own (keys.hpp); escaped parts hold no '}' and no ':'.
  const std::string prefix = "dlock:{" + escape_key_part(service) + ":";
  const std::string suffix = ":" + std::string(kind);
  if (redis_key.size() < prefix.size() + suffix.size() ||
      redis_key.substr(0, prefix.size()) != prefix ||
      redis_key.substr(redis_key.size() - suffix.size()) != suffix) {
    return std::nullopt;
  }
  const std::string_view rest =
      redis_key.substr(prefix.size(), redis_key.size() - prefix.size() - suffix.size());
  const auto close = rest.find('}');
  if (close == std::string_view::npos) return std::nullopt;
  if (close + 1 == rest.size()) {
    auto key = unescape_key_part(rest.substr(0, close));
    if (!key || hash_tag_of(*key)) return std::nullopt;
    return key;
  }
  if (rest.substr(close + 1, 1) != ":") return std::nullopt;
  auto key = unescape_key_part(rest.substr(close + 2));
  const auto tag = unescape_key_part(rest.substr(0, close));
  if (!key || !tag || hash_tag_of(*key) != std::optional<std::string_view>(*tag)) {
    return std::nullopt;
  }
  return key;
}

Reply scan_lock_keys(Connection& conn, const std::string& match, std::vector<std::string>& out) {
  std::string cursor = "0";
  do {
    Reply reply = conn.command({"SCAN", cursor, "MATCH", match, "COUNT", kScanCount});
    if (!answered(reply)) return reply;
    const ReplyView page(reply);
    if (page.size() != 2 || !page[1].is_array()) {
      return Reply::failed(Reply::Status::kBroken, "unexpected reply to SCAN");
    }
    cursor = std::string(page[0].text());
    for (std::size_t i = 0; i < page[1].size(); ++i) out.emplace_back(page[1][i].text());
  } while (cursor != "0");
  return Reply::ok(nullptr);
}

Reply scan_keys_sorted(Connection& conn, const std::string& match, std::vector<std::string>& out) {
  out.clear();
  Reply reply = scan_lock_keys(conn, match, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return reply;
}

namespace {

// What the lock hash's fields, from `hash[from]` on, say beyond kLockFields: the holders of a
// lock held shared or as a semaphore (and which were released, kept for min_hold), its
// permits, and the waiters of its hand-off queue.
void describe_hash(const ReplyView& hash, std::size_t from, LockInfo& info) {
  std::vector<std::string_view> released;
  for (std::size_t i = from; i + 1 < hash.size(); i += 2) {
    const std::string_view field = hash[i].text();
    const std::string_view value = hash[i + 1].text();
    if (field == "permits") info.permits = static_cast<int>(to_ll(value));
    if (field.substr(0, 2) == "h:") info.holders.push_back(holder_of(field.substr(2), value));
    if (field.substr(0, 2) == "r:") released.push_back(field.substr(2));
    if (field.substr(0, 2) == "q:") info.queue.push_back(handoff_waiter_of(value));
  }
  if (info.owner == "*shared" || info.owner == "*permits") {
    info.mode = info.owner == "*shared" ? "shared" : "permits";
    for (HolderInfo& holder : info.holders) {
      holder.min_hold =
          std::find(released.begin(), released.end(), holder.owner) != released.end();
    }
  }
}

}  // namespace

Reply read_lock(Connection& conn, const std::string& lock_key, const std::string& user_key,
                std::optional<LockInfo>& out, bool asking) {
  Reply reply = read_record(conn, lock_key, user_key, kLockFields, out, asking);
  if (!out) return reply;
  LockInfo& info = *out;
  describe_hash(ReplyView(reply), 0, info);
  Reply extra = read_holders_and_queue(conn, lock_key, info, asking);
  return answered(extra) ? std::move(reply) : std::move(extra);
}

bool removed_of(const Reply& reply, const std::string& user_key, std::optional<LockInfo>& removed,
                std::int64_t& now_ms) {
  removed.reset();
  const ReplyView raw(reply);
  if (!answered(reply) || raw.size() < 2) return false;
  now_ms = to_ll(raw[0].text());
  const long long pttl = raw[1].integer().value_or(-2);
  if (pttl == -2 || raw.size() < 3) return true;
  LockInfo info;
  info.key = user_key;
  info.ttl = Millis{pttl};
  read_fields(kLockFields, raw, 2, info);
  describe_hash(raw, 2, info);
  if (info.mode != "exclusive") {  // named by its first holder
    describe_by_first_holder(info);
    info.ttl = Millis{pttl};
  }
  removed = std::move(info);
  return true;
}

AuditEntry complete_audit(const AuditEntry& who, const LockInfo& removed, std::int64_t now_ms) {
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

void log_forced(const std::string& backend, const AuditEntry& e) {
  log(LogLevel::kWarn,
      "forced release: backend={} key={} owner={} token={} holder={}:{} name={} by {}@{} pid {} "
      "note=\"{}\"",
      backend, printable(e.key), e.owner, e.token, e.owner_host, e.owner_pid,
      printable(e.owner_name), e.user, e.host, e.pid, printable(e.note));
}

Reply push_audit(Connection& conn, const std::string& key, const AuditEntry& e, bool asking) {
  const std::string text = encode_audit(e);
  const std::string last = std::to_string(kAuditCap - 1);
  std::vector<Reply> replies =
      pipeline(conn, {{"LPUSH", key, text}, {"LTRIM", key, "0", last}}, asking);
  for (auto& reply : replies) {
    if (!answered(reply)) return std::move(reply);
  }
  return std::move(replies[0]);
}

Reply read_audit(Connection& conn, const std::string& key, std::size_t limit,
                 std::vector<AuditEntry>& out, bool asking) {
  if (limit == 0) return Reply::ok(nullptr);
  std::vector<Reply> replies =
      pipeline(conn, {{"LRANGE", key, "0", std::to_string(limit - 1)}}, asking);
  Reply& reply = replies[0];
  if (!answered(reply)) return std::move(reply);
  const ReplyView entries(reply);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (auto e = decode_audit(entries[i].text())) out.push_back(std::move(*e));
  }
  return std::move(reply);
}

}  // namespace dlock::internal::admin
