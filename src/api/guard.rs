//! The guards: one type, [`Guard`], for a held lock of every kind.
//!
//! Every guard has the methods every held lock has — whether it is still held, its lease,
//! extend, release, lost-lock reports — written once; what one kind alone offers is on that
//! kind's guard only. The aliases [`Lock`], [`ReadLock`], [`WriteLock`], [`Permits`] and
//! [`MultiLock`] name the guard of each kind.

use std::fmt;
use std::time::Duration;

use crate::api::fence::Fence;
use crate::api::kind::{
    Exclusive, Kind, Leader, OneName, Read, Redisson, Semaphore, Set, SetParts, Write,
};
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
    held: Held,
    parts: K::Parts,
}

/// A held exclusive lock.
pub type Lock = Guard<Exclusive>;
/// A held read lock.
pub type ReadLock = Guard<Read>;
/// A held write lock.
pub type WriteLock = Guard<Write>;
/// Permits of a semaphore held by one grant.
pub type Permits = Guard<Semaphore>;
/// A set of exclusive locks held together. If renewal finds any name lost, the whole set counts
/// as lost.
pub type MultiLock = Guard<Set>;
/// A held Redisson lock (one hold of it: the same thread may hold it again; see
/// [`Client::redisson_lock`](crate::Client::redisson_lock)).
pub type RedissonLock = Guard<Redisson>;

/// The leadership of an election, held (see [`Client::leader`](crate::Client::leader)).
/// Dropping it resigns.
pub type Leadership = Guard<Leader>;

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

impl Guard<Exclusive> {
    /// The fencing token of this grant, when the lock was acquired with fencing: strictly
    /// larger than that of every earlier fenced grant of the same name. Pass it to the
    /// protected resource, which should refuse writes carrying a smaller token than it has seen.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token()
    }

    /// The fence of this grant, when the lock was acquired with fencing: its name, fencing token and, on a Sentinel group
    /// or a Cluster, epoch, to hand to the resources it protects
    /// (a [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Option<Fence> {
        Fence::of(&self.held)
    }

    /// The lock's owner token: the random value its Redis key holds while the lock is ours.
    /// It is a bearer secret (whoever knows it can release or extend the lock): hand it only to
    /// the code that is to take the lock over, for example a queued job that
    /// [restores](crate::LockRequest::restore) it, and never log it.
    pub fn owner_token(&self) -> &str {
        self.held.owner_token()
    }

    /// Lets the lock outlive this handle: it is no longer renewed, and dropping the handle does
    /// not release it, so it ends with its lease unless someone holding its
    /// [owner token](Self::owner_token) releases or extends it first. Returns that token.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let lock = client.lock("import:42").lease(Duration::from_secs(600)).try_acquire()?;
    /// let owner = lock.detach()?; // hand `owner` to the job that finishes the work
    /// // ... later, in that job, maybe in another process:
    /// client.lock("import:42").auto_renew(false).restore(&owner)?.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn detach(self) -> Result<String, Error> {
        self.held.detach()
    }
}

impl Guard<Leader> {
    /// The epoch of this leadership: a fencing token, strictly larger than every earlier
    /// leader's of the election (on a Sentinel group or a Cluster ordered first by the
    /// failover epoch of the master that elected it). Pass it to the resources the leader
    /// writes, and have them refuse an epoch smaller than one they saw (docs/leaders.md).
    pub fn epoch(&self) -> u64 {
        self.held.fencing_token().unwrap_or(0)
    }

    /// The fence of this grant, when always (a leadership is always fenced): its name, fencing token and, on a Sentinel group
    /// or a Cluster, epoch, to hand to the resources it protects
    /// (a [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Fence {
        Fence::of(&self.held).unwrap_or_else(|| Fence::new(self.held.name(), 0, None))
    }

    /// Whether this process still leads, as far as it knows, without a round trip: not
    /// resigned, not found lost, and the lease not run out by this process's clock. A leader
    /// paused past its lease (a stop, a long pause) sees `false` before it acts again; check
    /// it before each step that must be the leader's alone.
    pub fn is_leader(&self) -> bool {
        self.held.is_held()
    }

    /// The identity this leader campaigned with.
    pub fn identity(&self) -> &str {
        &self.parts
    }

    /// Steps down: deletes the leadership and wakes the campaigners and observers. `Ok` means
    /// it was still ours; [`Error::is_not_held`] means it was lost before.
    pub fn resign(self) -> Result<(), Error> {
        self.held.release()
    }
}

