//! The lock operations, typed: every call the library makes to Redis about a lock, each one
//! round trip (a command, a pipeline or a script of `scripts.rs`), with its arguments and its
//! reply in Rust types.
//!
//! This is the seam between the lock logic and the servers: acquire (`acquire.rs`), waiting
//! (`waiting.rs`), release and extend (`lock.rs`), renewal (`renewal/`) and cancel (`cancel.rs`)
//! call only these functions, and only these functions pick a connection pool of the backend.
//! A topology that places locks on more than one server routes here, by the lock's keys.
//!
//! With `min_replicas`, every write that grants or extends a lock is followed on the same
//! connection by WAIT (`replication.rs`), and counts only once enough replicas acknowledge it.
//!
//! With Redlock (independent masters, `Servers::Quorum`), acquire, release, extend, renewal
//! and the holder's GET go to every master at once and count a majority (`quorum/`); a waiter
//! and a cancel use one master, the lock's home.

use std::time::{Duration, Instant};

use crate::backend::{Backend, Node, Servers};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::pool::PooledConn;
use crate::quorum;
use crate::replication;
use crate::scripts;
use crate::token::Token;

/// The server that holds the lock of `keys`. With Redlock, the master its waiters block on (the
/// operations that need every master branch off before asking).
fn node<'b>(b: &'b Backend, keys: &LockKeys) -> &'b Node {
    match &b.servers {
        Servers::One(node) => node,
        Servers::Quorum(masters) => &masters.home(keys).node,
    }
}

/// A lock granted: its fencing token (0 without fencing) and the instant from which its lease
/// counts.
pub(crate) struct Grant {
    pub fence: u64,
    pub lease_from: Instant,
}

/// What a waiter is known by on the server: its keys and its queue entry.
pub(crate) struct Waiter {
    /// The list a release pushes the grant onto (and a cancel its mark).
    pub signal: Vec<u8>,
    /// Exists while the queue entry is valid; the waiter refreshes it on every re-check.
    pub alive: Vec<u8>,
    /// The queue entry: `wid:lease:fence:token`, what a release needs to hand the lock over.
    pub entry: String,
}

/// What ENQUEUE found.
pub(crate) enum Enqueued {
    /// The lock is ours: taken now, or handed over since the waiter's last block.
    Granted { fence: i64, pttl: i64 },
    /// Queued (or the entry refreshed); `pttl` is the lock key's remaining lifetime (-1: none).
    Queued { pttl: i64 },
}

/// One attempt to take a free lock: the classic `SET key token NX PX lease`, or the ACQUIRE
/// script with fencing. `Ok(None)`: held by another owner. A grant that is not acknowledged by
/// enough replicas, or whose reply was lost, is released again (if it was applied) and reported
/// as the error.
pub(crate) fn acquire(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
    fencing: bool,
) -> Result<Option<Grant>, Error> {
    if let Servers::Quorum(masters) = &b.servers {
        return quorum::acquire(masters, keys, token, lease, fencing);
    }
    let ms = lease.as_millis() as u64;
    let mut sent = false;
    let mut sent_at = Instant::now();
    // Set while a grant waits for its replicas' acknowledgement (min_replicas).
    let mut unacknowledged = false;
    let result = node(b, keys).main.run(None, |c, attempt| {
        sent = true;
        sent_at = Instant::now();
        // A retry (after the connection dropped mid-call) uses the script, which also accepts
        // the key already holding our token: the first SET may have been applied.
        if !fencing && attempt == 0 {
            let mut set = redis::cmd("SET");
            set.arg(keys.lock())
                .arg(token.as_str())
                .arg("NX")
                .arg("PX")
                .arg(ms);
            if b.cfg.min_replicas == 0 {
                let set: Option<String> = set.query(c)?;
                return Ok(set.map(|_| 0));
            }
            // With min_replicas the WAIT goes in the same round trip.
            let mut pipe = redis::pipe();
            replication::add_wait(pipe.add_command(set), &b.cfg);
            let (set, acks): (Option<String>, i64) = pipe.query(c)?;
            if set.is_some() {
                unacknowledged = true;
                replication::check(acks, &b.cfg)?;
                unacknowledged = false;
            }
            Ok(set.map(|_| 0))
        } else {
            let (ok, fence): (i64, i64) = scripts::ACQUIRE
                .key(keys.lock())
                .key(keys.fence())
                .arg(token.as_str())
                .arg(ms)
                .arg(if fencing { "1" } else { "0" })
                .invoke(c)?;
            if ok == 1 {
                unacknowledged = true;
                replication::wait(c, &b.cfg)?;
                unacknowledged = false;
            }
            Ok((ok == 1).then_some(fence.max(0) as u64))
        }
    });
    match result {
        Ok(fence) => Ok(fence.map(|fence| Grant {
            fence,
            lease_from: sent_at,
        })),
        Err(e) => {
            if unacknowledged || (sent && e.is_timeout()) {
                // Not acknowledged by enough replicas: not a grant. Or the SET may have been
                // applied before the reply was lost: the lock may be held with our token.
                // Remove it if so; never assume either way.
                let _ = release(b, keys, token);
            }
            Err(e)
        }
    }
}

