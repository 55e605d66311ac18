//! Waiting without polling, for the read/write lock, the semaphore and sets of locks: the same
//! design as the exclusive lock's (`waiting.rs`). A waiter's script takes the grant if the
//! queue lets it, else queues the waiter; the waiter then blocks in BLPOP on its own signal
//! list, onto which the releasing script pushes the grant. When nothing wakes it, it re-checks
//! after a jittered interval that is never later than the holder's remaining lease, so a holder
//! that crashed never strands it. Waiters block on connections of their own pool.
//!
//! What differs between kinds (the scripts, their keys, what a signal means) is behind the
//! [`Queue`] trait; the loop here is kind-blind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Place, reserve};
use crate::backend::{Backend, Node, NodeRef, Owner};
use crate::cancel::{CANCEL_MARK, Cancel};
use crate::client::LockOptions;
use crate::error::Error;
use crate::keys::LockKeys;
use crate::ops;
use crate::pool::{PooledConn, mark_broken};

/// How much longer than its next re-check a queue entry lives.
pub(crate) const ENTRY_GRACE: Duration = Duration::from_millis(500);
/// How often one wait replaces a connection the server dropped before it gives up.
const MAX_RECONNECTS: u32 = 3;
/// How far past the wait bound a waiter keeps reading before it gives up on the server.
const DEADLINE_SLACK: Duration = Duration::from_millis(1);

/// How a waiter's script is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// One attempt: take the grant if the queue lets us, never queue.
    Try,
    /// The first call of a wait: take it or queue.
    First,
    /// A re-check: take it (it may have been handed over) or refresh the queue entry.
    Again,
}

impl Mode {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Try => "try",
            Mode::First => "first",
            Mode::Again => "again",
        }
    }
}

/// What a waiter's script answered.
pub(crate) enum Step {
    /// Ours: the fencing tokens (one per name; 0 without fencing) and how many ms of the lease
    /// are left.
    Granted { fences: Vec<u64>, left_ms: i64 },
    /// Queued (or refused, for [`Mode::Try`]); the first holder's lease (of several, the one
    /// that runs out first) has `pttl` ms left (-1: it has no expiry, -2: no holder).
    Queued { pttl: i64 },
}

/// What a value popped from a waiter's signal list means (other than a cancel mark).
pub(crate) enum Signal {
    /// The grant is ours, with this fencing token.
    Granted(u64),
    /// Look again at once (a set waiter was handed one of its names).
    Recheck,
    /// The wait cannot succeed.
    Refused(Error),
}

/// One kind's waiter: its scripts and keys.
pub(crate) trait Queue {
    /// The keys of the (first) name: they pick the server the waiter talks to.
    fn keys(&self) -> &LockKeys;
    /// The name as shown in messages.
    fn shown(&self) -> String;
    /// The signal lists the waiter blocks on (the first is the one a cancel pushes onto).
    fn signals(&self) -> &[Vec<u8>];
    /// Runs the waiter's script.
    fn step(
        &self,
        c: &mut redis::Connection,
        mode: Mode,
        entry_ttl: Duration,
    ) -> redis::RedisResult<Step>;
    /// Leaves the queue; [`Step::Granted`] when the grant was handed over meanwhile.
    fn leave(&self, c: &mut redis::Connection) -> redis::RedisResult<Step>;
    /// What a popped signal means.
    fn signalled(&self, value: &[u8]) -> Signal;
    /// Releases a grant this waiter got but must not keep (cancelled meanwhile).
    fn give_back(&self, b: &Backend) -> Result<(), Error>;
}

/// A grant won by waiting (or by one attempt).
pub(crate) struct Grant {
    pub fences: Vec<u64>,
    pub lease_from: Instant,
}

impl Grant {
    fn from_left(fences: Vec<u64>, left_ms: i64, lease: Duration, sent: Instant) -> Grant {
        let left = Duration::from_millis(left_ms.max(0) as u64);
        Grant {
            fences,
            lease_from: sent - lease.saturating_sub(left),
        }
    }
}

