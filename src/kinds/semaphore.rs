//! Semaphores: N permits per name, taken k at a time, each grant with its own lease.
//!
//! The semaphore named N keeps its holders in the key N, a sorted set of grants scored by their
//! expiry (with the number of permits recorded beside them), so a crashed holder's permits come
//! back when its lease runs out, and renewing a grant extends only its own lease. Waiting
//! requests are served strictly in arrival order: a request for k permits waits until k are
//! free, and later requests for fewer do not overtake it. The first user fixes N for as long as
//! anything is held or waiting; a request that says another N is refused. See the scripts
//! (`SEM_*` in `scripts.rs`).

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

/// The most permits a semaphore may have. Every call of its scripts reads all its current
/// grants (at most one per permit), so a bound keeps each call short.
pub const MAX_PERMITS: u32 = 10_000;

impl Client {
    /// The semaphore `name` with `permits` permits: up to that many may be held at once, taken
    /// one or more at a time, each grant with its own lease and (by default) auto-renewal.
    /// The first user of a name fixes its number of permits while anything is held or waiting;
    /// a request that gives another number fails with [`Error::is_invalid_argument`], and so
    /// does a name in use as a lock.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let pdf = client.semaphore("pdf-renderers", 3);
    /// let permit = pdf.acquire(1, Duration::from_secs(10))?; // at most 3 renders at once
    /// // ... render ...
    /// permit.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn semaphore<'a, N: AsRef<[u8]> + ?Sized>(
        &'a self,
        name: &'a N,
        permits: u32,
    ) -> SemaphoreRequest<'a> {
        let cfg = self.config();
        SemaphoreRequest {
            client: self,
            name: name.as_ref(),
            permits,
            cancel: None,
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: false,
            },
        }
    }
}

/// A semaphore with its number of permits and lease settings. Made by [`Client::semaphore`];
/// each [`acquire`](Self::acquire) is a separate grant with these settings.
#[derive(Debug, Clone)]
#[must_use]
pub struct SemaphoreRequest<'a> {
    client: &'a Client,
    name: &'a [u8],
    permits: u32,
    cancel: Option<&'a Cancel>,
    opts: LockOptions,
}

impl<'a> SemaphoreRequest<'a> {
    /// The lease of each grant (default: the client's `lease`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.opts.lease = lease;
        self
    }
    /// Whether a renewal thread keeps each grant alive (default: the client's `auto_renew`).
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.opts.auto_renew = on;
        self
    }
    /// Lets `cancel` end a waiting acquire from another thread ([`Error::is_cancelled`]).
    pub fn cancel_on(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Waits up to `wait` for `k` permits (fails with [`Error::is_wait_timeout`]), served in
    /// arrival order.
    pub fn acquire(&self, k: u32, wait: Duration) -> Result<Permits, Error> {
        self.take(k, Some(wait))
    }

    /// One attempt at `k` permits: fails with [`Error::is_held`] when fewer are free, or when
    /// earlier requests wait.
    pub fn try_acquire(&self, k: u32) -> Result<Permits, Error> {
        self.take(k, None)
    }

    fn take(&self, k: u32, wait: Option<Duration>) -> Result<Permits, Error> {
        let opts = &self.opts;
        let keys = LockKeys::new(&self.client.config().key_prefix, self.name)?;
        let shown = keys.shown();
        let n = self.permits;
        if n == 0 || n > MAX_PERMITS {
            return Err(Error::invalid_argument(format!(
                "semaphore {shown} must have 1 to {MAX_PERMITS} permits, got {n}"
            )));
        }
        if k == 0 || k > n {
            return Err(Error::invalid_argument(format!(
                "a request for {k} permits of semaphore {shown}, which has {n}: ask for 1 to {n}"
            )));
        }
        check_lease(opts.lease, opts.auto_renew)?;
        if let Some(w) = wait {
            check_wait(w)?;
        }
        if self.cancel.is_some_and(Cancel::is_cancelled) {
            return Err(Error::cancelled(&shown));
        }
        let owner = self.client.backend()?;
        let b = owner.backend();
        ops::check_kind_supported(b, "a semaphore", &shown)?;
        let token = Token::new(owner.pid)?;
        let wid = random_hex::<8>(owner.pid)?;
        let waiter = SemWaiter::new(&keys, &token, &wid, k, n, opts.lease);
        let kind = Kind::Permits(k);
        let extend = || super::extend_parts(b, &kind, &keys, &token, opts.lease);
        let (grant, place) = queue::obtain(&owner, &waiter, &wid, opts, wait, self.cancel, &extend)
            .map_err(|e| mismatch(other_kind(e, &shown, "a semaphore"), &shown, n))?;
        let lock = hold(
            &owner,
            keys,
            token,
            None,
            place,
            opts,
            grant.lease_from,
            kind,
        )?;
        Ok(Permits { lock, count: k })
    }
}

