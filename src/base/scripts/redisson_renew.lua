-- REDISSON_RENEW: reset the lease of Redisson's RLock while the owner field still holds it.
--
-- Redisson's renewal (renewal/LockTask.java at the tags redisson-3.52.0 and redisson-4.7.0,
-- every watchdog/3) runs this for a chunk of locks, `for i = 1, #KEYS` with ARGV[i + 1], and
-- replies with a table; here it is for one lock (KEYS[1], ARGV[2]) and replies with the number,
-- as renewal pipelines expect. Copyright (c) 2013-2026 Nikita Koksharov, Apache License 2.0
-- (https://github.com/redisson/redisson).
--
-- KEYS[1] the lock's hash. ARGV[1] lease in ms, ARGV[2] the owner field.
-- Returns 1 when extended, 0 when the owner no longer holds it.
if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return 1;
end;
return 0;
