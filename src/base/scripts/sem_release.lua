-- SEM_RELEASE: gives k permits back and grants the waiters that now fit, in order.
--
-- KEYS as in lib/sem.lua. ARGV[1] token, ARGV[2] k.
-- Returns 1 when the permits were ours, 0 when they had run out or been taken away.
if wrongtype then return 0 end
local member = ARGV[2] .. ':' .. ARGV[1]
local s = redis.call('ZSCORE', K, member)
local ours = s and tonumber(s) > now
if s then redis.call('ZREM', K, member) end
local n, used = state()
dispatch(nil, n, used)
sync()
if ours then return 1 end
return 0
