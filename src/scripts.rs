//! Every Lua script the library runs, in one place.
//!
//! Each script acts only while the lock key still holds the caller's token, so a program that
//! uses the classic `SET key token NX PX` + compare-and-delete pattern on the same key excludes,
//! and is excluded by, this library. Scripts are sent with EVALSHA; redis-rs loads a script and
//! retries when the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`).
//!
//! Waiting is a queue with direct handoff: a waiter that finds the lock held enqueues itself
//! (ENQUEUE) and blocks on its own signal list with BLPOP; RELEASE gives the lock straight to the
//! oldest live waiter (sets the key to that waiter's token) and pushes the grant onto its signal
//! list. Waiters are therefore served in arrival order and the releaser cannot barge back in.
//! A fenced grant increments the counter before it sets the key: a script that fails midway
//! keeps its earlier writes, and a failing INCR must not leave the key set with nobody holding it.
//!
//! The queue is a list of waiter entries `wid:lease:fence:token` in arrival order; what a handoff
//! needs (the waiter's lease, fencing flag and token) is in the entry itself. Each waiter also
//! has a liveness key with an expiry that the waiter refreshes on every re-check, so the entry of
//! a waiter that died is skipped once that key has expired: RELEASE's `DEL` of it both tells
//! whether the waiter is alive and cleans up, with no clock reading. The liveness key also tells
//! ENQUEUE whether the waiter's entry is still queued (it is created with the entry and deleted
//! when the entry is used up), so a re-check keeps its place. The queue's expiry is only ever
//! extended, to at least that of every liveness key. A handoff therefore costs RELEASE six server
//! calls (GET, LPOP, DEL, SET, RPUSH, PEXPIRE) and the waiter's ENQUEUE five (GET, SET NX,
//! RPUSH, PTTL, PTTL), plus an INCR with fencing.
//!
//! Every key a script touches is passed in KEYS, with one exception: RELEASE finds the waiter it
//! hands the lock to in the queue, so it makes that waiter's liveness key and signal list from
//! the entry (they cannot be known before the script runs without a round trip more per
//! handoff). They share the lock key's hash tag (`keys.rs`), so they live in the lock's Cluster
//! slot, on the node that runs the script: Redis 7 runs scripts without a `#!lua` flags line
//! in its compatible mode, which allows keys of the node's own slots not declared in KEYS
//! (measured on a Redis 7.0 cluster: the handoff works on every node). The scripts are called
//! only through `ops.rs`.

use std::sync::LazyLock;

use redis::Script;

/// ACQUIRE: take the lock if it is free, with an optional fencing token.
/// Used when fencing is on, and to retry an acquire whose first outcome is unknown.
///
/// KEYS[1] lock key, KEYS[2] fencing counter.
/// ARGV[1] token, ARGV[2] lease in ms, ARGV[3] "1" to increment the fencing counter.
/// Returns {1, fence} when the lock is ours (fence 0 without fencing; when the key already held
/// our token, the lease is reset and the current counter returned), or {0, pttl} when another
/// owner holds it (pttl -1: the key has no expiry).
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local f = 0
  if ARGV[3] == '1' then f = tonumber(redis.call('GET', KEYS[2]) or '0') end
  return {1, f}
end
if cur then return {0, redis.call('PTTL', KEYS[1])} end
local f = 0
if ARGV[3] == '1' then f = redis.call('INCR', KEYS[2]) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, f}",
    )
});

/// ENQUEUE: a waiter's atomic "take it if free, else queue me (or refresh my entry)".
///
/// KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] queue (list), KEYS[4] this waiter's
/// liveness key, KEYS[5] this waiter's signal list.
/// ARGV[1] token, ARGV[2] lease ms, ARGV[3] "1" for fencing, ARGV[4] the waiter's queue entry
/// (`wid:lease:fence:token`), ARGV[5] entry lifetime in ms (the waiter re-checks before it runs
/// out), ARGV[6] "1" when the waiter may have queued before (a re-check), "0" on its first call.
/// Returns {1, fence, pttl} when the lock is ours now (taken here, or handed over to this waiter
/// by a release since its last BLPOP; if an abandoned BLPOP took the grant, the fence is read
/// from the counter), or {0, 0, pttl} when queued (pttl of the lock key, -1 if it has no
/// expiry).
pub(crate) static ENQUEUE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  local f = tonumber(redis.call('LPOP', KEYS[5]) or '')
  f = f or tonumber(redis.call('GET', KEYS[2]) or '0')
  redis.call('LREM', KEYS[3], 1, ARGV[4])
  redis.call('DEL', KEYS[4], KEYS[5])
  return {1, f, redis.call('PTTL', KEYS[1])}
