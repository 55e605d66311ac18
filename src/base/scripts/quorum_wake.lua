-- QUORUM_WAKE: wake one waiter blocked on the lock's wake list (on the master waiters block
-- on), after a release. The list holds at most one wake-up: one release frees the lock once.
--
-- KEYS[1] the wake list. ARGV[1] how long an unclaimed wake-up stays, in ms.
-- Returns 1.
redis.call('LPOP', KEYS[1])
redis.call('RPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
