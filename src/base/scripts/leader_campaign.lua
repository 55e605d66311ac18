-- LEADER_CAMPAIGN: take the leadership of an election if nobody leads, and say who leads.
-- The lock key holds the leader's token as an exclusive lock's does (a plain lock client sees
-- it held); the fencing counter is the epoch; the leader key (a hash: id, fence, epoch) is what
-- observers read, with the lock's expiry; a new leader publishes its fence on the channel.
--
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] leader key, KEYS[4] the election's channel
-- (a name of the lock's slot, for SPUBLISH on a Cluster).
-- ARGV[1] token, ARGV[2] lease in ms, ARGV[3] the leader's identity, ARGV[4] the epoch of the
-- master the script runs on, as the client knows it, ARGV[5] 'publish' or 'spublish'.
-- Returns {1, fence, pttl} when we lead (elected here; or already, when a campaign whose reply
-- was lost is repeated), or {0, 0, pttl} when another owner holds the lock key (pttl -1: no
-- expiry).
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  return {1, current_fence(KEYS[2]), redis.call('PTTL', KEYS[1])}
end
if cur then return {0, 0, redis.call('PTTL', KEYS[1])} end
local f = next_fence(KEYS[2], '1')
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[3])
redis.call('HSET', KEYS[3], 'id', ARGV[3], 'fence', f, 'epoch', ARGV[4])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call(ARGV[5], KEYS[4], f)
return {1, f, tonumber(ARGV[2])}
