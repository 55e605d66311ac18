//! A waiter's rounds on the store that holds its lock.
//!
//! The engine's wait loop (`engine/wait.rs`) decides when a waiter tries again and how long it
//! may block; a [`Session`] makes the round trips of one round: which server and connection a
//! waiter uses, how it follows its lock to another server, and how it gets over a dropped
//! connection or a signal. Three kinds of session:
//!
//! - on a queue ([`QueueSession`]: one server, a Sentinel group's master, a cluster's node): the
//!   kind's script takes the grant or queues the waiter, then the waiter blocks in BLPOP on its
//!   own signal list, on the same connection of the waiters' pool, and the releasing script
//!   pushes the grant onto it;
//! - on Redlock's masters (`redlock/wait.rs`): an attempt on every master that queues the
//!   waiter on each, then a block until the releaser pushes the grant (a release hands the lock
//!   over on every master);
//! - on a lock's channel (`pubsub.rs`): an attempt, then the waiter listens
//!   on its subscription until a release publishes and it tries again.

use std::time::{Duration, Instant};

use redis::RedisResult;

use crate::base::backoff::Backoff;
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::pool::{Conn, mark_broken};
use crate::base::token::Token;
use crate::stores::{LockStore, NodeRef};

/// How much longer than its next re-check a queue entry lives: enough for a live waiter to come
/// back, short enough that a dead waiter is skipped soon.
pub(crate) const ENTRY_GRACE: Duration = Duration::from_millis(500);
/// The longest block of a waiter's round while its server has been unreachable.
const RIDING_OUT_BLOCK: Duration = Duration::from_millis(100);
/// How far past the wait bound a waiter keeps reading before it gives up on the server (the
/// kernel rounds socket timeouts up to its next tick, a few ms more).
pub(crate) const DEADLINE_SLACK: Duration = Duration::from_millis(1);

/// How a kind's script is called.
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
    /// The mode as the scripts take it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Mode::Try => "try",
            Mode::First => "first",
            Mode::Again => "again",
        }
    }
}

/// What a kind's script answered.
pub(crate) enum Step {
    /// Ours: the grant, with `left_ms` of its lease left when the script ran.
    Granted {
        fence: u64,
        /// A set of locks: each name's fencing token.
        fences: Vec<u64>,
        left_ms: i64,
        /// Acknowledged by enough replicas already (`min_replicas`).
        acknowledged: bool,
    },
    /// Queued (or refused, for [`Mode::Try`]); the first holder's lease (of several, the one that
    /// runs out first) has `pttl` ms left (-1: it has no expiry, -2: no holder).
    Queued { pttl: i64 },
}

impl Step {
    /// A plain grant (no set fences, not acknowledged yet).
    pub(crate) fn granted(fence: u64, left_ms: i64) -> Step {
        Step::Granted {
            fence,
            fences: Vec::new(),
            left_ms,
            acknowledged: false,
        }
    }

    /// The grant of a reply to a request sent at `sent` to a master of `epoch`
    /// ([`Connection::epoch`]); `Err` with the holder's `pttl` when the reply is no grant.
    pub(crate) fn into_grant(
        self,
        lease: Duration,
        sent: Instant,
        epoch: u64,
    ) -> Result<Grant, i64> {
        match self {
            Step::Granted {
                fence,
                fences,
                left_ms,
                acknowledged,
            } => {
                let mut grant = Grant::from_left(fence, left_ms, lease, sent);
                grant.fences = fences;
                grant.epoch = epoch;
                grant.acknowledged = acknowledged;
                Ok(grant)
            }
            Step::Queued { pttl } => Err(pttl),
        }
    }
}

