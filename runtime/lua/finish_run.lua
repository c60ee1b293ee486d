-- Records the end of a scheduled run, if the record is still ARGV[1]'s.
--
-- KEYS[1]  the run record
-- ARGV[1]  owner id            ARGV[2]  outcome ("ok", "failed", "lost", ...)
--
-- Returns the finish time in ms (server clock), or 0 when the record is gone or another
-- owner's.
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then
  return 0
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'finished_at_ms', string.format('%.0f', now_ms), 'outcome', ARGV[2])
return now_ms
