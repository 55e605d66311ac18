//! The lock guard: release, extend, and the holder's local view of the lock.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::base::sync::{Condvar, Mutex, MutexGuard};

use crate::base::backoff::Backoff;
use crate::base::config::check_lease;
use crate::base::error::Error;
use crate::base::grant::drift;
use crate::base::keys::LockKeys;
use crate::base::metrics::{LockKind, LostReason};
use crate::base::token::Token;
use crate::engine::backend::{Backend, Owner};
use crate::engine::kinds::Holding;
use crate::engine::renewal::Reservation;
use crate::engine::trace;

/// Where a lock stands, as its holder sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Ours, as far as we know (the lease may still run out if it is not renewed).
    Held,
    /// Released by its holder.
    Released,
    /// Left to its lease by [`Lock::detach`]: neither renewed nor released through this handle.
    Detached,
    /// Found lost: the key was gone or held another token, or Redis stayed unreachable until
    /// the lease ran out. The text says which.
    Lost(&'static str),
}

/// The mutable part of a lock, guarded by `LockState::status`.
pub(crate) struct Status {
    pub phase: Phase,
    pub lease: Duration,
    /// Until when the key is surely still ours (a lease counted from before the request was sent,
    /// less a clock-drift margin).
    pub valid_until: Instant,
    /// When the renewal thread next extends the lease.
    pub next_renewal: Instant,
    /// An auto-renewed lock's place among the client's `max_renewed_locks`, given back the
    /// moment the lock is released or found lost.
    pub reservation: Option<Reservation>,
    /// A release of ours is on its way: a renewal that finds the key gone meanwhile has met
    /// that release, not a loss.
    pub releasing: bool,
}

/// Everything about one held lock, shared by the guard and its renewal thread.
///
/// In a forked child the handle is inert, and it never takes `status` or `on_lost` there: a
/// thread of the parent (a renewal thread applying a reply, a release going on in the
/// background, another thread of the program) may have held either at the `fork()`, and no
/// thread of the child would ever unlock it. Every call that can reach a forked child checks
/// the process first (`check_process`).
pub(crate) struct LockState {
    pub backend: Arc<Backend>,
    pub keys: LockKeys,
    pub token: Token,
    pub fence: Option<u64>,
    pub auto_renew: bool,
    /// The lock's id with the renewal timer (auto-renewed locks only).
    pub renew_id: u64,
    /// The process that acquired the lock; in any other (a forked child) the handle is inert.
    pub pid: u32,
    pub status: Mutex<Status>,
    /// `Status::lease` in nanoseconds, written together with it (under `status`) and read
    /// without it, so that a forked child can read a handle's lease too.
    lease_nanos: AtomicU64,
    /// Wakes the renewal thread when the lock is released or extended.
    pub wake: Condvar,
    /// Called once when the lock is found lost ([`Lock::on_lost`]).
    pub on_lost: Mutex<Option<LostCallback>>,
    /// What kind of grant this is (exclusive lock, read or write lock, permits, a set of
    /// locks), which decides the scripts that release and extend it.
    pub kind: Holding,
    /// The same, as the metrics' `kind` label says it.
    pub metric_kind: LockKind,
    /// When the grant was made (for the hold-time histogram).
    pub granted_at: Instant,
}

/// What [`Lock::on_lost`] calls.
pub(crate) type LostCallback = Box<dyn FnOnce(&Error) + Send>;

