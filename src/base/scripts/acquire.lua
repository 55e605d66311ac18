-- ACQUIRE: take the lock if it is free, with an optional fencing token.
-- Used when fencing is on, and to retry an acquire whose first outcome is unknown.
--
-- KEYS[1] lock key, KEYS[2] fencing counter.
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] "1" to increment the fencing counter.
-- Returns {1, fence} when the lock is ours (fence 0 without fencing; when the key already held
-- our token, the lease is reset and the current counter returned), or {0, pttl} when another
-- owner holds it (pttl -1: the key has no expiry).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local f = 0
  if ARGV[3] == '1' then f = current_fence(KEYS[2]) end
  return {1, f}
end
if cur then return {0, redis.call('PTTL', KEYS[1])} end
local f = next_fence(KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f}
