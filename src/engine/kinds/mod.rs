//! The kinds of lock: exclusive locks (`exclusive.rs`), read/write locks (`rwlock.rs`),
//! semaphores (`semaphore.rs`), sets of exclusive locks taken at once (`multi.rs`) and
//! Redisson's RLock (`redisson.rs`).
//!
//! Each kind is a [`Kind`]: its scripts for one attempt and for a waiter, and what its grant is
//! once held ([`Holding`]). The one acquire (`engine/acquire.rs`) and the one wait loop
//! (`engine/wait.rs`) serve every kind on every store that offers it (Redlock offers the
//! exclusive lock only). Every grant is then held through the same lock state, so leases,
//! auto-renewal, lost-lock detection, `on_lost`, fork rules and release on drop work the same
//! for all of them; [`Holding`] picks the scripts that release and extend it.

pub(crate) mod exclusive;
pub(crate) mod multi;
pub(crate) mod redisson;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

use std::time::Duration;

use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::metrics::LockKind;
use crate::base::replication;
use crate::base::scripts;
use crate::base::token::Token;
use crate::engine::backend::Backend;
use crate::stores::LockStore;
use crate::stores::extend::{ExclusiveExtend, ExtendScript};
use crate::stores::pubsub::Subscriber;
use crate::stores::wait::{Mode, Queue, Step};

pub use multi::MAX_SET_NAMES;
pub use semaphore::MAX_PERMITS;

/// One kind of lock, as one acquire asks for it.
pub(crate) trait Kind {
    /// The keys of the (first) name: they pick the server.
    fn keys(&self) -> &LockKeys;
    /// The token the grant is to be held with.
    fn token(&self) -> &Token;
    /// The name(s) as shown in messages.
    fn shown(&self) -> String {
        self.keys().shown()
    }
    /// One attempt on `c`: take the grant if the queue lets us, never queue. `retry`: the call
    /// is repeated after a dropped connection, and the first may have been applied.
    fn try_once(
        &self,
        c: &mut Connection,
        retry: bool,
        store: &dyn LockStore,
    ) -> redis::RedisResult<Step>;
    /// This acquire's waiter: on a queue (its queue entry, liveness keys and signal lists), or
    /// on the lock's channel.
    fn waiter(&self) -> Result<Waits<'_>, Error>;
    /// What the grant is once held.
    fn holding(&self) -> Holding;

    /// The kind as the metrics' `kind` label says it.
    fn metric(&self) -> LockKind {
        self.holding().metric()
    }
    /// An error of this kind's scripts in words a caller understands (another kind of lock on
    /// the name, a semaphore of another size).
    fn explain(&self, e: Error) -> Error {
        e
    }
    /// Asked when one attempt found the name taken and the acquire does not wait: `Err` when it
    /// is not taken by another holder of this kind but in use as another kind of lock, which an
    /// attempt that cannot tell the two apart (the exclusive lock's `SET NX`) then finds out.
    fn refused(&self, _b: &Backend) -> Result<(), Error> {
        Ok(())
    }
}

/// A kind whose waiter is the request itself (its queue entry is made with it): its one attempt
/// is its waiter's script in `try` mode. The read/write lock, the semaphore and the set.
pub(crate) trait QueueKind: Waiter {
    /// What the grant is once held.
    fn holding(&self) -> Holding;
    /// The kind as the metrics' `kind` label says it.
    fn metric(&self) -> LockKind {
        self.holding().metric()
    }
    /// The name(s) as shown in messages.
    fn shown(&self) -> String {
        self.keys().shown()
    }
    /// An error of this kind's scripts in words a caller understands.
    fn explain(&self, e: Error) -> Error {
        e
    }
}

impl<T: QueueKind> Kind for T {
    fn keys(&self) -> &LockKeys {
        Queue::keys(self)
    }

    fn token(&self) -> &Token {
        Queue::token(self)
    }

    fn shown(&self) -> String {
        QueueKind::shown(self)
    }

