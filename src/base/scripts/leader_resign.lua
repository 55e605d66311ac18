-- LEADER_RESIGN: the leader steps down: its lock key and leader key are deleted, and the change
-- is published on the election's channel, which wakes campaigners and observers.
--
-- KEYS[1] lock key, KEYS[2] leader key, KEYS[3] the election's channel.
-- ARGV[1] token, ARGV[2] 'publish' or 'spublish'.
-- Returns 1 when resigned, 0 when the lock key did not hold our token (nothing is touched).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call(ARGV[2], KEYS[3], '0')
return 1