/// The scripts' `PERMITS <n>` reply: the semaphore exists with another number of permits.
fn mismatch(e: Error, shown: &str, asked: u32) -> Error {
    if e.redis_code() != Some("PERMITS") {
        return e;
    }
    let msg = e.message();
    let has = msg
        .split_whitespace()
        .find_map(|w| w.parse::<u64>().ok())
        .map_or_else(|| "another number of".to_owned(), |n| n.to_string());
    Error::invalid_argument(format!(
        "semaphore {shown} has {has} permits, not {asked}: every user of a name must give the \
         same number"
    ))
}

/// One permit request's keys and queue entry.
struct SemWaiter<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    k: u32,
    n: u32,
    lease_ms: u64,
    /// `wid:k:n:lease:token`: what a release needs to grant it.
    entry: String,
    alive: Vec<u8>,
    signals: [Vec<u8>; 1],
}

impl<'a> SemWaiter<'a> {
    fn new(
        keys: &'a LockKeys,
        token: &'a Token,
        wid: &str,
        k: u32,
        n: u32,
        lease: Duration,
    ) -> SemWaiter<'a> {
        let lease_ms = lease.as_millis() as u64;
        SemWaiter {
            keys,
            token,
            k,
            n,
            lease_ms,
            entry: format!("{wid}:{k}:{n}:{lease_ms}:{}", token.as_str()),
            alive: keys.sem_alive(wid),
            signals: [keys.sem_signal(wid)],
        }
    }
}

fn granted(reply: (i64, i64, i64)) -> Step {
    let (ok, _, left) = reply;
    if ok == 1 {
        Step::Granted {
            fences: vec![0],
            left_ms: left,
        }
    } else {
        Step::Queued { pttl: left }
    }
}

impl Queue for SemWaiter<'_> {
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn shown(&self) -> String {
        self.keys.shown()
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
        let reply = scripts::SEM_ENQUEUE
            .key(self.keys.lock())
            .key(self.keys.sem_queue())
            .key(&self.alive)
            .key(&self.signals[0])
            .arg(self.token.as_str())
            .arg(self.k)
            .arg(self.n)
            .arg(self.lease_ms)
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64)
            .arg(mode.as_str())
            .invoke(c)?;
        Ok(granted(reply))
    }

    fn leave(&self, c: &mut redis::Connection) -> redis::RedisResult<Step> {
        let reply = scripts::SEM_LEAVE
            .key(self.keys.lock())
            .key(self.keys.sem_queue())
            .key(&self.alive)
            .key(&self.signals[0])
            .arg(self.token.as_str())
            .arg(self.k)
            .arg(&self.entry)
            .invoke(c)?;
        Ok(granted(reply))
    }

    fn signalled(&self, value: &[u8]) -> Signal {
        if value == b"mismatch" {
            return Signal::Refused(Error::invalid_argument(format!(
                "semaphore {} was set up again with another number of permits than {} while \
                 this request waited",
                self.keys.shown(),
                self.n
            )));
        }
        match queue::fence_of(value) {
            Some(_) => Signal::Granted(0),
            None => Signal::Refused(Error::internal(format!(
                "unexpected value on the signal list of a waiter for {}",
                self.keys.shown()
            ))),
        }
    }

    fn give_back(&self, b: &Backend) -> Result<(), Error> {
        release(b, self.keys, self.token, self.k).map(|_| ())
    }
}

/// Gives back `k` permits held with `token`, granting the waiting requests that now fit, in
/// order. Returns whether they were still ours.
pub(super) fn release(b: &Backend, keys: &LockKeys, token: &Token, k: u32) -> Result<bool, Error> {
    let released: i64 = ops::run(b, keys, |c, _| {
        scripts::SEM_RELEASE
            .key(keys.lock())
            .key(keys.sem_queue())
            .arg(token.as_str())
            .arg(k)
            .invoke(c)
    })?;
    Ok(released == 1)
}

/// Permits of a semaphore held by one grant. Dropping it gives them back (best effort);
/// [`release`](Self::release) tells whether they were still held.
#[derive(Debug)]
#[must_use = "dropping the guard gives the permits back at once"]
#[clippy::has_significant_drop]
pub struct Permits {
    lock: Lock,
    count: u32,
}

impl Permits {
    guard_methods!();

    /// The name (without the client's key prefix).
    pub fn name(&self) -> &[u8] {
        self.lock.name()
    }

    /// How many permits this grant holds.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The permits as a plain [`Lock`] (of kind [`Kind::Permits`]), as the C boundary holds
    /// every grant.
    pub(crate) fn into_lock(self) -> Lock {
        self.lock
    }
}
