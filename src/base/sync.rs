//! The library's locks and condition variables: thin wrappers over `std::sync` with the calls the
//! rest of the crate uses (`lock()` without a `Result`, `Condvar::wait(&mut guard)`,
//! `wait_until` with a deadline, bounded `try_lock_for`), and two fork-safe cells: [`Lazy`] and
//! [`PerProcess`].
//!
//! Why std and not parking_lot: fork safety for every program that links the library. On Linux
//! std's `Mutex`, `Condvar` and `RwLock` are a futex word each and keep no state outside
//! themselves, so a forked child that uses a client parks and wakes on its own words only.
//! parking_lot keeps one process-wide table of parked threads; after `fork()` the child's copy
//! still queues the parent's parked threads, which do not exist there, and the child's next park
//! or unpark can hang or crash on it (parking_lot#515). A `[patch]` that resets the table reaches
//! only the top-level workspace, never a program that depends on the crate, so the fix has to be
//! in what the crate uses.
//!
//! Poisoning is ignored on purpose, as parking_lot did: a panic while a lock is held is a bug
//! that the C boundary reports as such (`ffi/panic.rs`), and every state behind these locks is
//! whole between statements (replaced or pushed in one step), so the next caller goes on with it
//! instead of turning one panic into a panic on every later call.
//!
//! Unlike parking_lot's, std's condition variable may wake a waiter spuriously: every wait in
//! the crate is in a loop that checks its condition again.

use std::ops::{Deref, DerefMut};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{self, PoisonError, TryLockError};
use std::time::{Duration, Instant};

pub(crate) use std::sync::WaitTimeoutResult;

/// How long a timed `try_lock_for` sleeps between its tries at most. It serves only rare paths
/// (a Cluster's slot table being read again), where a holder keeps the lock for a round trip or
/// longer; it also ends a wait on a lock that a thread of the parent held at `fork()` and that
/// no thread of the child will ever release.
const TRY_SLEEP_MAX: Duration = Duration::from_millis(1);

/// Tries `attempt` until it gives a value or `timeout` has passed: at once, then after sleeps
/// that double from a few microseconds up to [`TRY_SLEEP_MAX`].
fn retry_for<G>(timeout: Duration, mut attempt: impl FnMut() -> Option<G>) -> Option<G> {
    if let Some(g) = attempt() {
        return Some(g);
    }
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_micros(4);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(pause.min(left));
        if let Some(g) = attempt() {
            return Some(g);
        }
        pause = (pause * 2).min(TRY_SLEEP_MAX);
    }
}

/// A mutual exclusion lock over `std::sync::Mutex`; see the module's documentation.
#[derive(Default)]
pub(crate) struct Mutex<T: ?Sized>(sync::Mutex<T>);

/// The guard of a [`Mutex`]: the lock is held while it lives.
///
/// It holds std's guard in an `Option` only so that [`Condvar`]'s waits and
/// [`MutexGuard::unlocked`] can hand it over and take it back through `&mut`; outside those calls
/// it is always `Some`.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub(crate) struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
    inner: Option<sync::MutexGuard<'a, T>>,
}

impl<T> Mutex<T> {
    pub(crate) const fn new(value: T) -> Mutex<T> {
        Mutex(sync::Mutex::new(value))
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock, waiting as long as it takes.
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard {
            mutex: self,
            inner: Some(self.0.lock().unwrap_or_else(PoisonError::into_inner)),
        }
    }

    /// Takes the lock if it is free now.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let inner = match self.0.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(MutexGuard {
            mutex: self,
            inner: Some(inner),
        })
    }

    /// Takes the lock if it comes free within `timeout` (see [`TRY_SLEEP_MAX`]).
    pub(crate) fn try_lock_for(&self, timeout: Duration) -> Option<MutexGuard<'_, T>> {
        retry_for(timeout, || self.try_lock())
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// Runs `f` with the lock released, and takes it again before returning.
    pub(crate) fn unlocked<R>(guard: &mut MutexGuard<'a, T>, f: impl FnOnce() -> R) -> R {
        drop(guard.inner.take());
        let r = f();
        guard.inner = Some(guard.mutex.0.lock().unwrap_or_else(PoisonError::into_inner));
        r
    }

    fn take(&mut self) -> sync::MutexGuard<'a, T> {
        self.inner
            .take()
            .expect("a mutex guard holds its lock outside a wait")
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.inner
            .as_deref()
            .expect("a mutex guard holds its lock outside a wait")
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.inner
            .as_deref_mut()
            .expect("a mutex guard holds its lock outside a wait")
    }
}

