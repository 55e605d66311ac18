-- RW_EXTEND_READ: resets one reader's lease (renewal uses it too); the lock key's expiry is
-- raised to it if lower.
--
-- KEYS[1] lock key, KEYS[2] readers. ARGV[1] token, ARGV[2] lease ms.
-- Returns 1 when extended, 0 when the reader no longer holds the lock.
local now = server_ms()
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'string' or redis.call('GET', KEYS[1]) ~= 'redislock readers' then return 0 end
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s or tonumber(s) <= now then return 0 end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
if redis.call('PTTL', KEYS[2]) < lease then redis.call('PEXPIRE', KEYS[2], lease) end
return 1