impl LockState {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        backend: Arc<Backend>,
        keys: LockKeys,
        token: Token,
        fence: Option<u64>,
        reservation: Option<Reservation>,
        lease: Duration,
        granted_at: Instant,
        kind: Holding,
    ) -> LockState {
        let auto_renew = reservation.is_some();
        let metric_kind = kind.metric();
        backend.metrics.holding(metric_kind, 1);
        let renew_id = if auto_renew {
            backend.renewer.next_id()
        } else {
            0
        };
        LockState {
            pid: backend.pid,
            backend,
            keys,
            token,
            fence,
            auto_renew,
            renew_id,
            status: Mutex::new(Status {
                phase: Phase::Held,
                lease,
                valid_until: granted_at + lease.saturating_sub(drift(lease)),
                next_renewal: granted_at + lease / 3,
                reservation,
                releasing: false,
            }),
            lease_nanos: AtomicU64::new(nanos(lease)),
            wake: Condvar::new(),
            on_lost: Mutex::new(None),
            kind,
            metric_kind,
            granted_at,
        }
    }

    /// The lock stopped being held (released, detached or lost): counted out of the held
    /// locks, its hold time into the histogram.
    fn ended(&self) {
        let m = &self.backend.metrics;
        m.holding(self.metric_kind, -1);
        m.held_for(
            self.metric_kind,
            self.keys.name(),
            self.granted_at.elapsed(),
        );
    }

    /// `Ok` in the process that acquired the lock, [`Error::is_forked`] in a forked child,
    /// where the handle must not take its locks (see the type's documentation).
    fn check_process(&self) -> Result<(), Error> {
        if self.pid == std::process::id() {
            Ok(())
        } else {
            Err(Error::forked(&self.keys.shown()))
        }
    }

    /// Why a lock that is not [`Phase::Held`] cannot be used.
    fn not_held(&self, phase: Phase) -> Error {
        let why = match phase {
            Phase::Held => "it is held",
            Phase::Released => "it was released already",
            Phase::Detached => "it was detached from this handle",
            Phase::Lost(why) => why,
        };
        Error::not_held(&self.keys.shown(), why)
    }

    /// The status, locked, while the lock is held; else why it is not.
    fn held_status(&self) -> Result<MutexGuard<'_, Status>, Error> {
        let st = self.status.lock();
        if st.phase == Phase::Held {
            return Ok(st);
        }
        let phase = st.phase;
        drop(st);
        Err(self.not_held(phase))
    }

    /// Releases the lock; a second call reports [`Error::is_not_held`]. The handle's state
    /// changes only with the server's answer: while the server cannot be reached (a failover)
    /// the release is tried again for up to `patience` (see [`LockState::ride_out`]), and if
    /// it still has no answer the lock is still held as far as this handle knows (and still
    /// renewed), so the call can be repeated.
    pub(crate) fn release(&self, patience: Duration) -> Result<(), Error> {
        self.check_process()?;
        {
            let mut st = self.held_status()?;
            // The place among the renewed locks is given back before the release is sent: the
            // waiter it hands the lock to may claim one the moment it wakes.
            st.reservation = None;
            st.releasing = true;
        }
        let released = trace::release(self, || {
            self.ride_out(patience, || {
                self.kind.release(&self.backend, &self.keys, &self.token)
            })
        });
        let released = match released {
            Ok(released) => released,
            Err(e) => {
                // Still ours as far as we know, and still renewed: take a place again if one is
                // free (the bound may be exceeded by this one lock until it is released).
                let mut st = self.status.lock();
                st.releasing = false;
                if self.auto_renew && st.phase == Phase::Held && st.reservation.is_none() {
                    st.reservation = self.backend.renewer.reserve().ok();
                }
                return Err(e);
            }
        };
        {
            let mut st = self.status.lock();
            if st.phase != Phase::Held {
                // Another thread released or detached the lock meanwhile, or renewal found it lost.
                let phase = st.phase;
                drop(st);
                return if released {
                    Ok(())
                } else {
                    Err(self.not_held(phase))
                };
            }
            if released {
                st.phase = Phase::Released;
                st.reservation = None;
                drop(st);
                self.ended();
            } else {
                self.mark_lost(st, LostReason::FoundByRelease);
            }
        }
        self.stop_renewal();
        if released {
            Ok(())
        } else {
            Err(Error::not_held(
                &self.keys.shown(),
                LostReason::FoundByRelease.why(),
            ))
        }
    }

    /// Runs `call` (a release or an extend of this lock) and, while it fails only because the
    /// server that holds the lock cannot be reached or cannot serve yet ([`Error::is_transient`]:
    /// a master died and its replica is being promoted), runs it again after a back-off pause,
    /// for up to `patience` and never past the lease (after it the key is gone on any master).
    /// Each try asks the deployment for the lock's server anew (the sentinels, the cluster's
    /// slot table), so it lands on the new master once there is one. The scripts act only on a
    /// key that holds our token, so a repeat can never touch another owner's lock.
    fn ride_out<T>(
        &self,
        patience: Duration,
        mut call: impl FnMut() -> Result<T, Error>,
    ) -> Result<T, Error> {
        // `Duration::MAX`: no bound but the lease.
        let bound = Instant::now().checked_add(patience);
        let mut backoff = None;
        loop {
            let e = match call() {
                Err(e) if e.is_transient() => e,
                done => return done,
            };
            let backoff =
                backoff.get_or_insert_with(|| Backoff::new(self.token.as_str().as_bytes()));
            let valid_until = self.status.lock().valid_until;
            let until = bound.map_or(valid_until, |b| b.min(valid_until));
            let pause = backoff.pause();
            if Instant::now() + pause >= until {
                return Err(e);
            }
            log::debug!(
                "lock {}: its server cannot serve ({e}); trying again in {} ms",
                self.keys.shown(),
                pause.as_millis()
            );
            thread::sleep(pause);
        }
    }

    /// Stops renewing and managing the lock; the key keeps our token until its lease runs out
    /// (or someone releases it with the token).
    pub(crate) fn detach(&self) -> Result<(), Error> {
        self.check_process()?;
        {
            let mut st = self.held_status()?;
            st.phase = Phase::Detached;
            st.reservation = None;
        }
        self.ended();
        self.stop_renewal();
        Ok(())
    }

    /// Marks the lock lost unless it was released meanwhile; then, with the status unlocked,
    /// logs it and calls the holder's [`Lock::on_lost`] callback on this thread.
    pub(crate) fn mark_lost(&self, mut st: MutexGuard<'_, Status>, reason: LostReason) {
        if st.phase != Phase::Held {
            return;
        }
        let why = reason.why();
        st.phase = Phase::Lost(why);
        st.reservation = None;
        drop(st);
        self.ended();
        trace::lost(self, reason);
        self.backend
            .metrics
            .lost(self.metric_kind, self.keys.name(), reason);
        log::warn!("lock {} lost: {why}", self.keys.shown());
        let callback = self.on_lost.lock().take();
        if let Some(callback) = callback {
            let error = Error::not_held(&self.keys.shown(), why);
            // A panicking callback must not take the renewal thread down with it.
            let called =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| callback(&error)));
            if called.is_err() {
                log::error!(
                    "the on_lost callback of lock {} panicked",
                    self.keys.shown()
                );
            }
        }
    }

    /// After release: the renewal timer forgets the lock, and its renewal thread (if it has one
    /// already) wakes and ends at once.
    fn stop_renewal(&self) {
        if self.auto_renew {
            self.backend.renewer.forget(self.renew_id);
            self.wake.notify_all();
        }
    }
}