impl Guard<Read> {
    /// The fencing token of this grant, when acquired with fencing: larger than that of the
    /// writer before it, smaller than that of the writer after it.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token()
    }

    /// The fence of this grant, when acquired with fencing: its name, fencing token and, on a Sentinel group
    /// or a Cluster, epoch, to hand to the resources it protects
    /// (a [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Option<Fence> {
        Fence::of(&self.held)
    }
}

impl Guard<Write> {
    /// The fencing token of this grant, when acquired with fencing: larger than that of every
    /// earlier grant of the name.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token()
    }

    /// The fence of this grant, when acquired with fencing: its name, fencing token and, on a Sentinel group
    /// or a Cluster, epoch, to hand to the resources it protects
    /// (a [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Option<Fence> {
        Fence::of(&self.held)
    }

    /// Turns the write lock into a read lock without a gap (one round trip): no writer can come
    /// in between, and the readers waiting at the head of the queue are let in at once. The read
    /// lock keeps the lease, auto-renewal and fencing token of the write lock.
    ///
    /// Fails with [`Error::is_not_held`] when the write lock was lost meanwhile. When the call
    /// fails for want of an answer, the lock (write or read) is left to its lease.
    pub fn downgrade(self) -> Result<ReadLock, Error> {
        rwlock::downgrade(&self.held).map(|held| Guard::new(held, ()))
    }
}

impl Guard<Semaphore> {
    /// How many permits this grant holds.
    pub fn count(&self) -> u32 {
        self.parts
    }
}

impl Guard<Set> {
    pub(crate) fn set(held: Held, names: Vec<Vec<u8>>, fences: Option<Vec<u64>>) -> MultiLock {
        Guard::new(held, SetParts { names, fences })
    }

    /// The names of the set, in the order they were given (without the client's key prefix).
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.parts.names.iter().map(Vec::as_slice)
    }

    /// The fencing token of each name, in the order of [`names`](Self::names), when acquired
    /// with fencing; each from its name's own counter.
    pub fn fencing_tokens(&self) -> Option<&[u64]> {
        self.parts.fences.as_deref()
    }

    /// The fencing token of one name of the set, when acquired with fencing.
    pub fn fencing_token(&self, name: impl AsRef<[u8]>) -> Option<u64> {
        let i = self.parts.names.iter().position(|n| n == name.as_ref())?;
        self.parts.fences.as_ref().map(|f| f[i])
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

    /// The fencing token of a lock of one name, when acquired with fencing (a leadership's is
    /// its epoch); an error for permits, which have none, and for a set (see
    /// [`fencing_token_at`](Self::fencing_token_at)).
    pub fn fencing_token(&self) -> Result<Option<u64>, Error> {
        self.fencing_token_of(None)
    }

    /// The fence of a lock of one name, when acquired with fencing (a leadership's always): its
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

    /// The epoch of a leadership ([`Guard::<Leader>::epoch`](Guard::epoch)).
    pub fn epoch(&self) -> Result<u64, Error> {
        self.offers(self.kind().fencing == Fencing::Always, "an epoch")?;
        Ok(self.held.fencing_token().unwrap_or(0))
    }

    /// The owner token of an exclusive lock ([`Lock::owner_token`]): a bearer secret.
    pub fn owner_token(&self) -> Result<&str, Error> {
        self.offers(self.kind().owner_token, "an owner token")?;
        Ok(self.held.owner_token())
    }

    /// Leaves an exclusive lock to its lease ([`Lock::detach`]); the handle reports it
    /// detached from then on.
    pub fn detach(&self) -> Result<(), Error> {
        self.offers(self.kind().owner_token, "detach")?;
        self.held.state.detach()
    }

    /// Turns a write lock into a read lock without a gap ([`WriteLock::downgrade`]); this
    /// handle is no longer held afterwards.
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
