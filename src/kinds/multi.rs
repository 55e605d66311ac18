//! Several exclusive locks taken at once: all or none.
//!
//! A set of names is a set of exclusive locks, every key holding the set's one token, so each
//! name interoperates with exclusive locks (and plain `SET NX PX` clients) of that name. On one
//! server the whole set is taken by one script in one round trip, whatever the names' cluster
//! slots. A set never holds some names while it waits for others: it queues as an ordinary
//! waiter of the first held name, and when a release hands it that name, its re-check takes the
//! whole set if the other names are free, or passes the name straight on and queues behind the
//! next held one. Sets therefore never deadlock; the price is that a set waiting for busy names
//! can be overtaken by single-name users of its other names.
//!
//! On a Redis Cluster a script runs on one master, so a set's names must share one hash slot
//! (one `{hash tag}`); a set across slots is refused before anything is sent. (It would have to
//! be taken one slot group at a time in a fixed global order, by slot then by key, atomic within
//! each slot group only.)

use std::collections::HashSet;
use std::time::Duration;

use super::queue::{self, Mode, Queue, Signal, Step};
use super::{Kind, guard_methods, hold, other_kind};
use crate::backend::Backend;
use crate::cancel::Cancel;
use crate::client::{Client, LockOptions};
use crate::config::{check_lease, check_wait};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::Lock;
use crate::ops;
use crate::scripts;
use crate::token::{Token, random_hex};

/// The most names one set may hold.
pub const MAX_SET_NAMES: usize = 256;

impl Client {
    /// A request for the exclusive locks of all `names` at once: granted all together or not
    /// at all, released together. Each name is an ordinary exclusive lock of that name while
    /// the set holds it. An empty set and a name given twice are
    /// [invalid](Error::is_invalid_argument).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// // Move stock between two warehouses: both counters locked, or neither.
    /// let both = client.lock_all(&["stock:berlin:42", "stock:paris:42"]);
    /// let locks = both.acquire(Duration::from_secs(5))?;
    /// // ... move the stock ...
    /// locks.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn lock_all<'a, N: AsRef<[u8]>>(&'a self, names: &'a [N]) -> MultiLockRequest<'a> {
        let cfg = self.config();
        MultiLockRequest {
            client: self,
            names: names.iter().map(AsRef::as_ref).collect(),
            cancel: None,
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: cfg.fencing,
            },
        }
    }
}

/// A set of exclusive locks to take together, with its lease, auto-renewal and fencing
/// settings. Made by [`Client::lock_all`].
#[derive(Debug, Clone)]
#[must_use]
pub struct MultiLockRequest<'a> {
    client: &'a Client,
    names: Vec<&'a [u8]>,
    cancel: Option<&'a Cancel>,
    opts: LockOptions,
}

impl<'a> MultiLockRequest<'a> {
    /// The lease of the set (default: the client's `lease`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.opts.lease = lease;
        self
    }
    /// Whether a renewal thread keeps the set alive (default: the client's `auto_renew`). One
    /// thread renews the whole set, and it counts as one of the `max_renewed_locks`.
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.opts.auto_renew = on;
        self
    }
    /// Whether each name gets a fencing token from its own counter (default: the client's
    /// `fencing`).
    pub fn fencing(mut self, on: bool) -> Self {
        self.opts.fencing = on;
        self
    }
    /// Lets `cancel` end a waiting acquire from another thread ([`Error::is_cancelled`]).
    pub fn cancel_on(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Waits up to `wait` for all the names (fails with [`Error::is_wait_timeout`]); holds none
    /// of them while it waits.
    pub fn acquire(&self, wait: Duration) -> Result<MultiLock, Error> {
        self.take(Some(wait))
    }

    /// One attempt at all the names: fails with [`Error::is_held`] when any is held.
    pub fn try_acquire(&self) -> Result<MultiLock, Error> {
        self.take(None)
    }

    fn take(&self, wait: Option<Duration>) -> Result<MultiLock, Error> {
        let opts = &self.opts;
        if self.names.is_empty() {
            return Err(Error::invalid_argument("the set of lock names is empty"));
        }
        if self.names.len() > MAX_SET_NAMES {
            return Err(Error::invalid_argument(format!(
                "a set holds at most {MAX_SET_NAMES} names, got {}",
                self.names.len()
            )));
        }
        let prefix = &self.client.config().key_prefix;
        let keys = self
            .names
            .iter()
            .map(|n| LockKeys::new(prefix, n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut seen = HashSet::with_capacity(keys.len());
        for k in &keys {
            if !seen.insert(k.lock()) {
                return Err(Error::invalid_argument(format!(
                    "lock name {} is given twice in one set",
                    k.shown()
                )));
            }
        }
        check_lease(opts.lease, opts.auto_renew)?;
        if let Some(w) = wait {
            check_wait(w)?;
        }
        let shown = shown_set(&keys);
        if self.cancel.is_some_and(Cancel::is_cancelled) {
            return Err(Error::cancelled(&shown));
        }
        let owner = self.client.backend()?;
        let b = owner.backend();
        ops::check_kind_supported(b, "a set of locks", &shown)?;
        ops::check_one_server(b, &keys, &shown)?;
        let token = Token::new(owner.pid)?;
        let wid = random_hex::<8>(owner.pid)?;
        let waiter = SetWaiter::new(&keys, &token, &wid, opts, shown.clone());
        let kind = Kind::Set(keys.clone().into_boxed_slice());
        let extend = || super::extend_parts(b, &kind, &keys[0], &token, opts.lease);
        let (grant, place) = queue::obtain(&owner, &waiter, &wid, opts, wait, self.cancel, &extend)
            .map_err(|e| other_kind(e, &shown, "a lock"))?;
        let names = keys.iter().map(|k| k.name().to_vec()).collect();
        let fences = opts.fencing.then_some(grant.fences);
        let first = keys[0].clone();
        let lock = hold(
            &owner,
            first,
            token,
            None,
            place,
            opts,
            grant.lease_from,
            kind,
        )?;
        Ok(MultiLock {
            lock,
            names,
            fences,
        })
    }
}

/// The set's names as shown in messages: the first, and how many more.
fn shown_set(keys: &[LockKeys]) -> String {
    match keys.len() {
        1 => keys[0].shown(),
        n => format!("{} (and {} more)", keys[0].shown(), n - 1),
    }
}

/// A set waiter's keys (its liveness key and signal list in every name's slot) and its queue
/// entry, which has the form of an exclusive waiter's.
struct SetWaiter<'a> {
    keys: &'a [LockKeys],
    token: &'a Token,
    fencing: bool,
    lease_ms: u64,
    /// `wid:lease:0:token`: an exclusive waiter's entry, never fenced by the handoff (the set
    /// takes its fencing tokens when it takes the whole set).
    entry: String,
    alive: Vec<Vec<u8>>,
    signals: Vec<Vec<u8>>,
    shown: String,
}

impl<'a> SetWaiter<'a> {
    fn new(
        keys: &'a [LockKeys],
        token: &'a Token,
        wid: &str,
        opts: &LockOptions,
        shown: String,
    ) -> SetWaiter<'a> {
        let lease_ms = opts.lease.as_millis() as u64;
        SetWaiter {
            keys,
            token,
            fencing: opts.fencing,
            lease_ms,
            entry: format!("{wid}:{lease_ms}:0:{}", token.as_str()),
            alive: keys.iter().map(|k| k.alive(wid)).collect(),
            signals: keys.iter().map(|k| k.signal(wid)).collect(),
            shown,
        }
    }

    fn call(
        &self,
        c: &mut redis::Connection,
        mode: &str,
        entry_ttl: Duration,
    ) -> redis::RedisResult<Step> {
        let mut call = scripts::SET_ACQUIRE.prepare_invoke();
        for (i, k) in self.keys.iter().enumerate() {
            call.key(k.lock())
                .key(k.fence())
                .key(k.queue())
                .key(&self.alive[i])
                .key(&self.signals[i]);
        }
        call.arg(self.token.as_str())
            .arg(self.lease_ms)
            .arg(if self.fencing { "1" } else { "0" })
            .arg(mode)
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64);
        let reply: Vec<i64> = call.invoke(c)?;
        Ok(match reply.split_first() {
            Some((1, fences)) => Step::Granted {
                fences: fences.iter().map(|&f| f.max(0) as u64).collect(),
                left_ms: self.lease_ms as i64,
            },
            _ => Step::Queued {
                pttl: reply.get(1).copied().unwrap_or(0),
            },
        })
    }
}