end
if not cur then
  local f = 0
  if ARGV[3] == '1' then f = redis.call('INCR', KEYS[2]) end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  if ARGV[6] == '1' then
    redis.call('LREM', KEYS[3], 1, ARGV[4])
    redis.call('DEL', KEYS[4], KEYS[5])
  end
  return {1, f, tonumber(ARGV[2])}
end
local ttl = tonumber(ARGV[5])
if redis.call('SET', KEYS[4], '1', 'PX', ttl, 'NX') then
  redis.call('RPUSH', KEYS[3], ARGV[4])
else
  redis.call('PEXPIRE', KEYS[4], ttl)
end
if redis.call('PTTL', KEYS[3]) < ttl then redis.call('PEXPIRE', KEYS[3], 2 * ttl) end
return {0, 0, redis.call('PTTL', KEYS[1])}",
    )
});

/// RELEASE: if the key holds our token, hand the lock to the oldest live waiter, else delete it.
///
/// KEYS[1] lock key, KEYS[2] fencing counter, KEYS[3] queue (`<base>:q`; a waiter's signal
/// list and liveness key are `<base>:s:<wid>` and `<base>:e:<wid>`, in the same slot).
/// ARGV[1] token.
/// Returns 1 when released (or handed over), 0 when the key did not hold our token.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local base = string.sub(KEYS[3], 1, -2)
while true do
  local head = redis.call('LPOP', KEYS[3])
  if not head then break end
  local wid, lease, fence, token = string.match(head, '^([^:]+):(%d+):(%d):(.+)$')
  if wid and redis.call('DEL', base .. 'e:' .. wid) == 1 then
    local f = 0
    if fence == '1' then f = redis.call('INCR', KEYS[2]) end
    redis.call('SET', KEYS[1], token, 'PX', lease)
    local s = base .. 's:' .. wid
    redis.call('RPUSH', s, f)
    redis.call('PEXPIRE', s, lease)
    return 1
  end
end
redis.call('DEL', KEYS[1])
return 1",
    )
});

/// CANCEL: a waiter whose wait bound ran out leaves the queue.
///
/// KEYS[1] lock key, KEYS[2] queue, KEYS[3] this waiter's liveness key, KEYS[4] its signal
/// list, KEYS[5] fencing counter (read when the grant was popped by an abandoned BLPOP, or the
/// list's head is a cancel mark: the counter cannot have moved since, as the lock is ours).
/// ARGV[1] token, ARGV[2] the waiter's queue entry.
/// Returns {1, fence, pttl} when a release had handed the lock to this waiter after all (it is
/// ours), else {0, 0, 0}.
pub(crate) static CANCEL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "redis.call('LREM', KEYS[2], 1, ARGV[2])
local f = tonumber(redis.call('LPOP', KEYS[4]) or '')
redis.call('DEL', KEYS[3], KEYS[4])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  f = f or tonumber(redis.call('GET', KEYS[5]) or '0')
  return {1, f, redis.call('PTTL', KEYS[1])}
end
return {0, 0, 0}",
    )
});

/// SIGNAL_CANCEL: wakes a blocked waiter that is being cancelled (`Cancel::cancel`) by pushing
/// the cancel mark onto its signal list.
///
/// KEYS[1] the waiter's signal list. ARGV[1] the mark, ARGV[2] lifetime of the list in ms (so a
/// mark for a waiter that is gone does not stay).
/// Returns 1.
pub(crate) static SIGNAL_CANCEL: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1",
    )
});

