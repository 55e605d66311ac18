//! The guards: one type, [`Guard`], for a held lock of every kind.
//!
//! Every guard has the methods every held lock has — whether it is still held, its lease,
//! extend, release, lost-lock reports — written once; what one kind alone offers is on that
//! kind's guard only: each kind's part, with its alias ([`Lock`](crate::Lock) for an exclusive
//! lock), is in its file of `kinds/`.

use std::fmt;
use std::time::Duration;

use crate::api::fence::Fence;
use crate::api::kinds::{Kind, OneName};
use crate::base::error::Error;
use crate::base::kind::{Descriptor, Fencing};
use crate::engine::held::Held;
use crate::engine::kinds::{Fences, rwlock};

/// The methods every held lock has, written once for [`Guard`] and [`AnyLock`] (each keeps its
/// grant's [`Held`] in `held`).
macro_rules! held_methods {
    () => {
        /// Whether the lock is still ours, as far as this process knows, without a round trip:
        /// not released, not found lost by renewal, lease not run out, and this is the process
        /// that acquired it.
        pub fn is_held(&self) -> bool {
            self.held.is_held()
        }

        /// Whether renewal (or an extend) found the lock lost: the key expired, was deleted or
        /// taken over behind our back, or Redis stayed unreachable until the lease ran out.
        pub fn is_lost(&self) -> bool {
            self.held.is_lost()
        }

        /// How long the lock is surely still ours (zero when it is not held). Counted from before
        /// the acquiring request was sent, less a clock-drift margin.
        pub fn remaining(&self) -> Duration {
            self.held.remaining()
        }

        /// The current lease.
        pub fn lease(&self) -> Duration {
            self.held.lease()
        }

        /// Whether a renewal thread keeps this lock alive.
        pub fn auto_renews(&self) -> bool {
            self.held.auto_renews()
        }

        /// Resets the lease to `lease` from now, if the lock is still ours. Auto-renewal continues
        /// with the new lease. Fails with [`Error::is_not_held`] when the lock is gone. Rides out a
        /// failover as [`release`](Self::release) does, for up to the client's `release_timeout`.
        pub fn extend(&self, lease: Duration) -> Result<(), Error> {
            self.held.extend(lease)
        }

        /// Calls `f` once if the lock is found lost: renewal found its key gone or held by another
        /// owner, or could not reach Redis before the lease ran out (also when an extend or release
        /// finds it gone). `f` gets the [`Error::is_not_held`] error that says why, and runs on the
        /// thread that found it, usually a renewal thread: it must not block, and must not release
        /// or extend this lock. A release or detach never calls it. When the lock is lost already,
        /// `f` runs at once on this thread. A second call replaces the first callback.
        ///
        /// ```no_run
        /// use std::sync::mpsc;
        /// use std::time::Duration;
        /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
        /// let lock = client.acquire("payments:batch", Duration::from_secs(5))?;
        /// let (lost_tx, lost_rx) = mpsc::channel();
        /// lock.on_lost(move |e| {
        ///     let _ = lost_tx.send(e.to_string());
        /// });
        /// // ... between steps of the work: stop at once if the lock was lost
        /// if let Ok(why) = lost_rx.try_recv() {
        ///     eprintln!("stopping: {why}");
        /// }
        /// # Ok::<(), redislock::Error>(())
        /// ```
        pub fn on_lost(&self, f: impl FnOnce(&Error) + Send + 'static) {
            self.held.on_lost(f)
        }
    };
}

/// A held lock of kind `K`. Dropping it releases the lock (best effort; errors are ignored), so
/// keep it alive for as long as the protected work runs, and call [`release`](Guard::release)
/// to learn whether the lock was still ours at the end.
///
/// ```no_run
/// use std::time::Duration;
/// let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
/// let lock = client.acquire("stock:42", Duration::from_secs(5))?;
/// // ... read-modify-write the stock of item 42 ...
/// assert!(lock.is_held());
/// lock.release()?; // Err(NotHeld) if the lease ran out or the lock was lost meanwhile
/// # Ok::<(), redislock::Error>(())
/// ```
#[must_use = "dropping the guard releases the lock at once"]
#[clippy::has_significant_drop]
pub struct Guard<K: Kind> {
    pub(in crate::api) held: Held,
    pub(in crate::api) parts: K::Parts,
}

