//! A waiter's rounds on Redlock's masters: a queue on every master, and the lock handed over.
//!
//! Each master keeps the name's waiters in a sorted set (`quorum_enqueue.lua`), ordered by when
//! each first queued (the waiter's clock: the same score on every master), so that masters with
//! the same live waiters name the same first one. A waiter's round is an attempt on every master
//! that also queues it where it is refused (its entry lives a little past its next block, until
//! an absolute time, so that a round a stopped master runs late queues nobody gone since); then
//! it blocks in BLPOP on its own signal list on one master: the name's *home* (a hash of the
//! name, `Masters::home`), or the next master that answers while that one is away
//! (`Masters::waiting_master`). It blocks [`MAX_BLOCK`] at most, so that it finds out soon that
//! the master it blocks on stopped answering.
//!
//! A release (`release.rs`, `quorum_handover.lua`) writes the token of the first live waiter
//! into the key on every master that held the releaser's: the waiter holds the lock when the
//! release returns, with no moment in which another could take it. The releaser then pushes the
//! grant onto that waiter's signal list, on the master it blocks on: `g` and the oldest round of
//! the waiter's that the masters handed the lock over by. The waiter counts its lease from the
//! start of that round: each master handed the lock over after that round had queued the waiter
//! there (or a later one had), and a round of the waiter's that found its token there since only
//! reset the lease. A grant the waiter cannot count on so is checked by an attempt at once
//! ([`RedlockSession::signalled`]); so is a nudge (`n`: fewer masters than a majority handed the
//! lock to this waiter, as masters named different first waiters).
//!
//! A handover leaves the waiter queued (it leaves every master's queue when it releases the lock
//! or gives up), so that it changes no queue. A failed attempt gives back what it was handed
//! (kept, the lock would stand in the way of a waiter that holds the other masters the same way);
//! since that may undo a handover still under way, a grant pushed for that round or an earlier
//! one is checked by an attempt. Keys a master did not answer for while the waiter waits are
//! released there only once the wait ends (they may be a handover by then). A master where the
//! waiter may be queued and that did not answer its latest round, or that the releasing round
//! did not hear from, may hold the lock for it unheard: its key there is released with the lock
//! ([`RedlockSession::owe_unheard`]). A waiter that gives up passes on what it was handed
//! ([`Session::leave`]).
//!
//! Waiters of earlier versions do not queue: they mark the lock as wanted on every master and
//! block on the home master's wake list, and their releases delete the key, leave the woken
//! waiter a short turn and push a wake-up there. This version's waiters keep the marks and block
//! on that list too (a wake-up makes them try at once, with the turn), and this version's release
//! wakes an earlier version's waiter when it has nobody of this version to hand the lock to.
//!
//! Attempts at the same moment can split the masters so that none has a majority (three
//! contenders, one master each): all fail and clear their keys, and no release will come. A
//! waiter tells that apart from a holder, since the masters that refuse it name their owner's
//! token: when no token is on a majority of the masters, the round asks the wait loop for a
//! pause ([`Round::Pause`]): a random back-off that doubles while the split lasts.
//!
//! A signal that interrupts a waiter's block (EINTR) may have cost it a push the server had
//! already popped for it: the waiter then tries at once. When nothing comes (the holder vanished,
//! or a foreign client deleted the key), the waiter re-checks after the wait loop's jittered
//! interval, never later than the soonest expiry of a key that refused it, as on one server.

use std::cell::Cell;
use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::acquire::Queued;
use super::keys::RedlockKeys;
use super::{Attempt, MARK_GRACE, Masters, Tally};
use crate::base::backoff::Jitter;
use crate::base::error::Error;
use crate::base::grant::{Grant, drift};
use crate::base::keys::LockKeys;
use crate::base::metrics::KindLabel;
use crate::base::pool::{Conn, is_interrupted, mark_broken};
use crate::base::token::Token;
use crate::stores::CANCEL_MARK;
use crate::stores::wait::{DEADLINE_SLACK, Mode, Round, Session};

/// The longest block: a release may hand the lock to a waiter blocked on a master that stopped
/// answering, which finds that out only when its block ends (and its short slack), so the lock
/// waits for it that long at most.
const MAX_BLOCK: Duration = Duration::from_millis(400);