/// EXTEND: reset the lease of a lock we still hold (renewal uses it too).
///
/// KEYS[1] lock key. ARGV[1] token, ARGV[2] lease in ms.
/// Returns 1 when extended, 0 when the key is gone or holds another token.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0",
    )
});

// ---- Read/write locks ----
//
// The write lock of name N is the lock key itself holding the writer's token, exactly like an
// exclusive lock, so a plain `SET N token NX PX` client (or an exclusive lock of the same name)
// excludes and is excluded by a writer. While readers hold N, the lock key holds the marker
// `redislock readers` (a value no owner token can take: it has a space) with an expiry equal to
// the latest reader's, so such a client is excluded by readers too. Each reader's own lease is
// its score in the readers' sorted set (`{N}:rw:r`, reader token → expiry in server ms), so
// renewing a reader extends only its lease, and a crashed reader's entry simply runs out.
//
// Waiters queue in `{N}:rw:q` as `wid:kind:lease:fence:token` (kind `r` or `w`), each with a
// liveness key and a signal list as in the exclusive queue. Whenever the lock may have become
// available (a release, a downgrade, a waiter leaving, a waiter's re-check) DISPATCH grants the
// live entries at the head of the queue for as long as they are compatible: one writer, or
// every consecutive reader; it sets the lock for each and pushes the grant onto its signal list.
// A newcomer takes the lock at once only when the queue has no live entry, so readers that
// arrive after a waiting writer queue behind it. Scripts read the server's clock (TIME) to
// compare reader expiries.

/// Shared start of every read/write lock script: the clock, the keys, a type check, and the
/// functions that grant, check and dispatch. KEYS[1] lock key, KEYS[2] fencing counter,
/// KEYS[3] readers (sorted set), KEYS[4] queue (`<base>:rw:q`; a waiter's signal list and
/// liveness key are `<base>:rw:s:<wid>` and `<base>:rw:e:<wid>`).
macro_rules! rw_prelude {
    () => {
        "local MARK = 'redislock readers'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
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
  local f = 0
  if fence == '1' then f = redis.call('INCR', F) end
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
local function dispatch(me)
  local mine = nil
  while true do
    local head = redis.call('LINDEX', Q, 0)
    if not head then break end
    local wid, kind, lease, fence, token = string.match(head, '^([^:]+):([rw]):(%d+):(%d):(.+)$')
    if not wid or redis.call('EXISTS', base .. 'e:' .. wid) == 0 then
      redis.call('LPOP', Q)
    else
      local cur = redis.call('GET', K)
      if cur and (kind == 'w' or cur ~= MARK) then break end
      redis.call('LPOP', Q)
      redis.call('DEL', base .. 'e:' .. wid)
      local f = grant(kind, token, tonumber(lease), fence)
      if wid == me then
        mine = f
      else
        local s = base .. 's:' .. wid
        redis.call('RPUSH', s, f)
        redis.call('PEXPIRE', s, lease)
      end
      if kind == 'w' then break end
    end
  end
  return mine
end
"
    };
}

/// RW_ENQUEUE: take the read or write lock if the queue lets us, else (unless it is a single
/// attempt) queue this waiter or refresh its entry. Also moves the queue along (DISPATCH).
///
/// KEYS[1..4] as in the prelude, KEYS[5] this waiter's liveness key, KEYS[6] its signal list.
/// ARGV[1] token, ARGV[2] lease ms, ARGV[3] "1" for fencing, ARGV[4] "r" or "w", ARGV[5] the
/// queue entry (`wid:kind:lease:fence:token`), ARGV[6] entry lifetime ms, ARGV[7] "try" (one
/// attempt, never queue), "first" or "again" (a re-check).
/// Returns {1, fence, ms left of our lease} when the lock is ours (taken now, or handed over
/// since the last BLPOP), {0, 0, ms until the first holder's lease runs out (the writer's, or
/// the earliest reader's)} when queued or (with "try") refused;
/// an error reply `WRONGTYPE` when the name is in use as a semaphore.
pub(crate) static RW_ENQUEUE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        rw_prelude!(),
        "if wrongtype then
  return redis.error_reply('WRONGTYPE the name is in use as a semaphore')
