-- Releases the lock, if ARGV[1] still owns it, and wakes waiters.
--
-- KEYS[1]  the lock            KEYS[2]  the release channel
-- ARGV[1]  owner id
-- ARGV[2]  keep-for in ms: > 0 leaves the key to expire then (min_hold), 0 deletes it
--
-- Returns 1 released, 2 kept until min_hold, 0 gone, -1 held by another owner.
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return 0
end
if owner ~= ARGV[1] then
  return -1
end
local keep_for = tonumber(ARGV[2])
if keep_for > 0 then
  redis.call('HSET', KEYS[1], 'released', '1')
  redis.call('PEXPIRE', KEYS[1], keep_for)
  return 2
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 'released')
return 1
