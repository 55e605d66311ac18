//! Waiting for a held lock without spinning: the one wait loop, for every kind of lock on every
//! store.
//!
//! Each round, the waiter's store (a [`Session`], `stores/wait.rs`) tries the grant and, when it
//! is refused, blocks until a release signals the waiter: on a queue (one server, a Sentinel
//! group, a Cluster) the release hands the grant over and pushes it onto the waiter's own list,
//! so the waiter wakes already holding it, one wake-up per release and in arrival order; on
//! Redlock's masters a release wakes one waiter to try again; on a lock's channel (the kinds
//! whose release publishes) a release publishes, and every subscribed waiter tries again. When nothing signals
//! (the holder vanished, or a foreign client released with a plain DEL), the waiter re-checks
//! after a jittered interval that is never later than the lock's remaining lifetime. Waiters
//! block on connections of their own pool, so any number of them never starve releases and
//! renewals of connections.
//!
//! Here the loop decides when: the wait bound, the re-check interval and its jitter, a cancel,
//! a signal's meaning (through the kind), a store's pause when nothing will signal, and leaving
//! the queue at the end, passing on a grant that came too late to be kept. A store's own states
//! (Redlock's split votes and its back-off, its woken waiter's turn) stay in its session.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::base::backoff::Jitter;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::engine::backend::Backend;
use crate::engine::cancel::Cancel;
use crate::engine::contended;
use crate::engine::kinds::{Acquiring, Signal, Waits};
use crate::stores::CANCEL_MARK;
use crate::stores::pubsub;
use crate::stores::wait::{Mode, Round, Session};

/// While the waiter cannot block (its server is unreachable) or listens on the lock's channel
/// (where a cancel pushes nothing), how often it looks at its cancel.
const CANCEL_LOOK: Duration = Duration::from_millis(50);

/// Waits until `deadline` for the grant of an acquire (`a`). Fails with the store's wait-timeout error
/// (the time counted from `started`) when the bound runs out, and with [`Error::is_cancelled`]
/// when `cancel` is cancelled, leaving no queue entry and no grant behind either way.
pub(crate) fn wait(
    b: &Arc<Backend>,
    a: &Acquiring<'_>,
    started: Instant,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Grant, Error> {
    let waiter = a.waiter()?;
    let store = &b.store;
    let mut session = match waiter {
        Waits::Queue(w) => store.session(&**w, a.lease),
        Waits::Channel(w) => pubsub::session(&**store, &**w, a.lease),
    };
    // The list a cancel pushes its mark onto: a queue waiter's first signal list. A waiter on
    // a channel has none: it looks at its cancel while it listens.
    let first_signal = match waiter {
        Waits::Queue(w) => Some(w.signals()[0].as_slice()),
        Waits::Channel(_) => None,
    };
    if let (Some(c), Some(signal)) = (cancel, first_signal)
        && !c.block(b, a.keys, signal)
    {
        return Err(Error::cancelled(&a.shown()));
    }
    let result = rounds(&mut *session, b, a, waiter, deadline, cancel);
    if let (Some(c), Some(signal)) = (cancel, first_signal) {
        c.unblock(signal);
    }
    let cancelled = cancel.is_some_and(Cancel::is_cancelled);
    let ended = match result {
        Ok(Some(grant)) if !cancelled => {
            log::debug!("{} granted to a waiter", a.shown());
            return Ok(grant);
        }
        // Granted, but cancelled meanwhile: the grant is passed on below.
        Ok(_) => None,
        Err(e) => Some(e),
    };
    // Leave the queue. A release may have handed us the grant in the meantime: then it is ours.
    let left = session.leave();
    if cancelled {
        // Leaving finds the grant ours also when it was popped already.
        if matches!(left, Ok(Some(_))) {
            a.kind.release(b, a.keys, a.token)?;
        }
        return Err(Error::cancelled(&a.shown()));
    }
    match (left, ended) {
        (Ok(Some(grant)), _) => Ok(grant),
        (_, Some(e)) => Err(e),
        (_, None) => Err(session.timed_out(&a.shown(), started.elapsed())),
    }
}

/// The rounds of a wait, until the grant (`Some`), the wait bound or a cancel (`None`), or an
/// error.
fn rounds(
    session: &mut dyn Session,
    b: &Backend,
    a: &Acquiring<'_>,
    waiter: &Waits<'_>,
    deadline: Instant,
    cancel: Option<&Cancel>,
) -> Result<Option<Grant>, Error> {
    let cfg = b.store.cfg();
    let key = a.keys.lock();
    let mut jitter = Jitter::new(match waiter {
        Waits::Queue(w) => &w.signals()[0],
        Waits::Channel(w) => w.seed(),
    });
    let mut mode = Mode::First;
    // A release signalled: one more attempt, even at the wait bound.
    let mut signalled = false;
    loop {
        if cancel.is_some_and(Cancel::is_cancelled) {
            return Ok(None);
        }
        let now = Instant::now();
        // A wake-up taken calls for one more attempt, even at the wait bound.
        if now >= deadline && !signalled {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(now);
        let planned = left
            .min(jitter.shorten(cfg.recheck_interval, cfg.recheck_jitter))
            .max(Duration::from_millis(1));
        signalled = false;
        let round = session.round(mode, planned, deadline)?;
        if mode == Mode::First && matches!(round, Round::Granted(_)) {
            // Found free at once: the next acquire of this name tries the plain attempt first.
            contended::clear(key);
        }
        // From the first round on the waiter may be queued (its script may have run even when
        // the reply was lost): every later round refreshes its entry, never queues it anew.
        mode = Mode::Again;
        match round {
            Round::Granted(grant) => return Ok(Some(grant)),
            Round::Blocked(popped) => {
                contended::note(key);
                let Some(value) = popped else { continue };
                if value == CANCEL_MARK {
                    return Ok(None);
                }
                if let Waits::Channel(_) = waiter {
                    continue;
                }
                match a.kind.signalled(a.keys, &value) {
                    // The grant was made in the same event-loop turn that answered the BLPOP,
                    // so its lease counts from the reply less a millisecond for its way here.
                    Signal::Granted(fence) => {
                        b.metrics.handoff(a.kind.label());
                        return Ok(Some(Grant {
                            fence,
                            fences: Vec::new(),
                            epoch: session.epoch(),
                            lease_from: Instant::now() - Duration::from_millis(1),
                            acknowledged: false,
                        }));
                    }
                    Signal::Recheck => {}
                    Signal::Refused(e) => return Err(e),
                }
            }
            Round::Released => {
                contended::note(key);
                signalled = true;
            }
            Round::Listen(until) => {
                contended::note(key);
                loop {
                    let rest = until.saturating_duration_since(Instant::now());
                    if rest.is_zero() || session.listen(rest.min(CANCEL_LOOK)) {
                        break;
                    }
                    if cancel.is_some_and(Cancel::is_cancelled) {
                        return Ok(None);
                    }
                }
                // Whatever ended the listen (a release heard, the holder's lease run out, the
                // re-check due, a lost subscription), the waiter tries again at once, also at
                // the wait bound; that round's refusal at the bound
                // ends the wait.
                signalled = true;
            }
            Round::Pause(pause) => {
                contended::note(key);
                sleep_unless_cancelled(pause, cancel);
            }
            Round::Interrupted => {}
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