end
local token, lease, kind, entry, mode = ARGV[1], tonumber(ARGV[2]), ARGV[4], ARGV[5], ARGV[7]
local alive, sig = KEYS[5], KEYS[6]
if holds(kind, token) then
  local f = tonumber(redis.call('LPOP', sig) or '')
  f = f or tonumber(redis.call('GET', F) or '0')
  redis.call('LREM', Q, 1, entry)
  redis.call('DEL', alive, sig)
  return {1, f, left_ms(kind, token)}
end
local queued = redis.call('EXISTS', alive) == 1
local me = nil
if queued then me = string.match(entry, '^([^:]+):') end
local f = dispatch(me)
if f then
  redis.call('DEL', sig)
  return {1, f, lease}
end
if not queued and redis.call('LLEN', Q) == 0 then
  local cur = redis.call('GET', K)
  if not cur or (kind == 'r' and cur == MARK) then
    return {1, grant(kind, token, lease, ARGV[3]), lease}
  end
end
if mode == 'try' then return {0, 0, next_ms()} end
local ttl = tonumber(ARGV[6])
if redis.call('SET', alive, '1', 'PX', ttl, 'NX') then
  redis.call('RPUSH', Q, entry)
else
  redis.call('PEXPIRE', alive, ttl)
end
if redis.call('PTTL', Q) < ttl then redis.call('PEXPIRE', Q, 2 * ttl) end
return {0, 0, next_ms()}"
    ))
});

/// RW_LEAVE: a waiter whose wait ended (bound, cancel, error) leaves the queue; the queue moves
/// on, as its entry may have held back the ones behind it.
///
/// KEYS as RW_ENQUEUE. ARGV[1] token, ARGV[2] the queue entry, ARGV[3] "r" or "w".
/// Returns {1, fence, ms left} when a release had handed the lock to this waiter after all (it
/// is ours), else {0, 0, 0}.
pub(crate) static RW_LEAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        rw_prelude!(),
        "if wrongtype then return {0, 0, 0} end
local token, entry, kind = ARGV[1], ARGV[2], ARGV[3]
redis.call('LREM', Q, 1, ARGV[2])
local f = tonumber(redis.call('LPOP', KEYS[6]) or '')
redis.call('DEL', KEYS[5], KEYS[6])
if holds(kind, token) then
  f = f or tonumber(redis.call('GET', F) or '0')
  return {1, f, left_ms(kind, token)}
end
dispatch(nil)
return {0, 0, 0}"
    ))
});

/// RW_RELEASE: releases a read or write lock and grants what can now proceed.
///
/// KEYS as in the prelude. ARGV[1] token, ARGV[2] "r" or "w".
/// Returns 1 when the lock was ours, 0 when it was not (expired, lost or taken over).
pub(crate) static RW_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        rw_prelude!(),
        "if wrongtype then return 0 end
local token = ARGV[1]
local ours
if ARGV[2] == 'w' then
  ours = redis.call('GET', K) == token
  if ours then redis.call('DEL', K) end
else
  ours = reader_holds(token)
  redis.call('ZREM', R, token)
  readers_left()
end
dispatch(nil)
if ours then return 1 end
return 0"
    ))
});

/// RW_DOWNGRADE: turns a held write lock into a read lock of the same token without a gap,
/// and lets in the readers at the head of the queue.
///
/// KEYS as in the prelude. ARGV[1] token, ARGV[2] lease ms of the read lock.
/// Returns 1 when downgraded, 0 when the write lock was not ours.
pub(crate) static RW_DOWNGRADE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        rw_prelude!(),
        "if wrongtype or redis.call('GET', K) ~= ARGV[1] then return 0 end
local lease = tonumber(ARGV[2])
redis.call('DEL', R)
redis.call('SET', K, MARK, 'PX', lease)
grant_reader(ARGV[1], lease)
dispatch(nil)
return 1"
    ))
});

