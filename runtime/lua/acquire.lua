-- Grants the lock to ARGV[1] if nobody holds it, and issues its fencing token. A caller
-- that is waiting (ARGV[9] > 0) and finds the lock busy takes a place in the lock's queue:
-- the release that frees the lock then grants it to the first live waiter directly
-- (release.lua), and the waiter learns of it from the release notification.
--
-- KEYS[1]  the lock: a hash holding the owner and metadata
-- KEYS[2]  the fencing counter of this lock (outlives the lock itself)
-- KEYS[3]  the queue: a sorted set of waiting owners, scored by arrival (server time, us)
-- KEYS[4]  the waiters: owner -> "<place expiry, server us> <lease ms> <host> <pid> <thread>
--          <lock name>", what a grant by release.lua stores for them
-- ARGV[1]  owner id            ARGV[2]  lease in ms
-- ARGV[3]  not-after, server time in us (0: none): a request that arrives after its
--          caller gave up must not leave a lock behind
-- ARGV[4]  host  ARGV[5]  pid  ARGV[6]  thread  ARGV[7]  lock name
-- ARGV[8]  lifetime of the fencing counter in ms
-- ARGV[9]  place in the queue, ms (0: do not queue): how long the place stays without being
--          taken again by a later attempt of the same owner
--
-- Returns {1, token, pttl} granted (pttl: the key's time left, which is less than the lease
-- when an earlier attempt or a release granted it), {0, pttl, last token} busy,
-- {-1, 0} arrived too late (nothing held).
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local not_after = tonumber(ARGV[3])
local late = not_after > 0 and now_us > not_after
local place = tonumber(ARGV[9])

-- Ownership first: this may be a retry of a request that was applied but whose reply was
-- lost, or a release may have granted the lock to this waiter. Late, it must not leave that
-- grant behind: the caller has given up.
local owner = redis.call('HGET', KEYS[1], 'owner')
if owner == ARGV[1] then
  if late then
    redis.call('DEL', KEYS[1])
    return {-1, 0}
  end
  return {1, tonumber(redis.call('HGET', KEYS[1], 'token')), redis.call('PTTL', KEYS[1])}
end
if late then
  return {-1, 0}
end
if owner then
  local ttl = redis.call('PTTL', KEYS[1])
  if place > 0 then
    -- NX: a waiter keeps the place of its first arrival.
    redis.call('ZADD', KEYS[3], 'NX', now_us, ARGV[1])
    redis.call('HSET', KEYS[4], ARGV[1], string.format('%.0f', now_us + place * 1000) .. ' ' ..
               ARGV[2] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7])
    -- The queue outlives every place in it, and goes once they have all lapsed.
    for k = 3, 4 do
      if redis.call('PTTL', KEYS[k]) < place then
        redis.call('PEXPIRE', KEYS[k], place)
      end
    end
  end
  return {0, ttl, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if place > 0 then
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
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
return {1, token, tonumber(ARGV[2])}
