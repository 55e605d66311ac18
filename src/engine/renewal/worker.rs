//! Renewal threads: one per held auto-renewed lock, parked between locks.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::base::sync::{Condvar, Mutex};

use super::io::{ExtendReply, PendingExtend, submit};
use super::{IDLE_EXIT, Inner, stopping};
use crate::base::metrics::LostReason;
use crate::engine::renewable::{Phase, Renewable};

/// A renewal thread's mailbox.
pub(super) struct Worker {
    pub(super) job: Mutex<Option<Job>>,
    pub(super) cv: Condvar,
}

pub(super) struct Job {
    pub(super) lock: Arc<dyn Renewable>,
}

/// Runs jobs until parked for [`IDLE_EXIT`] with nothing to do, or until shutdown. Holds the
/// renewer only weakly, so it never keeps the client's renewal state alive by itself.
pub(super) fn worker_loop(me: Arc<Worker>, renewer: Weak<Inner>) {
    loop {
        let job = me.job.lock().take();
        if let Some(job) = job {
            renew(&job.lock, &renewer);
        }
        let Some(inner) = renewer.upgrade() else {
            return;
        };
        if stopping(&inner) {
            inner.threads.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        inner.idle.lock().push(me.clone());
        let mut job = me.job.lock();
        let deadline = Instant::now() + IDLE_EXIT;
        while job.is_none() {
            // The flag is read with the mailbox locked, and shutdown notifies with it locked:
            // a shutdown cannot slip in between this check and the wait.
            let ended = stopping(&inner) || me.cv.wait_until(&mut job, deadline).timed_out();
            if ended && job.is_none() {
                let mut idle = inner.idle.lock();
                if let Some(pos) = idle.iter().position(|w| Arc::ptr_eq(w, &me)) {
                    idle.swap_remove(pos);
                    inner.threads.fetch_sub(1, Ordering::AcqRel);
                    return;
                }
                // A starter took this thread off the idle list just now: its job is on the way.
                drop(idle);
                while job.is_none() {
                    me.cv.wait(&mut job);
                }
            }
        }
    }
}

/// Keeps one lock alive until it is released or found lost.
///
/// Once per period this thread wakes, hands the EXTEND to the renewal-I/O thread and sleeps
/// until the next renewal would be due. A success is applied to the lock by the I/O thread
/// without waking this one; a failure wakes it at once, and so does a reply that comes later than
/// the next renewal would have been due. So a renewal costs this thread one wake-up.
fn renew(lock: &Arc<dyn Renewable>, renewer: &Weak<Inner>) {
    loop {
        let mut st = lock.status().lock();
        loop {
            if st.phase != Phase::Held {
                return;
            }
            let now = Instant::now();
            if now >= st.valid_until {
                // The last lease (cut at `at_most`) ran out as planned, or renewal came too late.
                let reason = if st.last {
                    LostReason::AtMost
                } else {
                    LostReason::Expired
                };
                lock.mark_lost(st, reason);
                return;
            }
            let due = if st.last {
                st.valid_until
            } else {
                st.next_renewal.min(st.valid_until)
            };
            if now >= due {
                break;
            }
            lock.wake().wait_until(&mut st, due);
        }
        let (lease, due) = (st.lease, st.next_renewal);
        drop(st);

        let sent = Instant::now();
        // The key's new expiry: the lease, or longer to cover `at_least`, cut at `at_most`.
        let (px, last) = lock.extension(lease, sent);
        if px.is_zero() {
            lock.mark_lost(lock.status().lock(), LostReason::AtMost);
            return;
        }
        let late = sent.saturating_duration_since(due);
        if late > lease / 6 {
            lock.metrics().renewals_late.inc();
            log::warn!(
                "renewal of lock {} sent {} ms late (lease {} ms)",
                lock.shown(),
                late.as_millis(),
                lease.as_millis()
            );
        }
        let submitted = match renewer.upgrade() {
            Some(inner) => submit(&inner, lock, lease, px, last, sent),
            None => return,
        };
        let result = match submitted {
            Ok(request) => match wait_for_reply(&**lock, &request, sent + lease / 3) {
                Some(ExtendReply::Extended) => continue,
                Some(ExtendReply::Failed(result)) => result,
                // Released, or its lease ran out waiting: the loop above says which.
                None => continue,
            },
            Err(e) => Err(e),
        };

        let mut st = lock.status().lock();
        if st.phase != Phase::Held {
            return;
        }
        match result {
            // The key went with our own release, which is on its way: not a loss.
            Ok(_) if st.releasing => return,
            Ok(_) => {
                lock.mark_lost(st, LostReason::TakenOver);
                return;
            }
            Err(e) => {
                // Unreachable or an error reply: try again soon, until the lease runs out.
                lock.metrics().renewal_failures.inc();
                let retry =
                    (lease / 10).clamp(Duration::from_millis(10), Duration::from_millis(200));
                log::warn!(
                    "renewal of lock {} failed, retrying in {} ms: {e}",
                    lock.shown(),
                    retry.as_millis()
                );
                st.next_renewal = Instant::now() + retry;
            }
        }
    }
}

/// Sleeps until the reply of `request` is in, and returns it; `None` when the lock was released
/// or its lease ran out first. Until `expected` (when the next renewal would be due after a
/// success, the usual case) it sleeps without asking to be woken for a success; past it, it asks.
fn wait_for_reply(
    lock: &dyn Renewable,
    request: &PendingExtend,
    expected: Instant,
) -> Option<ExtendReply> {
    let mut st = lock.status().lock();
    loop {
        if st.phase != Phase::Held {
            return None;
        }
        let now = Instant::now();
        {
            let mut rs = request.state.lock();
            if let Some(outcome) = rs.outcome.take() {
                return Some(outcome);
            }
            if now >= st.valid_until {
                return None;
            }
            rs.waiting = now >= expected;
        }
        // The I/O thread takes the status before it looks at `waiting`, so a reply cannot slip
        // in between the look above and this wait.
        let until = if now < expected {
            expected.min(st.valid_until)
        } else {
            st.valid_until
        };
        lock.wake().wait_until(&mut st, until);
    }
}
