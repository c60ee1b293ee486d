-- Takes several locks for ARGV[1] at once, all or none: the exclusive lock of acquire.lua on
-- each, on one server (on a cluster, keys of one slot). A lock held by another owner or one
-- with waiters in its fair queue makes the whole request busy, with nothing written; the
-- caller then takes the keys one by one, waiting as each needs. A key in use as a semaphore
-- refuses the request, as acquire.lua refuses a lock on it.
--
-- KEYS     for each lock i = 1..m, five keys: the lock, its fencing counter, its holders,
--          its fair queue and the queue's places (acquire.lua, holders.lua)
-- ARGV[1..8] as acquire.lua (owner, lease ms, not-after us, host, pid, thread, lock name,
--          lifetime of the fencing counters)
--
-- Returns {1, ttl, token_1, ..., token_m} granted (ttl: the least time left of the keys),
-- {0, i, ttl, last token of i} lock i busy, {-1, 0} too late (nothing held), {-2, i} lock i
-- held as a semaphore (nothing held).
local now_us, now_text, now_ms_text = server_now()
local not_after = tonumber(ARGV[3])
local late = not_after > 0 and now_us > not_after
local m = #KEYS / 5
local owners, heads = {}, {}
for i = 1, m do
  local lock, fence, holders = KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2]
  heads[i] = redis.call('HMGET', lock, 'owner', 'wpending', 'w:' .. ARGV[1])
  local owner = heads[i][1]
  if is_marker(owner) and holding.prune_holders(lock, holders, now_us) == 0 then
    holding.clear_holders(lock, holders)
    owner = nil
  end
  if owner == '*permits' then
    return {-2, i}
  end
  local queued = redis.call('EXISTS', KEYS[5 * i - 1]) == 1 and
                 #holding.fair_head(KEYS[5 * i - 1], KEYS[5 * i], now_us) > 0
  if (owner and owner ~= ARGV[1]) or queued then
    if late then
      return {-1, 0}
    end
    local ttl = owner and redis.call('PTTL', lock) or 0
    return {0, i, math.max(ttl, owner and 1 or 0), tonumber(redis.call('GET', fence)) or 0}
  end
  owners[i] = owner
end
if late then
  -- A retry that comes after its caller gave up leaves nothing behind.
  for i = 1, m do
    if owners[i] == ARGV[1] and not redis.call('HGET', KEYS[5 * i - 4], 'qtail') then
      redis.call('DEL', KEYS[5 * i - 4])
    end
  end
  return {-1, 0}
end
local out = {1, tonumber(ARGV[2])}
for i = 1, m do
  local lock, fence = KEYS[5 * i - 4], KEYS[5 * i - 3]
  if owners[i] == ARGV[1] then
    -- Granted by an earlier attempt whose reply was lost.
    out[i + 2] = tonumber(redis.call('HGET', lock, 'token'))
    out[2] = math.min(out[2], math.max(redis.call('PTTL', lock), 1))
  else
    local _, token_text = next_token(fence, now_us, ARGV[8], now_text)
    redis.call('HSET', lock, 'owner', ARGV[1], 'token', token_text, 'host', ARGV[4],
               'pid', ARGV[5], 'thread', ARGV[6], 'name', ARGV[7],
               'acquired_at_ms', now_ms_text, 'lease_ms', ARGV[2])
    if heads[i][2] then
      redis.call('HDEL', lock, 'wpending')
    end
    if heads[i][3] then
      redis.call('HDEL', lock, 'w:' .. ARGV[1], 'q:' .. heads[i][3])
    end
    redis.call('PEXPIRE', lock, ARGV[2])
    out[i + 2] = tonumber(token_text)
  end
end
return out
