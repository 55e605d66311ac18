-- LEADER_EXTEND: reset the lease of a leadership we still hold, and the leader key's with it
-- (renewal uses it too).
--
-- KEYS[1] lock key, KEYS[2] leader key. ARGV[1] token, ARGV[2] lease in ms.
-- Returns 1 when extended, 0 when the lock key is gone or holds another token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
