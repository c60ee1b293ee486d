-- Deletes the lock whoever owns it (an operator's forced release) and wakes waiters.
--
-- KEYS[1]  the lock            KEYS[2]  its holders (holders.lua): every holder goes
-- ARGV[1]  the release channel (see release.lua)
--
-- Returns {now_ms, pttl, field1, value1, ...}: the server time in ms, the key's time left
-- before it was deleted and the lock hash that was removed; just {now_ms, -2} when there
-- was no lock. The fencing counter is left alone: later grants still get higher tokens.
local t = redis.call('TIME')
local now_ms = string.format('%.0f', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then
  return {now_ms, -2}
end
local out = {now_ms, redis.call('PTTL', KEYS[1])}
for i = 1, #fields do
  out[#out + 1] = fields[i]
end
redis.call('DEL', KEYS[1], KEYS[2])
-- The release has happened; a notification refused (say, an ACL user without channel
-- permissions) only costs waiters a poll, so it must not turn the release into an error
-- (the caller would then skip the audit entry).
redis.pcall('PUBLISH', ARGV[1], 'released')
return out
