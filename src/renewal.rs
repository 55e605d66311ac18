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
//!
//! Renewal threads do not each check out a connection: they hand their EXTEND to one renewal-I/O
//! thread, which sends everything due in one pipeline and hands each thread its reply. Thousands
//! of locks renewing in the same second then cost a few round trips, not thousands of pool
//! checkouts by threads competing for two cores.

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
/// How long after acquiring a lock gets its renewal thread (or at its first renewal, if that
/// comes sooner): long enough that short critical sections never need one, short enough that
/// starting threads for many locks taken at once overlaps with taking them.
const ATTACH_AFTER: Duration = Duration::from_millis(100);
/// The most EXTENDs sent in one pipeline.
const MAX_BATCH: usize = 1024;
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
    io: Mutex<IoQueue>,
    io_wake: Condvar,
}

/// EXTENDs waiting for the renewal-I/O thread.
#[derive(Default)]
struct IoQueue {
    requests: Vec<Arc<Request>>,
    running: bool,
}

/// One renewal's EXTEND and, once sent, its outcome.
struct Request {
    lock: Arc<LockState>,
    lease_ms: u64,
    outcome: Mutex<Option<Result<i64, Error>>>,
    done: Condvar,
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
                io: Mutex::new(IoQueue::default()),
                io_wake: Condvar::new(),
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
    pub(crate) fn watch(&self, lock: Arc<LockState>) -> Result<(), Error> {
        let due = {
            let st = lock.status.lock();
            st.next_renewal
                .min(st.valid_until.min(Instant::now() + ATTACH_AFTER))
        };
        let id = lock.renew_id;
        let mut t = self.inner.timer.lock();
        let earliest = t.due.peek().map(|e| e.0.0);
        t.due.push(Reverse((due, id)));
        t.pending.insert(id, Job { lock });
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

/// Queues an EXTEND of `lock` for the renewal-I/O thread and waits up to `limit` for its reply.
fn extend_batched(
    inner: &Arc<Inner>,
    lock: &Arc<LockState>,
    lease_ms: u64,
    limit: Duration,
) -> Result<i64, Error> {
    let request = Arc::new(Request {
        lock: lock.clone(),
        lease_ms,
        outcome: Mutex::new(None),
        done: Condvar::new(),
    });
    {
        let mut q = inner.io.lock();
        q.requests.push(request.clone());
        if !q.running {
            let io_inner = inner.clone();
            thread::Builder::new()
                .name("redislock-renew-io".into())
                .stack_size(STACK_SIZE)
                .spawn(move || io_loop(io_inner))
                .map_err(|e| Error::limit(format!("cannot start the renewal I/O thread: {e}")))?;
            q.running = true;
        }
        inner.io_wake.notify_one();
    }
    let deadline = Instant::now() + limit;
    let mut outcome = request.outcome.lock();
    while outcome.is_none() {
        if request.done.wait_until(&mut outcome, deadline).timed_out() {
            break;
        }
    }
    outcome.take().unwrap_or_else(|| {
        Err(Error::connection(
            request.lock.backend.main.server(),
            "renewal got no reply in time",
            true,
        ))
    })
}

/// Sends queued EXTENDs in pipelines and hands out the replies. Ends after [`IDLE_EXIT`] idle.
fn io_loop(inner: Arc<Inner>) {
    loop {
        let batch = {
            let mut q = inner.io.lock();
            while q.requests.is_empty() {
                if inner.io_wake.wait_for(&mut q, IDLE_EXIT).timed_out() && q.requests.is_empty() {
                    q.running = false;
                    return;
                }
            }
            let n = q.requests.len().min(MAX_BATCH);
            q.requests.drain(..n).collect::<Vec<_>>()
        };
        let outcomes = send_batch(&batch);
        for (request, outcome) in batch.iter().zip(outcomes) {
            *request.outcome.lock() = Some(outcome);
            request.done.notify_one();
        }
    }
}

/// One pipeline of EXTENDs (loading the script first if the server lost it). All the locks
/// belong to one client, so the first lock's pool serves them all.
fn send_batch(batch: &[Arc<Request>]) -> Vec<Result<i64, Error>> {
    let pool = &batch[0].lock.backend.main;
    let sent = pool.run(None, |c, _| {
        let mut loaded = false;
        loop {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for r in batch {
                pipe.cmd("EVALSHA")
                    .arg(scripts::EXTEND.get_hash())
                    .arg(1)
                    .arg(&r.lock.keys.lock)
                    .arg(r.lock.token.as_str())
                    .arg(r.lease_ms);
            }
            let replies: Vec<redis::RedisResult<i64>> = pipe.query(c)?;
            let noscript = replies.iter().any(|r| {
                r.as_ref().is_err_and(|e| {
                    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                })
            });
            if noscript && !loaded {
                scripts::EXTEND.load(c)?;
                loaded = true;
                continue;
            }
            return Ok(replies);
        }
    });
    match sent {
        Ok(replies) => replies
            .into_iter()
            .map(|r| r.map_err(|e| Error::from_redis(pool.server(), &e)))
            .collect(),
        Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
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
