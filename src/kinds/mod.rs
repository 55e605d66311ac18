//! The kinds of lock beyond the exclusive one: read/write locks (`rwlock.rs`), semaphores
//! (`semaphore.rs`) and sets of exclusive locks taken at once (`multi.rs`), with the waiting
//! they share (`queue.rs`).
//!
//! Every grant of any kind is held through the same [`LockState`] as an exclusive lock, so
//! leases, auto-renewal, lost-lock detection, `on_lost`, fork rules and release on drop work the
//! same for all of them. What differs is which script releases and extends a grant: [`Kind`]
//! says which, and [`release`], [`extend`] and [`add_renewal`] pick it.

mod multi;
mod queue;
mod rwlock;
mod semaphore;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Owner};
use crate::client::LockOptions;
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::{Lock, LockState};
use crate::ops;
use crate::replication;
use crate::scripts;
use crate::token::Token;

pub use multi::{MAX_SET_NAMES, MultiLock, MultiLockRequest};
pub(crate) use rwlock::downgrade;
pub use rwlock::{ReadLock, RwLockRequest, WriteLock};
pub use semaphore::{MAX_PERMITS, Permits, SemaphoreRequest};

/// What a held grant is, and so which scripts release and extend it.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
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
}

/// Releases a grant of any kind: runs its kind's release script. Returns whether it was still
/// ours.
pub(crate) fn release(s: &LockState) -> Result<bool, Error> {
    release_parts(&s.backend, &s.kind, &s.keys, &s.token)
}

/// [`release`] of a grant given by its parts.
pub(crate) fn release_parts(
    b: &Backend,
    kind: &Kind,
    keys: &LockKeys,
    token: &Token,
) -> Result<bool, Error> {
    match kind {
        Kind::Exclusive => ops::release(b, keys, token),
        Kind::Read => rwlock::release(b, keys, token, false),
        Kind::Write => rwlock::release(b, keys, token, true),
        Kind::Permits(k) => semaphore::release(b, keys, token, *k),
        Kind::Set(names) => multi::release(b, names, token),
    }
}

/// Resets the lease of a grant of any kind (with `min_replicas`, acknowledged by the replicas).
/// Returns whether it was still ours.
pub(crate) fn extend(s: &LockState, lease: Duration) -> Result<bool, Error> {
    extend_parts(&s.backend, &s.kind, &s.keys, &s.token, lease)
}

/// [`extend`] of a grant given by its parts.
pub(crate) fn extend_parts(
    b: &Backend,
    kind: &Kind,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
) -> Result<bool, Error> {
    let ms = lease.as_millis() as u64;
    let extended: i64 = match kind {
        Kind::Exclusive | Kind::Write => return ops::extend(b, keys, token, lease),
        Kind::Read => ops::run(b, keys, |c, _| {
            let extended: i64 = scripts::RW_EXTEND_READ
                .key(keys.lock())
                .key(keys.rw_readers())
                .arg(token.as_str())
                .arg(ms)
                .invoke(c)?;
            acknowledged(c, b, extended)
        })?,
        Kind::Permits(k) => ops::run(b, keys, |c, _| {
            let extended: i64 = scripts::SEM_EXTEND
                .key(keys.lock())
                .arg(token.as_str())
                .arg(*k)
                .arg(ms)
                .invoke(c)?;
            acknowledged(c, b, extended)
        })?,
        Kind::Set(names) => ops::run(b, keys, |c, _| {
            let mut call = scripts::SET_EXTEND.prepare_invoke();
            for k in names.iter() {
                call.key(k.lock());
            }
            let extended: i64 = call.arg(token.as_str()).arg(ms).invoke(c)?;
            acknowledged(c, b, extended)
        })?,
    };
    Ok(extended == 1)
}

/// With `min_replicas`, an extension counts once enough replicas acknowledged it.
fn acknowledged(c: &mut redis::Connection, b: &Backend, extended: i64) -> redis::RedisResult<i64> {
    if extended == 1 {
        replication::wait(c, &b.cfg)?;
    }
    Ok(extended)
}

