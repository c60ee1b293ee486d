// Scheduled-run records on Redis, shared by every topology (runtime/lua/claim_run.lua,
// finish_run.lua): a topology decides which server gets a call, this file what the call is
// and what its reply means.
//
//   dlock:{shop:report%3A29511234}:lock   the lock
//   dlock:{shop:report%3A29511234}:run    its run record: a hash, kept for RunOptions::keep
//
// Both carry the lock's hash tag, so the claim can check the lock and write the record in
// one script on one cluster node.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "redis/connection.hpp"
#include "redis/scripts.hpp"
#include "run_store.hpp"

namespace dlock::internal::runs {

[[nodiscard]] std::string run_key(std::string_view service, std::string_view key);

/// claim_run.lua for `mine` (owner, label, host, pid) on the lock `lock_key`.
[[nodiscard]] ScriptCall claim_call(const std::string& lock_key, const std::string& run_key,
                                    const RunRecord& mine, Millis keep);
/// finish_run.lua.
[[nodiscard]] ScriptCall finish_call(const std::string& run_key, std::string_view owner,
                                     std::string_view outcome);

/// What a reply to claim_call() means for `mine` (the key and the fields claim_call sent);
/// nothing for no reply, an error reply or one of another shape.
[[nodiscard]] std::optional<RunClaimReply> claim_of(const Reply& reply, const RunRecord& mine);
/// A reply to finish_call(): true when the record was updated.
[[nodiscard]] bool finished_of(const Reply& reply);

/// HGETALL and PTTL of one run record: sets `out` when it exists. Returns the first failing
/// reply (which may be a redirect), or the HGETALL reply.
Reply read_run(Connection& conn, const std::string& run_key, const std::string& user_key,
               std::optional<RunRecord>& out, bool asking = false);

/// TIME, in ms since the Unix epoch: sets `out_ms` and returns an ok reply, or returns the
/// failure (a reply of the wrong shape is a kBroken failure).
Reply read_time_ms(Connection& conn, std::int64_t& out_ms, bool asking = false);

}  // namespace dlock::internal::runs
