#include "redis/run_records.hpp"

#include <hiredis/hiredis.h>

#include "lua_scripts.hpp"
#include "redis/backend_admin.hpp"
#include "redis/keys.hpp"
#include "redis/sha1.hpp"

namespace dlock::internal::runs {
namespace {

// Never destroyed, like the other scripts: background threads may use them during exit.
const Script& claim_script() {
  static const Script* s = new Script{"claim_run", lua::kClaimRunLua, sha1_hex(lua::kClaimRunLua)};
  return *s;
}

const Script& finish_script() {
  static const Script* s = new Script{"finish_run", lua::kFinishRunLua, sha1_hex(lua::kFinishRunLua)};
  return *s;
}

// Fills `record` from a flat field/value array starting at element `first`.
void apply_fields(RunRecord& record, const redisReply* array, std::size_t first) {
  using admin::str_of;
  using admin::to_ll;
  for (std::size_t i = first; i + 1 < array->elements; i += 2) {
    const std::string_view field = str_of(array->element[i]);
    const std::string_view value = str_of(array->element[i + 1]);
    if (field == "owner") record.owner = value;
    else if (field == "token") record.token = std::strtoull(std::string(value).c_str(), nullptr, 10);
    else if (field == "name") record.name = value;
    else if (field == "label") record.label = value;
    else if (field == "host") record.host = value;
    else if (field == "pid") record.pid = to_ll(value);
    else if (field == "started_at_ms") record.started_at_ms = to_ll(value);
    else if (field == "finished_at_ms") record.finished_at_ms = to_ll(value);
    else if (field == "outcome") record.outcome = value;
    else if (field == "pttl") record.ttl = Millis{to_ll(value)};
  }
}

}  // namespace

std::string run_key(std::string_view service, std::string_view key) {
  std::string lock = lock_keys(service, key).lock;
  lock.replace(lock.size() - 4, 4, "run");  // "...}:lock" -> "...}:run"
  return lock;
}

ScriptCall claim_call(const std::string& lock_key, const std::string& run_key, const RunRecord& mine,
                      Millis keep) {
  return ScriptCall{&claim_script(),
                    {lock_key, run_key},
                    {mine.owner, std::to_string(std::max<long long>(1, keep.count())), mine.label, mine.host,
                     std::to_string(mine.pid), std::to_string(mine.token)}};
}

ScriptCall finish_call(const std::string& run_key, std::string_view owner, std::string_view outcome) {
  return ScriptCall{&finish_script(), {run_key}, {std::string(owner), std::string(outcome)}};
}

std::optional<RunClaimReply> claim_of(const Reply& reply, const RunRecord& mine) {
  const redisReply* raw = reply.get();
  if (!reply.ok() || reply.is_error() || raw == nullptr || raw->type != REDIS_REPLY_ARRAY || raw->elements == 0 ||
      raw->element[0]->type != REDIS_REPLY_INTEGER) {
    return std::nullopt;
  }
  RunClaimReply out;
  switch (raw->element[0]->integer) {
    case 1: {
      if (raw->elements != 3) return std::nullopt;
      out.status = ClaimStatus::kClaimed;
      out.record = mine;
      out.record.started_at_ms = admin::to_ll(admin::str_of(raw->element[1]));
      out.record.name = admin::str_of(raw->element[2]);
      out.record.outcome = "running";
      return out;
    }
    case 0:
      out.status = ClaimStatus::kAlreadyRan;
      out.record.key = mine.key;
      apply_fields(out.record, raw, 1);
      return out;
    case -1:
      out.status = ClaimStatus::kNotHeld;
      return out;
    default:
      return std::nullopt;
  }
}

bool finished_of(const Reply& reply) { return reply.ok() && reply.is_integer() && reply.integer() > 0; }

Reply read_run(Connection& conn, const std::string& run_key, const std::string& user_key,
               std::optional<RunRecord>& out, bool asking) {
  out.reset();
  std::vector<Reply> replies = admin::pipeline(conn, {{"HGETALL", run_key}, {"PTTL", run_key}}, asking);
  for (auto& reply : replies) {
    if (!reply.ok() || reply.is_error()) return std::move(reply);
  }
  const redisReply* fields = replies[0].get();
  if (fields == nullptr || fields->type != REDIS_REPLY_ARRAY || fields->elements == 0) return std::move(replies[0]);
  const long long pttl = replies[1].is_integer() ? replies[1].integer() : 0;
  if (pttl == -2) return std::move(replies[0]);  // dropped between the two commands
  RunRecord record;
  record.key = user_key;
  apply_fields(record, fields, 0);
  record.ttl = Millis{pttl};
  out = std::move(record);
  return std::move(replies[0]);
}

Reply read_time_ms(Connection& conn, std::int64_t& out_ms, bool asking) {
  std::vector<Reply> replies = admin::pipeline(conn, {{"TIME"}}, asking);
  Reply& reply = replies[0];
  if (!reply.ok() || reply.is_error()) return std::move(reply);
  const std::optional<std::int64_t> us = server_time_us_of(reply);
  if (!us) return Reply::failed(Reply::Status::kBroken, "unexpected reply to TIME");
  out_ms = *us / 1000;
  return std::move(reply);
}

}  // namespace dlock::internal::runs