/// A held grant of any kind, as the engine hands it to the API's guards: its state (shared with
/// its renewal) and the backend it runs on. Dropping it releases the grant (best effort).
#[must_use = "dropping the handle releases the grant at once"]
#[clippy::has_significant_drop]
pub(crate) struct Held {
    pub(crate) state: Arc<LockState>,
    /// Keeps the client's connections and renewal threads running while the lock lives, also
    /// after the client itself is dropped.
    pub(crate) _owner: Arc<Owner>,
}

impl Held {
    /// The lock's name (without the client's key prefix).
    pub(crate) fn name(&self) -> &[u8] {
        self.state.keys.name()
    }

    /// Whether the lock is still ours, as far as this process knows, without a round trip:
    /// not released, not found lost by renewal, lease not run out, and this is the process
    /// that acquired it.
    pub(crate) fn is_held(&self) -> bool {
        // The process first: a forked child must not take the status (see `LockState`).
        if self.state.check_process().is_err() {
            return false;
        }
        let st = self.state.status.lock();
        st.phase == Phase::Held && Instant::now() < st.valid_until
    }

    /// Whether renewal (or an extend) found the lock lost: the key expired, was deleted or
    /// taken over behind our back, or Redis stayed unreachable until the lease ran out.
    /// Never in a forked child: the grant is the parent's, and nothing there watches it.
    pub(crate) fn is_lost(&self) -> bool {
        self.state.check_process().is_ok()
            && matches!(self.state.status.lock().phase, Phase::Lost(_))
    }

