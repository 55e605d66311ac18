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

// Redlock (`quorum/`): each script runs on one master of several. A lock is held where a
// majority of masters hold its key with the owner's token; each master only ever sees its own
// key. There is no queue: waiters mark the name as wanted on every master and block on one
// master's wake list, and a release that finds the mark pushes one wake-up there (QUORUM_WAKE).

/// QUORUM_ACQUIRE: a Redlock waiter's attempt on one master, also the retry of an attempt whose
/// outcome on that master is unknown (a plain `SET NX PX` is the first attempt).
///
/// KEYS[1] lock key, KEYS[2] the "waiters exist" mark.
/// ARGV[1] token, ARGV[2] lease in ms, ARGV[3] how long the mark must live at least, in ms ("0":
/// leave it alone).
/// Returns {1, 0} when this master holds the lock for us now (set here, or it held our token
/// already: the lease is reset), or {0, pttl} when another owner holds it here (pttl -1: the
/// key has no expiry).
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
if cur then return {0, redis.call('PTTL', KEYS[1])} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1, 0}",
    )
});

/// QUORUM_RELEASE: delete the key on one master if it holds our token; tell whether waiters
/// marked the lock as wanted here (the releaser then wakes one, once every master is done).
///
/// KEYS[1] lock key, KEYS[2] the "waiters exist" mark. ARGV[1] token.
/// Returns {released, wanted}: released 1 when the key held our token (and is gone now), else 0;
/// wanted 1 when the mark exists.
pub(crate) static QUORUM_RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local released = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  released = 1
end
local wanted = 0
if redis.call('PTTL', KEYS[2]) > 0 then wanted = 1 end
return {released, wanted}",
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
