//! The lock operations, typed: every call the library makes to Redis about a lock, each one
//! round trip (a command, a pipeline or a script of `scripts.rs`), with its arguments and its
//! reply in Rust types.
//!
//! This is the seam between the lock logic and the servers: acquire (`acquire.rs`), waiting
//! (`waiting.rs`), release and extend (`lock.rs`), renewal (`renewal/`) and cancel (`cancel.rs`)
//! call only these functions, and only these functions pick a connection pool of the backend.
//! A topology that places locks on more than one server routes here, by the lock's keys: a
//! Redis Cluster by the lock's hash slot (`topology/cluster.rs` follows its redirections), and
//! renewal sends one pipeline per master. The other kinds of lock (`kinds/`) type their own
//! script calls and run them through [`run`] and the waiter functions here, so they are routed
//! the same way.
//!
//! With `min_replicas`, every write that grants or extends a lock is followed on the same
//! connection by WAIT (`replication.rs`), and counts only once enough replicas acknowledge it.
//!
//! With Redlock (independent masters, `Servers::Quorum`), acquire, release, extend, renewal
//! and the holder's GET go to every master at once and count a majority (`quorum/`); a waiter
//! and a cancel use one master, the lock's home.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Node, NodeRef, Servers};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::kinds::{self, Kind};
use crate::pool::{ConnPool, PooledConn};
use crate::quorum;
use crate::replication;
use crate::scripts;
use crate::token::Token;
use crate::topology::cluster::{Cluster, Redirect};

