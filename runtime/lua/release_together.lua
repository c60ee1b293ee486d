-- Releases several locks in one request: each as release.lua releases one, for its own
-- owner, in the order given. The locks are those of one lease of several keys, on one server
-- (on a cluster, of one slot); none depends on another's outcome.
--
-- KEYS     for each lock i = 1..m, five keys: the lock, its fencing counter, its holders,
--          its fair queue and the queue's places (release.lua)
-- ARGV[1]  lifetime of the fencing counters in ms
-- ARGV[3i - 1], ARGV[3i], ARGV[3i + 1]  lock i's owner id, keep-for in ms and release
--          channel (release.lua's ARGV[1..3])
--
-- Returns one result of release.lua per lock, in the order given.
local out = {}
for i = 1, #KEYS / 5 do
  out[i] = release_lock(KEYS[5 * i - 4], KEYS[5 * i - 3], KEYS[5 * i - 2], KEYS[5 * i - 1],
                        KEYS[5 * i], ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1], '0', ARGV[1],
                        '')
end
return out
