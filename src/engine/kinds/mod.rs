//! The kinds of lock: exclusive locks (`exclusive.rs`), read/write locks (`rwlock.rs`),
//! semaphores (`semaphore.rs`), sets of exclusive locks taken at once (`multi.rs`),
//! Redisson's RLock (`redisson.rs`) and the leadership of an election (`leader.rs`).
//!
//! A kind is one type in one file (plus its `.lua` scripts) that implements one trait,
//! [`Rules`]: what the stores must offer for it, its one attempt, its waiter (a queue entry or
//! the lock's channel) and what a signal to that waiter means, how its grant is released,
//! extended and renewed, and its name in metrics and messages. The value is made by the API's
//! request (the side of a read/write lock, the permits, a set's names), drives the one acquire
//! (`engine/acquire.rs`) and the one wait loop (`engine/wait.rs`), and is then kept by the held
//! lock, so leases, auto-renewal, lost-lock detection, `on_lost`, fork rules and release on drop
//! are written once for all of them. ARCHITECTURE.md, "Adding a kind", says how to add one.

pub(crate) mod exclusive;
pub(crate) mod leader;
pub(crate) mod multi;
#[cfg(feature = "recipe-kind")]
pub(crate) mod recipe;
pub(crate) mod redisson;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

use std::cell::OnceCell;
use std::fmt;
use std::time::Duration;

use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::kind::Descriptor;
use crate::base::metrics::KindLabel;
use crate::base::token::{Token, random_hex};
use crate::engine::backend::Backend;
use crate::stores::extend::{ExtendScript, Extension, send_extends};
use crate::stores::pubsub::Subscriber;
use crate::stores::wait::{Mode, Queue};
use crate::stores::{Check, LockStore, run_on};

/// Every script: the ones of `base/scripts.rs` and each kind's own (for the scripts' tests there).
#[cfg(test)]
pub(crate) fn all_scripts() -> Vec<(&'static str, &'static [&'static str], &'static str)> {
    [
        crate::base::scripts::SCRIPTS,
        leader::SCRIPTS,
        multi::SCRIPTS,
        #[cfg(feature = "recipe-kind")]
        recipe::SCRIPTS,
        redisson::SCRIPTS,
        rwlock::SCRIPTS,
        semaphore::SCRIPTS,
    ]
    .concat()
}

pub use multi::MAX_SET_NAMES;
pub use semaphore::MAX_PERMITS;

/// The rules of one kind of lock. Its renewal is its [`ExtendScript`] (the script and arguments
/// renewal pipelines with other grants'); everything else is here.
pub(crate) trait Rules: ExtendScript + Send + Sync + fmt::Debug {
    /// What the kind is and offers (`base/kind.rs`).
    fn descriptor(&self) -> &'static Descriptor;
    /// The kind as the metrics' and traces' `kind` label says it.
    fn label(&self) -> KindLabel {
        self.descriptor().label
    }
    /// The kind in messages: "an exclusive lock".
    fn what(&self) -> &'static str {
        self.descriptor().what
    }
    /// The name(s) as shown in messages, `keys` being the (first) name's.
    fn shown(&self, keys: &LockKeys) -> String {
        keys.shown()
    }
    /// Whether `store` offers this kind, asked before anything is sent. By default every store,
    /// and Redlock's only where the descriptor says so (the exclusive lock).
    fn offered(&self, store: &dyn LockStore, keys: &LockKeys) -> Result<(), Error> {
        if self.descriptor().redlock {
            return Ok(());
        }
        store.check(Check::Kind {
            what: self.what(),
            shown: &self.shown(keys),
        })
    }
    /// The token a grant is held with when the application names none: a fresh random one.
    fn token(&self, b: &Backend) -> Result<Token, Error> {
        Token::new(b.pid)
    }
    /// One attempt: take the grant if the queue lets us, never queue. `Ok(None)`: held by
    /// another owner. `sent` is set once it went out ([`LockStore::attempt`]). By default the
    /// waiter's script in `try` mode, on the server that holds the lock.
    fn try_once(
        &self,
        a: &Acquiring<'_>,
        store: &dyn LockStore,
        sent: &mut bool,
    ) -> Result<Option<Grant>, Error> {
        let Waits::Queue(w) = a.waiter()? else {
            return Err(Error::internal(
                "a kind that waits on a channel has its own attempt",
            ));
        };
        store.attempt(a.keys, a.lease, sent, &mut |c, _| {
            w.step(c, Mode::Try, Duration::ZERO)
        })
    }
    /// The acquire's waiter: on a queue (its queue entry, liveness keys and signal lists), or on
    /// the lock's channel. Made once per acquire, by [`Acquiring::waiter`].
    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error>;
    /// What a value popped from the waiter's signal list means (other than a cancel's mark). By
    /// default the grant, with the fencing token pushed (0 without fencing).
    fn signalled(&self, _keys: &LockKeys, value: &[u8]) -> Signal {
        Signal::Granted(fence_of(value).unwrap_or(0))
    }
    /// An error of this kind's scripts in words a caller understands (another kind of lock on
    /// the name, a semaphore of another size).
    fn explain(&self, e: Error, shown: &str) -> Error {
        other_kind(e, shown, self.what())
    }
    /// Asked when one attempt found the name taken and the acquire does not wait: `Err` when it
    /// is not taken by another holder of this kind but in use as another kind of lock, which an
    /// attempt that cannot tell the two apart (the exclusive lock's `SET NX`) then finds out.
    fn refused(&self, _b: &Backend, _keys: &LockKeys) -> Result<(), Error> {
        Ok(())
    }

    /// Releases a grant of this kind held with `token`, handing it on to the waiters that can
    /// now proceed. Returns whether it was still ours.
    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error>;
    /// Resets the lease of a grant of this kind (with `min_replicas`, once the replicas
    /// acknowledge it). Returns whether it was still ours. By default its renewal's script, sent
    /// alone to the server that holds the lock ([`extend_on_one_server`]).
    fn extend(
        &self,
        b: &Backend,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
    ) -> Result<bool, Error> {
        let me = self;
        extend_on_one_server(&*b.store, &me, keys, token, lease)
    }

    /// Releases a grant held with `token` before its `at_least`: the grant stays held with the
    /// token for `left` more (its expiry set to it), and nobody is handed it before. Returns
    /// whether it was still ours. Only the exclusive lock offers `at_least`.
    fn keep(
        &self,
        _b: &Backend,
        _keys: &LockKeys,
        _token: &Token,
        _left: Duration,
    ) -> Result<bool, Error> {
        Err(Error::internal(format!(
            "{} cannot be kept past its release (at_least)",
            self.what()
        )))
    }

    /// Which fencing tokens a grant of this kind has: one (every kind of one name but
    /// permits), none (permits), or one per name of a set.
    fn fences(&self) -> Fences {
        Fences::One
    }
}

