-- Shared holds and permits, put before the scripts that meet them (acquire, acquire_shared,
-- renew, release). A lock held shared has owner '*shared' in its hash, a semaphore owner
-- '*permits' (and 'permits' = N, as the last grant asked); neither is ever an owner id. Each
-- holder has a field 'h:<owner>' = "<token> <lease ms> <acquired ms> <host> <pid> <thread>
-- <name>" and, in the holders set, the server time in us at which its hold ends as its score;
-- 'r:<owner>' marks a hold released and kept until its min_hold ends. The hash and the set
-- expire with the last hold.

local function server_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function us_text(us)
  return string.format('%.0f', us)
end

local function is_marker(owner)
  return owner == '*shared' or owner == '*permits'
end

-- Drops the holds that have ended (at most 64 per call: the rest go with a later call) and
-- returns how many are left.
local function prune_holders(lock, holders, now_us)
  local ended = redis.call('ZRANGEBYSCORE', holders, '-inf', us_text(now_us), 'LIMIT', 0, 64)
  for _, member in ipairs(ended) do
    redis.call('ZREM', holders, member)
    redis.call('HDEL', lock, 'h:' .. member, 'r:' .. member)
  end
  return redis.call('ZCARD', holders)
end

-- Both keys expire with the hold that ends last, or with a waiting writer's claim.
local function expire_with_holders(lock, holders, now_us)
  local last = redis.call('ZRANGE', holders, -1, -1, 'WITHSCORES')
  local until_us = tonumber(last[2] or '0')
  until_us = math.max(until_us, tonumber(redis.call('HGET', lock, 'wpending') or '0'))
  local ms = math.max(1, math.ceil((until_us - now_us) / 1000))
  redis.call('PEXPIRE', lock, ms)
  redis.call('PEXPIRE', holders, ms)
end

-- Time left on the first hold to end, in ms (at least 1): when a place may come free.
local function first_hold_left(holders, now_us)
  local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  return math.max(1, math.ceil((tonumber(first[2] or '0') - now_us) / 1000))
end

-- The lock is no longer held shared or as a semaphore: its last holder left.
local function clear_holders(lock, holders)
  redis.call('HDEL', lock, 'owner', 'permits')
  redis.call('DEL', holders)
end

-- Ends the hold of `owner` on a lock held shared or as a semaphore, as release.lua does:
-- returns 0 (no such hold: lapsed, or never held), 2 (kept until keep_for ms from now), 1 (ended,
-- others still hold) or nil (ended, and nobody holds the lock any more).
local function end_hold(lock, holders, owner, keep_for, now_us)
  local score = redis.call('ZSCORE', holders, owner)
  if not score or tonumber(score) <= now_us then
    return 0
  end
  if keep_for > 0 then
    redis.call('ZADD', holders, 'XX', us_text(now_us + keep_for * 1000), owner)
    redis.call('HSET', lock, 'r:' .. owner, '1')
    expire_with_holders(lock, holders, now_us)
    return 2
  end
  redis.call('ZREM', holders, owner)
  redis.call('HDEL', lock, 'h:' .. owner, 'r:' .. owner)
  if prune_holders(lock, holders, now_us) > 0 then
    expire_with_holders(lock, holders, now_us)
    return 1
  end
  clear_holders(lock, holders)
  return nil
end