/// One attempt on the main pool. A retry after a dropped connection finds the grant ours if
/// the first call was applied. When the reply is lost to a timeout, the grant may have been
/// made: `give_back` runs before the error is returned.
fn try_once(b: &Backend, q: &dyn Queue, lease: Duration) -> Result<Option<Grant>, Error> {
    let mut sent = Instant::now();
    let mut tried = false;
    let result = ops::run(b, q.keys(), |c, _| {
        tried = true;
        sent = Instant::now();
        q.step(c, Mode::Try, Duration::ZERO)
    });
    match result {
        Ok(Step::Granted { fences, left_ms }) => {
            Ok(Some(Grant::from_left(fences, left_ms, lease, sent)))
        }
        Ok(Step::Queued { .. }) => Ok(None),
        Err(e) => {
            if tried && e.is_timeout() {
                let _ = q.give_back(b);
            }
            Err(e)
        }
    }
}

/// Waits until `deadline` for the grant. `Ok(None)` means the wait bound ran out. With
/// `cancel`, a cancel ends the wait with [`Error::is_cancelled`], leaving no queue entry and no
/// grant. `wid` seeds the re-check jitter.
pub(crate) fn wait(
    b: &Arc<Backend>,
    q: &dyn Queue,
    wid: &str,
    lease: Duration,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Grant>, Error> {
    let first_signal = &q.signals()[0];
    if let Some(c) = cancel
        && !c.block(b, q.keys(), first_signal)
    {
        return Err(Error::cancelled(&q.shown()));
    }
    let result = wait_queued(b, q, wid, lease, deadline, cancel);
    if let Some(c) = cancel {
        c.unblock(first_signal);
    }
    let cancelled = cancel.is_some_and(Cancel::is_cancelled);
    let result = match result {
        Ok(Some(grant)) if !cancelled => return Ok(Some(grant)),
        Ok(Some(_)) => Ok(None),
        other => other,
    };
    // Leave the queue. A release may have handed us the grant in the meantime: then it is ours.
    let left = ops::run(b, q.keys(), |c, _| q.leave(c));
    if cancelled {
        if matches!(left, Ok(Step::Granted { .. })) {
            q.give_back(b)?;
        }
        return Err(Error::cancelled(&q.shown()));
    }
    match left {
        Ok(Step::Granted { fences, left_ms }) => Ok(Some(Grant::from_left(
            fences,
            left_ms,
            lease,
            Instant::now(),
        ))),
        _ => result,
    }
}

/// The waiting loop: on the server that holds the grant's keys, and on the next one when they
/// move (a cluster's resharding or failover).
fn wait_queued(
    b: &Backend,
    q: &dyn Queue,
    wid: &str,
    lease: Duration,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Grant>, Error> {
    let mut st = WaitState {
        jitter: Jitter::new(wid),
        reconnects: 0,
        mode: Mode::First,
    };
    loop {
        let node = ops::waiter_node(b, q.keys())?;
        match wait_on_node(b, &node, q, lease, deadline, cancel, &mut st)? {
            OnNode::Done(grant) => return Ok(grant),
            OnNode::Moved => {}
        }
    }
}

/// What a wait carries from one server to the next.
struct WaitState {
    jitter: Jitter,
    /// Connections replaced after the server dropped them.
    reconnects: u32,
    /// How the next call of the waiter's script is made.
    mode: Mode,
}

/// How a wait on one server ended.
enum OnNode {
    /// Granted (`Some`), or not within the wait bound or cancelled (`None`).
    Done(Option<Grant>),
    /// The keys live on another server now (or are moving there): wait there.
    Moved,
}

/// The waiting loop on `node`, until the wait ends or the keys move to another server.
fn wait_on_node(
    b: &Backend,
    node: &NodeRef<'_>,
    q: &dyn Queue,
    lease: Duration,
    deadline: Instant,
    cancel: Option<&Cancel>,
    st: &mut WaitState,
) -> Result<OnNode, Error> {
    let mut conn: Option<PooledConn<'_>> = None;
    loop {
        let now = Instant::now();
        if now >= deadline || cancel.is_some_and(Cancel::is_cancelled) {
            return Ok(OnNode::Done(None));
        }
        let left = deadline - now;
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match ops::waiter_conn(node, left) {
                Ok(c) => conn.insert(c),
                Err(_) if ops::waiters_exhausted(node) => continue,
                Err(e) => return Err(e),
            },
        };
        let this_mode = st.mode;
        st.mode = Mode::Again;
        match wait_once(
            b,
            node,
            &mut c.redis,
            q,
            this_mode,
            left,
            lease,
            &mut st.jitter,
        ) {
            Ok(Wake::Granted(grant)) => return Ok(OnNode::Done(Some(grant))),
            Ok(Wake::Recheck) => {}
            Ok(Wake::Cancelled) => return Ok(OnNode::Done(None)),
            Ok(Wake::Refused(e)) => return Err(e),
            Err(e) => {
                mark_broken(c);
                conn = None;
                if e.is_timeout() && Instant::now() + DEADLINE_SLACK >= deadline {
                    return Ok(OnNode::Done(None));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if ops::waiter_follows(b, q.keys(), node, &e, left) {
                    log::info!(
                        "waiter for {} follows it away from {}: {e}",
                        q.shown(),
                        ops::waiter_server(node)
                    );
                    return Ok(OnNode::Moved);
                }
                if ops::waiter_may_retry(node, &e)
                    && (!e.is_connection_dropped() || st.reconnects < MAX_RECONNECTS)
                {
                    log::info!(
                        "waiter for {} reconnects to {}: {e}",
                        q.shown(),
                        ops::waiter_server(node)
                    );
                    st.reconnects += u32::from(e.is_connection_dropped());
                    continue;
                }
                return Err(Error::from_redis(ops::waiter_server(node), &e));
            }
        }
    }
}

/// What woke a waiter.
enum Wake {
    Granted(Grant),
    Recheck,
    Cancelled,
    Refused(Error),
}

/// One round: take the grant or queue up, then block until a release hands it over, the
/// re-check time comes, or a cancel.
#[allow(clippy::too_many_arguments)]
fn wait_once(
    b: &Backend,
    node: &Node,
    c: &mut redis::Connection,
    q: &dyn Queue,
    mode: Mode,
    left: Duration,
    lease: Duration,
    jitter: &mut Jitter,
) -> redis::RedisResult<Wake> {
    let cfg = &b.cfg;
    let entry_ttl = left.min(cfg.recheck_interval) + ENTRY_GRACE;
    let planned = left
        .min(jitter.shorten(cfg.recheck_interval, cfg.recheck_jitter))
        .max(Duration::from_millis(1));
    // As in waiting.rs: one read timeout for the whole round; a block that ends at the wait
    // bound gets almost nothing on top, so the socket enforces the bound.
    let slack = if planned >= left {
        DEADLINE_SLACK
    } else {
        ops::waiter_read_timeout(node)
    };
    c.set_read_timeout(Some(planned + slack))?;
    let sent = Instant::now();
    let pttl = match q.step(c, mode, entry_ttl)? {
        Step::Granted { fences, left_ms } => {
            return Ok(Wake::Granted(Grant::from_left(
                fences, left_ms, lease, sent,
            )));
        }
        Step::Queued { pttl } => pttl,
    };
    let mut block = planned;
    if pttl >= 0 {
        block = block.min(Duration::from_millis(pttl as u64 + 1));
    }
    let mut blpop = redis::cmd("BLPOP");
    for s in q.signals() {
        blpop.arg(s);
    }
    let popped: Option<(Vec<u8>, Vec<u8>)> =
        blpop.arg(block.as_millis() as f64 / 1000.0).query(c)?;
    let Some((_, value)) = popped else {
        return Ok(Wake::Recheck);
    };
    if value == CANCEL_MARK {
        return Ok(Wake::Cancelled);
    }
    // The grant was made in the same event-loop turn that answered this BLPOP.
    Ok(match q.signalled(&value) {
        Signal::Granted(fence) => Wake::Granted(Grant {
            fences: vec![fence],
            lease_from: Instant::now() - Duration::from_millis(1),
        }),
        Signal::Recheck => Wake::Recheck,
        Signal::Refused(e) => Wake::Refused(e),
    })
}

/// A grant signalled as a number: its fencing token.
pub(crate) fn fence_of(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Takes a grant for `q`: one attempt when `wait` is `None` (fails with [`Error::is_held`]),
/// else waits up to `wait` (fails with [`Error::is_wait_timeout`]). A place among the renewed
/// locks is taken before the first round trip (so a refusal costs none) and given back while
/// waiting; it is returned with the grant. With `min_replicas` a grant counts once the replicas
/// have it (`extend`, a write of ours after the grant, and WAIT): a handoff lost before they
/// had it (a failover) means waiting again, within the same bound.
pub(crate) fn obtain(
    owner: &Owner,
    q: &dyn Queue,
    wid: &str,
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
    extend: &dyn Fn() -> Result<bool, Error>,
) -> Result<(Grant, Option<Place>), Error> {
    let b = owner.backend();
    let mut place = reserve(owner, opts)?;
    let started = Instant::now();
    let waits = wait.is_some_and(|w| !w.is_zero());
    let grant = if !waits {
        match try_once(b, q, opts.lease)? {
            Some(grant) => acknowledge(b, q, extend, grant)?,
            None => None,
        }
    } else {
        drop(place.take());
        let deadline = started + wait.unwrap_or_default();
        let grant = loop {
            let Some(grant) = self::wait(b, q, wid, opts.lease, deadline, cancel)? else {
                break None;
            };
            match acknowledge(b, q, extend, grant)? {
                Some(grant) => break Some(grant),
                None => log::info!(
                    "{} was handed over but lost before its replicas had it; waiting again",
                    q.shown()
                ),
            }
        };
        if grant.is_some() {
            place = match reserve(owner, opts) {
                Ok(place) => place,
                Err(e) => {
                    let _ = q.give_back(b);
                    return Err(e);
                }
            };
        }
        grant
    };
    match grant {
        Some(grant) => Ok((grant, place)),
        None if wait.is_some() => Err(Error::wait_timeout(&q.shown(), started.elapsed())),
        None => Err(Error::held(&q.shown())),
    }
}

/// With `min_replicas`, a grant counts once the replicas have it: the grant (or the handoff,
/// written by the releaser's connection) is followed by a write of ours (the lease reset,
/// `extend`) and WAIT, which cover it as replicas apply the stream in order. `None`: the grant
/// was gone by then (lost in a failover). On an error the grant is given back.
fn acknowledge(
    b: &Backend,
    q: &dyn Queue,
    extend: &dyn Fn() -> Result<bool, Error>,
    grant: Grant,
) -> Result<Option<Grant>, Error> {
    if b.cfg.min_replicas == 0 {
        return Ok(Some(grant));
    }
    let sent = Instant::now();
    match extend() {
        Ok(true) => Ok(Some(Grant {
            fences: grant.fences,
            lease_from: sent,
        })),
        Ok(false) => Ok(None),
        Err(e) => {
            let _ = q.give_back(b);
            Err(e)
        }
    }
}

/// A small xorshift generator seeded from the waiter id, for re-check jitter.
struct Jitter(u64);

impl Jitter {
    fn new(seed_hex: &str) -> Jitter {
        Jitter(u64::from_str_radix(seed_hex, 16).unwrap_or(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// `d` less a random fraction (up to `fraction`) of it.
    fn shorten(&mut self, d: Duration, fraction: f64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        d.mul_f64(1.0 - fraction * u)
    }
}
