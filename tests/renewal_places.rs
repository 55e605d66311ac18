//! `max_renewed_locks` counts the auto-renewed locks *held*: a released lock's place must be free
//! again once `release()` has returned, however slow its renewal thread is to get a CPU.
//!
//! These tests simulate a busy machine (spinning threads, and renewal threads under SCHED_IDLE), so
//! they run one at a time and in a test binary of their own: the slow-down must not reach other
//! tests' renewal threads.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::Duration;

use redislock::{Client, ErrorKind};
use support::{RedisServer, eventually, unique_name};

/// Serializes the tests of this file.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the flag when dropped, also while unwinding, so spinning helper threads always end.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Puts this process's threads named `comm` under the SCHED_IDLE policy: they then only run
/// when no other thread wants the CPU, as on a busy machine. Returns how many it found.
fn deprioritize_threads(comm: &str) -> usize {
    let mut n = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if name.trim_end() == comm {
            let tid: libc::pid_t = task.file_name().to_string_lossy().parse().unwrap();
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sched_setscheduler(2) only reads `param`, a valid local; on Linux a thread
            // id selects just that thread.
            unsafe { libc::sched_setscheduler(tid, libc::SCHED_IDLE, &param) };
            n += 1;
        }
    }
    n
}

/// Keeps a CPU busy until `stop` is set, so that SCHED_IDLE threads here get none. One spinner
/// per CPU is enough for that; other test processes still get their fair share.
fn spin(stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        std::hint::spin_loop();
    }
}

/// One spinner per CPU.
fn spinners() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

#[test]
fn renewed_lock_place_is_free_right_after_release_repeatedly() {
    // `max_renewed_locks` bounds the auto-renewed locks *held*: once release() has returned, the
    // released lock must not count any more, also when it was held long enough to be renewed
    // and its renewal thread is slow to get a CPU (a busy machine: here, spinning threads and a
    // renewal thread under SCHED_IDLE).
    let _serial = serial();
    let srv = RedisServer::start();
    let lease = Duration::from_millis(300);
    let c = Client::builder(&srv.url())
        .max_renewed_locks(1)
        .lease(lease)
        .build()
        .unwrap();
    let name = unique_name("lim-loop");
    let mut refused = 0;
    let mut renewal_threads = 0;
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for _ in 0..spinners() {
            s.spawn(|| spin(&stop));
        }
        for _ in 0..10 {
            // A refused round below may leave the slot taken for a while: wait for it.
            eventually(Duration::from_secs(10), || c.stats().renewed_locks == 0);
            let l = c.try_acquire(&name).unwrap();
            // Held past its first renewal (due at lease/3), so a renewal thread has it.
            thread::sleep(lease / 2);
            renewal_threads = renewal_threads.max(deprioritize_threads("redislock-renew"));
            // (Its result is told if the next acquire fails otherwise: a release that did not
            // go through leaves the name held.)
            let released = l.release();
            match c.try_acquire(&name) {
                Ok(l) => {
                    let _ = l.release();
                }
                Err(e) if e.kind() == ErrorKind::LimitReached => refused += 1,
                Err(e) => panic!("{e} (the release before it: {released:?})"),
            }
        }
    });
    assert!(renewal_threads >= 1, "no renewal thread seen");
    assert_eq!(
        refused, 0,
        "{refused} of 10 acquires right after a release were refused with LimitReached"
    );
}

#[test]
fn waiter_handed_a_released_lock_is_not_refused_by_its_place() {
    // max_renewed_locks(3): one lock held throughout, one released to a waiter of the same
    // client, and a third taken while the waiter waits (a waiter holds no place while it
    // waits). The released lock's place must be free by the time the waiter takes it over: the
    // waiter must not be refused with LimitReached after it was already handed the lock.
    let _serial = serial();
    let srv = RedisServer::start();
    let lease = Duration::from_millis(300);
    let c = Client::builder(&srv.url())
        .max_renewed_locks(3)
        .lease(lease)
        .build()
        .unwrap();
    // Long leases: these two never need a renewal thread during the test.
    let long = Duration::from_secs(60);
    let kept = unique_name("kept");
    let other = c.lock(&kept).lease(long).try_acquire().unwrap();
    let name = unique_name("handoff-place");
    let mut con = srv.conn();
    let stop = AtomicBool::new(false);
    let mut failures = Vec::new();
    thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        for _ in 0..spinners() {
            s.spawn(|| spin(&stop));
        }
        for _ in 0..5 {
            eventually(Duration::from_secs(10), || c.stats().renewed_locks == 1);
            let h = c.try_acquire(&name).unwrap();
            let w = s.spawn(|| {
                c.acquire(&name, Duration::from_secs(20))
                    .map(|l| l.release())
            });
            let queued = eventually(Duration::from_secs(10), || {
                redis::cmd("LLEN")
                    .arg(format!("{{{name}}}:q"))
                    .query::<i64>(&mut con)
                    .unwrap()
                    == 1
            });
            assert!(queued, "the waiter did not queue");
            let third_name = unique_name("third");
            let third = c.lock(&third_name).lease(long).try_acquire().unwrap();
            // Held past its first renewal, so a renewal thread (slow to get a CPU) has it.
            thread::sleep(lease / 2);
            deprioritize_threads("redislock-renew");
            let _ = h.release();
            match w.join().unwrap() {
                Ok(_) => {}
                Err(e) => failures.push(e.to_string()),
            }
            let _ = third.release();
        }
    });
    assert!(other.is_held());
    assert!(
        failures.is_empty(),
        "waiters handed the lock were refused: {failures:?}"
    );
}
