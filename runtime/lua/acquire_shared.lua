-- Grants a shared hold (ARGV[10] = 'S') or a permit of a semaphore of ARGV[11] permits
-- (ARGV[10] = 'P') to ARGV[1], each with a fencing token of its own. Shared holds overlap one
-- another, never an exclusive holder, and none starts while a writer waits (the 'wpending'
-- claim acquire.lua leaves: writers are not starved). A semaphore has at most N holders.
--
-- KEYS[1]  the lock (see acquire.lua and holders.lua)   KEYS[2]  the fencing counter
-- KEYS[3]  the holders set    KEYS[4], KEYS[5]  the fair queue and its places
-- ARGV[1..9] as acquire.lua (a place in the queue is not taken: waiters of these kinds are
--          woken by 'released' notifications)
-- ARGV[10] 'S' or 'P'          ARGV[11] permits (P)
-- ARGV[12] '1' or 'K': fair order; 'R': a restored hold (see acquire.lua). A grant leaves
--          the fair queue also with 'K': a kept place would count as a permit waiting
-- ARGV[13] how long the caller's place in the fair queue lasts, ms (0: it does not wait)
--
-- Returns {1, token, ttl} granted, {0, ttl, last token} busy, {-1, 0} too late, {-2, 0} the
-- key is held as another kind of lock.
local lock, holders = KEYS[1], KEYS[3]
local now_us = server_now_us()
local not_after = tonumber(ARGV[3])
local late = not_after > 0 and now_us > not_after
local marker = ARGV[10] == 'S' and '*shared' or '*permits'

local owner = redis.call('HGET', lock, 'owner')
if is_marker(owner) and holding.prune_holders(lock, holders, now_us) == 0 then
  holding.clear_holders(lock, holders)
  owner = nil
end
if owner == marker then
  local mine = redis.call('HGET', lock, 'h:' .. ARGV[1])
  if mine then
    -- A retry of a request that was applied but whose reply was lost.
    if late then
      -- Only this hold goes; a writer's place and claim stay (the hash keeps its time).
      holding.end_hold(lock, holders, ARGV[1], 0, now_us)
      return {-1, 0}
    end
    local score = tonumber(redis.call('ZSCORE', holders, ARGV[1]))
    return {1, tonumber(string.match(mine, '^(%d+)')),
            math.max(1, math.ceil((score - now_us) / 1000))}
  end
end
if late then
  return {-1, 0}
end
local last = tonumber(redis.call('GET', KEYS[2])) or 0
if owner and owner ~= marker and (is_marker(owner) or ARGV[10] == 'P') then
  return {-2, 0}
end
-- A semaphore keeps the size it was first taken with while anyone holds it.
if owner == '*permits' and redis.call('HGET', lock, 'permits') ~= ARGV[11] then
  return {-2, 0}
end
local live = {}
local fair = ARGV[12] == '1' or ARGV[12] == 'K'
if fair or (ARGV[12] ~= 'R' and redis.call('EXISTS', KEYS[4]) == 1) then
  live = holding.fair_head(KEYS[4], KEYS[5], now_us)
end
local ordered = fair or #live > 0
local function busy(ttl)
  local place_ms = tonumber(ARGV[13]) or 0
  if ordered and place_ms > 0 then
    holding.fair_wait(KEYS[4], KEYS[5], ARGV[1], ARGV[10], place_ms, now_us)
  end
  return {0, ttl, last}
end
if owner and owner ~= marker then
  if holding.fair_turn_held(live, owner) then
    return busy(0)
  end
  return busy(math.max(redis.call('PTTL', lock), 1))
end
local ahead = 0
if ordered then
  local turn
  turn, ahead = holding.fair_turn(KEYS[4], live, ARGV[1], ARGV[10])
  if not turn then
    return busy(0)
  end
end
if ARGV[10] == 'S' and not ordered then
  -- In fair order the queue serves writers; otherwise a waiting writer's claim does.
  local claim = tonumber(redis.call('HGET', lock, 'wpending') or '0')
  if claim > now_us then
    return busy(math.max(1, math.ceil((claim - now_us) / 1000)))
  end
elseif ARGV[10] == 'P' and redis.call('ZCARD', holders) + ahead >= tonumber(ARGV[11]) then
  return busy(owner and holding.first_hold_left(holders, now_us) or 0)
end
if ordered then
  holding.fair_leave(KEYS[4], KEYS[5], ARGV[1])
end

if not owner then
  redis.call('DEL', holders)  -- left by a forced release: no stale member may count
end
local token, token_text = next_token(KEYS[2], now_us, ARGV[8])
redis.call('HSET', lock, 'owner', marker, 'h:' .. ARGV[1],
           token_text .. ' ' .. ARGV[2] .. ' ' .. us_text(math.floor(now_us / 1000)) .. ' ' ..
           ARGV[4] .. ' ' .. ARGV[5] .. ' ' .. ARGV[6] .. ' ' .. ARGV[7])
if ARGV[10] == 'P' then
  redis.call('HSET', lock, 'permits', ARGV[11])
end
redis.call('ZADD', holders, us_text(now_us + tonumber(ARGV[2]) * 1000), ARGV[1])
holding.expire_with_holders(lock, holders, now_us)
return {1, token, tonumber(ARGV[2])}
