#include "redis/lock_scripts.hpp"

#include <algorithm>

#include "owner.hpp"
#include "redis/reply.hpp"

namespace dlock::internal {
namespace {

std::string millis_text(Millis d) { return std::to_string(d.count()); }

const std::string& fence_lifetime_text() {
  static const std::string* text = new std::string(millis_text(kFenceLifetime));  // outlives exit
  return *text;
}

}  // namespace

ScriptCall acquire_call(const LockKeys& keys, const GrantRequest& request, Millis key_ttl,
                        std::int64_t not_after_us) {
  ScriptCall call{&acquire_script(),
                  {keys.lock, keys.fence, keys.holders, keys.queue, keys.places},
                  {std::string(request.owner), millis_text(key_ttl), std::to_string(not_after_us),
                   host_name(), std::to_string(process_id()), std::to_string(thread_id()),
                   std::string(request.name), fence_lifetime_text(),
                   millis_text(request.place)}};
  const char* fair = request.fair ? "1" : "0";
  if (request.kind == LockKind::kExclusive) {
    call.args.push_back(millis_text(request.claim));
    call.args.emplace_back(fair);
  } else {
    call.script = &acquire_shared_script();
    call.args.emplace_back(request.kind == LockKind::kShared ? "S" : "P");
    call.args.push_back(std::to_string(request.permits));
    call.args.emplace_back(fair);
    call.args.push_back(millis_text(request.claim));
  }
  return call;
}

ScriptCall acquire_together_call(const std::vector<LockKeys>& keys, const GrantRequest& request,
                                 Millis key_ttl, std::int64_t not_after_us) {
  ScriptCall call{&acquire_together_script(),
                  {},
                  {std::string(request.owner), millis_text(key_ttl), std::to_string(not_after_us),
                   host_name(), std::to_string(process_id()), std::to_string(thread_id()),
                   std::string(request.name), fence_lifetime_text()}};
  call.keys.reserve(5 * keys.size());
  for (const LockKeys& one : keys) {
    for (const std::string* key : {&one.lock, &one.fence, &one.holders, &one.queue, &one.places}) {
      call.keys.push_back(*key);
    }
  }
  return call;
}

GrantReply together_grant_of(const Reply& reply, std::size_t count) {
  GrantReply out = grant_of(reply);  // errors, busy and too late read as for one key
  const ReplyView raw(reply);
  if (out.kind == GrantReply::Kind::kAcquired) {
    out.ttl = Millis{static_cast<long long>(out.token)};  // {1, ttl, tokens...}
    out.token = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::optional<long long> token = raw[2 + i].integer();
      if (!token || *token <= 0) {
        out = GrantReply{};
        out.error = "unexpected reply to acquire_together";
        return out;
      }
      out.tokens.push_back(static_cast<std::uint64_t>(*token));
    }
    out.token = out.tokens.front();
  } else if (out.kind == GrantReply::Kind::kRefused) {
    const std::optional<long long> i = raw[1].integer();  // {-2, i}
    out.busy_index = static_cast<std::size_t>(std::max<long long>(1, i.value_or(1)) - 1);
  } else if (out.kind == GrantReply::Kind::kBusy) {
    // {0, i, ttl, last}: grant_of read i as the ttl.
    const std::optional<long long> ttl = raw[2].integer(), last = raw[3].integer();
    out.busy_index = static_cast<std::size_t>(std::max<long long>(1, out.ttl.count()) - 1);
    out.ttl = Millis{std::max(0LL, ttl.value_or(0))};
    out.last_token = last && *last > 0 ? static_cast<std::uint64_t>(*last) : 0;
  }
  return out;
}

ScriptCall renew_call(const LockKeys& keys, std::string_view owner, Millis ttl,
                      std::uint64_t token_floor) {
  return ScriptCall{&renew_script(),
                    {keys.lock, keys.fence, keys.holders},
                    {std::string(owner), millis_text(ttl), std::to_string(token_floor),
                     fence_lifetime_text()}};
}

ScriptCall release_call(const LockKeys& keys, std::string_view owner, Millis keep_for,
                        std::uint64_t token_floor, std::string_view flags) {
  return ScriptCall{&release_script(),
                    {keys.lock, keys.fence, keys.holders, keys.queue, keys.places},
                    {std::string(owner), millis_text(keep_for), keys.channel,
                     std::to_string(token_floor), fence_lifetime_text(), std::string(flags)}};
}

namespace {

// Sets acquire_call()'s argument `exclusive` of acquire.lua, or `shared` of
// acquire_shared.lua (0-based), to `value`.
void set_arg(ScriptCall& acquire, std::size_t exclusive, std::size_t shared, const char* value) {
  const std::size_t at = acquire.script == &acquire_script() ? exclusive : shared;
  if (at < acquire.args.size()) acquire.args[at] = value;
}

// acquire.lua's ARGV[11], acquire_shared.lua's ARGV[12].
void set_fair_arg(ScriptCall& acquire, const char* value) { set_arg(acquire, 10, 11, value); }

}  // namespace

void without_fair_order(ScriptCall& acquire) {
  set_fair_arg(acquire, "0");
  set_arg(acquire, 9, 12, "0");  // the claim: acquire.lua's ARGV[10], acquire_shared.lua's ARGV[13]
}