/// RW_EXTEND_READ: resets one reader's lease (renewal uses it too); the lock key's expiry is
/// raised to it if lower.
///
/// KEYS[1] lock key, KEYS[2] readers. ARGV[1] token, ARGV[2] lease ms.
/// Returns 1 when extended, 0 when the reader no longer holds the lock.
pub(crate) static RW_EXTEND_READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'string' or redis.call('GET', KEYS[1]) ~= 'redislock readers' then return 0 end
local s = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not s or tonumber(s) <= now then return 0 end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], now + lease, ARGV[1])
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
if redis.call('PTTL', KEYS[2]) < lease then redis.call('PEXPIRE', KEYS[2], lease) end
return 1",
    )
});

// ---- Semaphores ----
//
// The semaphore named N keeps its holders in the key N itself, a sorted set: one member
// `k:token` per grant of k permits, scored by its expiry (server ms), and one member `#n`
// (score 0) recording the number of permits, fixed by the first user while anything is held or
// waiting. Permits are counted after dropping expired members, so a crashed holder's permits
// come back when its lease runs out; the key expires with its latest holder and is deleted when
// the last one leaves. Waiters queue in `{N}:sem:q` as `wid:k:n:lease:token`; DISPATCH grants
// the live entries at the head in order while the permits suffice, and stops at the first that
// does not fit, so a later, smaller request never overtakes it.

/// Shared start of every semaphore script. KEYS[1] the semaphore key (sorted set), KEYS[2] the
/// queue (`<base>:sem:q`; a waiter's signal list and liveness key are `<base>:sem:s:<wid>` and
/// `<base>:sem:e:<wid>`).
macro_rules! sem_prelude {
    () => {
        "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local K, Q = KEYS[1], KEYS[2]
local base = string.sub(Q, 1, -2)
local ty = redis.call('TYPE', K)['ok']
local wrongtype = ty ~= 'none' and ty ~= 'zset'
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
local function dispatch(me, n, used)
  local mine = nil
  while n do
    local head = redis.call('LINDEX', Q, 0)
    if not head then break end
    local wid, k, hn, lease, token = string.match(head, '^([^:]+):(%d+):(%d+):(%d+):(.+)$')
    if not wid or redis.call('EXISTS', base .. 'e:' .. wid) == 0 then
      redis.call('LPOP', Q)
    else
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
        local s = base .. 's:' .. wid
        redis.call('RPUSH', s, v)
        redis.call('PEXPIRE', s, lease)
      end
    end
  end
  return mine, used
end
"
    };
}

/// SEM_ENQUEUE: take k permits if the queue lets us, else (unless it is a single attempt)
/// queue this waiter or refresh its entry. Also moves the queue along.
///
/// KEYS[1..2] as in the prelude, KEYS[3] this waiter's liveness key, KEYS[4] its signal list.
/// ARGV[1] token, ARGV[2] k, ARGV[3] n (permits of the semaphore), ARGV[4] lease ms, ARGV[5]
/// the queue entry (`wid:k:n:lease:token`), ARGV[6] entry lifetime ms, ARGV[7] "try", "first"
/// or "again".
/// Returns {1, 0, ms left of our lease} when the permits are ours, {0, 0, ms until the first
/// holder's lease runs out} when queued or refused; error replies `PERMITS <n>` when the semaphore has another number of
/// permits, `WRONGTYPE` when the name is in use as a lock.
pub(crate) static SEM_ENQUEUE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sem_prelude!(),
        "if wrongtype then
  return redis.error_reply('WRONGTYPE the name is in use as a lock, not a semaphore')
end
local token, k, n, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local entry, mode, alive, sig = ARGV[5], ARGV[7], KEYS[3], KEYS[4]
local s = redis.call('ZSCORE', K, k .. ':' .. token)
if s and tonumber(s) > now then
  redis.call('LREM', Q, 1, entry)
  redis.call('DEL', alive, sig)
  return {1, 0, tonumber(s) - now}
end
local size, used = state()
if size and size ~= n then
  sync()
  return redis.error_reply('PERMITS ' .. size)
