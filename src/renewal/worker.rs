//! Renewal threads: one per held auto-renewed lock, parked between locks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::io::extend_batched;
use super::{IDLE_EXIT, Inner, stopping};
use crate::lock::{LockState, Phase, drift};

/// A renewal thread's mailbox.
pub(super) struct Worker {
    pub(super) job: Mutex<Option<Job>>,
    pub(super) cv: Condvar,
}

pub(super) struct Job {
    pub(super) lock: Arc<LockState>,
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
        let mut slot = me.job.lock();
        let deadline = Instant::now() + IDLE_EXIT;
        while slot.is_none() {
            // The flag is read with the mailbox locked, and shutdown notifies with it locked:
            // a shutdown cannot slip in between this check and the wait.
            let ended = stopping(&inner) || me.cv.wait_until(&mut slot, deadline).timed_out();
            if ended && slot.is_none() {
                let mut idle = inner.idle.lock();
                if let Some(pos) = idle.iter().position(|w| Arc::ptr_eq(w, &me)) {
                    idle.swap_remove(pos);
                    inner.threads.fetch_sub(1, Ordering::AcqRel);
                    return;
                }
                // A starter took this thread off the idle list just now: its job is on the way.
                drop(idle);
                while slot.is_none() {
                    me.cv.wait(&mut slot);
                }
            }
        }
    }
}

/// Keeps one lock alive until it is released or found lost.
fn renew(lock: &Arc<LockState>, renewer: &Weak<Inner>) {
    let count = |pick: fn(&Inner) -> &AtomicU64| {
        if let Some(inner) = renewer.upgrade() {
            pick(&inner).fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        let mut st = lock.status.lock();
        loop {
            if st.phase != Phase::Held {
                return;
            }
            let now = Instant::now();
            if now >= st.valid_until {
                lock.mark_lost(st, "its lease ran out before renewal could reach Redis");
                count(|i| &i.lost);
                return;
            }
            let due = st.next_renewal.min(st.valid_until);
            if now >= due {
                break;
            }
            lock.wake.wait_until(&mut st, due);
        }
        let (lease, due, valid_until) = (st.lease, st.next_renewal, st.valid_until);
        drop(st);

        let sent = Instant::now();
        let late = sent.saturating_duration_since(due);
        if late > lease / 6 {
            count(|i| &i.late);
            log::warn!(
                "renewal of lock {} sent {} ms late (lease {} ms)",
                lock.keys.shown(),
                late.as_millis(),
                lease.as_millis()
            );
        }
        let ms = lease.as_millis() as u64;
        let left = valid_until.saturating_duration_since(sent);
        let result = match renewer.upgrade() {
            Some(inner) => extend_batched(&inner, lock, ms, left),
            None => return,
        };

        let mut st = lock.status.lock();
        if st.phase != Phase::Held {
            return;
        }
        match result {
            Ok(1) => {
                st.valid_until = sent + lease.saturating_sub(drift(lease));
                st.next_renewal = sent + lease / 3;
                count(|i| &i.renewals);
            }
            Ok(_) => {
                lock.mark_lost(st, "renewal found the key gone or held by another owner");
                count(|i| &i.lost);
                return;
            }
            Err(e) => {
                // Unreachable or an error reply: try again soon, until the lease runs out.
                let retry =
                    (lease / 10).clamp(Duration::from_millis(10), Duration::from_millis(200));
                log::warn!(
                    "renewal of lock {} failed, retrying in {} ms: {e}",
                    lock.keys.shown(),
                    retry.as_millis()
                );
                st.next_renewal = Instant::now() + retry;
            }
        }
    }
}