/// Adds the EVALSHA that extends a grant of `kind` to `pipe` (renewal sends many in one
/// pipeline, `ops::extend_many`); its reply is 1 when extended, 0 when the grant is no longer
/// ours.
pub(crate) fn add_extend(
    pipe: &mut redis::Pipeline,
    kind: &Kind,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
) {
    let ms = lease.as_millis() as u64;
    let token = token.as_str();
    match kind {
        Kind::Exclusive | Kind::Write => {
            pipe.cmd("EVALSHA")
                .arg(scripts::EXTEND.get_hash())
                .arg(1)
                .arg(keys.lock())
                .arg(token)
                .arg(ms);
        }
        Kind::Read => {
            pipe.cmd("EVALSHA")
                .arg(scripts::RW_EXTEND_READ.get_hash())
                .arg(2)
                .arg(keys.lock())
                .arg(keys.rw_readers())
                .arg(token)
                .arg(ms);
        }
        Kind::Permits(k) => {
            pipe.cmd("EVALSHA")
                .arg(scripts::SEM_EXTEND.get_hash())
                .arg(1)
                .arg(keys.lock())
                .arg(token)
                .arg(*k)
                .arg(ms);
        }
        Kind::Set(names) => {
            let cmd = pipe
                .cmd("EVALSHA")
                .arg(scripts::SET_EXTEND.get_hash())
                .arg(names.len());
            for k in names.iter() {
                cmd.arg(k.lock());
            }
            cmd.arg(token).arg(ms);
        }
    }
}

/// Loads every script [`add_extend`] may send (after the server answered NOSCRIPT).
pub(crate) fn load_extend_scripts(c: &mut redis::Connection) -> redis::RedisResult<()> {
    for s in [
        &*scripts::EXTEND,
        &*scripts::RW_EXTEND_READ,
        &*scripts::SEM_EXTEND,
        &*scripts::SET_EXTEND,
    ] {
        s.load(c)?;
    }
    Ok(())
}

/// The guard of a grant just made: its state with `kind`, its renewal started (`reserved`: the
/// place among the renewed locks taken for it, `None` without auto-renewal).
#[allow(clippy::too_many_arguments)]
pub(crate) fn hold(
    owner: &Arc<Owner>,
    keys: LockKeys,
    token: Token,
    fence: Option<u64>,
    reserved: Option<Place>,
    opts: &LockOptions,
    lease_from: Instant,
    kind: Kind,
) -> Result<Lock, Error> {
    let mut state = LockState::new(
        owner.backend().clone(),
        keys,
        token,
        fence,
        reserved,
        opts.lease,
        lease_from,
    );
    state.kind = kind;
    let state = Arc::new(state);
    let lock = Lock {
        state: state.clone(),
        _owner: owner.clone(),
    };
    if state.auto_renew {
        owner.renewer.watch(state)?;
    }
    Ok(lock)
}

/// A place among the client's `max_renewed_locks`, taken before a grant is asked for.
pub(crate) type Place = crate::renewal::Reservation;

/// Takes a place among the renewed locks when the options ask for auto-renewal.
pub(crate) fn reserve(owner: &Owner, opts: &LockOptions) -> Result<Option<Place>, Error> {
    if opts.auto_renew {
        owner.renewer.reserve().map(Some)
    } else {
        Ok(None)
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

/// Delegates the read-only and lease methods every guard shares to its inner [`Lock`].
macro_rules! guard_methods {
    () => {
        /// Whether the grant is still ours, as far as this process knows, without a round trip:
        /// not released, not found lost by renewal, lease not run out, and this is the process
        /// that acquired it.
        pub fn is_held(&self) -> bool {
            self.lock.is_held()
        }

        /// Whether renewal (or an extend) found the grant lost: its lease ran out, it was
        /// removed behind our back, or Redis stayed unreachable until the lease ran out.
        pub fn is_lost(&self) -> bool {
            self.lock.is_lost()
        }

        /// How long the grant is surely still ours (zero when it is not held).
        pub fn remaining(&self) -> std::time::Duration {
            self.lock.remaining()
        }

        /// The current lease.
        pub fn lease(&self) -> std::time::Duration {
            self.lock.lease()
        }

        /// Whether a renewal thread keeps this grant alive.
        pub fn auto_renews(&self) -> bool {
            self.lock.auto_renews()
        }

        /// Resets the lease to `lease` from now, if the grant is still ours; auto-renewal goes on
        /// with the new lease. Fails with [`Error::is_not_held`](crate::Error::is_not_held) when
        /// it is gone.
        pub fn extend(&self, lease: std::time::Duration) -> Result<(), crate::Error> {
            self.lock.extend(lease)
        }

        /// Calls `f` once if the grant is found lost; see [`Lock::on_lost`](crate::Lock::on_lost).
        pub fn on_lost(&self, f: impl FnOnce(&crate::Error) + Send + 'static) {
            self.lock.on_lost(f)
        }

        /// Releases the grant and hands it on to the waiters that can now proceed. `Ok` means it
        /// was still ours; [`Error::is_not_held`](crate::Error::is_not_held) means it had
        /// expired, been lost or taken away meanwhile.
        pub fn release(self) -> Result<(), crate::Error> {
            self.lock.release()
        }
    };
}
pub(crate) use guard_methods;