/// The longest first back-off after an attempt that found the masters split between attempts
/// (the back-off is random, up to this, doubling while the split lasts)...
const SPLIT_BACK_OFF: Duration = Duration::from_millis(1);
/// ... up to 2^9 ms (never longer than the re-check interval).
const SPLIT_DOUBLINGS: u32 = 10;

/// How many of its latest rounds a waiter remembers the start of (a grant pushed for an older
/// round is checked by a new attempt instead).
const ROUNDS_KEPT: usize = 64;

/// How much later than its block a BLPOP reply may come before the waiter takes the master for
/// gone: Redis notices a block's end at its next event-loop tick (1/hz, 100 ms by default): BLPOP
/// with a 50 ms or 137 ms timeout answered up to 74 ms late on Redis 6.0-7.4 and Valkey 9.
const BLOCK_SLACK: Duration = Duration::from_millis(150);

/// A waiter on Redlock's masters; see the module's documentation.
pub(crate) struct RedlockSession<'a> {
    masters: &'a Masters,
    keys: &'a LockKeys,
    token: &'a Token,
    lease: Duration,
    /// The waiter's own signal list (only a cancel pushes onto it).
    signal: &'a [u8],
    /// The master the waiter blocks on, and its connection there (of its waiters' pool).
    conn: Option<(usize, Conn)>,
    /// What the masters said to the last attempt, for the wait-timeout error.
    last: Option<Tally>,
    /// The waiter's id (its signal list is `keys.signal(wid)`) and its entry key on every
    /// master (`keys.alive(token)`).
    wid: String,
    entry: Vec<u8>,
    /// Its place in every master's queue: when it first queued, in µs of the system clock.
    place: u64,
    /// The number of its latest round, and when its latest rounds began.
    round: u64,
    started: VecDeque<(u64, Instant)>,
    /// The latest round whose attempt cleared keys that may have held a handover to us: a
    /// grant pushed for it or an earlier round is checked by a new attempt.
    distrusted: u64,
    /// One bit per master: those a round of this wait was sent to (it may be queued there, so a
    /// release may hand it the lock there), and those that answered the latest round.
    touched: u64,
    answered: u64,
    /// A release's wake-up (of an earlier version's kind) was taken and not yet used: the next
    /// round takes the woken waiter's turn, and leaving passes it on.
    woken: bool,
    /// Rounds in a row that found the masters split, and the back-off's randomness.
    splits: u32,
    jitter: Jitter,
}

