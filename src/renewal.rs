//! Auto-renewal: each held auto-renewed lock has its own renewal thread, which extends the lease
//! every lease/3 while the key still holds our token, and marks the lock lost when the key is
//! gone or owned by another token, or when Redis stays unreachable until the lease runs out.
//!
//! Two things keep this off the fast path of a short critical section:
//! - A lock gets its renewal thread when its first renewal comes due. Until then one timer
//!   thread per client watches it, so acquiring costs a heap push and releasing a map removal,
//!   with no thread woken; most short-held locks never need a renewal thread at all.
//! - A renewal thread whose lock is released parks and takes the next lock that comes due; a
//!   thread parked for [`IDLE_EXIT`] ends. Release wakes the lock's renewal thread at once
//!   through the lock's condition variable, so no thread sleeps out its period after the lock
//!   is gone.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::Error;
use crate::lock::{LockState, Phase, drift};
use crate::scripts;

/// How long a parked renewal thread waits for a new lock before it ends.
pub const IDLE_EXIT: Duration = Duration::from_secs(30);
/// Stack size of renewal threads: they only run a script and parse a small reply.
const STACK_SIZE: usize = 128 * 1024;
/// How late the timer may hand a lock to its renewal thread, so that one wake-up serves many
/// locks. Renewal is due at lease/3 and the lease only runs out at lease.
const TIMER_SLACK: Duration = Duration::from_millis(5);

/// Counters of one client's renewal machinery, for monitoring and the benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Renewal threads alive (busy or parked), not counting the one timer thread.
    pub renewal_threads: usize,
    /// Of those, parked and waiting for a lock.
    pub idle_renewal_threads: usize,
    /// Auto-renewed locks held now (counted against `max_renewed_locks`).
    pub renewed_locks: usize,
    /// Successful renewals so far.
    pub renewals: u64,
    /// Renewals sent more than lease/6 after they were due (the thread was starved or Redis slow).
    pub late_renewals: u64,
    /// Locks that renewal found lost.
    pub lost_locks: u64,
}

struct Inner {
    max: usize,
    /// Reserved or running renewal jobs.
    active: AtomicUsize,
    threads: AtomicUsize,
    idle: Mutex<Vec<Arc<Worker>>>,
    renewals: AtomicU64,
    late: AtomicU64,
    lost: AtomicU64,
    next_id: AtomicU64,
    timer: Mutex<Timer>,
    timer_wake: Condvar,
}

/// Auto-renewed locks whose first renewal is not due yet.
#[derive(Default)]
struct Timer {
    /// (due, lock id), earliest first. Entries of released locks stay until they come due.
    due: BinaryHeap<Reverse<(Instant, u64)>>,
    /// The locks still waiting for their renewal thread.
    pending: HashMap<u64, Job>,
    /// Whether the timer thread is alive.
    running: bool,
}

/// A renewal thread's mailbox.
struct Worker {
    job: Mutex<Option<Job>>,
    cv: Condvar,
}

struct Job {
    lock: Arc<LockState>,
    _slot: Slot,
}

/// A place among the `max_renewed_locks`, taken before acquiring so that a refusal costs no
/// round trip; given back when dropped.
pub(crate) struct Slot {
    inner: Arc<Inner>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.inner.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The renewal threads of one client in one process.
pub(crate) struct Renewer {
    inner: Arc<Inner>,
}

impl Renewer {
    pub(crate) fn new(max: usize) -> Renewer {
        Renewer {
            inner: Arc::new(Inner {
                max,
                active: AtomicUsize::new(0),
                threads: AtomicUsize::new(0),
                idle: Mutex::new(Vec::new()),
                renewals: AtomicU64::new(0),
                late: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                next_id: AtomicU64::new(1),
                timer: Mutex::new(Timer::default()),
                timer_wake: Condvar::new(),
            }),
        }
    }

    /// An id for a new auto-renewed lock.
    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes a slot, or refuses when `max_renewed_locks` are held already.
    pub(crate) fn reserve(&self) -> Result<Slot, Error> {
        let inner = &self.inner;
        if inner.active.fetch_add(1, Ordering::AcqRel) >= inner.max {
            inner.active.fetch_sub(1, Ordering::AcqRel);
            return Err(Error::limit(format!(
                "{} auto-renewed locks are held through this client already (max_renewed_locks)",
                inner.max
            )));
        }
        Ok(Slot {
            inner: inner.clone(),
        })
    }

