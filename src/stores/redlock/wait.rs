//! A waiter's rounds on Redlock's masters.
//!
//! Independent masters share no queue, so a Redlock waiter does not queue: it retries the
//! majority when a release tells it the lock may be free. Each attempt of a waiter also marks
//! the lock as wanted on every master (a key with an expiry a little longer than the waiter's
//! next block), then the waiter blocks with BLPOP on the lock's wake list on one master, its
//! *home*, picked by a hash of the name (`Masters::home`). A release deletes the key on every
//! master, and when any master reports the mark, pushes one wake-up onto the home master's wake
//! list once every delete is done, so the woken waiter finds the lock free everywhere. Because a
//! waiter marks every master before it tries it, a release either came before the attempt there
//! (the attempt found the key free) or after the mark (the release sees it): a waiter that
//! failed is always woken by the release it waits for.
//!
//! One release wakes one waiter (the list holds at most one wake-up): the one blocked longest on
//! the home master, as Redis serves blocked clients in order. The release also leaves the lock to
//! that waiter for a moment (its *turn*, [`TURN`](super::TURN), a key on every master): until the
//! woken waiter has tried, other waiters' attempts find the lock refused, so the releasing thread
//! coming back for the lock waits its turn instead of taking it again ahead of the waiters. That
//! is still not a queue: a first attempt (a plain `SET NX PX`, made by an acquire of a name not
//! found held lately in this process) ignores turns, a waiter that times out of its block
//! re-blocks behind the others, and there is no cross-master first-come first-served order.
//!
//! Attempts at the same moment can split the masters so that none has a majority (three
//! contenders, one master each): all fail and clear their keys, and no release will come. A
//! waiter tells that apart from a holder, since the masters that refuse it name their owner's
//! token: when no token is on a majority of the masters, the round says so ([`Round::Split`])
//! and the wait loop retries after a random back-off.
//!
//! When nothing wakes it (the holder vanished, a foreign client deleted the key, or the home
//! master is down), the waiter re-checks after the wait loop's jittered interval, never later
//! than the soonest expiry of a key that refused it, as on one server.

use std::time::{Duration, Instant};

use super::{Attempt, MARK_GRACE, Masters, Tally};
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::pool::{Conn, mark_broken};
use crate::base::token::Token;
use crate::stores::wait::{DEADLINE_SLACK, Mode, Round, Session};

/// A waiter on Redlock's masters; see the module's documentation.
pub(crate) struct RedlockSession<'a> {
    masters: &'a Masters,
    keys: &'a LockKeys,
    token: &'a Token,
    lease: Duration,
    /// The waiter's own signal list (only a cancel pushes onto it).
    signal: &'a [u8],
    /// The waiter's connection to the home master (of its waiters' pool).
    conn: Option<Conn>,
    /// What the masters said to the last attempt, for the wait-timeout error.
    last: Option<Tally>,
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
        }
    }

    /// Blocks on the home master until a release or a cancel pushes, or `block` passes.
    /// `at_bound`: the block ends at the wait bound, which the socket's read timeout enforces.
    fn block(&mut self, block: Duration, at_bound: bool) -> Round {
        let pool = &self.masters.home(self.keys).node.wait;
        if self.conn.is_none() {
            match pool.get(Some(block)) {
                Ok(c) => self.conn = Some(c.into_inner()),
                Err(e) => {
                    // Every waiter connection is in use, or the home master is unreachable:
                    // re-check when the block would have ended.
                    if !pool.exhausted() {
                        log::debug!("waiter for lock {} cannot block: {e}", self.keys.shown());
                    }
                    return Round::Unreachable(block);
                }
            }
        }
        let c = self.conn.as_mut().expect("set above");
        // Redis notices a BLPOP timeout only at its next event-loop tick, so a block that ends
        // before the wait bound gets the connection's read timeout on top.
        let slack = if at_bound {
            DEADLINE_SLACK
        } else {
            pool.read_timeout()
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
            Ok(Some((list, value))) if list == self.signal => Round::Blocked(Some(value)),
            Ok(Some(_)) => Round::Released,
            Ok(None) => Round::Blocked(None),
            Err(e) => {
                mark_broken(c);
                if let Some(conn) = self.conn.take() {
                    pool.put_back(conn);
                }
                if e.is_timeout() && at_bound {
                    return Round::Blocked(None);
                }
                log::info!(
                    "waiter for lock {} could not block on {}: {e}",
                    self.keys.shown(),
                    pool.server()
                );
                Round::Unreachable(block)
            }
        }
    }
}

impl Drop for RedlockSession<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.masters.home(self.keys).node.wait.put_back(conn);
        }
    }
}

impl Session for RedlockSession<'_> {
    fn round(&mut self, mode: Mode, planned: Duration, deadline: Instant) -> Result<Round, Error> {
        let wanted = Some(planned + MARK_GRACE);
        let woken = mode == Mode::Woken;
        let attempt = self
            .masters
            .attempt(self.keys, self.token, self.lease, wanted, woken)?;
        let tally = match attempt {
            Attempt::Granted(grant) => return Ok(Round::Granted(grant)),
            Attempt::Refused(tally) => tally,
        };
        if !tally.held_somewhere() {
            // No master refused: too few answered, and no release is coming to wait for.
            return Err(tally.error(&self.keys.shown(), None));
        }
        let split = tally.split();
        let left = deadline.saturating_duration_since(Instant::now());
        let mut block = planned.min(left);
        if let Some(expiry) = tally.soonest_expiry() {
            block = block.min(expiry + Duration::from_millis(1));
        }
        self.last = Some(tally);
        if split {
            return Ok(Round::Split);
        }
        if left.is_zero() {
            // The wait bound came during the attempt: the wait ends.
            return Ok(Round::Blocked(None));
        }
        Ok(self.block(block, block >= left))
    }

    fn leave(&mut self, woken: bool) -> Result<Option<Grant>, Error> {
        if woken {
            // A wake-up taken and not used: pass it on to another waiter.
            let _ = self.masters.wake(self.keys);
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