end
local queued = redis.call('EXISTS', alive) == 1
local me = nil
if queued then me = string.match(entry, '^([^:]+):') end
local mine
mine, used = dispatch(me, n, used)
if mine then
  redis.call('DEL', sig)
  return {1, 0, lease}
end
if not queued and redis.call('LLEN', Q) == 0 and used + k <= n then
  grant(token, k, n, lease)
  return {1, 0, lease}
end
sync()
if mode == 'try' then return {0, 0, next_ms()} end
local ttl = tonumber(ARGV[6])
if redis.call('SET', alive, '1', 'PX', ttl, 'NX') then
  redis.call('RPUSH', Q, entry)
else
  redis.call('PEXPIRE', alive, ttl)
end
if redis.call('PTTL', Q) < ttl then redis.call('PEXPIRE', Q, 2 * ttl) end
return {0, 0, next_ms()}"
    ))
});

/// SEM_LEAVE: a waiter whose wait ended leaves the queue; the queue moves on.
///
/// KEYS as SEM_ENQUEUE. ARGV[1] token, ARGV[2] k, ARGV[3] the queue entry.
/// Returns {1, 0, ms left} when the permits had been handed to this waiter after all, else
/// {0, 0, 0}.
pub(crate) static SEM_LEAVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sem_prelude!(),
        "if wrongtype then return {0, 0, 0} end
redis.call('LREM', Q, 1, ARGV[3])
redis.call('DEL', KEYS[3], KEYS[4])
local s = redis.call('ZSCORE', K, ARGV[2] .. ':' .. ARGV[1])
if s and tonumber(s) > now then return {1, 0, tonumber(s) - now} end
local n, used = state()
dispatch(nil, n, used)
sync()
return {0, 0, 0}"
    ))
});

/// SEM_RELEASE: gives k permits back and grants the waiters that now fit, in order.
///
/// KEYS as in the prelude. ARGV[1] token, ARGV[2] k.
/// Returns 1 when the permits were ours, 0 when they had run out or been taken away.
pub(crate) static SEM_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        sem_prelude!(),
        "if wrongtype then return 0 end
local member = ARGV[2] .. ':' .. ARGV[1]
local s = redis.call('ZSCORE', K, member)
local ours = s and tonumber(s) > now
if s then redis.call('ZREM', K, member) end
local n, used = state()
dispatch(nil, n, used)
sync()
if ours then return 1 end
return 0"
    ))
});

/// SEM_EXTEND: resets the lease of k permits held with a token (renewal uses it too).
///
/// KEYS[1] the semaphore key. ARGV[1] token, ARGV[2] k, ARGV[3] lease ms.
/// Returns 1 when extended, 0 when the permits are no longer ours.
pub(crate) static SEM_EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then return 0 end
local member = ARGV[2] .. ':' .. ARGV[1]
local s = redis.call('ZSCORE', KEYS[1], member)
if not s or tonumber(s) <= now then return 0 end
local lease = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], 'XX', now + lease, member)
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return 1",
    )
});

// ---- Several exclusive locks at once ----
//
// A set of names is a set of exclusive locks, each its own key holding the set's one token, so
// every name interoperates with exclusive locks and plain `SET NX PX` clients of that name. The
// set is taken all or none by one script. A set waiter that finds a name held queues as an
// ordinary exclusive waiter of that name (entry `wid:lease:0:token`); the holder's RELEASE hands
// it that name and wakes it, and its re-check then takes the whole set if the other names are
// free, or passes the name straight on (the same handoff as RELEASE) and queues behind the next
// held one. So a set waiter never holds some names while it waits for others.

