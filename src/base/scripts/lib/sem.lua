-- Needs lib/clock.lua, lib/signal.lua and lib/queue.lua before it.
--
-- The shared start of every semaphore script but SEM_EXTEND: the clock, the keys, a type check,
-- and the functions that count, grant and dispatch.
-- KEYS[1] the semaphore key (sorted set), KEYS[2] the queue (`<base>:sem:q`; a waiter's signal
-- list and liveness key are `<base>:sem:s:<wid>` and `<base>:sem:e:<wid>`).
--
-- The semaphore named N keeps its holders in the key N itself, a sorted set: one member
-- `k:token` per grant of k permits, scored by its expiry (server ms), and one member `#n`
-- (score 0) recording the number of permits, fixed by the first user while anything is held or
-- waiting. Permits are counted after dropping expired members, so a crashed holder's permits
-- come back when its lease runs out; the key expires with its latest holder and is deleted when
-- the last one leaves. Waiters queue in `{N}:sem:q` as `wid:k:n:lease:token`; dispatch() grants
-- the live entries at the head in order while the permits suffice, and stops at the first that
-- does not fit, so a later, smaller request never overtakes it.
local now = server_ms()
local K, Q = KEYS[1], KEYS[2]
local base = string.sub(Q, 1, -2)
local ty = redis.call('TYPE', K)['ok']
local wrongtype = ty ~= 'none' and ty ~= 'zset'

-- The semaphore's number of permits (nil when nothing fixes it) and how many are held, after
-- dropping the expired holders.
local function state()
  redis.call('ZREMRANGEBYSCORE', K, '(0', now)
  local n, used = nil, 0
  for _, m in ipairs(redis.call('ZRANGE', K, 0, -1)) do
    local size = string.match(m, '^#(%d+)$')
    if size then
      n = tonumber(size)
    else
      used = used + (tonumber(string.match(m, '^(%d+):')) or 0)
    end
  end
  if not n then
    local head = redis.call('LINDEX', Q, 0)
    if head then n = tonumber(string.match(head, '^[^:]+:%d+:(%d+):')) end
  end
  return n, used
end

local function grant(token, k, n, lease)
  redis.call('ZADD', K, 0, '#' .. n)
  redis.call('ZADD', K, now + lease, k .. ':' .. token)
  if redis.call('PTTL', K) < lease then redis.call('PEXPIRE', K, lease) end
end

-- The key's expiry follows its latest holder; the key goes when no holder is left.
local function sync()
  local top = redis.call('ZRANGE', K, -1, -1, 'WITHSCORES')
  if #top == 0 or tonumber(top[2]) == 0 then
    redis.call('DEL', K)
  else
    redis.call('PEXPIREAT', K, top[2])
  end
end

local function next_ms()
  local first = redis.call('ZRANGEBYSCORE', K, '(0', '+inf', 'LIMIT', 0, 1, 'WITHSCORES')
  if #first == 0 then return -2 end
  return tonumber(first[2]) - now
end

-- Grants the live entries at the head of the queue while the n permits suffice (an entry for
-- another number of permits is taken off and told 'mismatch'); returns what the waiter `me`
-- (its wid, or nil) was told, if it was one of them (it is not signalled), and the permits used.
local function dispatch(me, n, used)
  local mine = nil
  while n do
    local wid, k, hn, lease, token = live_head(Q, base, '^([^:]+):(%d+):(%d+):(%d+):(.+)$')
    if not wid then break end
    k = tonumber(k)
    local wrong = tonumber(hn) ~= n
    if not wrong and used + k > n then break end
    redis.call('LPOP', Q)
    redis.call('DEL', base .. 'e:' .. wid)
    local v = 'mismatch'
    if not wrong then
      grant(token, k, n, tonumber(lease))
      used = used + k
      v = '0'
    end
    if wid == me then
      mine = v
    else
      signal(base .. 's:' .. wid, v, lease)
    end
  end
  return mine, used
end
