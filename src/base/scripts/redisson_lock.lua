-- REDISSON_LOCK: one attempt at Redisson's RLock (reentrant per owner field).
--
-- Redisson's own script, RedissonLock.tryLockInnerAsync, as written at the tags redisson-3.52.0
-- and redisson-4.7.0 (the same at both): Copyright (c) 2013-2026 Nikita Koksharov, Apache
-- License 2.0 (https://github.com/redisson/redisson). Only the layout is changed.
--
-- KEYS[1] the lock's hash (the lock name). ARGV[1] lease in ms, ARGV[2] the owner field,
-- `<client uuid>:<thread id>`.
-- Returns nil when taken (or taken again by the same owner: its count + 1), else the PTTL of
-- the hash (ms; -1: no expiry).
if ((redis.call('exists', KEYS[1]) == 0)
    or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);
