-- Extends the lock's time-to-live, if ARGV[1] still owns it.
--
-- KEYS[1]  the lock            ARGV[1]  owner id    ARGV[2]  new time-to-live in ms
--
-- Returns 1 renewed, 0 gone, -1 held by another owner.
local owner = redis.call('HGET', KEYS[1], 'owner')
if not owner then
  return 0
end
if owner ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