    /// How long the lock is surely still ours (zero when it is not held). Counted from before
    /// the acquiring request was sent, less a clock-drift margin.
    pub(crate) fn remaining(&self) -> Duration {
        if !self.is_held() {
            return Duration::ZERO;
        }
        self.state
            .status
            .lock()
            .valid_until
            .saturating_duration_since(Instant::now())
    }

    /// The fencing token of this grant, when the lock was acquired with fencing: strictly
    /// larger than that of every earlier fenced grant of the same name (on a Sentinel group or
    /// a Cluster, ordered first by the failover epoch of the master that granted it). Pass it to the
    /// protected resource, which should refuse writes carrying a smaller token than it has seen.
    pub(crate) fn fencing_token(&self) -> Option<u64> {
        self.state.fence
    }

    /// The current lease (in a forked child, the lease the grant had at the fork).
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_nanos(self.state.lease_nanos.load(Ordering::Relaxed))
    }

    /// Whether a renewal thread keeps this lock alive.
    pub(crate) fn auto_renews(&self) -> bool {
        self.state.auto_renew
    }

    /// Resets the lease to `lease` from now, if the key still holds our token. Auto-renewal
    /// continues with the new lease. Fails with [`Error::is_not_held`] when the lock is gone.
    pub(crate) fn extend(&self, lease: Duration) -> Result<(), Error> {
        let s = &self.state;
        check_lease(lease, s.auto_renew)?;
        s.check_process()?;
        drop(s.held_status()?);
        let patience = s.backend.store.cfg().release_timeout;
        let mut sent = Instant::now();
        let extended = trace::extend(s, lease, || {
            s.ride_out(patience, || {
                sent = Instant::now();
                s.kind.extend(&s.backend, &s.keys, &s.token, lease)
            })
        })?;
        let mut st = s.status.lock();
        if extended {
            if st.phase != Phase::Held {
                // Released, detached or found lost by another thread while the call was on its
                // way: the handle's verdict stands (a lost lock stays lost).
                let phase = st.phase;
                drop(st);
                return Err(s.not_held(phase));
            }
            st.lease = lease;
            s.lease_nanos.store(nanos(lease), Ordering::Relaxed);
            st.valid_until = sent + lease.saturating_sub(drift(lease));
            st.next_renewal = sent + lease / 3;
            let due = st.next_renewal;
            drop(st);
            if s.auto_renew {
                s.backend.renewer.reschedule(s.renew_id, due);
                s.wake.notify_all();
            }
            Ok(())
        } else {
            s.mark_lost(st, LostReason::FoundByExtend);
            Err(Error::not_held(
                &s.keys.shown(),
                LostReason::FoundByExtend.why(),
            ))
        }
    }

    /// Releases the lock. `Ok` means it was still ours and is now free (or handed to the next
    /// waiter); [`Error::is_not_held`] means it had already expired, been lost or taken over,
    /// so the protected work may have overlapped with another holder's.
    ///
    /// While the server cannot be reached (a failover) the release is tried again for up to
    /// the client's `release_timeout`. When it still has no answer then, the error is
    /// returned and the release goes on on a thread of the library until it is answered or
    /// the lease has run out, so the name is free again soon after the failover, not only at
    /// the end of the lease.
    pub(crate) fn release(self) -> Result<(), Error> {
        let patience = self.state.backend.store.cfg().release_timeout;
        let result = self.state.release(patience);
        match &result {
            Err(e) if e.is_transient() && self.state.check_process().is_ok() => {
                release_later(self);
            }
            // This handle is gone with the call: leave the key to its lease.
            Err(_) if self.state.check_process().is_ok() => {
                let _ = self.state.detach();
            }
            _ => {}
        }
        result
    }

    /// Calls `f` once if the lock is found lost: renewal found its key gone or held by another
    /// owner, or could not reach Redis before the lease ran out (also when an extend or release
    /// finds it gone). `f` gets the [`Error::is_not_held`] error that says why, and runs on the
    /// thread that found it, usually a renewal thread: it must not block, and must not release
    /// or extend this lock. A release or detach never calls it. When the lock is lost already,
    /// `f` runs at once on this thread. A second call replaces the first callback. In a forked
    /// child, where the grant is the parent's and is never found lost, `f` is dropped uncalled.
    pub(crate) fn on_lost(&self, f: impl FnOnce(&Error) + Send + 'static) {
        let s = &self.state;
        if s.check_process().is_err() {
            return;
        }
        let st = s.status.lock();
        if let Phase::Lost(why) = st.phase {
            drop(st);
            f(&Error::not_held(&s.keys.shown(), why));
            return;
        }
        // Stored with the status locked: a loss found after this sees the callback.
        *s.on_lost.lock() = Some(Box::new(f));
    }

    /// The lock's owner token: the random value its Redis key holds while the lock is ours.
    /// It is a bearer secret (whoever knows it can release or extend the lock): hand it only to
    /// the code that is to take the lock over, for example a queued job that
    /// [restores](crate::LockRequest::restore) it, and never log it.
    pub(crate) fn owner_token(&self) -> &str {
        self.state.token.as_str()
    }

    /// Lets the lock outlive this handle: it is no longer renewed, and dropping the handle does
    /// not release it, so it ends with its lease unless someone holding its
    /// [owner token](Self::owner_token) releases or extends it first. Returns that token.
    pub(crate) fn detach(self) -> Result<String, Error> {
        self.state.detach()?;
        Ok(self.state.token.as_str().to_owned())
    }
}

