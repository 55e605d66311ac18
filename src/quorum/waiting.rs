//! Waiting for a Redlock lock without spinning.
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
//! that waiter for a moment (its *turn*, [`TURN`], a key on every master): until the woken
//! waiter has tried, other waiters' attempts find the lock refused, so the releasing thread
//! coming back for the lock waits its turn instead of taking it again ahead of the waiters. That
//! is still not a queue: a first attempt (a plain `SET NX PX`, made by an acquire of a name not
//! found held lately in this process) ignores turns, a waiter that times out of its block
//! re-blocks behind the others, and there is no cross-master first-come first-served order.
//!
//! Attempts at the same moment can split the masters so that none has a majority (three
//! contenders, one master each): all fail and clear their keys, and no release will come. A
//! waiter tells that apart from a holder, since the masters that refuse it name their owner's
//! token: when no token is on a majority of the masters, it retries after a random back-off of
//! up to 1 ms that doubles while the split lasts, rather than block.
//!
//! When nothing wakes it (the holder vanished, a foreign client deleted the key, or the home
//! master is down), the waiter re-checks after a jittered interval (`recheck_interval`, never
//! later than the soonest expiry of a key that refused it), as on one server.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::{Attempt, Masters, Tally};
use crate::backend::Backend;
use crate::cancel::Cancel;
use crate::client::LockOptions;
use crate::error::Error;
use crate::keys::LockKeys;
use crate::ops::Grant;
use crate::pool::{PooledConn, mark_broken};
use crate::token::{Token, random_hex};
use crate::waiting::{Jitter, hint};

/// How much longer than a waiter's next block the "waiters exist" mark lives (and an
/// unclaimed wake-up stays): enough for the waiter to come back and refresh it.
pub(crate) const MARK_GRACE: Duration = Duration::from_millis(500);
/// How long a release leaves the lock to the waiter it wakes: other waiters' attempts are refused
/// meanwhile (a woken waiter that does not come, cancelled or gone, holds the others up that
/// long at most).
pub(crate) const TURN: Duration = Duration::from_millis(50);
/// How far past the wait bound a waiter keeps reading before it gives up on the home master.
const DEADLINE_SLACK: Duration = Duration::from_millis(1);
/// The longest first back-off after an attempt that found the masters split between attempts
/// (the back-off is random, up to this, doubling while the split lasts)...
const SPLIT_BACK_OFF: Duration = Duration::from_millis(1);
/// ... up to 2^9 ms (never longer than the re-check interval).
const SPLIT_DOUBLINGS: u32 = 10;
/// While the home master is down, how often a sleeping waiter looks at its cancel flag.
const CANCEL_LOOK: Duration = Duration::from_millis(50);

/// What ended a waiter's block.
enum Woke {
    /// A release pushed a wake-up: try again.
    Released,
    /// A [`Cancel`] pushed its mark onto the waiter's own signal list.
    Cancelled,
    /// The re-check time came.
    Recheck,
    /// The home master could not be asked; sleep out the block instead.
    Unreachable,
}

