//! Waiting for a held lock without spinning.
//!
//! A waiter queues itself with the ENQUEUE script and blocks with BLPOP on its own signal list.
//! The holder's release hands the lock directly to the oldest live waiter and pushes the grant
//! onto that list, so the waiter wakes already holding the lock: one wake-up per release, in
//! arrival order, and the releasing thread cannot barge back in ahead of the queue.
//!
//! When nothing wakes it (the holder vanished, or a foreign client released with a plain DEL),
//! the waiter re-checks after a jittered interval that is never later than the lock's remaining
//! lifetime. Waiters block on connections of their own pool, so any number of them never starve
//! releases and renewals of connections.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Node, NodeRef, Servers};
use crate::cancel::{CANCEL_MARK, Cancel};
use crate::client::LockOptions;
use crate::error::Error;
use crate::keys::LockKeys;
use crate::ops::{self, Enqueued, Grant, Waiter};
use crate::pool::{PooledConn, mark_broken};
use crate::token::{Token, random_hex};

pub(crate) use hint::recently_contended;

/// How much longer than its next re-check a queue entry lives: enough for a live waiter to come
/// back, short enough that a dead waiter is skipped soon.
const ENTRY_GRACE: Duration = Duration::from_millis(500);
/// How often one wait replaces a connection the server dropped before it gives up.
const MAX_RECONNECTS: u32 = 3;
/// How far past the wait bound a waiter keeps reading before it gives up on the server (the
/// kernel rounds socket timeouts up to its next tick, a few ms more).
const DEADLINE_SLACK: Duration = Duration::from_millis(1);

/// What woke a waiter.
enum Wake {
    /// The lock is ours.
    Granted(Grant),
    /// The re-check time came (or the wait bound): look again.
    Recheck,
    /// A [`Cancel`] pushed its mark.
    Cancelled,
}