impl Held {
    /// Releases the lock without blocking on a server that cannot be reached: one try on this
    /// thread; if the server cannot be reached (a failover), the error is returned and the
    /// release goes on on a thread of the library ([`release_later`]), so that the caller (a
    /// scope's end, a PHP request's) is not held up.
    pub(crate) fn release_or_hand_over(&self) -> Result<(), Error> {
        let s = &self.state;
        let result = s.release(Duration::ZERO);
        if let Err(e) = &result
            && e.is_transient()
            && s.check_process().is_ok()
        {
            release_later(Held {
                state: s.clone(),
                _owner: self._owner.clone(),
            });
        }
        result
    }
}

impl Drop for Held {
    /// Releases a lock still held, without blocking on a server that cannot be reached
    /// ([`Held::release_or_hand_over`]).
    fn drop(&mut self) {
        let s = &self.state;
        // The process first: in a forked child the handle is dropped without a look at its
        // status, which a thread of the parent may have held at the fork (see `LockState`).
        if s.check_process().is_ok() && s.status.lock().phase == Phase::Held {
            let _ = self.release_or_hand_over();
        }
    }
}

/// Goes on with the release of `held`, which found no server to answer it, on a thread of its
/// own (`redislock-release`): tried again with back-off until it is answered or the lease has
/// run out (then the key is gone anyway and the handle is left detached). The thread keeps the
/// client's connections alive until then, and ends with it. If no thread can be started, the
/// lock is left to its lease, as before a release at all.
fn release_later(held: Held) {
    let state = held.state.clone();
    let started = thread::Builder::new()
        .name("redislock-release".to_owned())
        .spawn(move || {
            let s = &held.state;
            let result = s.release(Duration::MAX);
            match result {
                Ok(()) => log::info!("lock {} released once its server answered", s.keys.shown()),
                Err(e) if !e.is_not_held() => {
                    log::warn!(
                        "release of lock {} not confirmed: it ends with its lease ({e})",
                        s.keys.shown()
                    );
                    let _ = s.detach();
                }
                Err(_) => {}
            }
            drop(held);
        });
    if let Err(e) = started {
        log::warn!(
            "release of lock {} left to its lease: no thread to retry it ({e})",
            state.keys.shown()
        );
        let _ = state.detach();
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.state.keys.shown())
            .field("token", &self.state.token)
            .field("held", &self.is_held())
            .field("fencing_token", &self.state.fence)
            .field("auto_renew", &self.state.auto_renew)
            .finish()
    }
}