    fn try_once(&self, c: &mut Connection, _: bool, _: &dyn LockStore) -> redis::RedisResult<Step> {
        self.step(c, Mode::Try, Duration::ZERO)
    }

    fn waiter(&self) -> Result<Waits<'_>, Error> {
        Ok(Waits::Queue(self))
    }

    fn holding(&self) -> Holding {
        QueueKind::holding(self)
    }

    fn metric(&self) -> LockKind {
        QueueKind::metric(self)
    }

    fn explain(&self, e: Error) -> Error {
        QueueKind::explain(self, e)
    }
}

/// How a kind's waiter waits in the one wait loop (`engine/wait.rs`).
pub(crate) enum Waits<'a> {
    /// On a queue: a release hands the grant over and pushes it onto the waiter's own list
    /// (every kind but Redisson's).
    Queue(&'a dyn Waiter),
    /// On the lock's channel: a release publishes, and every waiter tries again (Redisson's).
    Channel(&'a dyn Subscriber),
}

/// A kind's waiter: its scripts on a queue, and what its signals mean.
pub(crate) trait Waiter: Queue {
    /// What a value popped from the waiter's signal list means (other than a cancel's mark).
    fn signalled(&self, value: &[u8]) -> Signal;
}

/// What a value popped from a waiter's signal list means.
pub(crate) enum Signal {
    /// The grant is ours, with this fencing token.
    Granted(u64),
    /// Look again at once (a set waiter was handed one of its names).
    Recheck,
    /// The wait cannot succeed.
    Refused(Error),
}

/// A grant signalled as a number: its fencing token.
pub(crate) fn fence_of(value: &[u8]) -> Option<u64> {
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// What a held grant is, and so which scripts release and extend it.
#[derive(Debug, Clone)]
pub(crate) enum Holding {
    /// An exclusive lock: the lock key holds the token.
    Exclusive,
    /// A read lock: the token is a member of the readers' sorted set.
    Read,
    /// A write lock: the lock key holds the token, as for an exclusive lock.
    Write,
    /// This many permits of a semaphore, held with the token.
    Permits(u32),
    /// A set of exclusive locks, every key holding the token (the state's own keys are the
    /// first name's, for messages).
    Set(Box<[LockKeys]>),
    /// Redisson's RLock: the hash at the lock key has the token as a field (`redisson.rs`);
    /// a release that keeps a hold resets the lease to `lease_ms`; `latch` is the id of the
    /// hold's unlock latch.
    Redisson { lease_ms: u64, latch: Box<str> },
}

impl Holding {
    /// The kind as the metrics' `kind` label says it.
    pub(crate) fn metric(&self) -> LockKind {
        match self {
            Holding::Exclusive => LockKind::Exclusive,
            Holding::Read => LockKind::Read,
            Holding::Write => LockKind::Write,
            Holding::Permits(_) => LockKind::Semaphore,
            Holding::Set(_) => LockKind::Set,
            Holding::Redisson { .. } => LockKind::Redisson,
        }
    }

    /// Releases a grant of this kind held with `token`: runs the kind's release script, which
    /// hands it on to the waiters that can now proceed. Returns whether it was still ours.
    pub(crate) fn release(
        &self,
        b: &Backend,
        keys: &LockKeys,
        token: &Token,
    ) -> Result<bool, Error> {
        match self {
            Holding::Exclusive => b.store.release(keys, token),
            Holding::Read => rwlock::release(b, keys, token, false),
            Holding::Write => rwlock::release(b, keys, token, true),
            Holding::Permits(k) => semaphore::release(b, keys, token, *k),
            Holding::Set(names) => multi::release(b, names, token),
            Holding::Redisson { lease_ms, latch } => {
                redisson::release(b, keys, token, *lease_ms, latch)
            }
        }
    }

    /// Resets the lease of a grant of this kind (with `min_replicas`, acknowledged by the
    /// replicas). Returns whether it was still ours.
    pub(crate) fn extend(
        &self,
        b: &Backend,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
    ) -> Result<bool, Error> {
        let ms = lease.as_millis() as u64;
        let extended: i64 = match self {
            Holding::Exclusive | Holding::Write => {
                return b.store.extend(keys, token, lease);
            }
            Holding::Read => b.store.run(keys, |c, _| {
                let extended: i64 = scripts::RW_EXTEND_READ
                    .key(keys.lock())
                    .key(keys.rw_readers())
                    .arg(token.as_str())
                    .arg(ms)
                    .invoke(c)?;
                acknowledged(c, b, extended)
            })?,
            Holding::Permits(k) => b.store.run(keys, |c, _| {
                let extended: i64 = scripts::SEM_EXTEND
                    .key(keys.lock())
                    .arg(token.as_str())
                    .arg(*k)
                    .arg(ms)
                    .invoke(c)?;
                acknowledged(c, b, extended)
            })?,
            Holding::Set(names) => b.store.run(keys, |c, _| {
                let mut call = scripts::SET_EXTEND.prepare_invoke();
                for k in names.iter() {
                    call.key(k.lock());
                }
                let extended: i64 = call.arg(token.as_str()).arg(ms).invoke(c)?;
                acknowledged(c, b, extended)
            })?,
            Holding::Redisson { .. } => b.store.run(keys, |c, _| {
                let extended: i64 = scripts::REDISSON_RENEW
                    .key(keys.lock())
                    .arg(ms)
                    .arg(token.as_str())
                    .invoke(c)?;
                acknowledged(c, b, extended)
            })?,
        };
        Ok(extended == 1)
    }
}

/// With `min_replicas`, an extension counts once enough replicas acknowledged it.
fn acknowledged(c: &mut Connection, b: &Backend, extended: i64) -> redis::RedisResult<i64> {
    if extended == 1 {
        replication::wait(c, b.store.cfg())?;
    }
    Ok(extended)
}

/// Renewal extends grants of every kind in one pipeline: each kind's script and its arguments.
impl ExtendScript for Holding {
    fn script(&self) -> &'static redis::Script {
        match self {
            Holding::Exclusive | Holding::Write => ExclusiveExtend.script(),
            Holding::Read => &scripts::RW_EXTEND_READ,
            Holding::Permits(_) => &scripts::SEM_EXTEND,
            Holding::Set(_) => &scripts::SET_EXTEND,
            Holding::Redisson { .. } => &scripts::REDISSON_RENEW,
        }
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        if let Holding::Exclusive | Holding::Write = self {
            return ExclusiveExtend.add_args(pipe, keys, token, lease_ms);
        }
        let token = token.as_str();
        match self {
            Holding::Exclusive | Holding::Write => {}
            Holding::Read => {
                pipe.arg(2)
                    .arg(keys.lock())
                    .arg(keys.rw_readers())
                    .arg(token)
                    .arg(lease_ms);
            }
            Holding::Permits(k) => {
                pipe.arg(1)
                    .arg(keys.lock())
                    .arg(token)
                    .arg(*k)
                    .arg(lease_ms);
            }
            Holding::Set(names) => {
                pipe.arg(names.len());
                for k in names.iter() {
                    pipe.arg(k.lock());
                }
                pipe.arg(token).arg(lease_ms);
            }
            Holding::Redisson { .. } => {
                pipe.arg(1).arg(keys.lock()).arg(lease_ms).arg(token);
            }
        }
    }
}

/// A reply that says the name is in use as another kind of lock (the scripts' `WRONGTYPE`, or
/// Redis' own for a command on a key of the other type) becomes a clear invalid-argument error;
/// any other error is returned as it is.
pub(crate) fn other_kind(e: Error, shown: &str, wanted: &str) -> Error {
    if e.redis_code() == Some("WRONGTYPE") {
        return Error::invalid_argument(format!(
            "lock name {shown} is in use as another kind of lock; it cannot be used as {wanted} \
             at the same time"
        ));
    }
    e
}
