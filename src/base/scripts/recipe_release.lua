-- RECIPE_RELEASE: release a recipe lock (the kind ARCHITECTURE.md's "Adding a kind" adds) and
-- publish on its channel, which its waiters listen on.
--
-- KEYS[1] lock key, KEYS[2] the lock's channel. ARGV[1] token, ARGV[2] `publish` (`spublish`
-- where waiters subscribe sharded: a Cluster).
-- Returns 1 when released, 0 when the key is gone or holds another token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call(ARGV[2], KEYS[2], 'free')
return 1
