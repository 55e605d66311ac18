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
//! thread, which sends everything due in one pipeline and applies each reply to its lock, waking
//! the lock's thread only for a failure. Thousands of locks renewing in the same second then cost
//! a few round trips and one wake-up per renewal, not thousands of pool checkouts by threads
//! competing for two cores.
//!
//! A thread per lock costs a task and memory mappings: an auto-renewed lock that would need a
//! thread beyond what the operating system's limits leave (`vm.max_map_count`, `kernel.pid_max`,
//! `kernel.threads-max`, `RLIMIT_NPROC`, the cgroup's `pids.max`; see `limits.rs`) is refused with
//! `LimitReached` before its acquire touches Redis.
//!
//! Every thread started here is recorded, and when the client's last handle is gone (the
//! client and every lock taken through it), [`Renewer::shutdown`] wakes them all, lets them end
//! and joins them, within a bound: nothing of a freed client keeps running.

mod io;
mod limits;
mod timer;
mod worker;

use std::cmp::Reverse;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::base::sync::{Condvar, Mutex};

use crate::base::error::Error;
use crate::base::metrics::Metrics;
use crate::engine::renewable::{Renewable, Reservation};

use io::IoQueue;
use timer::{ATTACH_AFTER, Timer, timer_loop};
use worker::{Job, Worker};

/// How long a parked renewal thread waits for a new lock before it ends.
pub const IDLE_EXIT: Duration = Duration::from_secs(30);
/// Stack size of renewal threads: they only run a script and parse a small reply.
pub(super) const STACK_SIZE: usize = 128 * 1024;
/// Counters of one client's renewal machinery, for monitoring and the benchmarks (the same
/// counts are among [`Client::metrics`](crate::Client::metrics), with many more).
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
    active: Arc<AtomicUsize>,
    threads: AtomicUsize,
    idle: Mutex<Vec<Arc<Worker>>>,
    next_id: AtomicU64,
    timer: Mutex<Timer>,
    timer_wake: Condvar,
    io: Mutex<IoQueue>,
    io_wake: Condvar,
    /// Set when the client's last handle is gone: every thread ends.
    shutdown: AtomicBool,
    /// Every thread started, until joined.
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// How many handles the last sweep of ended threads left.
    swept: AtomicUsize,
    /// The last reading of the operating system's thread limits.
    os: Mutex<OsCap>,
    /// Threads started and not yet at their end.
    live: Arc<Live>,
}

/// How many auto-renewed locks the operating system's limits allow, as last read.
#[derive(Default)]
struct OsCap {
    /// Renewal threads alive at the reading plus the threads that could still start.
    cap: usize,
    /// The limit that sets `cap`.
    bound: String,
    read_at: Option<Instant>,
}

/// Counts the renewal machinery's running threads, so that shutdown can wait for them.
#[derive(Default)]
struct Live {
    count: Mutex<usize>,
    ended: Condvar,
}

/// Held by a running thread; its drop, the thread's last act, counts the thread out.
struct LiveGuard(Arc<Live>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        *self.0.count.lock() -= 1;
        self.0.ended.notify_all();
    }
}