/// A condition variable over `std::sync::Condvar`, waited on with a [`MutexGuard`].
///
/// It counts its waiters so that a notification with nobody waiting costs no system call (std's
/// always makes one; pool returns and releases notify on every call). That is exact as long as
/// what a waiter waits for is changed under the mutex it waits with, before the notification,
/// as condition variables require anyway: a waiter is counted while it holds that mutex, before
/// the wait releases it, so a notifier that took the mutex after it sees the count.
#[derive(Default)]
pub(crate) struct Condvar {
    cv: sync::Condvar,
    waiters: AtomicUsize,
}

impl Condvar {
    pub(crate) const fn new() -> Condvar {
        Condvar {
            cv: sync::Condvar::new(),
            waiters: AtomicUsize::new(0),
        }
    }

    /// Releases the guard's lock, sleeps until notified (or spuriously), and takes it again.
    pub(crate) fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let g = guard.take();
        // Relaxed is enough: the mutex orders this against a notifier (see the type's docs).
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let g = self.cv.wait(g).unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        guard.inner = Some(g);
    }

    /// As [`Condvar::wait`], for at most `timeout`.
    pub(crate) fn wait_for<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
    ) -> WaitTimeoutResult {
        let g = guard.take();
        self.waiters.fetch_add(1, Ordering::Relaxed);
        let (g, result) = self
            .cv
            .wait_timeout(g, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_sub(1, Ordering::Relaxed);
        guard.inner = Some(g);
        result
    }

    /// As [`Condvar::wait`], until `deadline` at the latest (on the monotonic clock).
    pub(crate) fn wait_until<T>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Instant,
    ) -> WaitTimeoutResult {
        self.wait_for(guard, deadline.saturating_duration_since(Instant::now()))
    }

    pub(crate) fn notify_one(&self) {
        if self.waiters.load(Ordering::Relaxed) > 0 {
            self.cv.notify_one();
        }
    }

    pub(crate) fn notify_all(&self) {
        if self.waiters.load(Ordering::Relaxed) > 0 {
            self.cv.notify_all();
        }
    }
}

/// A reader-writer lock over `std::sync::RwLock`; see the module's documentation.
#[derive(Default)]
pub(crate) struct RwLock<T: ?Sized>(sync::RwLock<T>);

impl<T> RwLock<T> {
    pub(crate) const fn new(value: T) -> RwLock<T> {
        RwLock(sync::RwLock::new(value))
    }
}

impl<T: ?Sized> RwLock<T> {
    pub(crate) fn read(&self) -> sync::RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> sync::RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A value made on first use, as `std::sync::LazyLock` makes it, but without a lock: threads
/// that find it not made yet each make one, the first to finish puts its own in place, the
/// others drop theirs and use it. `LazyLock` and `OnceLock` park a thread that finds another one
/// making the value until the maker is done; in a child forked while a thread of the parent was
/// making it, no thread ever is, and the child would wait for good. Here it makes its own.
/// For values that are cheap to make twice and the same whoever makes them (the scripts, a
/// clock's epoch).
pub(crate) struct Lazy<T> {
    value: AtomicPtr<T>,
    make: fn() -> T,
}

impl<T> Lazy<T> {
    /// A value that `make` makes on first use.
    pub(crate) const fn new(make: fn() -> T) -> Lazy<T> {
        Lazy {
            value: AtomicPtr::new(ptr::null_mut()),
            make,
        }
    }
}

#[allow(unsafe_code)] // a leaked Box behind an atomic pointer: std has no lock-free lazy value
impl<T> Deref for Lazy<T> {
    type Target = T;

