-- Grants the lock to ARGV[1] if nobody holds it, and issues its fencing token. A caller
-- that is waiting (ARGV[9] > 0) and finds the lock busy takes a place in the lock's queue:
-- the release that frees the lock then grants it to the first live waiter directly
-- (release.lua), and the waiter learns of it from the release notification.
--
-- KEYS[1]  the lock: a hash holding the owner and metadata, and while anyone waits the
--          queue: 'qtail' (the last place given), 'qhead' (the next place to serve, 1 when
--          absent), 'q:<n>' = "<place expiry, server us> <lease ms> <owner> <host> <pid>
--          <thread> <lock name>" and 'w:<owner>' = n. The queue lives and dies with the lock.
-- KEYS[2]  the fencing counter of this lock (outlives the lock itself)
-- KEYS[3]  the holders of the lock while it is held shared or as a semaphore (holders.lua)
-- KEYS[4], KEYS[5]  the fair queue and its places (holders.lua)
-- ARGV[1]  owner id            ARGV[2]  lease in ms
-- ARGV[3]  not-after, server time in us (0: none): a request that arrives after its
--          caller gave up must not leave a lock behind
-- ARGV[4]  host  ARGV[5]  pid  ARGV[6]  thread  ARGV[7]  lock name
-- ARGV[8]  lifetime of the fencing counter in ms
-- ARGV[9]  place in the queue, ms (0: do not queue): how long the place stays without being
--          taken again by a later attempt of the same owner
-- ARGV[10] a waiting writer's claim, ms (0: none): while the lock is held shared, no new
--          shared hold starts for this long (the claim's next try renews it); with fair
--          order, how long the caller's place in the fair queue lasts
-- ARGV[11] '1': fair order; 'K': fair order, and a grant keeps (and renews) the caller's
--          place (Redlock's order instance: a grant there may still be given back for want
--          of a quorum, and the caller must not lose its turn); 'R': a Redlock holder's key
--          restored on an instance that lost it, which no queue holds back. Otherwise a
--          request still keeps to the fair queue while anyone
--          has a place in it (it would jump that queue otherwise)
--
-- Returns {1, token, pttl} granted (pttl: the key's time left, which is less than the lease
-- when an earlier attempt or a release granted it), {0, pttl, last token} busy ({0, 0, ...}:
-- another waiter's turn, the lock free or held by that waiter),
-- {-1, 0} arrived too late (nothing held, or a queue to hand on: see below), {-2, 0} the key
-- is a semaphore.
local now_us, now_text, now_ms_text = server_now()
local not_after = tonumber(ARGV[3])
local late = not_after > 0 and now_us > not_after
local place = tonumber(ARGV[9]) or 0

-- Ownership first: this may be a retry of a request that was applied but whose reply was
-- lost, or a release may have granted the lock to this waiter.
-- One read for what the common paths need: the owner, a writer's claim to clear and a place
-- of ours left from an earlier try (only the grant below reads the last two).
local head = redis.call('HMGET', KEYS[1], 'owner', 'wpending', 'w:' .. ARGV[1])
local owner = head[1]
if is_marker(owner) and holding.prune_holders(KEYS[1], KEYS[3], now_us) == 0 then
  holding.clear_holders(KEYS[1], KEYS[3])
  owner = nil
end
if owner == '*permits' then
  return {-2, 0}
end
if owner == ARGV[1] then
  if late then
    -- The caller has given up and must not leave the grant behind. With others queued, the
    -- caller's own release (it gives up with one) hands the lock on; else it goes now.
    if not redis.call('HGET', KEYS[1], 'qtail') then
      redis.call('DEL', KEYS[1])
    end
    return {-1, 0}
  end
  local token = tonumber(redis.call('HGET', KEYS[1], 'token'))
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl <= 0 then
    -- Still ours but at its last millisecond: a full lease again, like a renewal.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    ttl = tonumber(ARGV[2])
  end
  return {1, token, ttl}
end
if late then
  return {-1, 0}
end
local claim = tonumber(ARGV[10]) or 0
local live = {}
local fair = ARGV[11] == '1' or ARGV[11] == 'K'
if fair or (ARGV[11] ~= 'R' and redis.call('EXISTS', KEYS[4]) == 1) then
  live = holding.fair_head(KEYS[4], KEYS[5], now_us)
end
local ordered = fair or #live > 0
if owner then
  if ordered then
    if claim > 0 then
      holding.fair_wait(KEYS[4], KEYS[5], ARGV[1], 'X', claim, now_us)
    end
    if holding.fair_turn_held(live, owner) then
      return {0, 0, tonumber(redis.call('GET', KEYS[2])) or 0}
    end
  elseif place > 0 then
    local record = string.format('%.0f', now_us + place * 1000) .. ' ' .. ARGV[2] .. ' ' ..
                   ARGV[1] .. ' ' .. ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7]
    local n = redis.call('HGET', KEYS[1], 'w:' .. ARGV[1])
    if n then
      redis.call('HSET', KEYS[1], 'q:' .. n, record)
    else
      -- A waiter keeps the place of its first arrival.
      n = redis.call('HINCRBY', KEYS[1], 'qtail', 1)
      redis.call('HSET', KEYS[1], 'w:' .. ARGV[1], n, 'q:' .. n, record)
    end
  end
  if owner == '*shared' and claim > 0 and not ordered then
    local until_us = now_us + claim * 1000
    if until_us > tonumber(redis.call('HGET', KEYS[1], 'wpending') or '0') then
      redis.call('HSET', KEYS[1], 'wpending', us_text(until_us))
      holding.expire_with_holders(KEYS[1], KEYS[3], now_us)
    end
  end
  -- Under a millisecond left reads as 0, which the caller would take for "unknown" and
  -- sleep a whole poll: 1 has it try again as the key expires.
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl == 0 then
    ttl = 1
  end
  return {0, ttl, tonumber(redis.call('GET', KEYS[2])) or 0}
end

if ordered then
  if not holding.fair_turn(KEYS[4], live, ARGV[1], 'X') then
    -- Free, but a waiter that came first has the next turn.
    if claim > 0 then
      holding.fair_wait(KEYS[4], KEYS[5], ARGV[1], 'X', claim, now_us)
    end
    return {0, 0, tonumber(redis.call('GET', KEYS[2])) or 0}
  end
  if ARGV[11] ~= 'K' then
    holding.fair_leave(KEYS[4], KEYS[5], ARGV[1])
  elseif claim > 0 then
    holding.fair_wait(KEYS[4], KEYS[5], ARGV[1], 'X', claim, now_us)
  end
end

local token, token_text = next_token(KEYS[2], now_us, ARGV[8], now_text)
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token_text, 'host', ARGV[4],
           'pid', ARGV[5], 'thread', ARGV[6], 'name', ARGV[7],
           'acquired_at_ms', now_ms_text, 'lease_ms', ARGV[2])
if head[2] then
  redis.call('HDEL', KEYS[1], 'wpending')
end
-- A place of ours left from an earlier try (the hash outlived its holders) goes: a release
-- must never hand the lock back to its own holder.
if head[3] then
  redis.call('HDEL', KEYS[1], 'w:' .. ARGV[1], 'q:' .. head[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, token, tonumber(ARGV[2])}
