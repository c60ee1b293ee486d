-- Records a scheduled run: writes the run record of a lock if ARGV[1] holds the lock and
-- no record exists yet. At most one record exists per key while it is kept, so a key runs
-- at most once even after its lock has expired and been taken again.
--
-- KEYS[1]  the lock            KEYS[2]  its run record (same hash tag)
-- ARGV[1]  owner id            ARGV[2]  how long the record is kept, in ms
-- ARGV[3]  label               ARGV[4]  host          ARGV[5]  pid
-- ARGV[6]  the grant's fencing token (Redlock: the highest of the instances', so not
--          necessarily the one stored here)
--
-- Returns {1, now_ms, name}: recorded; {0, field1, value1, ...}: a record exists
-- (returned with its time left as the field 'pttl'); {-1}: the lock is not held by ARGV[1]
-- (gone, taken, or released and kept for min_hold).
local lock = redis.call('HMGET', KEYS[1], 'owner', 'name', 'released')
if lock[1] ~= ARGV[1] or lock[3] == '1' then
  return {-1}
end
local existing = redis.call('HGETALL', KEYS[2])
if #existing > 0 then
  local out = {0}
  for i = 1, #existing do
    out[#out + 1] = existing[i]
  end
  out[#out + 1] = 'pttl'
  out[#out + 1] = tostring(redis.call('PTTL', KEYS[2]))
  return out
end
local t = redis.call('TIME')
local now_ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local name = lock[2] or ''
redis.call('HSET', KEYS[2], 'owner', ARGV[1], 'token', ARGV[6], 'name', name, 'label', ARGV[3],
           'host', ARGV[4], 'pid', ARGV[5], 'started_at_ms', now_ms, 'outcome', 'running')
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return {1, now_ms, name}