/// Waits until `deadline` for the lock. `Ok(None)` means the wait bound ran out. With `cancel`,
/// a cancel ends the wait with [`Error::is_cancelled`] and leaves no queue entry and no lock.
/// With `min_replicas`, a grant counts once enough replicas acknowledge it.
pub(crate) fn wait(
    b: &Arc<Backend>,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Grant>, Error> {
    if let Servers::Quorum(masters) = &b.servers {
        return crate::quorum::waiting::wait(b, masters, keys, token, opts, deadline, cancel);
    }
    loop {
        let grant = wait_for_grant(b, keys, token, opts, deadline, cancel)?;
        let Some(grant) = grant else {
            return Ok(None);
        };
        if b.cfg.min_replicas == 0 {
            return Ok(Some(grant));
        }
        // The handoff was written by the releaser's connection: a write of ours after it (the
        // lease reset) and WAIT cover it, as replicas apply the stream in order.
        let sent = Instant::now();
        match ops::extend(b, keys, token, opts.lease) {
            Ok(true) => {
                return Ok(Some(Grant {
                    fence: grant.fence,
                    lease_from: sent,
                }));
            }
            // The handoff did not survive a failover (the new master never had it): not a
            // grant; wait again, within the same bound.
            Ok(false) => {
                log::info!(
                    "lock {} was handed over but lost before its replicas had it; waiting again",
                    keys.shown()
                );
            }
            Err(e) => {
                let _ = ops::release(b, keys, token);
                return Err(e);
            }
        }
    }
}

/// [`wait`] before replica acknowledgement.
fn wait_for_grant(
    b: &Arc<Backend>,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Grant>, Error> {
    let wid = random_hex::<8>(b.pid)?;
    let w = Waiter {
        signal: keys.signal(&wid),
        alive: keys.alive(&wid),
        entry: queue_entry(
            &wid,
            opts.lease.as_millis() as u64,
            opts.fencing,
            token.as_str(),
        ),
    };
    if let Some(c) = cancel
        && !c.block(b, keys, &w.signal)
    {
        return Err(Error::cancelled(&keys.shown()));
    }
    let result = wait_queued(b, keys, token, opts, deadline, cancel, &w, &wid);
    if let Some(c) = cancel {
        c.unblock(&w.signal);
    }
    let cancelled = cancel.is_some_and(Cancel::is_cancelled);
    let result = match result {
        Ok(Some(grant)) if !cancelled => {
            log::debug!("lock {} granted to a waiter", keys.shown());
            return Ok(Some(grant));
        }
        // Granted, but cancelled meanwhile: pass the lock on below.
        Ok(Some(_)) => Ok(None),
        other => other,
    };
    // Leave the queue. A release may have handed us the lock in the meantime: then it is ours.
    let left = ops::leave_queue(b, keys, token, &w);
    if cancelled {
        // The leaving script finds the lock ours also when the grant was popped already.
        if matches!(left, Ok(Some(_))) {
            ops::release(b, keys, token)?;
        }
        return Err(Error::cancelled(&keys.shown()));
    }
    match left {
        Ok(Some((fence, pttl))) => Ok(Some(grant_from_pttl(
            fence,
            pttl,
            opts.lease,
            Instant::now(),
        ))),
        _ => result,
    }
}

/// A waiter's queue entry, `wid:lease:fence:token` (put together by hand: `format!` costs
/// a few thousand instructions per wait).
fn queue_entry(wid: &str, lease_ms: u64, fencing: bool, token: &str) -> String {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = lease_ms;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut e = String::with_capacity(wid.len() + token.len() + 26);
    e.push_str(wid);
    e.push(':');
    e.extend(digits[i..].iter().map(|&d| d as char));
    e.push_str(if fencing { ":1:" } else { ":0:" });
    e.push_str(token);
    e
}

/// The waiting loop, with the waiter's keys and queue entry in `w`: on the server that holds
/// the lock, and on the next one when the lock moves (a cluster's resharding or failover).
#[allow(clippy::too_many_arguments)]
fn wait_queued(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    deadline: Instant,
    cancel: Option<&Cancel>,
    w: &Waiter,
    wid: &str,
) -> Result<Option<Grant>, Error> {
    let mut st = WaitState {
        jitter: Jitter::new(wid),
        reconnects: 0,
        sent: false,
    };
    loop {
        let node = ops::waiter_node(b, keys)?;
        match wait_on_node(b, &node, keys, token, opts, deadline, cancel, w, &mut st)? {
            OnNode::Done(grant) => return Ok(grant),
            OnNode::Moved => {}
        }
    }
}

/// How a wait on one server ended.
enum OnNode {
    /// Granted (`Some`), or not within the wait bound or cancelled (`None`).
    Done(Option<Grant>),
    /// The lock lives on another server now (or is moving there): wait there.
    Moved,
}

/// What a wait carries from one server to the next.
struct WaitState {
    jitter: Jitter,
    /// Connections replaced after the server dropped them.
    reconnects: u32,
    /// Whether an ENQUEUE was sent already: from then on the waiter may be in the queue.
    sent: bool,
}

/// The waiting loop on `node`, until the wait ends or the lock moves to another server.
#[allow(clippy::too_many_arguments)]
fn wait_on_node(
    b: &Backend,
    node: &NodeRef<'_>,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    deadline: Instant,
    cancel: Option<&Cancel>,
    w: &Waiter,
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
                // Every waiter connection is in use: wait for one until the deadline.
                Err(_) if ops::waiters_exhausted(node) => continue,
                Err(e) => return Err(e),
            },
        };
        let first = !st.sent;
        st.sent = true;
        match wait_once(
            b,
            node,
            &mut c.redis,
            keys,
            token,
            opts,
            w,
            first,
            left,
            &mut st.jitter,
        ) {
            Ok(Wake::Granted(grant)) => return Ok(OnNode::Done(Some(grant))),
            Ok(Wake::Recheck) => {}
            Ok(Wake::Cancelled) => return Ok(OnNode::Done(None)),
            Err(e) => {
                mark_broken(c);
                conn = None;
                if e.is_timeout() && Instant::now() + DEADLINE_SLACK >= deadline {
                    return Ok(OnNode::Done(None));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if ops::waiter_follows(b, keys, node, &e, left) {
                    log::info!(
                        "waiter for lock {} follows it away from {}: {e}",
                        keys.shown(),
                        ops::waiter_server(node)
                    );
                    return Ok(OnNode::Moved);
                }
                // A killed connection (CLIENT KILL, server restart) or a signal's EINTR: a new
                // connection; our queue entry is still there, so the place in line is kept.
                // Signals may come often and end nothing; dropped connections are counted.
                if ops::waiter_may_retry(node, &e)
                    && (!e.is_connection_dropped() || st.reconnects < MAX_RECONNECTS)
                {
                    log::info!(
                        "waiter for lock {} reconnects to {}: {e}",
                        keys.shown(),
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

/// One round: take the lock or queue up, then block until a release hands it over or the
/// re-check time comes, or a cancel. `first`: no ENQUEUE of this waiter was sent before.
#[allow(clippy::too_many_arguments)]
fn wait_once(
    b: &Backend,
    node: &Node,
    c: &mut redis::Connection,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    w: &Waiter,
    first: bool,
    left: Duration,
    jitter: &mut Jitter,
) -> redis::RedisResult<Wake> {
    let cfg = &b.cfg;
    let entry_ttl = left.min(cfg.recheck_interval) + ENTRY_GRACE;
    // BLPOP with timeout 0 would block forever: never ask for less than 1 ms.
    let planned = left
        .min(jitter.shorten(cfg.recheck_interval, cfg.recheck_jitter))
        .max(Duration::from_millis(1));
    // One read timeout serves the whole round (one setsockopt, not two around every BLPOP).
    // Redis notices a BLPOP timeout only at its next event-loop tick (up to 1/hz = 100 ms late
    // on an idle server), so a block that ends before the wait bound gets the connection's read
    // timeout on top. A block that ends at the wait bound gets almost nothing on top: the
    // socket's read timeout enforces the bound, and the caller then drops the connection and
    // cancels. The ENQUEUE before the BLPOP is bounded by the same timeout, which is never
    // shorter than the time left before the wait bound nor than the connection's own.
    let slack = if planned >= left {
        DEADLINE_SLACK
    } else {
        ops::waiter_read_timeout(node)
    };
    c.set_read_timeout(Some(planned + slack))?;
    let sent = Instant::now();
    let pttl = match ops::enqueue(
        c,
        keys,
        token,
        opts.lease,
        opts.fencing,
        w,
        first,
        entry_ttl,
    )? {
        Enqueued::Granted { fence, pttl } => {
            if first {
                // Found free at once: the next acquire of this name tries the plain SET first.
                hint::clear(keys.lock());
            }
            return Ok(Wake::Granted(grant_from_pttl(
                fence, pttl, opts.lease, sent,
            )));
        }
        Enqueued::Queued { pttl } => pttl,
    };
    hint::note(keys.lock());
    let mut block = planned;
    if pttl > 0 {
        block = block.min(Duration::from_millis(pttl as u64 + 1));
    }
    let popped = ops::block_for_grant(c, w, block)?;
    // Redis sets the key and answers this BLPOP in the same event-loop turn, so the lease is
    // counted from the reply less a millisecond for its way here. (The send of the BLPOP is no
    // useful bound: the waiter may have blocked for most of a lease before the handoff.)
    let Some(value) = popped else {
        return Ok(Wake::Recheck);
    };
    if value == CANCEL_MARK {
        return Ok(Wake::Cancelled);
    }
    let fence = std::str::from_utf8(&value)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Ok(Wake::Granted(Grant {
        fence,
        lease_from: Instant::now() - Duration::from_millis(1),
    }))
}

/// A grant found by a script that reports the key's remaining lifetime.
fn grant_from_pttl(fence: i64, pttl: i64, lease: Duration, sent: Instant) -> Grant {
    let pttl = Duration::from_millis(pttl.max(0) as u64);
    Grant {
        fence: fence.max(0) as u64,
        lease_from: sent - lease.saturating_sub(pttl),
    }
}

/// Which lock names were found held recently, so that an acquire that may wait can queue at
/// once (ENQUEUE takes a free lock too) instead of first sending a `SET NX` that a contended
/// lock would refuse: a round trip and a server call less per contended acquire.
///
/// A small lossy table of the process: an entry per hash of the lock key, holding the key's tag and
/// when it was found held. A wrong answer costs no correctness, only a round trip or a heavier
/// script: names that share an entry evict each other, and a name found free by a direct ENQUEUE
/// is cleared, so an uncontended name soon goes back to the plain `SET NX`.
pub(crate) mod hint {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::{Duration, Instant};

    const ENTRIES: usize = 256;
    /// How long a name counts as contended after it was last found held.
    const FOR: Duration = Duration::from_secs(5);

    static TABLE: [AtomicU64; ENTRIES] = [const { AtomicU64::new(0) }; ENTRIES];
    static EPOCH: OnceLock<Instant> = OnceLock::new();

    /// FNV-1a, 64 bits.
    fn hash(key: &[u8]) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in key {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }

    /// Milliseconds since the first use, never 0 (0 marks an empty entry), wrapping after 49 days.
    fn now_ms() -> u32 {
        let ms = EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u32;
        ms.max(1)
    }

    fn entry(key: &[u8]) -> (&'static AtomicU64, u64) {
        let h = hash(key);
        (&TABLE[h as usize % ENTRIES], h & 0xffff_ffff_0000_0000)
    }

    /// The lock `key` was found held just now.
    pub(crate) fn note(key: &[u8]) {
        let (entry, tag) = entry(key);
        entry.store(tag | u64::from(now_ms()), Ordering::Relaxed);
    }

    /// The lock `key` was found free.
    pub(crate) fn clear(key: &[u8]) {
        let (entry, tag) = entry(key);
        let v = entry.load(Ordering::Relaxed);
        if v & 0xffff_ffff_0000_0000 == tag {
            let _ = entry.compare_exchange(v, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Whether the lock `key` was found held within the last few seconds.
    pub(crate) fn recently_contended(key: &[u8]) -> bool {
        let (entry, tag) = entry(key);
        let v = entry.load(Ordering::Relaxed);
        let at = v as u32;
        at != 0
            && v & 0xffff_ffff_0000_0000 == tag
            && now_ms().wrapping_sub(at) < FOR.as_millis() as u32
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn noted_until_cleared() {
            let k = b"hint-test:a";
            assert!(!recently_contended(k));
            note(k);
            assert!(recently_contended(k));
            // Another name's clear leaves this one alone.
            clear(b"hint-test:b");
            assert!(recently_contended(k));
            clear(k);
            assert!(!recently_contended(k));
        }
    }
}

/// A small xorshift generator seeded from the waiter id, for re-check jitter.
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn new(seed_hex: &str) -> Jitter {
        Jitter(u64::from_str_radix(seed_hex, 16).unwrap_or(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// `d` less a random fraction (up to `fraction`) of it.
    pub(crate) fn shorten(&mut self, d: Duration, fraction: f64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        d.mul_f64(1.0 - fraction * u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_entries() {
        assert_eq!(
            queue_entry("ab12", 30_000, false, "tok"),
            "ab12:30000:0:tok"
        );
        assert_eq!(queue_entry("ab12", 0, true, "t:k"), "ab12:0:1:t:k");
        assert_eq!(
            queue_entry("f", u64::MAX, true, ""),
            format!("f:{}:1:", u64::MAX)
        );
    }

    #[test]
    fn jitter_stays_in_range() {
        let mut j = Jitter::new("0123456789abcdef");
        let d = Duration::from_millis(1000);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let s = j.shorten(d, 0.2);
            assert!(s <= d && s >= Duration::from_millis(800), "{s:?}");
            seen.insert(s.as_millis());
        }
        assert!(seen.len() > 50, "jitter should spread: {}", seen.len());
        assert_eq!(j.shorten(d, 0.0), d);
    }
}
