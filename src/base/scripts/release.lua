-- RELEASE: if the key holds our token, hand the lock to the oldest live waiter, else delete it.
--
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] queue (`<base>:q`; a waiter's signal
-- list and liveness key are `<base>:s:<wid>` and `<base>:e:<wid>`, in the same slot).
-- ARGV[1] token.
-- Returns 1 when released (or handed over), 0 when the key did not hold our token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
handoff(KEYS[1], KEYS[2], KEYS[3])
return 1
