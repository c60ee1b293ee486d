// The checker's protected resource: a counter kept on a fault-free redis-server behind a
// fencing Lua script. Shared by the controller (dlock_checker) and the workers.
//
// Every read and every write carries the reader's fencing token. The script remembers the
// highest token it has seen for the counter; a read or write with a lower token is stale: a
// stale write is rejected and counted, a stale read is answered (its write will be rejected)
// and counted. Every operation is appended to a log list in the store's own order, which the
// controller replays. With the key `checker:fencing` set to "off" the script accepts every
// write (used only to show that the checker notices what fencing would have caught).
#pragma once

#include <string>
#include <vector>

namespace checker {

/// Keys on the resource server.
inline const std::string kValueKey = "checker:value";          ///< the fenced counter
inline const std::string kHighestKey = "checker:highest";      ///< highest token seen
inline const std::string kLogKey = "checker:log";              ///< "R|W token outcome value"
inline const std::string kStatsKey = "checker:stats";          ///< hash: accepted, rejected, stale_reads
inline const std::string kFencingKey = "checker:fencing";      ///< "off" disables fencing
inline const std::string kRawKey = "checker:raw";              ///< unfenced counter (GET/SET)
inline const std::string kBrokenLockKey = "checker:broken-lock";    ///< the broken lock's key
inline const std::string kBrokenTokenKey = "checker:broken-token";  ///< its token counter

/// KEYS: value, highest, log, stats, fencing. ARGV: "read"|"write", token (decimal, no sign),
/// value to write. Returns {1, value} when the operation was in order, {0, value} when stale.
/// Tokens are compared as decimal strings (length first), so no precision is lost.
inline const std::string kFenceScript = R"lua(
local function below(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local op, token = ARGV[1], ARGV[2]
local highest = redis.call('GET', KEYS[2]) or '0'
local fencing = redis.call('GET', KEYS[5]) ~= 'off'
local stale = below(token, highest)
if op == 'read' then
  local value = redis.call('GET', KEYS[1]) or '0'
  if stale then
    redis.call('HINCRBY', KEYS[4], 'stale_reads', 1)
  else
    redis.call('SET', KEYS[2], token)
  end
  redis.call('RPUSH', KEYS[3], 'R ' .. token .. ' ' .. (stale and 'stale' or 'ok') .. ' ' .. value)
  return {stale and 0 or 1, value}
end
if stale and fencing then
  redis.call('HINCRBY', KEYS[4], 'rejected', 1)
  redis.call('RPUSH', KEYS[3], 'W ' .. token .. ' rejected ' .. ARGV[3])
  return {0, redis.call('GET', KEYS[1]) or '0'}
end
if not stale then redis.call('SET', KEYS[2], token) end
redis.call('SET', KEYS[1], ARGV[3])
redis.call('HINCRBY', KEYS[4], 'accepted', 1)
redis.call('RPUSH', KEYS[3], 'W ' .. token .. ' accepted ' .. ARGV[3])
return {1, ARGV[3]}
)lua";

/// The argument vector of one EVAL of kFenceScript.
inline std::vector<std::string> fence_call(const std::string& op, const std::string& token,
                                           const std::string& value = "0") {
  return {"EVAL", kFenceScript, "5", kValueKey, kHighestKey, kLogKey, kStatsKey, kFencingKey,
          op, token, value};
}

}  // namespace checker