    /// Starts renewing a freshly acquired lock: the timer hands it to a renewal thread of its own
    /// when its first renewal comes due.
    pub(crate) fn watch(&self, slot: Slot, lock: Arc<LockState>) -> Result<(), Error> {
        let due = lock.status.lock().next_renewal;
        let id = lock.renew_id;
        let mut t = self.inner.timer.lock();
        let earliest = t.due.peek().map(|e| e.0.0);
        t.due.push(Reverse((due, id)));
        t.pending.insert(id, Job { lock, _slot: slot });
        if !t.running {
            let inner = self.inner.clone();
            let started = thread::Builder::new()
                .name("redislock-timer".into())
                .stack_size(STACK_SIZE)
                .spawn(move || timer_loop(inner));
            if let Err(e) = started {
                let job = t.pending.remove(&id);
                drop(t);
                drop(job);
                return Err(Error::limit(format!(
                    "cannot start the renewal timer thread: {e}"
                )));
            }
            t.running = true;
        } else if earliest.is_none_or(|e| due < e) {
            self.inner.timer_wake.notify_one();
        }
        Ok(())
    }

    /// The lock was released or lost: the timer need not hand it to a renewal thread.
    pub(crate) fn forget(&self, id: u64) {
        let job = self.inner.timer.lock().pending.remove(&id);
        drop(job);
    }

    /// The lock's next renewal moved (extend): make sure the timer looks at it in time.
    pub(crate) fn reschedule(&self, id: u64, due: Instant) {
        let mut t = self.inner.timer.lock();
        if t.pending.contains_key(&id) {
            let earliest = t.due.peek().map(|e| e.0.0);
            t.due.push(Reverse((due, id)));
            if earliest.is_none_or(|e| due < e) {
                self.inner.timer_wake.notify_one();
            }
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        let i = &self.inner;
        Stats {
            renewal_threads: i.threads.load(Ordering::Acquire),
            idle_renewal_threads: i.idle.lock().len(),
            renewed_locks: i.active.load(Ordering::Acquire),
            renewals: i.renewals.load(Ordering::Relaxed),
            late_renewals: i.late.load(Ordering::Relaxed),
            lost_locks: i.lost.load(Ordering::Relaxed),
        }
    }
}

/// Hands every lock whose first renewal is due to a renewal thread of its own. Ends after
/// [`IDLE_EXIT`] with no lock to watch.
fn timer_loop(inner: Arc<Inner>) {
    let mut t = inner.timer.lock();
    loop {
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
    let started = thread::Builder::new()
        .name("redislock-renew".into())
        .stack_size(STACK_SIZE)
        .spawn(move || worker_loop(worker, weak));
    match started {
        Ok(_) => {
            inner.threads.fetch_add(1, Ordering::AcqRel);
        }
        Err(_) => {
            // No thread, no renewal: say so rather than let the lease run out unnoticed.
            lock.mark_lost(
                &mut lock.status.lock(),
                "no renewal thread could be started",
            );
            inner.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Runs jobs until parked for [`IDLE_EXIT`] with nothing to do. Holds the renewer only weakly,
/// so a dropped client lets its parked threads end.
fn worker_loop(me: Arc<Worker>, renewer: Weak<Inner>) {
    loop {
        let job = me.job.lock().take();
        if let Some(job) = job {
            renew(&job.lock, &renewer);
        }
        let Some(inner) = renewer.upgrade() else {
            return;
        };
        inner.idle.lock().push(me.clone());
        let mut slot = me.job.lock();
        let deadline = Instant::now() + IDLE_EXIT;
        while slot.is_none() {
            if me.cv.wait_until(&mut slot, deadline).timed_out() && slot.is_none() {
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
fn renew(lock: &LockState, renewer: &Weak<Inner>) {
    let count = |pick: fn(&Inner) -> &AtomicU64| {
        if let Some(inner) = renewer.upgrade() {
            pick(&inner).fetch_add(1, Ordering::Relaxed);
        }
    };
    let keys = &lock.keys;
    loop {
        let mut st = lock.status.lock();
        loop {
            if st.phase != Phase::Held {
                return;
            }
            let now = Instant::now();
            if now >= st.valid_until {
                lock.mark_lost(
                    &mut st,
                    "its lease ran out before renewal could reach Redis",
                );
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
        if sent.saturating_duration_since(due) > lease / 6 {
            count(|i| &i.late);
        }
        let ms = lease.as_millis() as u64;
        let left = valid_until.saturating_duration_since(sent);
        let result: Result<i64, Error> = lock.backend.main.run(Some(left), |c, _| {
            scripts::EXTEND
                .key(&keys.lock)
                .arg(lock.token.as_str())
                .arg(ms)
                .invoke(c)
        });

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
                lock.mark_lost(
                    &mut st,
                    "renewal found the key gone or held by another owner",
                );
                count(|i| &i.lost);
                return;
            }
            Err(_) => {
                // Unreachable or an error reply: try again soon, until the lease runs out.
                let retry =
                    (lease / 10).clamp(Duration::from_millis(10), Duration::from_millis(200));
                st.next_renewal = Instant::now() + retry;
            }
        }
    }
}
