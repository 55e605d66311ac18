//! What renewal (`engine/renewal/`) needs of a held lock, and nothing more: its status and the
//! condition variable its renewal thread waits on ([`Status`], [`Phase`]), a place among the
//! renewed locks ([`Reservation`]), and the calls of [`Renewable`], which the lock's state
//! (`engine/lock.rs`) implements. Renewal depends on this module alone of the engine's, so the
//! lock can use renewal without renewal using the lock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::base::error::Error;
use crate::base::metrics::{LostReason, Metrics};
use crate::base::sync::{Condvar, Mutex, MutexGuard};
use crate::engine::trace::Subject;
use crate::stores::extend::Extension;

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
    /// The lease runs out at the lock's `at_most`: no renewal after it, and its end is a loss
    /// for that reason.
    pub last: bool,
}

/// A place among a client's auto-renewed locks (`max_renewed_locks`), taken by
/// `Renewer::reserve` and given back when dropped.
pub(crate) struct Reservation {
    active: Arc<AtomicUsize>,
}

impl Reservation {
    /// The place just counted in `active`.
    pub(crate) fn taken(active: Arc<AtomicUsize>) -> Reservation {
        Reservation { active }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A held lock as its renewal sees it.
pub(crate) trait Renewable: Send + Sync {
    /// The lock's status, shared with its handle.
    fn status(&self) -> &Mutex<Status>;
    /// Wakes the renewal thread when the lock is released or extended.
    fn wake(&self) -> &Condvar;
    /// Marks the lock lost for `reason` unless it was released meanwhile, and reports it.
    fn mark_lost(&self, st: MutexGuard<'_, Status>, reason: LostReason);
    /// The key's new expiry for a renewal of `lease` sent at `sent` (longer to cover
    /// `at_least`, cut at `at_most`), and whether it reaches `at_most`.
    fn extension(&self, lease: Duration, sent: Instant) -> (Duration, bool);
    /// The metrics of the lock's client.
    fn metrics(&self) -> &Metrics;
    /// The lock as shown in log lines.
    fn shown(&self) -> String;
    /// The lock as the renewal's span names it.
    fn subject(&self) -> Subject<'_>;
    /// The lock's EXTEND to a key expiry of `px`.
    fn extend_to(&self, px: Duration) -> Extension<'_>;
    /// Sends `extends` (of locks of this lock's client): one pipeline per server, one result
    /// per EXTEND, in order.
    fn send_extends(&self, extends: &[Extension<'_>]) -> Vec<Result<bool, Error>>;
}
