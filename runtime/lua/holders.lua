-- Put before the lock scripts (acquire, acquire_shared, acquire_together, renew and the
-- release scripts): the server's clock, the fencing token, and the functions for shared
-- holds, permits and fair order.
--
-- A lock held shared has owner '*shared' in its hash, a semaphore owner '*permits' (and
-- 'permits' = N: a request for another N is refused while anyone holds it); neither is ever
-- an owner id. Each holder has a field 'h:<owner>' = "<token> <lease ms> <acquired ms> <host>
-- <pid> <thread> <name>" and, in the holders set, the server time in us at which its hold
-- ends as its score; 'r:<owner>' marks a hold released and kept until its min_hold ends. The
-- hash and the set expire with the last hold.

local function server_now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- The same, and also as text, in microseconds and in milliseconds, made of TIME's own digits:
-- a grant writes both, and formatting a 16-digit number costs the server more than the rest
-- of this function.
local function server_now()
  local t = redis.call('TIME')
  local micros = string.rep('0', 6 - #t[2]) .. t[2]
  return tonumber(t[1]) * 1000000 + tonumber(t[2]), t[1] .. micros, t[1] .. string.sub(micros, 1, 3)
end

local function us_text(us)
  return string.format('%.0f', us)
end

local function is_marker(owner)
  return owner == '*shared' or owner == '*permits'
end

-- Issues the next fencing token of a lock whose counter is `fence` (kept `life_ms`) and
-- returns it, as a number and as text (`now_text`: now_us as text, when the caller has it).
-- Tokens only grow: past the last one, and never below the server clock in microseconds, so
-- they keep growing after the counter expires or the server restarts empty. The clock is
-- almost always ahead of the last token: one SET ... GET (Redis 6.2), and the two compared as
-- text (digit strings: the shorter one, or at the same length the one that sorts first, is
-- the smaller; Lua sorts by the server's collation, in which digits keep their order); only
-- otherwise is the counter read as a number and written again.
local function next_token(fence, now_us, life_ms, now_text)
  now_text = now_text or us_text(now_us)
  local last = redis.call('SET', fence, now_text, 'PX', life_ms, 'GET')
  if not last or (string.find(last, '^%d+$') and
                  (#last < #now_text or (#last == #now_text and last < now_text))) then
    return now_us, now_text
  end
  local token = math.max((tonumber(last) or 0) + 1, now_us)
  local token_text = us_text(token)
  redis.call('SET', fence, token_text, 'PX', life_ms)
  return token, token_text
end

-- The functions for shared holds, permits and fair order, called as `holding.<name>(...)`. A
-- script runs its whole text on every call, and building these eleven functions each time cost
-- 0.7 us of server time per call (redis-server 7.0, commandstats); they are built only when
-- a call first needs one, so the common call (an exclusive lock, no fair queue) builds none.
local holding = setmetatable({}, {__index = function(built, wanted)
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

  -- Fair order. A fair lock's waiters keep a place in its queue, which outlives the lock:
  -- a sorted set of owner -> ticket (strictly increasing, from the server's clock: the order in
  -- which requests reached the server) and a hash of owner -> "<place ends, server us> <kind>"
  -- ('X', 'S' or 'P'), with '#last' the last ticket given. A place lapses unless its waiter's
  -- next try renews it, so a waiter that died stops holding the queue up within one place.

  -- The live places at the head of the queue, first first (at most 16: enough to decide any
  -- request; the rest are looked at as the head moves), lapsed ones dropped on the way.
  local function fair_head(queue, places, now_us)
    local live = {}
    for _, member in ipairs(redis.call('ZRANGE', queue, 0, 15)) do
      local record = redis.call('HGET', places, member)
      local ends, kind
      if record then
        ends, kind = string.match(record, '^(%d+) (%a)$')
      end
      if ends and tonumber(ends) > now_us then
        live[#live + 1] = {member, kind}
      else
        redis.call('ZREM', queue, member)
        redis.call('HDEL', places, member)
      end
    end
    return live
  end

  -- Whether the lock's holder `owner` keeps the first live place in the fair queue: Redlock's
  -- order instance, where a grant keeps its place while it seeks a quorum. While it does, it is
  -- nobody else's turn, whatever the other instances say; a key whose release never came holds
  -- nobody back once its place lapses.
  local function fair_turn_held(live, owner)
    return live[1] ~= nil and live[1][1] == owner
  end

  -- Whether the places ahead of `owner` let it take the lock as `kind` now, and how many
  -- permits the places ahead take first. Places of compatible kinds (shared after shared,
  -- permits after permits) are served together.
  local function fair_turn(queue, live, owner, kind)
    local ahead = 0
    for _, place in ipairs(live) do
      if place[1] == owner then
        return true, ahead
      end
      if kind == 'P' and place[2] == 'P' then
        ahead = ahead + 1
      elseif not (kind == 'S' and place[2] == 'S') then
        return false, ahead
      end
    end
    -- Not among the first 16: only if there is nobody beyond them.
    return redis.call('ZCARD', queue) <= #live, ahead
  end

  -- Takes (or renews) the place of `owner` for `place_ms`; its ticket is kept.
  local function fair_wait(queue, places, owner, kind, place_ms, now_us)
    if not redis.call('ZSCORE', queue, owner) then
      local ticket = math.max(tonumber(redis.call('HGET', places, '#last') or '0') + 1, now_us)
      redis.call('ZADD', queue, us_text(ticket), owner)
      redis.call('HSET', places, '#last', us_text(ticket))
    end
    redis.call('HSET', places, owner, us_text(now_us + place_ms * 1000) .. ' ' .. kind)
    for _, key in ipairs({queue, places}) do
      if redis.call('PTTL', key) < place_ms then
        redis.call('PEXPIRE', key, place_ms)
      end
    end
  end

  -- Returns whether `owner` had a place.
  local function fair_leave(queue, places, owner)
    redis.call('HDEL', places, owner)
    return redis.call('ZREM', queue, owner) == 1
  end

  -- After a release: tells the waiters whose turn it is ('turn <owner>': only they wake), up to
  -- `room` of them for permits. Returns false when nobody keeps a place.
  local function fair_announce(queue, places, channel, room, now_us)
    local live = fair_head(queue, places, now_us)
    if #live == 0 then
      return false
    end
    local first = live[1][2]
    for i, place in ipairs(live) do
      if i > 1 and (first == 'X' or place[2] ~= first or i > room) then
        break
      end
      redis.pcall('PUBLISH', channel, 'turn ' .. place[1])
    end
    return true
  end

  for name, fn in pairs({
    prune_holders = prune_holders,
    expire_with_holders = expire_with_holders,
    first_hold_left = first_hold_left,
    clear_holders = clear_holders,
    end_hold = end_hold,
    fair_head = fair_head,
    fair_turn_held = fair_turn_held,
    fair_turn = fair_turn,
    fair_wait = fair_wait,
    fair_leave = fair_leave,
    fair_announce = fair_announce
  }) do
    rawset(built, name, fn)
  end
  return rawget(built, wanted)
end})
