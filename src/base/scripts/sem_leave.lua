-- SEM_LEAVE: a waiter whose wait ended leaves the queue; the queue moves on.
--
-- KEYS as SEM_ENQUEUE. ARGV[1] token, ARGV[2] k, ARGV[3] the queue entry.
-- Returns {1, 0, ms left} when the permits had been handed to this waiter after all, else
-- {0, 0, 0}.
if wrongtype then return {0, 0, 0} end
leave_queue(Q, ARGV[3], KEYS[3], KEYS[4])
local s = redis.call('ZSCORE', K, ARGV[2] .. ':' .. ARGV[1])
if s and tonumber(s) > now then return {1, 0, tonumber(s) - now} end
local n, used = state()
dispatch(nil, n, used)
sync()
return {0, 0, 0}