/// The handoff of RELEASE for name i of a set (KEYS stride `st`: lock key, fencing counter,
/// queue at offsets 1, 2, 3): the lock goes to the oldest live exclusive waiter, else is freed.
macro_rules! set_handoff {
    () => {
        "local function handoff(i, st)
  local K, F, Q = KEYS[(i - 1) * st + 1], KEYS[(i - 1) * st + 2], KEYS[(i - 1) * st + 3]
  local base = string.sub(Q, 1, -2)
  while true do
    local head = redis.call('LPOP', Q)
    if not head then break end
    local wid, lease, fence, token = string.match(head, '^([^:]+):(%d+):(%d):(.+)$')
    if wid and redis.call('DEL', base .. 'e:' .. wid) == 1 then
      local f = 0
      if fence == '1' then f = redis.call('INCR', F) end
      redis.call('SET', K, token, 'PX', lease)
      local s = base .. 's:' .. wid
      redis.call('RPUSH', s, f)
      redis.call('PEXPIRE', s, lease)
      return
    end
  end
  redis.call('DEL', K)
end
"
    };
}

/// SET_ACQUIRE: takes every name of a set if none is held by another owner; otherwise passes on
/// the names handed to this waiter and (unless it is a single attempt, or leaving) queues it
/// behind the first held name.
///
/// KEYS, five per name in the set's order: lock key, fencing counter, queue, this waiter's
/// liveness key and signal list in that name's slot.
/// ARGV[1] token, ARGV[2] lease ms, ARGV[3] "1" for fencing, ARGV[4] "try", "first", "again"
/// or "leave" (the wait ended: never take the set, leave every queue), ARGV[5] the queue entry
/// (`wid:lease:0:token`), ARGV[6] entry lifetime ms.
/// Returns {1, fence1, fence2, ...} when the set is ours (fences 0 without fencing), or
/// {0, pttl of the first held name's key} (0 after "leave").
pub(crate) static SET_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        set_handoff!(),
        "local n = #KEYS / 5
local token, lease, mode, entry = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
local function key(i, j) return KEYS[(i - 1) * 5 + j] end
local busy = nil
for i = 1, n do
  local cur = redis.call('GET', key(i, 1))
  if cur and cur ~= token then
    busy = i
    break
  end
end
if not busy and mode ~= 'leave' then
  local out = {1}
  for i = 1, n do
    local f = 0
    if ARGV[3] == '1' then f = redis.call('INCR', key(i, 2)) end
    redis.call('SET', key(i, 1), token, 'PX', lease)
    if mode == 'again' then
      redis.call('LREM', key(i, 3), 1, entry)
      redis.call('DEL', key(i, 4), key(i, 5))
    end
    out[i + 1] = f
  end
  return out
end
for i = 1, n do
  if redis.call('GET', key(i, 1)) == token then handoff(i, 5) end
end
if mode == 'try' then return {0, redis.call('PTTL', key(busy, 1))} end
for i = 1, n do
  if i ~= busy then
    if redis.call('EXISTS', key(i, 4)) == 1 then redis.call('LREM', key(i, 3), 1, entry) end
    redis.call('DEL', key(i, 4), key(i, 5))
  end
end
if mode == 'leave' then
  if busy then
    redis.call('LREM', key(busy, 3), 1, entry)
    redis.call('DEL', key(busy, 4), key(busy, 5))
  end
  return {0, 0}
end
local ttl = tonumber(ARGV[6])
local alive, q = key(busy, 4), key(busy, 3)
if redis.call('SET', alive, '1', 'PX', ttl, 'NX') then
  redis.call('RPUSH', q, entry)
else
  redis.call('PEXPIRE', alive, ttl)
end
if redis.call('PTTL', q) < ttl then redis.call('PEXPIRE', q, 2 * ttl) end
return {0, redis.call('PTTL', key(busy, 1))}"
    ))
});

/// SET_RELEASE: releases every name of a set that still holds the set's token (handing each to
/// its oldest live exclusive waiter).
///
/// KEYS, three per name: lock key, fencing counter, queue. ARGV[1] token.
/// Returns how many names still held the token.
pub(crate) static SET_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        set_handoff!(),
        "local held = 0
for i = 1, #KEYS / 3 do
  if redis.call('GET', KEYS[(i - 1) * 3 + 1]) == ARGV[1] then
    handoff(i, 3)
    held = held + 1
  end
end
return held"
    ))
});

