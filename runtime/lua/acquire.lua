-- Grants the lock to ARGV[1] if nobody holds it, and issues its fencing token.
--
-- KEYS[1]  the lock: a hash holding the owner and metadata
-- KEYS[2]  the fencing counter of this lock (outlives the lock itself)
-- ARGV[1]  owner id            ARGV[2]  lease in ms
-- ARGV[3]  not-after, server time in us (0: none): a request that arrives after its
--          caller gave up must not leave a lock behind
-- ARGV[4]  host  ARGV[5]  pid  ARGV[6]  thread  ARGV[7]  lock name
-- ARGV[8]  lifetime of the fencing counter in ms
--
-- Returns {1, token} granted, {0, pttl} busy, {-1, 0} arrived too late (nothing held).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local not_after = tonumber(ARGV[3])
local late = not_after > 0 and now_us > not_after

-- Ownership first: this may be a retry of a request that was applied but whose reply was
-- lost. Late, it must not leave that earlier grant behind: the caller has given up.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] then
  if late then
    redis.call('DEL', KEYS[1])
    return {-1, 0}
  end
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token'))}
end
if late then
  return {-1, 0}
end
if owner then
  return {0, redis.call('PTTL', KEYS[1])}
end

-- Tokens only grow: past the last one, and never below the server clock in microseconds,
-- so they keep growing after the counter expires or the server restarts empty.
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local token = math.max(last + 1, now_us)
local token_text = string.format('%.0f', token)
redis.call('SET', KEYS[2], token_text, 'PX', ARGV[8])
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token_text, 'host', ARGV[4],
           'pid', ARGV[5], 'thread', ARGV[6], 'name', ARGV[7],
           'acquired_at_ms', string.format('%.0f', math.floor(now_us / 1000)),
           'lease_ms', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token}