    fn deref(&self) -> &T {
        let made = self.value.load(Ordering::Acquire);
        if !made.is_null() {
            // SAFETY: a pointer put in place is a leaked Box, freed only by Drop (&mut self).
            return unsafe { &*made };
        }
        let mine = Box::into_raw(Box::new((self.make)()));
        match self.value.compare_exchange(
            ptr::null_mut(),
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: ours, now in place (see above).
            Ok(_) => unsafe { &*mine },
            Err(theirs) => {
                // SAFETY: ours, never shared; theirs is in place (see above).
                drop(unsafe { Box::from_raw(mine) });
                unsafe { &*theirs }
            }
        }
    }
}

#[allow(unsafe_code)] // frees the Box that Deref leaked
impl<T> Drop for Lazy<T> {
    fn drop(&mut self) {
        let made = *self.value.get_mut();
        if !made.is_null() {
            // SAFETY: the Box put in place, no longer borrowed (we have &mut self).
            drop(unsafe { Box::from_raw(made) });
        }
    }
}

// SAFETY: as `LazyLock`: the value is shared by reference between threads (Sync) and may be
// made on one thread and dropped on another (Send).
#[allow(unsafe_code)]
unsafe impl<T: Send + Sync> Sync for Lazy<T> {}
// SAFETY: see above.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for Lazy<T> {}

/// A value of each process, made with `T::default()` where a process first reaches it. A
/// forked child puts its own in place, in its copy of the memory (the parent's is untouched),
/// and never takes the one it inherited, whose locks a thread of the parent may have held at the
/// fork: those would stay held in the child for good. The values of earlier processes are kept
/// until the `PerProcess` is dropped (another thread of the child may still be looking at one).
pub(crate) struct PerProcess<T> {
    current: AtomicPtr<Slot<T>>,
}

struct Slot<T> {
    pid: u32,
    value: T,
    /// The slot this one took the place of (an earlier process's), or null.
    older: *mut Slot<T>,
}

impl<T> PerProcess<T> {
    /// No value yet, in any process.
    pub(crate) const fn new() -> PerProcess<T> {
        PerProcess {
            current: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

#[allow(unsafe_code)] // leaked Boxes behind an atomic pointer, freed only by Drop
impl<T: Default> PerProcess<T> {
    /// The value of the process `pid` (the caller's: `std::process::id()`).
    pub(crate) fn of(&self, pid: u32) -> &T {
        let mut seen = self.current.load(Ordering::Acquire);
        loop {
            // SAFETY: a pointer put in place is a leaked Box, freed only by Drop (&mut self).
            if let Some(slot) = unsafe { seen.as_ref() }
                && slot.pid == pid
            {
                return &slot.value;
            }
            let mine = Box::into_raw(Box::new(Slot {
                pid,
                value: T::default(),
                older: seen,
            }));
            match self
                .current
                .compare_exchange(seen, mine, Ordering::AcqRel, Ordering::Acquire)
            {
                // SAFETY: ours, now in place (see above).
                Ok(_) => return unsafe { &(*mine).value },
                Err(now) => {
                    // SAFETY: ours, never shared.
                    drop(unsafe { Box::from_raw(mine) });
                    seen = now;
                }
            }
        }
    }
}

#[allow(unsafe_code)] // frees the Boxes that `of` leaked
impl<T> Drop for PerProcess<T> {
    fn drop(&mut self) {
        let mut next = *self.current.get_mut();
        while !next.is_null() {
            // SAFETY: each slot was put in place once and is reachable once, from its newer one.
            let slot = unsafe { Box::from_raw(next) };
            next = slot.older;
        }
    }
}

// SAFETY: as a `T` shared between threads (Sync) or moved with its owner (Send).
#[allow(unsafe_code)]
unsafe impl<T: Send + Sync> Sync for PerProcess<T> {}
// SAFETY: see above.
#[allow(unsafe_code)]
unsafe impl<T: Send> Send for PerProcess<T> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A child forked while a thread of the parent holds the lock of a per-process value takes
    /// a lock of its own: the one it inherited would never be let go there.
    #[test]
    fn a_forked_child_never_takes_a_lock_a_parent_thread_held() {
        let slot: Arc<PerProcess<RwLock<u32>>> = Arc::new(PerProcess::new());
        let parent = std::process::id();
        *slot.of(parent).write() = 7;
        let (inside_tx, inside_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let slot = slot.clone();
            std::thread::spawn(move || {
                let _held = slot.of(parent).write();
                inside_tx.send(()).unwrap();
                let _ = done_rx.recv();
            })
        };
        inside_rx.recv().unwrap();
        let (slot, child_ok) =
            redislock_testkit::fork_and_check_within(Duration::from_secs(10), slot, |slot| {
                let me = std::process::id();
                let mut value = slot.of(me).write();
                *value += 1;
                *value == 1
            });
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        assert!(child_ok, "the forked child did not get a value of its own");
        assert_eq!(*slot.of(parent).read(), 7);
    }

    /// A child forked while a thread of the parent is making a lazy value (as a thread is for a
    /// moment when it first sends a script) makes its own instead of waiting for that thread.
    #[test]
    fn a_forked_child_never_waits_for_a_value_a_parent_thread_was_making() {
        use std::sync::atomic::AtomicBool;
        static INSIDE: AtomicBool = AtomicBool::new(false);
        static LET_GO: AtomicBool = AtomicBool::new(false);
        fn slow_the_first_time() -> u32 {
            if !INSIDE.swap(true, Ordering::SeqCst) {
                while !LET_GO.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            7
        }
        static VALUE: Lazy<u32> = Lazy::new(slow_the_first_time);

        let maker = std::thread::spawn(|| *VALUE);
        while !INSIDE.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let ((), child_ok) =
            redislock_testkit::fork_and_check_within(Duration::from_secs(10), (), |()| *VALUE == 7);
        LET_GO.store(true, Ordering::SeqCst);
        assert_eq!(maker.join().unwrap(), 7);
        assert!(child_ok, "the forked child found a wrong value");
        assert_eq!(*VALUE, 7);
    }

    #[test]
    fn racing_first_uses_of_a_lazy_value_all_see_one_and_drop_the_others() {
        use std::sync::atomic::AtomicUsize;
        static MADE: AtomicUsize = AtomicUsize::new(0);
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPPED.fetch_add(1, Ordering::SeqCst);
            }
        }
        fn make() -> Counted {
            MADE.fetch_add(1, Ordering::SeqCst);
            // Long enough that the racing threads all find it not made yet.
            std::thread::sleep(Duration::from_millis(20));
            Counted
        }
        let lazy = Lazy::new(make);
        let start = std::sync::Barrier::new(4);
        let seen: Vec<usize> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        &*lazy as *const Counted as usize
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(
            seen.iter().all(|&p| p == seen[0]),
            "threads saw different values"
        );
        let made = MADE.load(Ordering::SeqCst);
        assert!(made >= 1);
        // Every value but the one in place was dropped at once; that one goes with the Lazy.
        assert_eq!(DROPPED.load(Ordering::SeqCst), made - 1);
        drop(lazy);
        assert_eq!(DROPPED.load(Ordering::SeqCst), made);
    }

    #[test]
    fn a_wait_releases_the_lock_and_takes_it_back() {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let other = pair.clone();
        let t = std::thread::spawn(move || {
            *other.0.lock() = true;
            other.1.notify_all();
        });
        let mut ready = pair.0.lock();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !*ready {
            assert!(!pair.1.wait_until(&mut ready, deadline).timed_out());
        }
        drop(ready);
        t.join().unwrap();
    }

    #[test]
    fn no_notification_is_lost_to_the_waiter_count() {
        // A waiter that waits without a timeout, many times over: a notification skipped
        // while it was counted would leave it asleep and the join below would hang.
        let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
        let other = pair.clone();
        let t = std::thread::spawn(move || {
            for i in 1..=2000 {
                let mut n = other.0.lock();
                while *n < i {
                    other.1.wait(&mut n);
                }
            }
        });
        for _ in 0..2000 {
            *pair.0.lock() += 1;
            pair.1.notify_one();
            std::thread::yield_now();
        }
        t.join().unwrap();
    }

    #[test]
    fn a_deadline_passed_times_out_and_keeps_the_lock() {
        let m = Mutex::new(1);
        let cv = Condvar::new();
        let mut g = m.lock();
        assert!(cv.wait_until(&mut g, Instant::now()).timed_out());
        *g += 1;
        assert!(m.try_lock().is_none());
        drop(g);
        assert_eq!(*m.lock(), 2);
    }

    #[test]
    fn unlocked_lets_others_in_and_takes_the_lock_back() {
        let m = Mutex::new(0);
        let mut g = m.lock();
        MutexGuard::unlocked(&mut g, || *m.try_lock().expect("released") = 5);
        assert_eq!(*g, 5);
        assert!(m.try_lock().is_none());
    }

    #[test]
    fn timed_tries_give_up_on_a_held_lock_and_take_a_free_one() {
        let m = Mutex::new(());
        let held = m.lock();
        let started = Instant::now();
        assert!(m.try_lock_for(Duration::from_millis(20)).is_none());
        assert!(started.elapsed() >= Duration::from_millis(20));
        drop(held);
        assert!(m.try_lock_for(Duration::ZERO).is_some());
    }

    #[test]
    fn a_panic_while_holding_does_not_poison_later_callers() {
        let m = Arc::new(Mutex::new(0));
        let other = m.clone();
        let _ = std::thread::spawn(move || {
            let _g = other.lock();
            panic!("while holding");
        })
        .join();
        *m.lock() += 1;
        assert_eq!(*m.lock(), 1);
    }
}