thread_local! {
    /// Whether this thread is one of the renewal machinery's.
    static ON_RENEWAL_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the renewer is shutting down: every thread ends.
fn stopping(inner: &Inner) -> bool {
    inner.shutdown.load(Ordering::Acquire)
}

/// Starts a named renewal thread with a small stack, recorded so that shutdown can join it.
fn spawn(inner: &Inner, name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    let mut handles = inner.handles.lock();
    if stopping(inner) {
        return Err(std::io::Error::other("the client is shutting down"));
    }
    // Threads that ended on their own (idle for IDLE_EXIT) are joined here, as new ones start:
    // whenever the list has doubled since the last sweep, so that starting n threads costs
    // O(n) in all, not O(n) each.
    if handles.len() >= 2 * inner.swept.load(Ordering::Relaxed).max(8) {
        let (ended, running): (Vec<_>, Vec<_>) = handles.drain(..).partition(|h| h.is_finished());
        *handles = running;
        inner.swept.store(handles.len(), Ordering::Relaxed);
        for h in ended {
            let _ = h.join();
        }
    }
    *inner.live.count.lock() += 1;
    let guard = LiveGuard(inner.live.clone());
    // On failure the closure, and with it the guard, is dropped: the count is back.
    let handle = thread::Builder::new()
        .name(name.into())
        .stack_size(STACK_SIZE)
        .spawn(move || {
            let _guard = guard;
            ON_RENEWAL_THREAD.with(|on| on.set(true));
            f();
        })?;
    handles.push(handle);
    Ok(())
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
                active: Arc::new(AtomicUsize::new(0)),
                threads: AtomicUsize::new(0),
                idle: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
                timer: Mutex::new(Timer::default()),
                timer_wake: Condvar::new(),
                io: Mutex::new(IoQueue::default()),
                io_wake: Condvar::new(),
                shutdown: AtomicBool::new(false),
                handles: Mutex::new(Vec::new()),
                swept: AtomicUsize::new(0),
                os: Mutex::new(OsCap::default()),
                live: Arc::new(Live::default()),
            }),
        }
    }

    /// Ends every thread of this renewer and joins it, waiting at most `bound` for threads still
    /// busy (one may be in the middle of a renewal round trip). Called when the client's last
    /// handle is gone, so no lock is held through it any more. A thread that outlives the bound
    /// is left to end on its own; so is the calling thread, if it is one of ours.
    pub(crate) fn shutdown(&self, bound: Duration) {
        let inner = &self.inner;
        inner.shutdown.store(true, Ordering::Release);
        // Each wake-up is sent with the sleeper's mutex held, so none can be missed.
        {
            let mut t = inner.timer.lock();
            t.pending.clear();
            inner.timer_wake.notify_all();
        }
        {
            let _q = inner.io.lock();
            inner.io_wake.notify_all();
        }
        // The idle list is let go before any mailbox is taken: a parked thread that wakes (or
        // joins the list) holds its mailbox and then takes the list (worker.rs), so holding
        // the list here while taking a mailbox could wait for good on both sides.
        let idle = inner.idle.lock().clone();
        for worker in idle {
            let _job = worker.job.lock();
            worker.cv.notify_all();
        }
        // Only a thread of ours asks for its own id: `thread::current()` on a thread the library
        // did not start (a C program's main thread) would allocate a handle that is never freed.
        let me = ON_RENEWAL_THREAD
            .with(|on| on.get())
            .then(|| thread::current().id());
        let mut handles = std::mem::take(&mut *inner.handles.lock());
        let ours = usize::from(handles.iter().any(|h| Some(h.thread().id()) == me));
        let deadline = Instant::now() + bound;
        let mut live = inner.live.count.lock();
        while *live > ours {
            if inner.live.ended.wait_until(&mut live, deadline).timed_out() {
                break;
            }
        }
        let all_ended = *live <= ours;
        drop(live);
        handles.retain(|h| Some(h.thread().id()) != me);
        for h in handles {
            if all_ended || h.is_finished() {
                let _ = h.join();
            }
        }
    }

    /// An id for a new auto-renewed lock.
    pub(crate) fn next_id(&self) -> u64 {
        self.inner.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Takes a place, or refuses when `max_renewed_locks` are held already, or when a renewal
    /// thread for one more lock would come near an operating-system limit.
    pub(crate) fn reserve(&self) -> Result<Reservation, Error> {
        let inner = &self.inner;
        let n = inner.active.fetch_add(1, Ordering::AcqRel) + 1;
        let refused = if n > inner.max {
            Some(Error::limit(format!(
                "{} auto-renewed locks are held through this client already (max_renewed_locks)",
                inner.max
            )))
        } else if n >= limits::CHECK_FROM {
            self.check_os(n).err()
        } else {
            None
        };
        if let Some(e) = refused {
            inner.active.fetch_sub(1, Ordering::AcqRel);
            return Err(e);
        }
        Ok(Reservation::taken(inner.active.clone()))
    }

    /// Whether the operating system lets the renewal machinery hold `n` locks, each with its
    /// own thread (see `limits.rs`). The limits are read again when `n` nears the last reading's
    /// cap, at most every `RECHECK_EVERY`, and every few seconds in any case.
    fn check_os(&self, n: usize) -> Result<(), Error> {
        let inner = &self.inner;
        let mut os = inner.os.lock();
        let age = os.read_at.map(|t| t.elapsed());
        let read = match age {
            None => true,
            Some(age) => {
                age >= limits::RECHECK_EVERY
                    && (n > os.cap - os.cap / 8 || age >= 10 * limits::RECHECK_EVERY)
            }
        };
        if read {
            let budget = limits::budget(&limits::read());
            let threads = inner.threads.load(Ordering::Acquire);
            os.cap = threads.saturating_add(usize::try_from(budget.threads).unwrap_or(usize::MAX));
            os.bound = budget.bound;
            os.read_at = Some(Instant::now());
        }
        if n > os.cap {
            return Err(Error::limit(format!(
                "no more than {} auto-renewed locks can be held in this process, each with a \
                 renewal thread of its own, without coming near an operating-system limit: {}",
                os.cap, os.bound
            )));
        }
        Ok(())
    }

    /// Starts renewing a freshly acquired lock: the timer hands it to a renewal thread of its own
    /// when its first renewal comes due.
    pub(crate) fn watch(&self, id: u64, lock: Arc<dyn Renewable>) -> Result<(), Error> {
        let due = {
            let st = lock.status().lock();
            st.next_renewal
                .min(st.valid_until.min(Instant::now() + ATTACH_AFTER))
        };
        let mut t = self.inner.timer.lock();
        let earliest = t.due.peek().map(|e| e.0.0);
        t.due.push(Reverse((due, id)));
        t.pending.insert(id, Job { lock });
        if !t.running {
            let inner = self.inner.clone();
            let started = spawn(&self.inner, "redislock-timer", move || timer_loop(inner));
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

    /// The threads and places now, and the renewal counters of the backend's `metrics`.
    pub(crate) fn stats(&self, metrics: &Metrics) -> Stats {
        let i = &self.inner;
        Stats {
            renewal_threads: i.threads.load(Ordering::Acquire),
            idle_renewal_threads: i.idle.lock().len(),
            renewed_locks: i.active.load(Ordering::Acquire),
            renewals: metrics.renewals.get(),
            late_renewals: metrics.renewals_late.get(),
            lost_locks: metrics.lost_by_renewal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::sync::Condvar;
    use std::sync::mpsc;
    use worker::Worker;

    /// A parked renewal thread that wakes as the client shuts down holds its mailbox and then
    /// takes the idle list (worker.rs). Shutdown must not hold the list while it takes that
    /// mailbox: it did once, and both waited for good (a hang of `redislock_client_free` about
    /// once in a hundred C test runs). Here the thread's side is played step by step, each wait
    /// bounded, so the old order fails instead of hanging.
    #[test]
    fn shutdown_never_holds_the_idle_list_while_it_takes_a_mailbox() {
        let renewer = Renewer::new(10);
        let worker = Arc::new(Worker {
            job: Mutex::new(None),
            cv: Condvar::new(),
        });
        renewer.inner.idle.lock().push(worker.clone());

        // The parked thread, awake: its mailbox held.
        let mailbox = worker.job.lock();
        let (done_tx, done_rx) = mpsc::channel();
        let inner = renewer.inner.clone();
        let shutting_down = thread::spawn(move || {
            Renewer { inner }.shutdown(Duration::from_secs(1));
            let _ = done_tx.send(());
        });
        // Shutdown is waiting for the mailbox by now; the thread takes the list next.
        thread::sleep(Duration::from_millis(200));
        let list = renewer.inner.idle.try_lock_for(Duration::from_secs(2));
        let took_the_list = list.is_some();
        drop(list);
        drop(mailbox);
        let ended = done_rx.recv_timeout(Duration::from_secs(5)).is_ok();
        assert!(
            took_the_list,
            "shutdown held the idle list while it waited for a parked thread's mailbox"
        );
        assert!(ended, "shutdown did not end");
        shutting_down.join().unwrap();
    }
}