/// A lease in nanoseconds (at most 30 days: `MAX_LEASE`, far below `u64::MAX`).
fn nanos(lease: Duration) -> u64 {
    u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    #![allow(unsafe_code)] // fork(2), waitpid(2) and _exit(2): std makes no forked child

    use std::sync::mpsc;

    use super::*;
    use crate::engine::kinds::Holding;

    /// A thread of the parent inside a handle's status at the `fork()` (as a renewal thread is
    /// for a moment at every renewal) must not hang the child: there the handle's calls, and
    /// its drop, look at the process before they take anything.
    #[test]
    fn a_forked_child_never_waits_for_the_status_a_parent_thread_held() {
        // Nothing here reaches a server: the client connects lazily, and the grant is made
        // here, without a round trip.
        let client = crate::Client::open("redis://127.0.0.1:1/").unwrap();
        let owner = client.backend().unwrap();
        let lease = Duration::from_secs(30);
        let state = LockState::new(
            owner.backend().clone(),
            LockKeys::new(b"", b"forked").unwrap(),
            Token::new(std::process::id()).unwrap(),
            Some(7),
            None,
            lease,
            Instant::now(),
            Holding::Exclusive,
        );
        let held = Held {
            state: Arc::new(state),
            _owner: owner,
        };
        let (inside_tx, inside_rx) = mpsc::channel();
        let (forked_tx, forked_rx) = mpsc::channel::<()>();
        let child_ok = thread::scope(|s| {
            let state = &held.state;
            s.spawn(move || {
                let _status = state.status.lock();
                inside_tx.send(()).unwrap();
                let _ = forked_rx.recv();
            });
            inside_rx.recv().unwrap();
            // SAFETY: the child only runs the calls below on its copy of the handle and leaves
            // with _exit, without running any destructor of the parent's.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let forked = |r: Result<(), Error>| r.is_err_and(|e| e.is_forked());
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let checks = !held.is_held()
                        && !held.is_lost()
                        && held.remaining() == Duration::ZERO
                        && held.lease() == lease
                        && held.fencing_token() == Some(7)
                        && forked(held.extend(lease))
                        && forked(held.state.release(Duration::ZERO))
                        && forked(held.state.detach());
                    held.on_lost(|_| {});
                    let _ = format!("{held:?}");
                    // SAFETY: this process's copy of the handle, dropped once, as a program
                    // drops what it inherited; the process ends right after.
                    drop(unsafe { std::ptr::read(&held) });
                    checks
                }))
                .unwrap_or(false);
                // SAFETY: ends the forked child at once (see above).
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            let status = loop {
                let mut status = 0;
                // SAFETY: polls our own child.
                let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                assert!(r >= 0, "waitpid failed");
                if r == pid {
                    break Some(status);
                }
                if Instant::now() >= deadline {
                    // SAFETY: kills and reaps our own child.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                        libc::waitpid(pid, &mut status, 0);
                    }
                    break None;
                }
                thread::sleep(Duration::from_millis(5));
            };
            forked_tx.send(()).unwrap();
            let status = status.expect("the forked child hung on the handle's status");
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        });
        assert!(child_ok, "the forked child found something wrong");
        // Still the parent's: held here, and left to its lease (no server to release it on).
        assert!(held.is_held());
        assert_eq!(held.lease(), lease);
        held.detach().unwrap();
    }
}