/// A waiter's scripts on a queue: one kind's (the engine's kinds implement it).
pub(crate) trait Queue {
    /// Who the waiter is: the keys of its (first) name, which pick the server it talks to; the
    /// token the grant is held with; the signal lists it blocks on (the first is the one a
    /// cancel pushes onto).
    fn who(&self) -> (&LockKeys, &Token, &[Vec<u8>]);
    /// The keys of the (first) name.
    fn keys(&self) -> &LockKeys {
        self.who().0
    }
    /// The token the grant is held with.
    fn token(&self) -> &Token {
        self.who().1
    }
    /// The signal lists the waiter blocks on.
    fn signals(&self) -> &[Vec<u8>] {
        self.who().2
    }
    /// Runs the waiter's script: take the grant or queue (see [`Mode`]). `entry_ttl`: how long
    /// the queue entry stays valid without the waiter coming back.
    fn step(&self, c: &mut Connection, mode: Mode, entry_ttl: Duration) -> RedisResult<Step>;
    /// Leaves the queue; [`Step::Granted`] when the grant was handed over meanwhile.
    fn leave(&self, c: &mut Connection) -> RedisResult<Step>;
}

/// What one round of a waiter ended with.
pub(crate) enum Round {
    /// The grant is ours: taken by the round's step, or handed over since the last block.
    Granted(Grant),
    /// Refused, then blocked: what was popped from the waiter's own signal lists (a grant, a
    /// cancel's mark, a set waiter's nudge), or `None` when the block ran out.
    Blocked(Option<Vec<u8>>),
    /// Refused, then a release signalled (Redlock's wake-up, or a release published on the lock's
    /// channel): try again at once, even at the wait bound.
    Released,
    /// Refused by a waiter on the lock's channel: listen ([`Session::listen`]) until this
    /// instant (the holder's remaining lease, the re-check or the wait bound), then try again.
    Listen(Instant),
    /// Refused, and no release will signal the waiter: re-check after this long (its server is
    /// unreachable, every waiter connection is in use, or Redlock's masters split between
    /// attempts and nobody holds the lock).
    Pause(Duration),
    /// The round's connection failed and the waiter got over it (a new connection, or the lock
    /// moved to another server): go on at once.
    Interrupted,
}

/// A waiter's rounds on its store; see the module's documentation.
pub(crate) trait Session {
    /// One round: take the grant or queue up (`mode`), then block until a release or a cancel
    /// signals, or `planned` passes (a block that would end at the wait bound, `deadline`, is
    /// enforced by the socket's read timeout). An error ends the wait.
    fn round(&mut self, mode: Mode, planned: Duration, deadline: Instant) -> Result<Round, Error>;
    /// After a [`Round::Listen`]: listens up to `d` for a release published on the lock's
    /// channel. `true`: one came, or the subscription failed (try again at once); `false`: `d`
    /// passed. Only a session on a channel listens: any other sleeps.
    fn listen(&mut self, d: Duration) -> bool {
        std::thread::sleep(d);
        false
    }
    /// Leaves the wait without the grant: out of the queue (a grant handed over meanwhile is
    /// returned: it is ours; a wake-up taken and not used is passed on to another waiter).
    fn leave(&mut self) -> Result<Option<Grant>, Error>;
    /// The error of a wait whose bound ran out after `waited`.
    fn timed_out(&self, shown: &str, waited: Duration) -> Error {
        Error::wait_timeout(shown, waited)
    }
    /// The epoch of the master the last round blocked on ([`Connection::epoch`]): a grant
    /// popped there was made by that master.
    fn epoch(&self) -> u64 {
        0
    }
}

/// A waiter on a queue: one server, a Sentinel group's master, or the cluster node that holds
/// its lock, followed when the lock moves.
pub(crate) struct QueueSession<'a> {
    store: &'a dyn LockStore,
    q: &'a dyn Queue,
    lease: Duration,
    /// The server the waiter talks to, and its connection there (checked out of that server's
    /// waiters' pool, given back when the session ends or moves on).
    node: Option<NodeRef<'a>>,
    conn: Option<Conn>,
    /// Whether a round has reached the server: from then on the waiter may be queued there,
    /// and it rides out the server's failure (a failover) instead of giving up.
    reached: bool,
    /// Since when the rounds have found no server to answer them (None: the last one answered).
    unreachable_since: Option<Instant>,
    /// The pauses between rounds that find no server.
    backoff: Backoff,
    /// The epoch of the master of the last round's connection.
    epoch: u64,
}

