-- Releases the lock, if ARGV[1] still owns it, and hands it to the first live waiter in its
-- queue (acquire.lua) or, with nobody queued, deletes it and tells waiters it is free.
--
-- KEYS[1]  the lock (with its queue, see acquire.lua)
-- KEYS[2]  the fencing counter of this lock
-- KEYS[3]  the holders (holders.lua): a shared hold or a permit ends there, and the last one
--          to end hands the lock on as an exclusive release does
-- KEYS[4], KEYS[5]  the fair queue and its places (holders.lua): the caller leaves it, and
--          while anyone keeps a place there the lock is not handed on: the waiters whose turn
--          it is are told ('turn <owner>'), and only they wake
-- ARGV[1]  owner id
-- ARGV[2]  keep-for in ms: > 0 leaves the key to expire then (min_hold), 0 releases it now
-- ARGV[3]  the release channel (a channel, not a key: in a cluster it is published to
--          every node, and the script touches only the keys declared above)
-- ARGV[4]  token floor, 0 for none: the counter is raised to at least this first, so that
--          every later grant on this server gets a higher token (Redlock: the grant's token
--          is the highest of several servers' tokens)
-- ARGV[5]  lifetime of the fencing counter in ms
--
-- The notification is 'released', or 'granted <token> <owner>' when the lock went to a
-- waiter. A caller that does not hold the lock (a waiter that gave up) leaves the queue.
--
-- Returns 1 released (or handed on), 2 kept until min_hold, 0 gone, -1 held by another owner.
local floor = tonumber(ARGV[4])
if floor > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') < floor then
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
end
local fair_queue = redis.call('EXISTS', KEYS[4]) == 1
if fair_queue then
  fair_leave(KEYS[4], KEYS[5], ARGV[1])
end
local lock = redis.call('HMGET', KEYS[1], 'owner', 'qhead', 'qtail', 'permits')
local owner = lock[1]
if not owner then
  return 0
end
local now_us
if is_marker(owner) then
  now_us = server_now_us()
  local ended = end_hold(KEYS[1], KEYS[3], ARGV[1], tonumber(ARGV[2]), now_us)
  if ended == 0 then
    local n = redis.call('HGET', KEYS[1], 'w:' .. ARGV[1])
    if n then
      redis.call('HDEL', KEYS[1], 'w:' .. ARGV[1], 'q:' .. n)
    end
  end
  if ended ~= nil then
    -- A permit that came free goes to the next in the fair queue, else to whoever asks first.
    if ended == 1 and owner == '*permits' then
      local room = tonumber(lock[4] or '1') - redis.call('ZCARD', KEYS[3])
      if not fair_announce(KEYS[4], KEYS[5], ARGV[3], room, now_us) then
        redis.pcall('PUBLISH', ARGV[3], 'released')
      end
    end
    return ended
  end
elseif owner ~= ARGV[1] then
  -- Not the holder: a waiter that gave up leaves its place (had it been granted the lock,
  -- it would be the owner and release it below).
  local n = redis.call('HGET', KEYS[1], 'w:' .. ARGV[1])
  if n then
    redis.call('HDEL', KEYS[1], 'w:' .. ARGV[1], 'q:' .. n)
  end
  return -1
end
local keep_for = tonumber(ARGV[2])
if keep_for > 0 and owner == ARGV[1] then
  redis.call('HSET', KEYS[1], 'released', '1')
  redis.call('PEXPIRE', KEYS[1], keep_for)
  return 2
end

-- The first waiter whose place has not lapsed gets the lock, written over the holder's
-- fields; places given up or lapsed are passed over, at most 16 per release (beyond that
-- the rest of the queue goes with the lock, and its waiters queue again with their next try).
local head, tail = tonumber(lock[2] or '1'), tonumber(lock[3] or '0')
local fair = false
if fair_queue then
  now_us = now_us or server_now_us()
  if #fair_head(KEYS[4], KEYS[5], now_us) > 0 then
    -- The fair queue decides who is next: no hand-off past it.
    fair = true
    head = tail + 1
  end
end
for _ = 1, 16 do
  if head > tail then
    break
  end
  local record = redis.call('HGET', KEYS[1], 'q:' .. head)
  head = head + 1
  if record then
    local expires, lease, waiter, host, pid, thread, name =
      string.match(record, '^(%d+) (%d+) (%S+) (%S*) (%S*) (%S*) (.*)$')
    if waiter then
      redis.call('HDEL', KEYS[1], 'q:' .. (head - 1), 'w:' .. waiter)
    else
      redis.call('HDEL', KEYS[1], 'q:' .. (head - 1))
    end
    if not now_us then
      now_us = server_now_us()
    end
    if waiter and waiter ~= ARGV[1] and tonumber(expires) > now_us and tonumber(lease) > 0 then
      local last = tonumber(redis.call('GET', KEYS[2]) or '0')
      local token_text = string.format('%.0f', math.max(last + 1, now_us))
      redis.call('SET', KEYS[2], token_text, 'PX', ARGV[5])
      redis.call('HSET', KEYS[1], 'owner', waiter, 'token', token_text, 'host', host, 'pid', pid,
                 'thread', thread, 'name', name,
                 'acquired_at_ms', string.format('%.0f', math.floor(now_us / 1000)),
                 'lease_ms', lease, 'qhead', head)
      redis.call('HDEL', KEYS[1], 'wpending')
      redis.call('PEXPIRE', KEYS[1], lease)
      redis.pcall('PUBLISH', ARGV[3], 'granted ' .. token_text .. ' ' .. waiter)
      return 1
    end
  end
end
if not now_us then
  now_us = server_now_us()
end
local claim = tonumber(redis.call('HGET', KEYS[1], 'wpending') or '0')
if claim > now_us then
  -- A writer waits to follow the last shared hold: its claim outlives the lock, so that no
  -- new shared hold gets in before it. The queue and the holder's fields go.
  local fields = redis.call('HKEYS', KEYS[1])
  for _, field in ipairs(fields) do
    if field ~= 'wpending' then
      redis.call('HDEL', KEYS[1], field)
    end
  end
  redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil((claim - now_us) / 1000)))
else
  redis.call('DEL', KEYS[1])
end
-- The release has happened; a notification refused (say, an ACL user without channel
-- permissions) only costs waiters a poll, so it must not turn the release into an error.
if not (fair and fair_announce(KEYS[4], KEYS[5], ARGV[3], 1000000, now_us)) then
  redis.pcall('PUBLISH', ARGV[3], 'released')
end
return 1