impl<'a> RedlockSession<'a> {
    pub(crate) fn new(
        masters: &'a Masters,
        keys: &'a LockKeys,
        token: &'a Token,
        lease: Duration,
        signal: &'a [u8],
    ) -> RedlockSession<'a> {
        RedlockSession {
            masters,
            keys,
            token,
            lease,
            signal,
            conn: None,
            last: None,
            wid: wid_of(keys, signal),
            entry: keys.alive(token.as_str()),
            place: unix_micros(),
            round: 0,
            started: VecDeque::with_capacity(ROUNDS_KEPT),
            distrusted: 0,
            touched: 0,
            answered: 0,
            woken: false,
            splits: 0,
            jitter: Jitter::new(signal),
        }
    }

    /// A master where this waiter may be queued but that did not answer its latest round may
    /// have handed the lock to it meanwhile (the release that did stopped being heard from):
    /// its key there is released once the lock is, or once the wait ends without it.
    fn owe_unheard(&self) {
        for (i, m) in self.masters.masters.iter().enumerate().take(64) {
            if self.touched & !self.answered & (1 << i) != 0 {
                m.owe(self.keys, self.token, true);
            }
        }
    }

    /// What a value pushed onto the waiter's signal list means: a grant of the lock a release
    /// handed over to us on a majority of masters (`g<round>:<unanswered>`: the oldest round of
    /// ours it was handed over by, and the masters that may have handed it over unheard), a nudge to try again (`n`: it was handed over to us on fewer), or a
    /// cancel. A grant counts its lease from the start of that round: the releasing round
    /// wrote our token on each master after our entry of that round or a later one was there
    /// (and every attempt of ours since only reset the lease). A grant this waiter cannot
    /// count on so (a round forgotten, or one whose handover its own attempt may have cleared
    /// since), or with less than half its lease left by then, is checked by an attempt at once:
    /// it finds our token where the lock was handed over.
    fn signalled(&self, value: Vec<u8>) -> Round {
        if value == CANCEL_MARK {
            return Round::Blocked(Some(value));
        }
        let grant = value.strip_prefix(b"g").and_then(|g| {
            let (round, unanswered) = std::str::from_utf8(g).ok()?.split_once(':')?;
            Some((round.parse::<u64>().ok()?, unanswered.parse::<u64>().ok()?))
        });
        let round = grant.map(|g| g.0).filter(|&r| r > self.distrusted);
        let from = round.and_then(|r| self.started.iter().find(|(n, _)| *n == r).map(|s| s.1));
        let Some(from) = from else {
            return Round::Interrupted;
        };
        let validity = self.lease.saturating_sub(drift(self.lease));
        if from.elapsed() > validity / 2 {
            return Round::Interrupted;
        }
        // Masters the releasing round did not hear back from may have handed the lock to us
        // too: their key is released once the lock is (when they answer again).
        let unanswered = grant.map_or(0, |g| g.1);
        for (i, m) in self.masters.masters.iter().enumerate().take(64) {
            if unanswered & (1 << i) != 0 {
                m.owe(self.keys, self.token, true);
            }
        }
        self.owe_unheard();
        self.masters.metrics.handoff(KindLabel::Exclusive);
        Round::Granted(Grant {
            fence: 0,
            fences: Vec::new(),
            epoch: 0,
            lease_from: from,
            acknowledged: true,
        })
    }

    /// Gives the connection back to its master's pool (closed, if broken).
    fn put_back(&mut self) {
        if let Some((i, conn)) = self.conn.take() {
            self.masters.masters[i].node.wait.put_back(conn);
        }
    }

    /// Blocks on master `at` until a release or a cancel pushes, or `block` passes.
    /// `at_bound`: the block ends at the wait bound, which the socket's read timeout enforces.
    fn block(&mut self, at: usize, block: Duration, at_bound: bool) -> Round {
        let master = &self.masters.masters[at];
        let pool = &master.node.wait;
        if self.conn.as_ref().is_some_and(|(i, _)| *i != at) {
            self.put_back();
        }
        if self.conn.is_none() {
            match pool.get(Some(block)) {
                Ok(c) => self.conn = Some((at, c.into_inner())),
                Err(e) => {
                    // Every waiter connection is in use: re-check when the block would have
                    // ended. The master is unreachable: it rests, and the waiter moves on.
                    if pool.exhausted() {
                        return Round::Pause(block);
                    }
                    log::debug!("waiter for lock {} cannot block: {e}", self.keys.shown());
                    master.failed(&e);
                    return self.moved(at, block);
                }
            }
        }
        let (_, c) = self.conn.as_mut().expect("set above");
        let slack = if at_bound {
            DEADLINE_SLACK
        } else {
            BLOCK_SLACK.min(pool.read_timeout())
        };
        let popped = c
            .redis
            .set_read_timeout(Some(block + slack))
            .and_then(|()| {
                redis::cmd("BLPOP")
                    .arg(self.signal)
                    .arg(self.keys.wake())
                    .arg(block.as_millis().max(1) as f64 / 1000.0)
                    .query::<Option<(Vec<u8>, Vec<u8>)>>(&mut c.redis)
            });
        match popped {
            Ok(Some((list, value))) if list == self.signal => self.signalled(value),
            Ok(Some(_)) => {
                self.woken = true;
                Round::Released
            }
            Ok(None) => Round::Blocked(None),
            Err(e) => {
                mark_broken(c);
                self.put_back();
                if is_interrupted(&e) {
                    // A signal: the server may have popped a wake-up for us already, and its
                    // reply went with the connection. Try at once, as the woken waiter.
                    self.woken = true;
                    return Round::Released;
                }
                if e.is_timeout() && at_bound {
                    return Round::Blocked(None);
                }
                let e = Error::from_redis(pool.server(), &e);
                log::info!("waiter for lock {} could not block: {e}", self.keys.shown());
                master.failed(&e);
                self.moved(at, block)
            }
        }
    }

    /// After the master `at` failed a waiter: try again at once when it rests now (the next
    /// round blocks elsewhere), else re-check after `block`.
    fn moved(&self, at: usize, block: Duration) -> Round {
        if self.masters.waiting_master(self.keys) == at {
            Round::Pause(block)
        } else {
            Round::Interrupted
        }
    }
}