impl<'a> QueueSession<'a> {
    pub(crate) fn new(
        store: &'a dyn LockStore,
        q: &'a dyn Queue,
        lease: Duration,
    ) -> QueueSession<'a> {
        QueueSession {
            store,
            q,
            lease,
            node: None,
            conn: None,
            reached: false,
            unreachable_since: None,
            backoff: Backoff::new(q.signals()[0].as_slice()),
            epoch: 0,
        }
    }

    /// The round's step and block on `c`; `Err` is the connection's failure. `reached` is set
    /// once the step was answered.
    #[allow(clippy::too_many_arguments)]
    fn on_conn(
        c: &mut Connection,
        q: &dyn Queue,
        lease: Duration,
        mode: Mode,
        entry_ttl: Duration,
        planned: Duration,
        timeout: Duration,
        reached: &mut bool,
    ) -> redis::RedisResult<Round> {
        // One read timeout serves the whole round (one setsockopt, not two around every BLPOP).
        c.set_read_timeout(Some(timeout))?;
        let sent = Instant::now();
        let step = q.step(c, mode, entry_ttl)?;
        *reached = true;
        let pttl = match step.into_grant(lease, sent, c.epoch()) {
            Ok(grant) => return Ok(Round::Granted(grant)),
            Err(pttl) => pttl,
        };
        let mut block = planned;
        if pttl >= 0 {
            block = block.min(Duration::from_millis(pttl as u64 + 1));
        }
        // BLPOP with timeout 0 would block forever: never ask for less than 1 ms.
        let block = block.max(Duration::from_millis(1));
        let mut blpop = redis::cmd("BLPOP");
        for s in q.signals() {
            blpop.arg(s);
        }
        let popped: Option<(Vec<u8>, Vec<u8>)> =
            blpop.arg(block.as_millis() as f64 / 1000.0).query(c)?;
        Ok(Round::Blocked(popped.map(|(_, value)| value)))
    }
}

impl QueueSession<'_> {
    /// Gives the connection back to its pool (closed, if broken).
    fn put_back(&mut self) {
        if let (Some(node), Some(conn)) = (&self.node, self.conn.take()) {
            node.wait.put_back(conn);
        }
    }

    /// A round that found no server to answer it (`e`: it died, was paused, or cannot serve
    /// yet). A waiter that has reached the server before rides it out: it pauses (a back-off,
    /// within the wait bound) and comes back through the store, which finds the lock's server
    /// anew (a Sentinel group's new master, a cluster's slot table read again), where its queue
    /// entry keeps its place if it reached that server. The first failure after an answer is
    /// retried at once (a connection the server closed: a restart, CLIENT KILL). Else the
    /// wait ends with `e`.
    fn unreachable(
        &mut self,
        e: Error,
        retry_at_once: bool,
        left: Duration,
    ) -> Result<Round, Error> {
        if !self.reached || !e.is_transient() {
            return Err(e);
        }
        if let Some(node) = self.node.take() {
            self.store.server_unreachable(self.q.keys(), &node);
        }
        let first = self.unreachable_since.is_none();
        self.unreachable_since.get_or_insert_with(Instant::now);
        if retry_at_once && first {
            return Ok(Round::Interrupted);
        }
        let pause = self.backoff.pause().min(left);
        log::debug!(
            "waiter for {}: its server cannot serve ({e}); back in {} ms",
            self.q.keys().shown(),
            pause.as_millis()
        );
        Ok(Round::Pause(pause))
    }
}

impl Drop for QueueSession<'_> {
    fn drop(&mut self) {
        self.put_back();
    }
}