impl Queue for SetWaiter<'_> {
    fn keys(&self) -> &LockKeys {
        &self.keys[0]
    }

    fn shown(&self) -> String {
        self.shown.clone()
    }

    fn signals(&self) -> &[Vec<u8>] {
        &self.signals
    }

    fn step(
        &self,
        c: &mut redis::Connection,
        mode: Mode,
        entry_ttl: Duration,
    ) -> redis::RedisResult<Step> {
        self.call(c, mode.as_str(), entry_ttl)
    }

    fn leave(&self, c: &mut redis::Connection) -> redis::RedisResult<Step> {
        self.call(c, "leave", Duration::ZERO)
    }

    /// A release handed us one of the names: look again at once.
    fn signalled(&self, _value: &[u8]) -> Signal {
        Signal::Recheck
    }

    fn give_back(&self, b: &Backend) -> Result<(), Error> {
        release(b, self.keys, self.token).map(|_| ())
    }
}

/// Releases every name of the set that still holds `token` (each handed to its oldest waiter).
/// Returns whether all of them still did.
pub(super) fn release(b: &Backend, keys: &[LockKeys], token: &Token) -> Result<bool, Error> {
    let held: i64 = ops::run(b, &keys[0], |c, _| {
        let mut call = scripts::SET_RELEASE.prepare_invoke();
        for k in keys {
            call.key(k.lock()).key(k.fence()).key(k.queue());
        }
        call.arg(token.as_str()).invoke(c)
    })?;
    Ok(held == keys.len() as i64)
}

/// A set of exclusive locks held together. Dropping it releases them all (best effort);
/// [`release`](Self::release) tells whether every one was still held. If renewal finds any
/// name lost, the whole set counts as lost.
#[derive(Debug)]
#[must_use = "dropping the guard releases every lock of the set at once"]
#[clippy::has_significant_drop]
pub struct MultiLock {
    lock: Lock,
    names: Vec<Vec<u8>>,
    fences: Option<Vec<u64>>,
}

impl MultiLock {
    guard_methods!();

    /// The names of the set, in the order they were given (without the client's key prefix).
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.names.iter().map(Vec::as_slice)
    }

    /// The fencing token of each name, in the order of [`names`](Self::names), when acquired
    /// with fencing; each from its name's own counter.
    pub fn fencing_tokens(&self) -> Option<&[u64]> {
        self.fences.as_deref()
    }

    /// The fencing token of one name of the set, when acquired with fencing.
    pub fn fencing_token(&self, name: impl AsRef<[u8]>) -> Option<u64> {
        let i = self.names.iter().position(|n| n == name.as_ref())?;
        self.fences.as_ref().map(|f| f[i])
    }

    /// The set as a plain [`Lock`] (of kind [`Kind::Set`]) and its fencing tokens, as the C
    /// boundary holds every grant.
    pub(crate) fn into_parts(self) -> (Lock, Option<Vec<u64>>) {
        (self.lock, self.fences)
    }
}
