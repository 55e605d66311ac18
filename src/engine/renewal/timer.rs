//! The timer: watches auto-renewed locks until their first renewal (or [`ATTACH_AFTER`]) comes
//! due, then gives each a renewal thread of its own.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::base::sync::{Condvar, Mutex, MutexGuard};

use crate::base::metrics::LostReason;

use super::worker::{Job, Worker, worker_loop};
use super::{IDLE_EXIT, Inner, spawn, stopping};

/// How long after acquiring a lock gets its renewal thread (or at its first renewal, if that
/// comes sooner): long enough that short critical sections never need one, short enough that
/// starting threads for many locks taken at once overlaps with taking them.
pub(super) const ATTACH_AFTER: Duration = Duration::from_millis(100);
/// How late the timer may hand a lock to its renewal thread, so that one wake-up serves many
/// locks. Renewal is due at lease/3 and the lease only runs out at lease.
const TIMER_SLACK: Duration = Duration::from_millis(5);

/// Auto-renewed locks whose first renewal is not due yet.
#[derive(Default)]
pub(super) struct Timer {
    /// (due, lock id), earliest first. Entries of released locks stay until they come due.
    pub(super) due: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The locks still waiting for their renewal thread.
    pub(super) pending: HashMap<u64, Job>,
    /// Whether the timer thread is alive.
    pub(super) running: bool,
}

/// Hands every lock whose first renewal is due to a renewal thread of its own. Ends after
/// [`IDLE_EXIT`] with no lock to watch, or at shutdown.
pub(super) fn timer_loop(inner: Arc<Inner>) {
    let mut t = inner.timer.lock();
    loop {
        if stopping(&inner) {
            t.running = false;
            return;
        }
        let now = Instant::now();
        let mut due = Vec::new();
        while let Some(&Reverse((at, id))) = t.due.peek() {
            if at > now {
                break;
            }
            t.due.pop();
            if let Some(job) = t.pending.remove(&id) {
                due.push(job);
            }
        }
        if !due.is_empty() {
            MutexGuard::unlocked(&mut t, || {
                for job in due {
                    attach(&inner, job);
                }
            });
            continue;
        }
        match t.due.peek() {
            Some(&Reverse((at, _))) => {
                inner.timer_wake.wait_until(&mut t, at + TIMER_SLACK);
            }
            None => {
                if inner.timer_wake.wait_for(&mut t, IDLE_EXIT).timed_out() && t.due.is_empty() {
                    t.running = false;
                    return;
                }
            }
        }
    }
}

/// Gives a lock to a parked renewal thread, or starts one.
fn attach(inner: &Arc<Inner>, job: Job) {
    let parked = inner.idle.lock().pop();
    if let Some(worker) = parked {
        *worker.job.lock() = Some(job);
        worker.cv.notify_one();
        return;
    }
    let lock = job.lock.clone();
    let worker = Arc::new(Worker {
        job: Mutex::new(Some(job)),
        cv: Condvar::new(),
    });
    let weak = Arc::downgrade(inner);
    let started = spawn(inner, "redislock-renew", move || worker_loop(worker, weak));
    match started {
        Ok(_) => {
            inner.threads.fetch_add(1, Ordering::AcqRel);
        }
        Err(_) => {
            // No thread, no renewal: say so rather than let the lease run out unnoticed.
            lock.mark_lost(lock.status().lock(), LostReason::NoRenewalThread);
        }
    }
}
