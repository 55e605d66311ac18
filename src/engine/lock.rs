//! The state of a held grant, shared by its handle (`held.rs`) and its renewal: its phase,
//! lease and validity; release, detach and lost-lock reports.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::thread;
use std::time::{Duration, Instant};

use crate::base::sync::{Condvar, Mutex, MutexGuard};

use crate::base::backoff::Backoff;
use crate::base::error::Error;
use crate::base::grant::drift;
use crate::base::keys::LockKeys;
use crate::base::metrics::{KindLabel, LostReason, Metrics};
use crate::base::token::Token;
use crate::engine::backend::Backend;
use crate::engine::bounds::Bounds;
use crate::engine::kinds::Rules;
use crate::engine::renewable::{Phase, Renewable, Reservation, Status};
use crate::engine::trace::{self, Subject};
use crate::stores::extend::Extension;

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
    /// The lock's id with the renewal timer: `Some` for an auto-renewed lock, whose place among
    /// the renewed locks is `Status::reservation`.
    pub renew_id: Option<u64>,
    /// The process that acquired the lock; in any other (a forked child) the handle is inert.
    pub pid: u32,
    pub status: Mutex<Status>,
    /// `Status::lease` in nanoseconds, written together with it (under `status`) and read
    /// without it, so that a forked child can read a handle's lease too.
    pub lease_nanos: AtomicU64,
    /// Wakes the renewal thread when the lock is released or extended.
    pub wake: Condvar,
    /// Called once when the lock is found lost ([`Lock::on_lost`]).
    pub on_lost: Mutex<Option<LostCallback>>,
    /// What kind of grant this is: its rules release, extend and renew it.
    pub kind: Box<dyn Rules>,
    /// The same, as the metrics' `kind` label says it.
    pub metric_kind: KindLabel,
    /// When the grant was made (for the hold-time histogram).
    pub granted_at: Instant,
    /// `at_least` and `at_most` (exclusive locks).
    pub bounds: Bounds,
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
        kind: Box<dyn Rules>,
        bounds: Bounds,
    ) -> LockState {
        let metric_kind = kind.label();
        backend.metrics.holding(metric_kind, 1);
        let renew_id = reservation.is_some().then(|| backend.renewer.next_id());
        LockState {
            pid: backend.pid,
            backend,
            keys,
            token,
            fence,
            renew_id,
            status: Mutex::new(Status {
                phase: Phase::Held,
                lease,
                valid_until: granted_at + lease.saturating_sub(drift(lease)),
                next_renewal: granted_at + lease / 3,
                reservation,
                releasing: false,
                last: bounds.until.is_some_and(|u| u <= granted_at + lease),
            }),
            lease_nanos: AtomicU64::new(nanos(lease)),
            wake: Condvar::new(),
            on_lost: Mutex::new(None),
            kind,
            metric_kind,
            granted_at,
            bounds,
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
    pub(crate) fn check_process(&self) -> Result<(), Error> {
        if self.pid == std::process::id() {
            Ok(())
        } else {
            Err(Error::forked(&self.keys.shown()))
        }
    }

    /// Why a lock that is not [`Phase::Held`] cannot be used.
    pub(crate) fn not_held(&self, phase: Phase) -> Error {
        let why = match phase {
            Phase::Held => "it is held",
            Phase::Released => "it was released already",
            Phase::Detached => "it was detached from this handle",
            Phase::Lost(why) => why,
        };
        Error::not_held(&self.keys.shown(), why)
    }

    /// The status, locked, while the lock is held; else why it is not.
    pub(crate) fn held_status(&self) -> Result<MutexGuard<'_, Status>, Error> {
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
        // Before `at_least`, the key keeps our token until then (renewal stops all the same).
        let released = trace::release(self.subject(), || {
            self.ride_out(patience, || match self.bounds.keep_for(Instant::now()) {
                Some(left) => self.kind.keep(&self.backend, &self.keys, &self.token, left),
                None => self.kind.release(&self.backend, &self.keys, &self.token),
            })
        });
        let released = match released {
            Ok(released) => released,
            Err(e) => {
                // Still ours as far as we know, and still renewed: take a place again if one is
                // free (the bound may be exceeded by this one lock until it is released).
                let mut st = self.status.lock();
                st.releasing = false;
                if self.auto_renews() && st.phase == Phase::Held && st.reservation.is_none() {
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
    pub(crate) fn ride_out<T>(
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
        trace::lost(self.subject(), reason, self.granted_at);
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
    pub(crate) fn stop_renewal(&self) {
        if let Some(id) = self.renew_id {
            self.backend.renewer.forget(id);
            self.wake.notify_all();
        }
    }

    /// Whether a renewal thread keeps the lock alive.
    pub(crate) fn auto_renews(&self) -> bool {
        self.renew_id.is_some()
    }

    /// The lock as its spans name it.
    pub(crate) fn subject(&self) -> Subject<'_> {
        Subject {
            kind: self.metric_kind,
            name: self.keys.name(),
            metrics: &self.backend.metrics,
        }
    }
}

impl Renewable for LockState {
    fn status(&self) -> &Mutex<Status> {
        &self.status
    }

    fn wake(&self) -> &Condvar {
        &self.wake
    }

    fn mark_lost(&self, st: MutexGuard<'_, Status>, reason: LostReason) {
        LockState::mark_lost(self, st, reason)
    }

    fn extension(&self, lease: Duration, sent: Instant) -> (Duration, bool) {
        self.bounds.extension(lease, sent)
    }

    fn metrics(&self) -> &Metrics {
        &self.backend.metrics
    }

    fn shown(&self) -> String {
        self.keys.shown()
    }

    fn subject(&self) -> Subject<'_> {
        LockState::subject(self)
    }

    fn extend_to(&self, px: Duration) -> Extension<'_> {
        Extension {
            keys: &self.keys,
            token: &self.token,
            lease: px,
            script: &*self.kind,
        }
    }

    fn send_extends(&self, extends: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
        self.backend.store.extend_many(extends)
    }
}

/// A lease in nanoseconds (at most 30 days: `MAX_LEASE`, far below `u64::MAX`).
pub(crate) fn nanos(lease: Duration) -> u64 {
    u64::try_from(lease.as_nanos()).unwrap_or(u64::MAX)
}
