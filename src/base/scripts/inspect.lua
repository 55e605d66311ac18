-- INSPECT: a look at a lock without holding it, for every kind the name can be used as. Reads
-- only: the queues' dead entries stay for the lock scripts to drop.
--
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] exclusive queue (`<base>:q`), KEYS[4]
-- read/write readers (sorted set), KEYS[5] read/write queue (`<base>:rw:q`), KEYS[6] semaphore
-- queue (`<base>:sem:q`); a waiter's liveness key is its queue key less `q`, then `e:<wid>`.
-- ARGV none.
-- Returns {used, holders, permits held, permits, pttl, exclusive waiters, read/write waiters,
-- semaphore waiters, fencing counter}: used 0 free, 1 one owner (an exclusive lock or a
-- writer), 2 readers, 3 a semaphore, 4 a key of another type (not a lock), 5 Redisson's lock;
-- pttl the lock key's (-2 none, -1 no expiry); waiters count the queue entries whose waiter is
-- alive.
local now = server_ms()
local K = KEYS[1]
local ty = redis.call('TYPE', K)['ok']
local used, holders, held, permits = 0, 0, 0, 0
if ty == 'string' then
  if redis.call('GET', K) == 'redislock readers' then
    used = 2
    holders = redis.call('ZCOUNT', KEYS[4], '(' .. now, '+inf')
  else
    used, holders = 1, 1
  end
elseif ty == 'zset' then
  used = 3
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', K, '(' .. now, '+inf')) do
    local k = string.match(m, '^(%d+):')
    if k then
      holders = holders + 1
      held = held + tonumber(k)
    end
  end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', K, 0, 0)) do
    local n = string.match(m, '^#(%d+)$')
    if n then permits = tonumber(n) end
  end
  if holders == 0 then used = 0 end
elseif ty == 'hash' then
  -- Redisson's lock (docs/redisson.md): one field per owner, `<client id>:<thread id>`, whose
  -- value counts its holds. A hash with a field of another layout is another key, as is one
  -- of more than 16 fields (Redisson's lock has one owner at a time), not read further.
  used = 5
  if redis.call('HLEN', K) > 16 then
    used = 4
  else
    local f = redis.call('HGETALL', K)
    for i = 1, #f, 2 do
      if string.match(f[i], ':%d+$') and string.match(f[i + 1], '^[1-9]%d*$') then
        holders = holders + 1
      else
        used, holders = 4, 0
        break
      end
    end
  end
elseif ty ~= 'none' then
  used = 4
end

-- The entries of `queue` whose waiter is alive.
local function live(queue)
  local base, n = string.sub(queue, 1, -2), 0
  for _, e in ipairs(redis.call('LRANGE', queue, 0, -1)) do
    local wid = string.match(e, '^([^:]+):')
    if wid and redis.call('EXISTS', base .. 'e:' .. wid) == 1 then n = n + 1 end
  end
  return n
end

local fence = tonumber(redis.call('GET', KEYS[2]) or '0')
return {used, holders, held, permits, redis.call('PTTL', K), live(KEYS[3]), live(KEYS[5]),
  live(KEYS[6]), fence}