impl Session for QueueSession<'_> {
    fn round(&mut self, mode: Mode, planned: Duration, deadline: Instant) -> Result<Round, Error> {
        let store = self.store;
        let left = deadline.saturating_duration_since(Instant::now());
        // While riding out an unreachable server, rounds block only briefly: a round sent while
        // the network was still cut waits for TCP's retransmission, whose back-off outgrows the
        // cut; a short round gives up on it soon and the next, on another connection, gets
        // through as soon as the server can be reached again.
        let planned = match self.unreachable_since {
            Some(_) => planned.min(RIDING_OUT_BLOCK),
            None => planned,
        };
        let keys = self.q.keys();
        if self.node.is_none() {
            match store.waiter_node(keys) {
                Ok(node) => self.node = Some(node),
                // A cluster whose table names no master for the slot yet (a failover).
                Err(e) => return self.unreachable(e, false, left),
            }
        }
        let node = self.node.as_ref().expect("set above");
        if self.conn.is_none() {
            // A connection of the pool only waiters use, so that blocked waiters never starve
            // releases and renewals of connections.
            let got = node.wait.get(Some(left)).map(|c| c.into_inner());
            match got {
                Ok(c) => self.conn = Some(c),
                // Every waiter connection is in use: wait for one until the deadline.
                Err(_) if node.wait.exhausted() => return Ok(Round::Interrupted),
                Err(e) => return self.unreachable(e, false, left),
            }
        }
        let c = self.conn.as_mut().expect("set above");
        self.epoch = c.redis.epoch();
        let cfg = store.cfg();
        let entry_ttl = left.min(cfg.recheck_interval) + ENTRY_GRACE;
        // Redis notices a BLPOP timeout only at its next event-loop tick (up to 1/hz = 100 ms
        // late on an idle server), so a block that ends before the wait bound gets the
        // connection's read timeout on top. A block that ends at the wait bound gets almost
        // nothing on top: the socket's read timeout enforces the bound, and the wait then drops
        // the connection and leaves the queue.
        let slack = if planned >= left {
            DEADLINE_SLACK
        } else {
            node.wait.read_timeout()
        };
        let started = Instant::now();
        let e = match Self::on_conn(
            &mut c.redis,
            self.q,
            self.lease,
            mode,
            entry_ttl,
            planned,
            planned + slack,
            &mut self.reached,
        ) {
            Ok(round) => {
                if self.unreachable_since.take().is_some() {
                    self.backoff = Backoff::new(self.q.signals()[0].as_slice());
                }
                return Ok(round);
            }
            Err(e) => e,
        };
        mark_broken(c);
        let rest = left.saturating_sub(started.elapsed());
        if e.is_timeout() && rest <= DEADLINE_SLACK {
            // The wait bound came during the round: the wait ends.
            self.put_back();
            return Ok(Round::Blocked(None));
        }
        let follows = store.waiter_follows(keys, node, &e, rest);
        let server = node.wait.server().to_owned();
        let retryable = node.wait.retryable(&e);
        self.put_back();
        if follows {
            log::info!(
                "waiter for {} follows it away from {server}: {e}",
                keys.shown()
            );
            self.node = None;
            return Ok(Round::Interrupted);
        }
        // A signal's EINTR: the queue entry is still there, so the place in line is kept.
        // Signals may come often and end nothing.
        if retryable && !e.is_connection_dropped() {
            return Ok(Round::Interrupted);
        }
        // A dropped connection (CLIENT KILL, a restart, a master that died) or no answer (a
        // paused master): ridden out, see `unreachable`.
        let e = if retryable {
            Error::connection(&server, &e, false)
        } else {
            Error::from_redis(&server, &e)
        };
        self.unreachable(e, retryable, rest)
    }

    fn leave(&mut self) -> Result<Option<Grant>, Error> {
        self.put_back();
        let sent = Instant::now();
        let mut epoch = 0;
        let left = self.store.run(self.q.keys(), |c, _| {
            epoch = c.epoch();
            self.q.leave(c)
        })?;
        Ok(left.into_grant(self.lease, sent, epoch).ok())
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn timed_out(&self, shown: &str, waited: Duration) -> Error {
        let e = Error::wait_timeout(shown, waited);
        match self.unreachable_since {
            Some(since) => e.with_note(&format!(
                "its server could not be reached for the last {} ms (a failover may have been \
                 under way)",
                since.elapsed().as_millis()
            )),
            None => e,
        }
    }
}
