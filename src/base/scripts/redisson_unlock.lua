-- REDISSON_UNLOCK: release one hold of Redisson's RLock; the last one deletes the hash and
-- publishes the unlock message on the lock's channel.
--
-- Redisson's own script, RedissonLock.unlockInnerAsync, as written at the tags redisson-3.52.0
-- and redisson-4.7.0 (the same at both): Copyright (c) 2013-2026 Nikita Koksharov, Apache
-- License 2.0 (https://github.com/redisson/redisson). Only the layout is changed.
--
-- KEYS[1] the lock's hash, KEYS[2] its channel (`redisson_lock__channel:{name}`), KEYS[3] the
-- unlock latch of this request (`redisson_unlock_latch:{name}:<request id>`: a repeated call
-- answers what the first did). ARGV[1] the unlock message (0), ARGV[2] lease in ms, ARGV[3] the
-- owner field, ARGV[4] `publish` (or `spublish` with sharded pub/sub on a Cluster), ARGV[5] the
-- latch's lifetime in ms.
-- Returns nil when the owner holds no count, 0 when it still holds (count - 1, lease reset),
-- 1 when released (and published).
local val = redis.call('get', KEYS[3]);
if val ~= false then
  return tonumber(val);
end;

if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call(ARGV[4], KEYS[2], ARGV[1]);
  redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
  return 1;
end;