/// Waits until `deadline` for the lock. A grant, or the error that ended the wait: a wait
/// timeout that says what every master answered last, a cancel, or a connection error when no
/// master refused and too few granted (there is no holder whose release could be waited for).
pub(crate) fn wait(
    b: &Arc<Backend>,
    m: &Masters,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Grant>, Error> {
    let wid = random_hex::<8>(b.pid)?;
    // Only this waiter's cancel pushes onto it.
    let signal = keys.signal(&wid);
    if let Some(c) = cancel
        && !c.block(b, keys, &signal)
    {
        return Err(Error::cancelled(&keys.shown()));
    }
    let started = Instant::now();
    let result = wait_loop(
        b, m, keys, token, opts, deadline, cancel, &signal, &wid, started,
    );
    if let Some(c) = cancel {
        c.unblock(&signal);
    }
    result.map(Some)
}

#[allow(clippy::too_many_arguments)]
fn wait_loop(
    b: &Backend,
    m: &Masters,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
    deadline: Instant,
    cancel: Option<&Cancel>,
    signal: &[u8],
    wid: &str,
    started: Instant,
) -> Result<Grant, Error> {
    let cfg = &b.cfg;
    let mut jitter = Jitter::new(wid);
    let mut conn: Option<PooledConn<'_>> = None;
    let mut last: Option<Tally> = None;
    // A wake-up was taken: the attempt it calls for is made even at the wait bound, and passed
    // on to another waiter if this one is cancelled instead.
    let mut woken = false;
    let mut first = true;
    // Attempts in a row that found the masters split.
    let mut splits = 0;
    loop {
        if cancel.is_some_and(Cancel::is_cancelled) {
            if woken {
                let _ = m.wake(b, keys);
            }
            return Err(Error::cancelled(&keys.shown()));
        }
        let now = Instant::now();
        if now >= deadline && !woken {
            return Err(timed_out(keys, last, started));
        }
        let left = deadline.saturating_duration_since(now);
        let planned = left
            .min(jitter.shorten(cfg.recheck_interval, cfg.recheck_jitter))
            .max(Duration::from_millis(1));
        let attempt = m.attempt(keys, token, opts.lease, Some(planned + MARK_GRACE), woken)?;
        woken = false;
        let tally = match attempt {
            Attempt::Granted(grant) => {
                if first {
                    // Found free at once: the next acquire of this name tries the plain SET.
                    hint::clear(keys.lock());
                }
                log::debug!("lock {} granted to a waiter", keys.shown());
                return Ok(grant);
            }
            Attempt::Refused(tally) => tally,
        };
        first = false;
        if !tally.held_somewhere() {
            // No master refused: too few answered, and no release is coming to wait for.
            return Err(tally.error(&keys.shown(), None));
        }
        hint::note(keys.lock());
        let now = Instant::now();
        if now >= deadline {
            return Err(timed_out(keys, Some(tally), started));
        }
        let left = deadline - now;
        if tally.split() {
            // The attempts split the masters and all failed: no release will wake anyone, so
            // try again after a random back-off (the Redlock retry) that doubles while the
            // split lasts (a key left behind by a failed clean-up expires with its lease).
            splits = (splits + 1).min(SPLIT_DOUBLINGS);
            let back_off = jitter.shorten(SPLIT_BACK_OFF * (1 << (splits - 1)), 1.0);
            last = Some(tally);
            sleep_unless_cancelled(back_off.min(planned).min(left), cancel);
            continue;
        }
        splits = 0;
        let mut block = planned.min(left);
        if let Some(expiry) = tally.soonest_expiry() {
            block = block.min(expiry + Duration::from_millis(1));
        }
        last = Some(tally);
        match block_once(m, keys, &mut conn, signal, block, block >= left) {
            Woke::Released => woken = true,
            Woke::Cancelled | Woke::Recheck => {}
            Woke::Unreachable => sleep_unless_cancelled(block, cancel),
        }
    }
}

/// The wait-timeout error, with what the masters answered to the last attempt.
fn timed_out(keys: &LockKeys, last: Option<Tally>, started: Instant) -> Error {
    match last {
        Some(tally) => tally.error(&keys.shown(), Some(started.elapsed())),
        None => Error::wait_timeout(&keys.shown(), started.elapsed()),
    }
}

/// Blocks on the home master until a release or a cancel pushes, or `block` passes.
/// `at_bound`: the block ends at the wait bound, which the socket's read timeout then enforces.
fn block_once<'m>(
    m: &'m Masters,
    keys: &LockKeys,
    conn: &mut Option<PooledConn<'m>>,
    signal: &[u8],
    block: Duration,
    at_bound: bool,
) -> Woke {
    let pool = &m.home(keys).node.wait;
    let c = match conn {
        Some(c) => c,
        None => match pool.get(Some(block)) {
            Ok(c) => conn.insert(c),
            // Every waiter connection is in use: re-check when the block would have ended.
            Err(_) if pool.exhausted() => return Woke::Unreachable,
            Err(e) => {
                log::debug!("waiter for lock {} cannot block: {e}", keys.shown());
                return Woke::Unreachable;
            }
        },
    };
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
                .arg(signal)
                .arg(keys.wake())
                .arg(block.as_millis() as f64 / 1000.0)
                .query::<Option<(Vec<u8>, Vec<u8>)>>(&mut c.redis)
        });
    match popped {
        Ok(Some((list, _))) if list == signal => Woke::Cancelled,
        Ok(Some(_)) => Woke::Released,
        Ok(None) => Woke::Recheck,
        Err(e) => {
            mark_broken(c);
            *conn = None;
            if e.is_timeout() && at_bound {
                return Woke::Recheck;
            }
            log::info!(
                "waiter for lock {} could not block on {}: {e}",
                keys.shown(),
                pool.server()
            );
            Woke::Unreachable
        }
    }
}

/// Sleeps for `d`, waking early when `cancel` is cancelled.
fn sleep_unless_cancelled(d: Duration, cancel: Option<&Cancel>) {
    let until = Instant::now() + d;
    loop {
        let now = Instant::now();
        if now >= until || cancel.is_some_and(Cancel::is_cancelled) {
            return;
        }
        thread::sleep((until - now).min(CANCEL_LOOK));
    }
}
