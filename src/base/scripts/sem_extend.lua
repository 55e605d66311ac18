-- SEM_EXTEND: resets the lease of k permits held with a token (renewal uses it too).
--
-- KEYS[1] the semaphore key. ARGV[1] token, ARGV[2] k, ARGV[3] lease ms.
-- Returns 1 when extended, 0 when the permits are no longer ours.
local now = server_ms()
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then return 0 end
local member = ARGV[2] .. ':' .. ARGV[1]
local s = redis.call('ZSCORE', KEYS[1], member)
if not s or tonumber(s) <= now then return 0 end
local lease = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', now + lease, member)
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return 1