void keeping_fair_place(ScriptCall& acquire) { set_fair_arg(acquire, "K"); }

void restoring(ScriptCall& acquire) { set_fair_arg(acquire, "R"); }

ScriptCall release_together_call(const std::vector<LockKeys>& keys,
                                 const std::vector<ReleaseItem>& items) {
  ScriptCall call{&release_together_script(), {}, {fence_lifetime_text()}};
  call.keys.reserve(5 * keys.size());
  call.args.reserve(1 + 3 * keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const LockKeys& one = keys[i];
    for (const std::string* key : {&one.lock, &one.fence, &one.holders, &one.queue, &one.places}) {
      call.keys.push_back(*key);
    }
    call.args.push_back(items[i].owner);
    call.args.push_back(millis_text(items[i].keep_for));
    call.args.push_back(one.channel);
  }
  return call;
}

GrantReply grant_of(const Reply& reply) {
  GrantReply out;
  out.kind = GrantReply::Kind::kUnavailable;
  if (!reply.ok()) {
    out.outcome_unknown =
        reply.status() != Reply::Status::kNotSent || reply.after_uncertain_attempt();
    out.error = reply.error();
    return out;
  }
  const ReplyView raw(reply);
  const std::optional<long long> code = raw[0].integer(), value = raw[1].integer(),
                                 extra = raw[2].integer();
  if (reply.is_error() || !code || !value) {
    out.error = !reply.is_error()     ? "unexpected reply to acquire"
                : reply.text().empty() ? "an error reply without a message"
                                       : std::string(reply.text());
    return out;
  }
  if (*code == 1) {
    out.kind = GrantReply::Kind::kAcquired;
    out.token = static_cast<std::uint64_t>(*value);
    if (extra && *extra > 0) out.ttl = Millis{*extra};
  } else if (*code == 0) {
    out.kind = GrantReply::Kind::kBusy;
    out.ttl = Millis{std::max(0LL, *value)};
    if (extra && *extra > 0) out.last_token = static_cast<std::uint64_t>(*extra);
    // An earlier attempt may have been granted after all and lost the key to this owner
    // since, or may still be on its way.
    out.outcome_unknown = reply.after_uncertain_attempt();
  } else if (*code == -2) {
    out.kind = GrantReply::Kind::kRefused;
    out.error = "the key is held as another kind of lock (a semaphore and a lock never share "
                "a key), or as a semaphore of another number of permits";
  } else {
    out.error = "the server answered after the command timeout; nothing was taken";
  }
  return out;
}

bool arrived_too_late(const Reply& reply) {
  return answered(reply) && ReplyView(reply)[0].integer() == -1;
}

bool late_by_a_stale_clock(Connection& conn, const Reply& reply, Clock::time_point give_up_at) {
  if (!arrived_too_late(reply)) return false;
  conn.distrust_clock();
  return Clock::now() < give_up_at;
}

Reply run_acquisition(Connection& conn, Clock::time_point give_up_at, bool asking,
                      const std::function<ScriptCall(std::int64_t)>& make) {
  Reply reply = make(conn.server_time_us(give_up_at)).run(conn, asking);
  if (late_by_a_stale_clock(conn, reply, give_up_at)) {
    reply = make(conn.server_time_us(give_up_at)).run(conn, asking);
  }
  return reply;
}

RenewOutcome renew_outcome_of(const Reply& reply) {
  if (!reply.ok() || !reply.is_integer()) return RenewOutcome::kUnavailable;
  switch (reply.integer()) {
    case 1: return RenewOutcome::kRenewed;
    case 0: return RenewOutcome::kGone;
    case 2: return RenewOutcome::kGone;  // released by its owner meanwhile; the watchdog drops it
    default: return RenewOutcome::kTaken;
  }
}

namespace {

ReleaseOutcome release_outcome_of(long long code, bool after_uncertain_attempt) {
  switch (code) {
    case 1: return ReleaseOutcome::kReleased;
    case 2: return ReleaseOutcome::kKept;
    // Gone after an attempt that may have been applied: most likely that attempt's work.
    case 0: return after_uncertain_attempt ? ReleaseOutcome::kReleased : ReleaseOutcome::kGone;
    default: return ReleaseOutcome::kTaken;
  }
}

}  // namespace

ReleaseOutcome release_outcome_of(const Reply& reply) {
  if (!reply.ok() || !reply.is_integer()) return ReleaseOutcome::kUnavailable;
  return release_outcome_of(reply.integer(), reply.after_uncertain_attempt());
}

std::vector<ReleaseOutcome> release_outcomes_of(const Reply& reply, std::size_t count) {
  std::vector<ReleaseOutcome> outcomes(count, ReleaseOutcome::kUnavailable);
  if (!reply.ok()) return outcomes;
  const ReplyView raw(reply);
  if (!raw.is_array() || raw.size() != count) return outcomes;
  for (std::size_t i = 0; i < count; ++i) {
    if (!raw[i].integer()) return std::vector<ReleaseOutcome>(count, ReleaseOutcome::kUnavailable);
  }
  for (std::size_t i = 0; i < count; ++i) {
    outcomes[i] = release_outcome_of(*raw[i].integer(), reply.after_uncertain_attempt());
  }
  return outcomes;
}

}  // namespace dlock::internal
