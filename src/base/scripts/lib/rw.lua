-- Needs lib/clock.lua, lib/fence.lua, lib/signal.lua and lib/queue.lua before it.
--
-- The shared start of every read/write lock script but RW_EXTEND_READ: the clock, the keys, a
-- type check, and the functions that grant, check and dispatch.
-- KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] readers (sorted set), KEYS[4] queue
-- (`<base>:rw:q`; a waiter's signal list and liveness key are `<base>:rw:s:<wid>` and
-- `<base>:rw:e:<wid>`).
--
-- The write lock of name N is the lock key itself holding the writer's token, exactly like an
-- exclusive lock, so a plain `SET N token NX PX` client (or an exclusive lock of the same name)
-- excludes and is excluded by a writer. While readers hold N, the lock key holds the marker
-- `redislock readers` (a value no owner token can take: it has a space) with an expiry equal to
-- the latest reader's, so such a client is excluded by readers too. Each reader's own lease is
-- its score in the readers' sorted set (`{N}:rw:r`, reader token → expiry in server ms), so
-- renewing a reader extends only its lease, and a crashed reader's entry simply runs out.
--
-- Waiters queue in `{N}:rw:q` as `wid:kind:lease:fence:token` (kind `r` or `w`), each with a
-- liveness key and a signal list as in the exclusive queue. Whenever the lock may have become
-- available (a release, a downgrade, a waiter leaving, a waiter's re-check) dispatch() grants the
-- live entries at the head of the queue for as long as they are compatible: one writer, or
-- every consecutive reader; it sets the lock for each and pushes the grant onto its signal list.
-- A newcomer takes the lock at once only when the queue has no live entry, so readers that
-- arrive after a waiting writer queue behind it. Scripts read the server's clock (TIME) to
-- compare reader expiries.
local MARK = 'redislock readers'
local now = server_ms()
local K, F, R, Q = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = string.sub(Q, 1, -2)
local ty = redis.call('TYPE', K)['ok']
local wrongtype = ty ~= 'none' and ty ~= 'string'

local function reader_holds(token)
  local s = redis.call('ZSCORE', R, token)
  return s and tonumber(s) > now and redis.call('GET', K) == MARK
end

local function holds(kind, token)
  if kind == 'w' then return redis.call('GET', K) == token end
  return reader_holds(token)
end

local function left_ms(kind, token)
  if kind == 'w' then return redis.call('PTTL', K) end
  return tonumber(redis.call('ZSCORE', R, token)) - now
end

local function grant_reader(token, lease)
  if redis.call('GET', K) ~= MARK then
    redis.call('DEL', R)
    redis.call('SET', K, MARK, 'PX', lease)
  elseif redis.call('PTTL', K) < lease then
    redis.call('PEXPIRE', K, lease)
  end
  redis.call('ZADD', R, now + lease, token)
  if redis.call('PTTL', R) < lease then redis.call('PEXPIRE', R, lease) end
end

local function grant(kind, token, lease, fence)
  local f = next_fence(F, fence)
  if kind == 'w' then redis.call('SET', K, token, 'PX', lease) else grant_reader(token, lease) end
  return f
end

local function readers_left()
  if redis.call('GET', K) ~= MARK then return end
  redis.call('ZREMRANGEBYSCORE', R, '-inf', now)
  local top = redis.call('ZRANGE', R, -1, -1, 'WITHSCORES')
  if #top == 0 then
    redis.call('DEL', K, R)
  else
    redis.call('PEXPIREAT', K, top[2])
    redis.call('PEXPIREAT', R, top[2])
  end
end

local function next_ms()
  if redis.call('GET', K) == MARK then
    local first = redis.call('ZRANGEBYSCORE', R, '(' .. now, '+inf', 'LIMIT', 0, 1, 'WITHSCORES')
    if #first > 0 then return tonumber(first[2]) - now end
  end
  return redis.call('PTTL', K)
end

-- Grants the compatible live entries at the head of the queue; returns the fence of the grant to
-- the waiter `me` (its wid, or nil) when it was one of them, which is not signalled.
local function dispatch(me)
  local mine = nil
  while true do
    local wid, kind, lease, fence, token = live_head(Q, base, '^([^:]+):([rw]):(%d+):(%d):(.+)$')
    if not wid then break end
    local cur = redis.call('GET', K)
    if cur and (kind == 'w' or cur ~= MARK) then break end
    redis.call('LPOP', Q)
    redis.call('DEL', base .. 'e:' .. wid)
    local f = grant(kind, token, tonumber(lease), fence)
    if wid == me then
      mine = f
    else
      signal(base .. 's:' .. wid, f, lease)
    end
    if kind == 'w' then break end
  end
  return mine
end