impl Drop for RedlockSession<'_> {
    fn drop(&mut self) {
        self.put_back();
    }
}

impl Session for RedlockSession<'_> {
    fn round(&mut self, _mode: Mode, planned: Duration, deadline: Instant) -> Result<Round, Error> {
        let at = self.masters.waiting_master(self.keys);
        self.round += 1;
        if self.started.len() == ROUNDS_KEPT {
            self.started.pop_front();
        }
        self.started.push_back((self.round, Instant::now()));
        let ttl = planned.min(MAX_BLOCK) + MARK_GRACE;
        let queued = Queued {
            ttl,
            until: (unix_micros() + ttl.as_micros() as u64) / 1000,
            blocks_on: at,
            wid: &self.wid,
            entry: &self.entry,
            place: self.place,
            round: self.round,
            woken: std::mem::take(&mut self.woken),
            sent: Cell::new(0),
            answered: Cell::new(0),
        };
        let attempt = self
            .masters
            .attempt(self.keys, self.token, self.lease, Some(&queued))?;
        self.touched |= queued.sent.get();
        self.answered = queued.answered.get();
        let tally = match attempt {
            Attempt::Granted(grant) => {
                self.owe_unheard();
                return Ok(Round::Granted(grant));
            }
            Attempt::Refused(tally) => tally,
        };
        if tally.cleared_handover {
            self.distrusted = self.round;
        }
        if !tally.held_somewhere() {
            // No master refused: too few answered, and no release is coming to wait for.
            return Err(tally.error(&self.keys.shown(), None));
        }
        let split = tally.split();
        let left = deadline.saturating_duration_since(Instant::now());
        // No longer than the read timeout at a time: a waiter finds out that its master went
        // away no later than that (and its short slack).
        let read_timeout = self.masters.masters[at].node.wait.read_timeout();
        let mut block = planned.min(left).min(read_timeout).min(MAX_BLOCK);
        if let Some(expiry) = tally.soonest_expiry() {
            block = block.min(expiry + Duration::from_millis(1));
        }
        self.last = Some(tally);
        if split {
            // The attempts split the masters and all failed: no release will wake anyone, so
            // try again after a random back-off (the Redlock retry) that doubles while the split
            // lasts (a key left behind by a failed clean-up expires with its lease).
            self.splits = (self.splits + 1).min(SPLIT_DOUBLINGS);
            let back_off = self
                .jitter
                .shorten(SPLIT_BACK_OFF * (1 << (self.splits - 1)), 1.0);
            return Ok(Round::Pause(back_off.min(planned).min(left)));
        }
        self.splits = 0;
        if left.is_zero() {
            // The wait bound came during the attempt: the wait ends.
            return Ok(Round::Blocked(None));
        }
        if self.masters.waiting_master(self.keys) != at {
            // The master to block on failed this attempt (it rests now): block elsewhere.
            return Ok(Round::Interrupted);
        }
        Ok(self.block(at, block, block >= left))
    }

    /// Out of every master's queue; a lock handed over to us meanwhile goes on to the next
    /// waiter (the release of our token, wherever it is).
    fn leave(&mut self) -> Result<Option<Grant>, Error> {
        if self.round > 0 {
            self.put_back();
            self.owe_unheard();
            let _ = self.masters.leave(self.keys, self.token);
        }
        if self.woken {
            // A wake-up taken and not used: pass it on to another waiter there.
            let at = self.masters.waiting_master(self.keys);
            self.masters.wake_on(self.keys, &[at]);
        }
        Ok(None)
    }

    fn timed_out(&self, shown: &str, waited: Duration) -> Error {
        match &self.last {
            Some(tally) => tally.error(shown, Some(waited)),
            None => Error::wait_timeout(shown, waited),
        }
    }
}

/// The time in µs since the Unix epoch (0 on a clock set before it).
fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The waiter id in a signal list's key made by `keys.signal(wid)`.
fn wid_of(keys: &LockKeys, signal: &[u8]) -> String {
    let prefix = keys.signal("");
    String::from_utf8_lossy(signal.strip_prefix(prefix.as_slice()).unwrap_or(signal)).into_owned()
}
