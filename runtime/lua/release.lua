-- Releases the lock, if ARGV[1] still owns it, and wakes waiters.
--
-- KEYS[1]  the lock            KEYS[2]  the fencing counter of this lock
-- ARGV[1]  owner id
-- ARGV[2]  keep-for in ms: > 0 leaves the key to expire then (min_hold), 0 deletes it
-- ARGV[3]  the release channel (a channel, not a key: in a cluster it is published to
--          every node, and the script touches only the keys declared above)
-- ARGV[4]  token floor, 0 for none: the counter is raised to at least this first, so that
--          every later grant on this server gets a higher token (Redlock: the grant's token
--          is the highest of several servers' tokens)
-- ARGV[5]  lifetime of the fencing counter in ms
--
-- Returns 1 released, 2 kept until min_hold, 0 gone, -1 held by another owner.
local floor = tonumber(ARGV[4])
if floor > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') < floor then
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
end
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
-- The release has happened; a notification refused (say, an ACL user without channel
-- permissions) only costs waiters a poll, so it must not turn the release into an error.
redis.pcall('PUBLISH', ARGV[3], 'released')
return 1
