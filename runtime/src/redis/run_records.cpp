#include "redis/run_records.hpp"

#include "lua_scripts.hpp"
#include "redis/keys.hpp"
#include "redis/reply.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal::runs {
namespace {

// Never destroyed, like the other scripts: background threads may use them during exit.
const Script& claim_script() {
  static const Script* s = new Script{"claim_run", lua::kClaimRunLua, sha1_hex(lua::kClaimRunLua)};
  return *s;
}

const Script& finish_script() {
  static const Script* s =
      new Script{"finish_run", lua::kFinishRunLua, sha1_hex(lua::kFinishRunLua)};
  return *s;
}

// The fields of a run record hash (claim_run.lua), and its time left as `pttl`.
constexpr FieldReader<RunRecord> kRunFields[] = {
    {"owner", [](RunRecord& r, std::string_view v) { r.owner = v; }},
    {"token", [](RunRecord& r, std::string_view v) { r.token = to_ull(v); }},
    {"name", [](RunRecord& r, std::string_view v) { r.name = v; }},
    {"label", [](RunRecord& r, std::string_view v) { r.label = v; }},
    {"host", [](RunRecord& r, std::string_view v) { r.host = v; }},
    {"pid", [](RunRecord& r, std::string_view v) { r.pid = to_ll(v); }},
    {"started_at_ms", [](RunRecord& r, std::string_view v) { r.started_at_ms = to_ll(v); }},
    {"finished_at_ms", [](RunRecord& r, std::string_view v) { r.finished_at_ms = to_ll(v); }},
    {"outcome", [](RunRecord& r, std::string_view v) { r.outcome = v; }},
    {"pttl", [](RunRecord& r, std::string_view v) { r.ttl = Millis{to_ll(v)}; }},
};

}  // namespace

std::string run_key(std::string_view service, std::string_view key) {
  std::string lock = lock_keys(service, key).lock;
  lock.replace(lock.size() - 4, 4, "run");  // "...}:lock" -> "...}:run"
  return lock;
}

ScriptCall claim_call(const std::string& lock_key, const std::string& run_key,
                      const RunRecord& mine, Millis keep) {
  return ScriptCall{&claim_script(),
                    {lock_key, run_key},
                    {mine.owner, std::to_string(std::max<long long>(1, keep.count())), mine.label,
                     mine.host, std::to_string(mine.pid), std::to_string(mine.token)}};
}

ScriptCall finish_call(const std::string& run_key, std::string_view owner,
                       std::string_view outcome) {
  return ScriptCall{&finish_script(), {run_key}, {std::string(owner), std::string(outcome)}};
}

std::optional<RunClaimReply> claim_of(const Reply& reply, const RunRecord& mine) {
  const ReplyView raw(reply);
  const std::optional<long long> code = raw[0].integer();
  if (!answered(reply) || !code) return std::nullopt;
  RunClaimReply out;
  switch (*code) {
    case 1: {
      if (raw.size() != 3) return std::nullopt;
      out.status = ClaimStatus::kClaimed;
      out.record = mine;
      out.record.started_at_ms = to_ll(raw[1].text());
      out.record.name = raw[2].text();
      out.record.outcome = "running";
      return out;
    }
    case 0:
      out.status = ClaimStatus::kAlreadyRan;
      out.record.key = mine.key;
      read_fields(kRunFields, raw, 1, out.record);
      return out;
    case -1:
      out.status = ClaimStatus::kNotHeld;
      return out;
    default:
      return std::nullopt;
  }
}

bool finished_of(const Reply& reply) {
  return reply.ok() && reply.is_integer() && reply.integer() > 0;
}

Reply read_run(Connection& conn, const std::string& run_key, const std::string& user_key,
               std::optional<RunRecord>& out, bool asking) {
  return read_record(conn, run_key, user_key, kRunFields, out, asking);
}

Reply read_time_ms(Connection& conn, std::int64_t& out_ms, bool asking) {
  std::vector<Reply> replies = pipeline(conn, {{"TIME"}}, asking);
  Reply& reply = replies[0];
  if (!answered(reply)) return std::move(reply);
  const std::optional<std::int64_t> us = server_time_us_of(reply);
  if (!us) return Reply::failed(Reply::Status::kBroken, "unexpected reply to TIME");
  out_ms = *us / 1000;
  return std::move(reply);
}

}  // namespace dlock::internal::runs
