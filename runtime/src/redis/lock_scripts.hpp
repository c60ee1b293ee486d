// The calls of the three lock scripts and what their replies mean, shared by every Redis
// topology: a topology decides which server gets a call, this file what the call is.
//
//   ScriptCall call = acquire_call(lock_keys(service, key), request, request.lease,
//                                  conn.server_time_us(request.give_up_at));
//   GrantReply grant = grant_of(call.run(conn));
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "redis/keys.hpp"
#include "redis/scripts.hpp"

namespace dlock::internal {

/// How long a fencing counter outlives its last grant; after that, tokens continue from the
/// server clock (see acquire.lua).
inline constexpr Millis kFenceLifetime{7LL * 24 * 3600 * 1000};

/// acquire.lua: take the lock for `request.owner` with a time-to-live of `key_ttl`, unless
/// the server's clock has passed `not_after_us` (Connection::server_time_us; 0: no limit).
[[nodiscard]] ScriptCall acquire_call(const LockKeys& keys, const GrantRequest& request,
                                      Millis key_ttl, std::int64_t not_after_us);
/// acquire_together.lua: every lock of `keys` (one server, one slot) or none, exclusive.
[[nodiscard]] ScriptCall acquire_together_call(const std::vector<LockKeys>& keys,
                                               const GrantRequest& request, Millis key_ttl,
                                               std::int64_t not_after_us);
/// What a reply to acquire_together_call() for `count` keys means (GrantReply::tokens,
/// busy_index); no reply or an error reply is kUnavailable.
[[nodiscard]] GrantReply together_grant_of(const Reply& reply, std::size_t count);
/// renew.lua. A `token_floor` above 0 also raises the fencing counter to it (Redlock).
[[nodiscard]] ScriptCall renew_call(const LockKeys& keys, std::string_view owner, Millis ttl,
                                    std::uint64_t token_floor = 0);
/// release.lua; `keep_for` > 0 leaves the key to expire then (min_hold). `flags`, its
/// ARGV[6]: "q" sends no plain "released" notification, "k" keeps the owner's place in the
/// fair queue (Redlock, TOPOLOGIES.md).
[[nodiscard]] ScriptCall release_call(const LockKeys& keys, std::string_view owner,
                                      Millis keep_for, std::uint64_t token_floor = 0,
                                      std::string_view flags = {});
/// An acquire_call() of a fair request made plain: this server does not keep the order
/// (Redlock's instances but the one that does), and the caller claims no place here, nor the
/// lock from its readers. It still keeps to a fair queue it has.
void without_fair_order(ScriptCall& acquire);
/// An acquire_call() of a fair exclusive request whose grant keeps (and renews) the caller's
/// place in the fair queue until its release (Redlock's order instance: the grant may still
/// be given back). A shared hold or a permit leaves it as usual.
void keeping_fair_place(ScriptCall& acquire);
/// An acquire_call() that restores a holder's key on a Redlock instance that lost it: no
/// fair queue there holds it back.
void restoring(ScriptCall& acquire);
/// release_together.lua: item i's key is `keys[i]`, released for its owner.
[[nodiscard]] ScriptCall release_together_call(const std::vector<LockKeys>& keys,
                                               const std::vector<ReleaseItem>& items);

/// What a reply to acquire_call() means; no reply or an error reply is kUnavailable.
[[nodiscard]] GrantReply grant_of(const Reply& reply);
/// The reply to acquire_call() says the request reached the server after its not-after
/// time. Besides a slow request, that is what a stale server-clock estimate looks like.
[[nodiscard]] bool arrived_too_late(const Reply& reply);
/// After a reply to acquire_call() on `conn`: if it arrived too late, the connection measures
/// the server's clock again before its next not-after time. Returns true when that reply came
/// back before `give_up_at` all the same: the request was in time and the estimate was behind
/// (the server's clock stepped forward), so the call is worth sending once more.
[[nodiscard]] bool late_by_a_stale_clock(Connection& conn, const Reply& reply,
                                         Clock::time_point give_up_at);
/// Runs on `conn` (after ASKING when `asking`) the acquisition that `make(not_after_us)`
/// builds for the server's clock at `give_up_at`, and once more when late_by_a_stale_clock()
/// says its answer is worth another try.
[[nodiscard]] Reply run_acquisition(Connection& conn, Clock::time_point give_up_at, bool asking,
                                    const std::function<ScriptCall(std::int64_t)>& make);
[[nodiscard]] RenewOutcome renew_outcome_of(const Reply& reply);
[[nodiscard]] ReleaseOutcome release_outcome_of(const Reply& reply);
/// What a reply to release_together_call() for `count` keys means, one outcome per key; no
/// reply, an error reply or one of another shape is kUnavailable for every key.
[[nodiscard]] std::vector<ReleaseOutcome> release_outcomes_of(const Reply& reply,
                                                              std::size_t count);

}  // namespace dlock::internal