/// Runs `op` on a lock-call connection to the server that holds the lock of `keys`, as
/// [`ConnPool::run`] does: on a connection the server dropped, `op` runs again with `attempt` ≥ 1,
/// so it must be safe to repeat. One server: its pool, nothing more. A cluster: the master of the
/// lock's slot, following redirections. The other kinds of lock (`kinds/`) run their typed
/// script calls through it too.
pub(crate) fn run<T>(
    b: &Backend,
    keys: &LockKeys,
    op: impl FnMut(&mut redis::Connection, u32) -> redis::RedisResult<T>,
) -> Result<T, Error> {
    match &b.servers {
        Servers::One(node) => node.main.run(None, op),
        Servers::Cluster(c) => c.run(keys.slot(), c.patience(), op),
        // The operations that need every master branch off before; the rest (a waiter's
        // marks, a cancel) use the lock's home master.
        Servers::Quorum(masters) => masters.home(keys).node.main.run(None, op),
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
    let result = run(b, keys, |c, attempt| {
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
            // Replies one by one: an error reply keeps its details (a MOVED's address).
            pipe.ignore_errors();
            let (set, acks): (redis::RedisResult<Option<String>>, redis::RedisResult<i64>) =
                pipe.query(c)?;
            let set = set?;
            if set.is_some() {
                unacknowledged = true;
                replication::check(acks?, &b.cfg)?;
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
    let released: i64 = run(b, keys, |c, _| {
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
    let extended: i64 = run(b, keys, |c, _| {
        if b.cfg.min_replicas == 0 {
            return scripts::EXTEND
                .key(keys.lock())
                .arg(token.as_str())
                .arg(ms)
                .invoke(c);
        }
        // With min_replicas the WAIT goes in the same round trip (after a handoff, this is
        // what makes the grant count).
        let mut loaded = false;
        loop {
            let mut pipe = redis::pipe();
            pipe.cmd("EVALSHA")
                .arg(scripts::EXTEND.get_hash())
                .arg(1)
                .arg(keys.lock())
                .arg(token.as_str())
                .arg(ms);
            replication::add_wait(&mut pipe, &b.cfg);
            // Replies one by one: an error reply keeps its details (a MOVED's address).
            pipe.ignore_errors();
            let (extended, acks): (redis::RedisResult<i64>, redis::RedisResult<i64>) =
                pipe.query(c)?;
            match extended {
                Ok(extended) => {
                    if extended == 1 {
                        replication::check(acks?, &b.cfg)?;
                    }
                    return Ok(extended);
                }
                Err(e)
                    if !loaded
                        && e.kind()
                            == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) =>
                {
                    scripts::EXTEND.load(c)?;
                    loaded = true;
                }
                Err(e) => return Err(e),
            }
        }
    })?;
    Ok(extended == 1)
}

/// One lock to extend in [`extend_many`].
pub(crate) struct Extension<'a> {
    pub keys: &'a LockKeys,
    pub token: &'a Token,
    pub lease: Duration,
    /// What kind of grant it is: which script extends it (see `kinds/`).
    pub kind: &'a Kind,
}

/// EXTEND (for other kinds of grant, their own extend script) for many locks of one backend
/// (renewal): one pipeline per server, loading the scripts first if the server lost them. One
/// outcome per lock, in order: `Ok(true)` extended, `Ok(false)` the grant is no longer ours.
/// With `min_replicas`, one WAIT covers each pipeline (so in a cluster each master waits for its
/// own replicas).
pub(crate) fn extend_many(b: &Backend, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
    if locks.is_empty() {
        return Vec::new();
    }
    match &b.servers {
        Servers::One(node) => match extend_pipeline(b, &node.main, locks.iter()) {
            Ok(replies) => replies
                .into_iter()
                .map(|r| r.map_err(|e| Error::from_redis(node.main.server(), &e)))
                .collect(),
            Err(e) => locks.iter().map(|_| Err(e.clone())).collect(),
        },
        Servers::Cluster(c) => extend_many_in_cluster(b, c, locks),
        Servers::Quorum(masters) => masters.extend_many(locks),
    }
}

/// One pipeline of EXTENDs on `pool`: each lock's outcome (`Ok(true)` extended), or the error
/// that failed them all.
fn extend_pipeline<'a>(
    b: &Backend,
    pool: &ConnPool,
    locks: impl Iterator<Item = &'a Extension<'a>> + Clone,
) -> Result<Vec<redis::RedisResult<bool>>, Error> {
    pool.run(None, |c, _| send_extends(c, b, locks.clone()))
}

/// Sends the EXTENDs of `locks` on `c` in one pipeline (with WAIT for `min_replicas`), loading
/// the scripts first if the server lost them; each lock's outcome.
fn send_extends<'a>(
    c: &mut redis::Connection,
    b: &Backend,
    locks: impl Iterator<Item = &'a Extension<'a>> + Clone,
) -> redis::RedisResult<Vec<redis::RedisResult<bool>>> {
    let mut loaded = false;
    loop {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for l in locks.clone() {
            kinds::add_extend(&mut pipe, l.kind, l.keys, l.token, l.lease);
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
            kinds::load_extend_scripts(c)?;
            loaded = true;
            continue;
        }
        return Ok(replies.into_iter().map(|r| r.map(|n| n == 1)).collect());
    }
}

/// [`extend_many`] in a cluster: the locks grouped by the master of their slot, one pipeline to
/// each. Locks whose slot moved (MOVED) are sent again to their new master, and so are those of
/// a master that stopped answering if the table read again names another one: once, so that
/// renewal is never held up for long (a lock that fails here is retried by its renewal thread).
/// A lock whose slot is being migrated (ASK) is extended on its own.
fn extend_many_in_cluster(
    b: &Backend,
    c: &Cluster,
    locks: &[Extension<'_>],
) -> Vec<Result<bool, Error>> {
    let mut out: Vec<Option<Result<bool, Error>>> = locks.iter().map(|_| None).collect();
    let mut pending: Vec<usize> = (0..locks.len()).collect();
    // Masters that failed to answer, and how: their locks are not sent to them again.
    let mut failed: Vec<(Arc<Node>, Error)> = Vec::new();
    for round in 0..2 {
        let last_round = round == 1;
        let mut groups: Vec<(Arc<Node>, Vec<usize>)> = Vec::new();
        for i in pending.drain(..) {
            let node = match c.node_for(locks[i].keys.slot()) {
                Ok(node) => node,
                Err(e) => {
                    out[i] = Some(Err(e));
                    continue;
                }
            };
            if let Some((_, e)) = failed.iter().find(|(n, _)| Arc::ptr_eq(n, &node)) {
                out[i] = Some(Err(e.clone()));
                continue;
            }
            match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, &node)) {
                Some((_, group)) => group.push(i),
                None => groups.push((node, vec![i])),
            }
        }
        let mut unreachable = false;
        for (node, group) in groups {
            match extend_pipeline(b, &node.main, group.iter().map(|&i| &locks[i])) {
                Ok(replies) => {
                    for (i, reply) in group.into_iter().zip(replies) {
                        let e = match reply {
                            Ok(extended) => {
                                out[i] = Some(Ok(extended));
                                continue;
                            }
                            Err(e) => e,
                        };
                        match Redirect::of(&e) {
                            Some(Redirect::Moved(addr)) if !last_round => {
                                let _ = c.moved(locks[i].keys.slot(), &addr);
                                pending.push(i);
                            }
                            Some(Redirect::Ask(_)) => {
                                let l = &locks[i];
                                out[i] = Some(extend_routed(b, c, l));
                            }
                            _ => out[i] = Some(Err(Error::from_redis(node.main.server(), &e))),
                        }
                    }
                }
                Err(e) if e.is_connection() && !last_round => {
                    unreachable = true;
                    pending.extend(group);
                    failed.push((node, e));
                }
                Err(e) => {
                    for i in group {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        if unreachable {
            // A master may have failed over: its locks go to the new one, if the table says so.
            let _ = c.refresh(Instant::now(), None, None);
        }
        if pending.is_empty() {
            break;
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(Error::internal("a renewal got no outcome"))))
        .collect()
}

/// The EXTEND of one lock in a cluster (its kind's), following redirections, not waiting out a
/// migration (renewal retries soon anyway).
fn extend_routed(b: &Backend, c: &Cluster, l: &Extension<'_>) -> Result<bool, Error> {
    c.run(l.keys.slot(), Duration::ZERO, |con, _| {
        let mut replies = send_extends(con, b, std::iter::once(l))?;
        // Its error, a redirection among them, is the call's.
        replies.pop().unwrap_or(Ok(false))
    })
}

/// For calls that use the keys of several locks at once (a set of locks, `kinds/multi.rs`):
/// checks that one server holds them all. A cluster does only when they share a hash slot.
pub(crate) fn check_one_server(b: &Backend, keys: &[LockKeys], shown: &str) -> Result<(), Error> {
    let Servers::Cluster(_) = &b.servers else {
        return Ok(());
    };
    let Some(first) = keys.first() else {
        return Ok(());
    };
    let slot = first.slot();
    if keys.iter().all(|k| k.slot() == slot) {
        return Ok(());
    }
    Err(Error::invalid_argument(format!(
        "the set of locks {shown} spans several Redis Cluster hash slots: on a cluster all names \
         of a set must share one slot; give them one {{hash tag}}, as in {{order:7}}:stock and \
         {{order:7}}:payment"
    )))
}

/// For the other kinds of lock (`kinds/`: read/write locks, semaphores, sets): refuses them on
/// Redlock masters, whose locks are counted by majority and have no queue for them to share.
/// `what` names the kind, `shown` the lock, for the message.
pub(crate) fn check_kind_supported(b: &Backend, what: &str, shown: &str) -> Result<(), Error> {
    match &b.servers {
        Servers::Quorum(_) => Err(Error::invalid_argument(format!(
            "{what} ({shown}) is not supported on Redlock: only exclusive locks are; use a \
             redis://, redis-sentinel:// or redis-cluster:// URL for the other kinds"
        ))),
        _ => Ok(()),
    }
}

/// GET: the token the lock key holds now, if any.
pub(crate) fn holder(b: &Backend, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error> {
    if let Servers::Quorum(masters) = &b.servers {
        return masters.holder(keys);
    }
    run(b, keys, |c, _| redis::cmd("GET").arg(keys.lock()).query(c))
}

/// The server waiters of `keys`' lock block on: the one that holds the lock now.
pub(crate) fn waiter_node<'b>(b: &'b Backend, keys: &LockKeys) -> Result<NodeRef<'b>, Error> {
    match &b.servers {
        Servers::One(node) => Ok(NodeRef::Fixed(node)),
        Servers::Cluster(c) => c.node_for(keys.slot()).map(NodeRef::Shared),
        Servers::Quorum(masters) => Ok(NodeRef::Fixed(&masters.home(keys).node)),
    }
}

/// A connection for one waiter on `node`, from the pool that only waiters use (so that blocked
/// waiters never starve releases and renewals of connections), within `limit`.
pub(crate) fn waiter_conn<'n>(node: &'n Node, limit: Duration) -> Result<PooledConn<'n>, Error> {
    node.wait.get(Some(limit))
}

/// Whether every waiter connection of `node` is in use (a failed [`waiter_conn`] then means
/// "wait for one", not "unreachable").
pub(crate) fn waiters_exhausted(node: &Node) -> bool {
    node.wait.exhausted()
}

/// For a waiter whose call failed on its connection: whether it may go on with a new one to
/// the same server (see [`crate::pool::ConnPool::retryable`]; call once per error).
pub(crate) fn waiter_may_retry(node: &Node, e: &redis::RedisError) -> bool {
    node.wait.retryable(e)
}

/// For a waiter whose call failed on `node`: whether the lock now lives on another server, or
/// is being moved there, so that the waiter must go on at [`waiter_node`] (a cluster's MOVED,
/// ASK, TRYAGAIN or CLUSTERDOWN, after a pause of at most `limit`; a master that stopped
/// answering and has a successor). Always false with one server.
pub(crate) fn waiter_follows(
    b: &Backend,
    keys: &LockKeys,
    node: &NodeRef<'_>,
    e: &redis::RedisError,
    limit: Duration,
) -> bool {
    match (&b.servers, node) {
        (Servers::Cluster(c), NodeRef::Shared(node)) => {
            c.waiter_follows(keys.slot(), node, e, limit)
        }
        _ => false,
    }
}

/// The name of `node`, for messages.
pub(crate) fn waiter_server(node: &Node) -> &str {
    node.wait.server()
}

/// How long a waiter connection's reads may take beyond what they wait for.
pub(crate) fn waiter_read_timeout(node: &Node) -> Duration {
    node.wait.read_timeout()
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
    let (ours, fence, pttl): (i64, i64, i64) = run(b, keys, |c, _| {
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
    run(b, keys, |c, _| {
        scripts::SIGNAL_CANCEL
            .key(signal)
            .arg(mark)
            .arg(lifetime.as_millis() as u64)
            .invoke::<i64>(c)
    })?;
    Ok(())
}
