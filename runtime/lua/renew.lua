-- Extends the lock's time-to-live, if ARGV[1] still owns it.
--
-- KEYS[1]  the lock            KEYS[2]  the fencing counter of this lock
-- KEYS[3]  the holders (holders.lua): a shared hold or a permit is renewed there
-- ARGV[1]  owner id            ARGV[2]  new time-to-live in ms
-- ARGV[3]  token floor, 0 for none (see release.lua)
-- ARGV[4]  lifetime of the fencing counter in ms
--
-- Returns 1 renewed, 0 gone, -1 held by another owner, 2 already released (kept only until
-- min_hold: a renewal racing the release must not extend it).
local floor = tonumber(ARGV[3])
if floor > 0 and (tonumber(redis.call('GET', KEYS[2])) or 0) < floor then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
end
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return 0
end
if is_marker(owner) then
  local now_us = server_now_us()
  local score = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if not score or tonumber(score) <= now_us then
    return 0
  end
  if redis.call('HEXISTS', KEYS[1], 'r:' .. ARGV[1]) == 1 then
    return 2
  end
  redis.call('ZADD', KEYS[3], 'XX', us_text(now_us + tonumber(ARGV[2]) * 1000), ARGV[1])
  holding.expire_with_holders(KEYS[1], KEYS[3], now_us)
  return 1
end
if owner ~= ARGV[1] then
  return -1
end
if redis.call('HEXISTS', KEYS[1], 'released') == 1 then
  return 2
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
