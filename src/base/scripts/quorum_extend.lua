-- QUORUM_EXTEND: reset the lease of our key on one master, telling a key that is gone from one
-- that another owner holds (a gone key is set again by the renewal when a majority of masters
-- still hold ours: a master restarted empty gets the lock back).
--
-- KEYS[1] lock key. ARGV[1] token, ARGV[2] lease in ms.
-- Returns 1 when extended, 0 when the key is gone, -1 when it holds another token.
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if cur then return -1 end
return 0