/// SET_EXTEND: resets the lease of every name of a set, if every one still holds the token
/// (renewal uses it too).
///
/// KEYS: the lock keys. ARGV[1] token, ARGV[2] lease ms.
/// Returns 1 when extended, 0 when some name no longer held the token (nothing is extended).
pub(crate) static SET_EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end
end
for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
return 1",
    )
});

// Redlock (`quorum/`): each script runs on one master of several. A lock is held where a
// majority of masters hold its key with the owner's token; each master only ever sees its own
// key. There is no queue: waiters mark the name as wanted on every master and block on one
// master's wake list, and a release that finds the mark pushes one wake-up there (QUORUM_WAKE)
// and leaves the turn to the woken waiter for a moment: until it has tried, other waiters'
// attempts are refused.

/// QUORUM_ACQUIRE: a Redlock waiter's attempt on one master, also the retry of an attempt whose
/// outcome on that master is unknown (a plain `SET NX PX` is the first attempt).
///
/// KEYS[1] lock key, KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn.
/// ARGV[1] token, ARGV[2] lease in ms, ARGV[3] how long the mark must live at least, in ms ("0":
/// leave it alone), ARGV[4] "1" when a release woke this waiter (it takes its turn), else "0".
/// Returns {1, 0} when this master holds the lock for us now (set here, or it held our token
/// already: the lease is reset), or {0, pttl, token} when another owner holds it here (pttl -1:
/// the key has no expiry; token: that owner's, so that a waiter can tell a holder that a
/// majority names from attempts that split the masters), or {0, pttl, ''} while the lock is
/// free but the turn of a woken waiter (pttl: the turn's).
pub(crate) static QUORUM_ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local ttl = tonumber(ARGV[3])
if ttl > 0 and redis.call('PTTL', KEYS[2]) < ttl then
  redis.call('SET', KEYS[2], '1', 'PX', ttl)
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, 0}
end
if cur then return {0, redis.call('PTTL', KEYS[1]), cur} end
if ARGV[4] == '1' then
  redis.call('DEL', KEYS[3])
else
  local turn = redis.call('PTTL', KEYS[3])
  if turn > 0 then return {0, turn, ''} end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0}",
    )
});

/// QUORUM_RELEASE: delete the key on one master if it holds our token; tell whether waiters
/// marked the lock as wanted here (the releaser then wakes one, once every master is done).
///
/// KEYS[1] lock key, KEYS[2] the "waiters exist" mark, KEYS[3] the woken waiter's turn.
/// ARGV[1] token, ARGV[2] how long the turn lasts, in ms ("0": no turn, no waiter is woken).
/// Returns released + 2 × wanted: released 1 when the key held our token (and is gone now), else
/// 0; wanted 1 when the mark exists (the releaser then wakes a waiter: the turn is set for it when
/// the key was ours). (An integer: a Lua table reply costs the server about 1 µs more per call,
/// on every master, on every release.)
pub(crate) static QUORUM_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
if redis.call('PTTL', KEYS[2]) > 0 then
  if released == 1 and ARGV[2] ~= '0' then redis.call('SET', KEYS[3], '1', 'PX', ARGV[2]) end
  return released + 2
end
return released",
    )
});

/// QUORUM_EXTEND: reset the lease of our key on one master, telling a key that is gone from one
/// that another owner holds (a gone key is set again by the renewal when a majority of masters
/// still hold ours: a master restarted empty gets the lock back).
///
/// KEYS[1] lock key. ARGV[1] token, ARGV[2] lease in ms.
/// Returns 1 when extended, 0 when the key is gone, -1 when it holds another token.
pub(crate) static QUORUM_EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if cur then return -1 end
return 0",
    )
});

/// QUORUM_WAKE: wake one waiter blocked on the lock's wake list (on the master waiters block
/// on), after a release. The list holds at most one wake-up: one release frees the lock once.
///
/// KEYS[1] the wake list. ARGV[1] how long an unclaimed wake-up stays, in ms.
/// Returns 1.
pub(crate) static QUORUM_WAKE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "redis.call('LPOP', KEYS[1])
redis.call('RPUSH', KEYS[1], '1')
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1",
    )
});