impl<K: Kind> Guard<K> {
    pub(crate) fn new(held: Held, parts: K::Parts) -> Guard<K> {
        Guard { held, parts }
    }

    held_methods!();

    /// Releases the lock (or hands it to the waiters that can now proceed). `Ok` means it was
    /// still ours; [`Error::is_not_held`] means it had already expired, been lost or taken
    /// over, so the protected work may have overlapped with another holder's.
    ///
    /// While the server cannot be reached (a Sentinel or Cluster failover) the release is tried
    /// again with back-off, on the master the deployment names each time, for up to the
    /// client's [`release_timeout`](crate::ClientBuilder::release_timeout) (never past the
    /// lease). When it still has no answer then, the connection error is returned and the
    /// release goes on on a thread of the library until it is answered or the lease has run
    /// out. Dropping a guard releases the same way without blocking: one try, then that thread.
    pub fn release(self) -> Result<(), Error> {
        self.held.release()
    }
}

impl<K: OneName> Guard<K> {
    /// The lock's name (without the client's key prefix).
    pub fn name(&self) -> &[u8] {
        self.held.name()
    }
}

impl<K: Kind> fmt::Debug for Guard<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("lock", &self.held)
            .field("parts", &self.parts)
            .finish()
    }
}

/// A held lock of any kind, its kind known at run time ([`kind`](AnyLock::kind)): what a
/// program holds when the kind is chosen at run time (the C ABI's `redislock_lock`, the
/// `redislock run` command). Made from a guard of any kind with `From`. The calls that apply to
/// some kinds only check the kind's [`Descriptor`] and fail with
/// [`Error::is_invalid_argument`] for the others. Dropping it releases the lock, as a guard's
/// drop does.
///
/// ```no_run
/// use std::time::Duration;
/// use redislock::AnyLock;
/// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
/// let read = std::env::args().any(|a| a == "--read");
/// let held: AnyLock = if read {
///     client.rw_lock("report").read(Duration::from_secs(5))?.into()
/// } else {
///     client.acquire("report", Duration::from_secs(5))?.into()
/// };
/// println!("holding {} ({})", held.kind().what, held.kind().name());
/// held.release()?;
/// # Ok::<(), redislock::Error>(())
/// ```
#[must_use = "dropping the lock releases it at once"]
#[clippy::has_significant_drop]
pub struct AnyLock {
    held: Held,
    /// For a set: the fencing token of each name.
    set_fences: Option<Box<[u64]>>,
}

impl<K: Kind> From<Guard<K>> for AnyLock {
    fn from(g: Guard<K>) -> AnyLock {
        AnyLock {
            held: g.held,
            set_fences: K::set_fences(g.parts).map(Vec::into_boxed_slice),
        }
    }
}

impl fmt::Debug for AnyLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnyLock")
            .field("kind", &self.kind().name())
            .field("lock", &self.held)
            .finish()
    }
}

