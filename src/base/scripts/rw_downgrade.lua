-- RW_DOWNGRADE: turns a held write lock into a read lock of the same token without a gap,
-- and lets in the readers at the head of the queue.
--
-- KEYS as in lib/rw.lua. ARGV[1] token, ARGV[2] lease ms of the read lock.
-- Returns 1 when downgraded, 0 when the write lock was not ours.
if wrongtype or redis.call('GET', K) ~= ARGV[1] then return 0 end
local lease = tonumber(ARGV[2])
redis.call('DEL', R)
redis.call('SET', K, MARK, 'PX', lease)
grant_reader(ARGV[1], lease)
dispatch(nil)
return 1
