-- LEADER_INFO: who leads an election now; reads only.
--
-- KEYS[1] lock key, KEYS[2] leader key. No ARGV.
-- Returns {0} when nobody leads; {1, id, fence, epoch, pttl} for a leader (pttl -1: no expiry);
-- {2, pttl} when the lock key is held but not by a leader (a plain lock on the same name).
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then return {0} end
local l = redis.call('HMGET', KEYS[2], 'id', 'fence', 'epoch')
if not l[1] then return {2, pttl} end
return {1, l[1], tonumber(l[2]) or 0, tonumber(l[3]) or 0, pttl}