/// RELEASE: frees the lock, or hands it to the oldest live waiter, if the key holds `token`.
/// Returns whether it did.
pub(crate) fn release(b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
    if let Servers::Quorum(masters) = &b.servers {
        return masters.release(b, keys, token);
    }
    let released: i64 = node(b, keys).main.run(None, |c, _| {
        scripts::RELEASE
            .key(keys.lock())
            .key(keys.fence())
            .key(keys.queue())
            .arg(token.as_str())
            .invoke(c)
    })?;
    Ok(released == 1)
}

/// EXTEND: resets the lease to `lease` if the key holds `token` (with `min_replicas`, once
/// enough replicas acknowledge it). Returns whether it did.
pub(crate) fn extend(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
) -> Result<bool, Error> {
    if let Servers::Quorum(masters) = &b.servers {
        return masters.extend(keys, token, lease);
    }
    let ms = lease.as_millis() as u64;
    let extended: i64 = node(b, keys).main.run(None, |c, _| {
        let extended = scripts::EXTEND
            .key(keys.lock())
            .arg(token.as_str())
            .arg(ms)
            .invoke(c)?;
        if extended == 1 {
            replication::wait(c, &b.cfg)?;
        }
        Ok(extended)
    })?;
    Ok(extended == 1)
}

/// One lock to extend in [`extend_many`].
pub(crate) struct Extension<'a> {
    pub keys: &'a LockKeys,
    pub token: &'a Token,
    pub lease: Duration,
}

/// EXTEND for many locks of one backend in one pipeline (renewal), loading the script first if
/// the server lost it. One outcome per lock, in order: `Ok(true)` extended, `Ok(false)` the key
/// no longer held the token. With `min_replicas`, one WAIT covers the whole pipeline.
pub(crate) fn extend_many(b: &Backend, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
    if let Servers::Quorum(masters) = &b.servers {
        return masters.extend_many(locks);
    }
    let Some(first) = locks.first() else {
        return Vec::new();
    };
    let main = &node(b, first.keys).main;
    let sent = main.run(None, |c, _| {
        let mut loaded = false;
        loop {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for l in locks {
                pipe.cmd("EVALSHA")
                    .arg(scripts::EXTEND.get_hash())
                    .arg(1)
                    .arg(l.keys.lock())
                    .arg(l.token.as_str())
                    .arg(l.lease.as_millis() as u64);
            }
            let waits = replication::add_wait(&mut pipe, &b.cfg);
            let mut replies: Vec<redis::RedisResult<i64>> = pipe.query(c)?;
            if waits {
                // Renewals count only once enough replicas acknowledged them (min_replicas).
                let acks = replies.pop().unwrap_or(Ok(0))?;
                replication::check(acks, &b.cfg)?;
            }
            let noscript = replies.iter().any(|r| {
                r.as_ref().is_err_and(|e| {
                    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                })
            });
            if noscript && !loaded {
                scripts::EXTEND.load(c)?;
                loaded = true;
                continue;
            }
            return Ok(replies);
        }
    });
    match sent {
        Ok(replies) => replies
            .into_iter()
            .map(|r| match r {
                Ok(n) => Ok(n == 1),
                Err(e) => Err(Error::from_redis(main.server(), &e)),
            })
            .collect(),
        Err(e) => locks.iter().map(|_| Err(e.clone())).collect(),
    }
}

/// GET: the token the lock key holds now, if any.
pub(crate) fn holder(b: &Backend, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error> {
    if let Servers::Quorum(masters) = &b.servers {
        return masters.holder(keys);
    }
    node(b, keys)
        .main
        .run(None, |c, _| redis::cmd("GET").arg(keys.lock()).query(c))
}

/// A connection for one waiter of `keys`' lock, from the pool that only waiters use (so that
/// blocked waiters never starve releases and renewals of connections), within `limit`.
pub(crate) fn waiter_conn<'b>(
    b: &'b Backend,
    keys: &LockKeys,
    limit: Duration,
) -> Result<PooledConn<'b>, Error> {
    node(b, keys).wait.get(Some(limit))
}