/// [`Rules::extend`] on the server that holds the lock: the kind's renewal script (`script`),
/// as renewal sends it (with WAIT for `min_replicas`).
pub(crate) fn extend_on_one_server(
    store: &dyn LockStore,
    script: &dyn ExtendScript,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
) -> Result<bool, Error> {
    let cfg = store.cfg();
    let one = Extension {
        keys,
        token,
        lease,
        script,
    };
    run_on(store, keys, |c, _| {
        // Its error (a redirection among them) is the call's.
        send_extends(c, cfg, std::iter::once(&one))?
            .pop()
            .unwrap_or(Ok(false))
    })
}

/// Which fencing tokens a grant has ([`Rules::fences`]).
pub(crate) enum Fences {
    One,
    None,
    /// One per name of a set of this many names.
    Set(usize),
}

/// One acquire of a kind: what its attempt and its waiter are made from.
pub(crate) struct Acquiring<'a> {
    pub kind: &'a dyn Rules,
    /// The (first) name's keys: they pick the server.
    pub keys: &'a LockKeys,
    pub token: &'a Token,
    pub lease: Duration,
    pub fencing: bool,
    pub pid: u32,
    /// Made when the acquire first needs it (an exclusive lock taken at once needs none).
    waiter: OnceCell<Waits<'a>>,
}

impl<'a> Acquiring<'a> {
    /// An acquire of `kind`.
    pub(crate) fn new(
        kind: &'a dyn Rules,
        keys: &'a LockKeys,
        token: &'a Token,
        lease: Duration,
        fencing: bool,
        pid: u32,
    ) -> Acquiring<'a> {
        Acquiring {
            kind,
            keys,
            token,
            lease,
            fencing,
            pid,
            waiter: OnceCell::new(),
        }
    }

    /// The acquire's waiter, made on the first call.
    pub(crate) fn waiter(&self) -> Result<&Waits<'a>, Error> {
        if let Some(w) = self.waiter.get() {
            return Ok(w);
        }
        let w = self.kind.waiter(self)?;
        Ok(self.waiter.get_or_init(|| w))
    }

    /// A new waiter id (random), for the waiter's keys and queue entry.
    pub(crate) fn wid(&self) -> Result<String, Error> {
        random_hex::<8>(self.pid)
    }

    /// The lease in milliseconds, as the scripts take it.
    pub(crate) fn lease_ms(&self) -> u64 {
        self.lease.as_millis() as u64
    }

    /// The name(s) as shown in messages.
    pub(crate) fn shown(&self) -> String {
        self.kind.shown(self.keys)
    }

    /// An error of the kind's scripts in words a caller understands ([`Rules::explain`]).
    pub(crate) fn explain(&self, e: Error) -> Error {
        self.kind.explain(e, &self.shown())
    }
}

/// How a kind's waiter waits in the one wait loop (`engine/wait.rs`).
pub(crate) enum Waits<'a> {
    /// On a queue: a release hands the grant over and pushes it onto the waiter's own list.
    Queue(Box<dyn Queue + 'a>),
    /// On the lock's channel: a release publishes, and every waiter tries again.
    Channel(Box<dyn Subscriber + 'a>),
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

/// Runs a kind's script that replies 1 when it did what it was asked (released the grant) on the
/// server that holds the lock of `keys`: whether it did.
pub(crate) fn done(
    store: &dyn LockStore,
    keys: &LockKeys,
    mut call: impl FnMut(&mut Connection) -> redis::RedisResult<i64>,
) -> Result<bool, Error> {
    Ok(run_on(store, keys, |c, _| call(c))? == 1)
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
