-- Releases one lock for its owner (release.lua, release_together.lua), put before the
-- scripts that release. The keys and arguments are those of release.lua, by name:
--
--   lock, fence, holders, queue, places   KEYS[1..5] of release.lua
--   owner_id, keep_for_ms, channel        ARGV[1..3]
--   floor_text, fence_life                ARGV[4..5]
--   flags                                 ARGV[6]: 'q' announces no plain 'released', 'k'
--                                         keeps the caller's place in the fair queue
--
-- Returns what release.lua returns.
local function release_lock(lock, fence, holders, queue, places, owner_id, keep_for_ms, channel,
                            floor_text, fence_life, flags)
  flags = flags or ''
  local quiet = string.find(flags, 'q', 1, true) ~= nil
  local floor = tonumber(floor_text)
  if floor > 0 and (tonumber(redis.call('GET', fence)) or 0) < floor then
    redis.call('SET', fence, floor_text, 'PX', fence_life)
  end
  local fair_queue = redis.call('EXISTS', queue) == 1
  local left = false
  if fair_queue and not string.find(flags, 'k', 1, true) then
    left = holding.fair_leave(queue, places, owner_id)
  end
  local state = redis.call('HMGET', lock, 'owner', 'qhead', 'qtail', 'permits', 'wpending')
  local owner = state[1]
  if not owner then
    -- A waiter that gave up its place while the lock was free: the next one may take it now.
    if left then
      holding.fair_announce(queue, places, channel, 1000000, server_now_us())
    end
    return 0
  end
  local now_us
  if is_marker(owner) then
    now_us = server_now_us()
    local ended = holding.end_hold(lock, holders, owner_id, tonumber(keep_for_ms), now_us)
    if ended == 0 then
      local n = redis.call('HGET', lock, 'w:' .. owner_id)
      if n then
        redis.call('HDEL', lock, 'w:' .. owner_id, 'q:' .. n)
      end
      if left then
        -- A waiter that gave up its place: whoever is now first may join the holders.
        local room = 1000000
        if owner == '*permits' then
          room = tonumber(state[4] or '1') - redis.call('ZCARD', holders)
        end
        if room > 0 then
          holding.fair_announce(queue, places, channel, room, now_us)
        end
      end
    end
    if ended ~= nil then
      -- A permit that came free goes to the next in the fair queue, else to whoever asks first.
      if ended == 1 and owner == '*permits' then
        local room = tonumber(state[4] or '1') - redis.call('ZCARD', holders)
        if not holding.fair_announce(queue, places, channel, room, now_us) and not quiet then
          redis.pcall('PUBLISH', channel, 'released')
        end
      end
      return ended
    end
  elseif owner ~= owner_id then
    -- Not the holder: a waiter that gave up leaves its place (had it been granted the lock,
    -- it would be the owner and release it below).
    local n = redis.call('HGET', lock, 'w:' .. owner_id)
    if n then
      redis.call('HDEL', lock, 'w:' .. owner_id, 'q:' .. n)
    end
    return -1
  end
  local keep_for = tonumber(keep_for_ms)
  if keep_for > 0 and owner == owner_id then
    redis.call('HSET', lock, 'released', '1')
    redis.call('PEXPIRE', lock, keep_for)
    return 2
  end

  -- The first waiter whose place has not lapsed gets the lock, written over the holder's
  -- fields; places given up or lapsed are passed over, at most 16 per release (beyond that
  -- the rest of the queue goes with the lock, and its waiters queue again with their next try).
  local head, tail = tonumber(state[2] or '1'), tonumber(state[3] or '0')
  local fair = false
  if fair_queue then
    now_us = now_us or server_now_us()
    if #holding.fair_head(queue, places, now_us) > 0 then
      -- The fair queue decides who is next: no hand-off past it.
      fair = true
      head = tail + 1
    end
  end
  for _ = 1, 16 do
    if head > tail then
      break
    end
    local record = redis.call('HGET', lock, 'q:' .. head)
    head = head + 1
    if record then
      local expires, lease, waiter, host, pid, thread, name =
        string.match(record, '^(%d+) (%d+) (%S+) (%S*) (%S*) (%S*) (.*)$')
      if waiter then
        redis.call('HDEL', lock, 'q:' .. (head - 1), 'w:' .. waiter)
      else
        redis.call('HDEL', lock, 'q:' .. (head - 1))
      end
      if not now_us then
        now_us = server_now_us()
      end
      if waiter and waiter ~= owner_id and tonumber(expires) > now_us and tonumber(lease) > 0 then
        local _, token_text = next_token(fence, now_us, fence_life)
        redis.call('HSET', lock, 'owner', waiter, 'token', token_text, 'host', host, 'pid', pid,
                   'thread', thread, 'name', name,
                   'acquired_at_ms', string.format('%.0f', math.floor(now_us / 1000)),
                   'lease_ms', lease, 'qhead', head)
        redis.call('HDEL', lock, 'wpending')
        redis.call('PEXPIRE', lock, lease)
        redis.pcall('PUBLISH', channel, 'granted ' .. token_text .. ' ' .. waiter)
        return 1
      end
    end
  end
  -- (nothing above changes 'wpending' but the hand-off, which returns)
  local claim = tonumber(state[5] or '0')
  if claim > 0 and not now_us then
    now_us = server_now_us()
  end
  if claim > 0 and claim > now_us then
    -- A writer waits to follow the last shared hold: its claim outlives the lock, so that no
    -- new shared hold gets in before it. The queue and the holder's fields go.
    local fields = redis.call('HKEYS', lock)
    for _, field in ipairs(fields) do
      if field ~= 'wpending' then
        redis.call('HDEL', lock, field)
      end
    end
    redis.call('PEXPIRE', lock, math.max(1, math.ceil((claim - now_us) / 1000)))
  else
    redis.call('DEL', lock)
  end
  -- The release has happened; a notification refused (say, an ACL user without channel
  -- permissions) only costs waiters a poll, so it must not turn the release into an error.
  if not (fair and holding.fair_announce(queue, places, channel, 1000000, now_us)) and not quiet then
    redis.pcall('PUBLISH', channel, 'released')
  end
  return 1
end