/// Whether every waiter connection is in use (a failed [`waiter_conn`] then means "wait for
/// one", not "unreachable").
pub(crate) fn waiters_exhausted(b: &Backend, keys: &LockKeys) -> bool {
    node(b, keys).wait.exhausted()
}

/// For a waiter whose call failed on its connection: whether it may go on with a new one (see
/// [`crate::pool::ConnPool::retryable`]; call once per error).
pub(crate) fn waiter_may_retry(b: &Backend, keys: &LockKeys, e: &redis::RedisError) -> bool {
    node(b, keys).wait.retryable(e)
}

/// The name of the server waiters of `keys`' lock block on, for messages.
pub(crate) fn waiter_server<'b>(b: &'b Backend, keys: &LockKeys) -> &'b str {
    node(b, keys).wait.server()
}

/// How long a waiter connection's reads may take beyond what they wait for.
pub(crate) fn waiter_read_timeout(b: &Backend, keys: &LockKeys) -> Duration {
    node(b, keys).wait.read_timeout()
}

/// ENQUEUE on a waiter's connection: take the lock if it is free, else queue the waiter (or
/// refresh its entry, keeping its place). `first`: no ENQUEUE of this waiter was sent before.
/// `entry_ttl`: how long the entry stays valid without the waiter coming back.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue(
    c: &mut redis::Connection,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
    fencing: bool,
    w: &Waiter,
    first: bool,
    entry_ttl: Duration,
) -> redis::RedisResult<Enqueued> {
    let (granted, fence, pttl): (i64, i64, i64) = scripts::ENQUEUE
        .key(keys.lock())
        .key(keys.fence())
        .key(keys.queue())
        .key(&w.alive)
        .key(&w.signal)
        .arg(token.as_str())
        .arg(lease.as_millis() as u64)
        .arg(if fencing { "1" } else { "0" })
        .arg(&w.entry)
        .arg(entry_ttl.as_millis() as u64)
        .arg(if first { "0" } else { "1" })
        .invoke(c)?;
    Ok(if granted == 1 {
        Enqueued::Granted { fence, pttl }
    } else {
        Enqueued::Queued { pttl }
    })
}

/// BLPOP on a waiter's signal list for at most `block` (at least 1 ms: 0 would block forever).
/// Returns what a release (the fencing token as text) or a cancel (its mark) pushed, or `None`
/// when the time ran out.
pub(crate) fn block_for_grant(
    c: &mut redis::Connection,
    w: &Waiter,
    block: Duration,
) -> redis::RedisResult<Option<Vec<u8>>> {
    let block = block.max(Duration::from_millis(1));
    let popped: Option<(Vec<u8>, Vec<u8>)> = redis::cmd("BLPOP")
        .arg(&w.signal)
        .arg(block.as_millis() as f64 / 1000.0)
        .query(c)?;
    Ok(popped.map(|(_, value)| value))
}

/// CANCEL: the waiter leaves the queue. Returns `Some((fence, pttl))` when a release had handed
/// the lock to this waiter after all (it is ours), else `None`.
pub(crate) fn leave_queue(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    w: &Waiter,
) -> Result<Option<(i64, i64)>, Error> {
    let (ours, fence, pttl): (i64, i64, i64) = node(b, keys).main.run(None, |c, _| {
        scripts::CANCEL
            .key(keys.lock())
            .key(keys.queue())
            .key(&w.alive)
            .key(&w.signal)
            .key(keys.fence())
            .arg(token.as_str())
            .arg(&w.entry)
            .invoke(c)
    })?;
    Ok((ours == 1).then_some((fence, pttl)))
}

/// SIGNAL_CANCEL: pushes `mark` onto a blocked waiter's signal list, which lives for `lifetime`
/// if nobody pops it.
pub(crate) fn signal_cancel(
    b: &Backend,
    keys: &LockKeys,
    signal: &[u8],
    mark: &[u8],
    lifetime: Duration,
) -> Result<(), Error> {
    node(b, keys).main.run(None, |c, _| {
        scripts::SIGNAL_CANCEL
            .key(signal)
            .arg(mark)
            .arg(lifetime.as_millis() as u64)
            .invoke::<i64>(c)
    })?;
    Ok(())
}