impl AnyLock {
    /// What kind of lock it is, and what that kind offers.
    pub fn kind(&self) -> &'static Descriptor {
        self.held.state.kind.descriptor()
    }

    /// The lock's name (for a set, its first name), without the client's key prefix.
    pub fn name(&self) -> &[u8] {
        self.held.name()
    }

    held_methods!();

    /// Releases the grant as [`Guard::release`] does, keeping the handle (which reports it
    /// released from then on). While the server cannot be reached it tries again for up to the
    /// client's `release_timeout`; without an answer by then the lock is still held by the
    /// handle, and dropping the handle goes on with the release on a thread of the library.
    pub fn release(&self) -> Result<(), Error> {
        let s = &self.held.state;
        s.release(s.backend.store.cfg().release_timeout)
    }

    /// Releases the grant without blocking on a server that cannot be reached: one try; if it
    /// finds no server, the error is returned and the release goes on on a thread of the
    /// library until the lease ends (for the end of a request, where nothing may wait).
    pub fn release_in_background(&self) -> Result<(), Error> {
        self.held.release_or_hand_over()
    }

    /// The fencing token of a lock of one name, when acquired with fencing (or always fenced:
    /// then its [`epoch`](Self::epoch)); an error for a kind without fencing tokens, as its
    /// [`Descriptor`] says, and for a set (see [`fencing_token_at`](Self::fencing_token_at)).
    pub fn fencing_token(&self) -> Result<Option<u64>, Error> {
        self.fencing_token_of(None)
    }

    /// The fence of a lock of one name, when acquired with fencing (or always fenced): its
    /// name, fencing token and, on a Sentinel group or a Cluster, epoch. A set of names has
    /// none: [invalid](Error::is_invalid_argument), as [`fencing_token`](Self::fencing_token).
    pub fn fence(&self) -> Result<Option<Fence>, Error> {
        self.fencing_token()?;
        Ok(Fence::of(&self.held))
    }

    /// The fencing token of name `index` of a set (in the order the names were given); index 0
    /// of a lock of one name is its token.
    pub fn fencing_token_at(&self, index: usize) -> Result<Option<u64>, Error> {
        self.fencing_token_of(Some(index))
    }

    /// A fencing token: the one of a lock of one name (`None`), or that of one index.
    fn fencing_token_of(&self, index: Option<usize>) -> Result<Option<u64>, Error> {
        let shown = self.shown();
        match (self.held.state.kind.fences(), &self.set_fences, index) {
            (Fences::None, _, None) | (Fences::Set(_), _, None) => {
                Err(self.does_not_apply("one fencing token"))
            }
            (Fences::None, _, Some(_)) => Err(self.does_not_apply("a fencing token")),
            (Fences::Set(names), _, Some(index)) if index >= names => Err(Error::invalid_argument(
                format!("the set of lock {shown} has {names} names: index {index} is out of range"),
            )),
            (Fences::Set(_), fences, Some(index)) => Ok(fences.as_ref().map(|f| f[index])),
            (Fences::One, _, Some(index)) if index != 0 => Err(Error::invalid_argument(format!(
                "lock {shown} is one name: its only index is 0, not {index}"
            ))),
            (Fences::One, _, _) => Ok(self.held.fencing_token()),
        }
    }

    /// The epoch of a grant that is always fenced ([`Fencing::Always`]): its fencing token.
    pub fn epoch(&self) -> Result<u64, Error> {
        self.offers(self.kind().fencing == Fencing::Always, "an epoch")?;
        Ok(self.held.fencing_token().unwrap_or(0))
    }

    /// The owner token of an exclusive lock ([`Lock::owner_token`](crate::Lock::owner_token)): a
    /// bearer secret.
    pub fn owner_token(&self) -> Result<&str, Error> {
        self.offers(self.kind().owner_token, "an owner token")?;
        Ok(self.held.owner_token())
    }

    /// Leaves an exclusive lock to its lease ([`Lock::detach`](crate::Lock::detach)); the handle
    /// reports it detached from then on.
    pub fn detach(&self) -> Result<(), Error> {
        self.offers(self.kind().owner_token, "detach")?;
        self.held.state.detach()
    }

    /// Turns a write lock into a read lock without a gap
    /// ([`WriteLock::downgrade`](crate::WriteLock::downgrade)); this handle is no longer held
    /// afterwards.
    pub fn downgrade(&self) -> Result<AnyLock, Error> {
        self.offers(self.kind().downgrade, "downgrade")?;
        let read = rwlock::downgrade(&self.held)?;
        Ok(AnyLock {
            held: read,
            set_fences: None,
        })
    }

    /// Drops the lost-lock callback, if one was set.
    pub(crate) fn forget_on_lost(&self) {
        // In a forked child the mutex may have been held by a parent thread at the fork: the
        // child's copy is inert, and its callback never runs anyway.
        if self.held.state.pid == std::process::id() {
            *self.held.state.on_lost.lock() = None;
        }
    }

    /// The lock as shown in messages.
    pub(crate) fn shown(&self) -> String {
        self.held.state.keys.shown()
    }

    /// Ok when the kind offers a call (`yes`); else the error of a call (`what`) that does
    /// not apply to it.
    fn offers(&self, yes: bool, what: &str) -> Result<(), Error> {
        if yes {
            Ok(())
        } else {
            Err(self.does_not_apply(what))
        }
    }

    fn does_not_apply(&self, what: &str) -> Error {
        Error::invalid_argument(format!(
            "{what} does not apply to {} (lock {})",
            self.held.state.kind.what(),
            self.shown()
        ))
    }
}
