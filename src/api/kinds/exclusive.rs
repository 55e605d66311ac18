//! The exclusive lock, one holder at a time, as the API offers it: its marker, the client's
//! [`lock`](Client::lock) and one-call conveniences, its request's owner token, `at_least`,
//! `at_most` and restore, and its guard's fencing token and owner token.

use std::time::Duration;

use super::{Kind, OneName, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::fence::Fence;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::error::Error;
use crate::base::kind::{Descriptor, EXCLUSIVE};
use crate::base::token::Token;
use crate::engine::acquire;
use crate::engine::kinds::Rules;
use crate::engine::kinds::exclusive::{self, ExclusiveRules};

/// An exclusive lock: one holder at a time ([`Lock`](crate::Lock),
/// [`LockRequest`](crate::LockRequest)).
#[derive(Debug)]
pub enum Exclusive {}

impl sealed::Sealed for Exclusive {}
impl Kind for Exclusive {
    const DESCRIPTOR: &'static Descriptor = &EXCLUSIVE;
    type Parts = ();
}
impl OneName for Exclusive {}
impl RequestKind for Exclusive {}
fenced! { Exclusive: Exclusive; }

/// A request for an exclusive lock.
pub type LockRequest<'a> = Request<'a, Exclusive>;
/// A held exclusive lock.
pub type Lock = Guard<Exclusive>;

/// The exclusive lock, as the client offers it.
impl Client {
    /// A request for the lock `name` that can override the client's lease, auto-renewal and
    /// fencing defaults before acquiring.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let lock = client
    ///     .lock("report:daily")
    ///     .lease(Duration::from_secs(60))
    ///     .auto_renew(false)
    ///     .fencing(true)
    ///     .acquire(Duration::from_millis(500))?;
    /// let token = lock.fencing_token().unwrap();
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn lock<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> LockRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0)
    }

    /// One acquire attempt with the client's defaults: fails with [`Error::is_held`] at once
    /// if another owner holds the lock.
    pub fn try_acquire(&self, name: impl AsRef<[u8]>) -> Result<Lock, Error> {
        self.lock(name.as_ref()).try_acquire()
    }

    /// Acquires with the client's defaults, waiting up to `wait` (fails with
    /// [`Error::is_wait_timeout`]). The waiter is woken by the holder's release, without polling.
    pub fn acquire(&self, name: impl AsRef<[u8]>, wait: Duration) -> Result<Lock, Error> {
        self.lock(name.as_ref()).acquire(wait)
    }

    /// Runs `f` under the lock (waiting up to `wait` for it) and releases it afterwards.
    /// Returns [`Error::is_not_held`] if the lock turned out to be lost before the release:
    /// then `f`'s work may have overlapped with another holder's, and its result is dropped.
    pub fn with_lock<R>(
        &self,
        name: impl AsRef<[u8]>,
        wait: Duration,
        f: impl FnOnce(&Lock) -> R,
    ) -> Result<R, Error> {
        self.lock(name.as_ref()).run(wait, f)
    }

    /// Releases the lock `name` whoever holds it (or hands it to the oldest waiter), as an
    /// operator's last resort for a holder that is gone. Returns whether a holder was there.
    /// The holder is not told; its next release or extend reports [`Error::is_not_held`].
    pub fn force_release(&self, name: impl AsRef<[u8]>) -> Result<bool, Error> {
        let keys = self.keys(name.as_ref())?;
        let b = self.backend()?;
        // The release script acts only for the token it is given: read the holder's, then
        // release it. A new holder in between keeps its lock (and we report it as released by
        // its own holder, which it soon will be).
        for _ in 0..3 {
            let Some(holder) = exclusive::holder(&*b.store, &keys)? else {
                return Ok(false);
            };
            let holder = String::from_utf8(holder).map_err(|_| {
                Error::invalid_argument(format!(
                    "lock {} is held with a token that is not text; release it with DEL",
                    keys.shown()
                ))
            })?;
            if ExclusiveRules.release(&b, &keys, &Token::from_held(holder))? {
                return Ok(true);
            }
        }
        Ok(true)
    }

    /// Whether the lock `name` is held now with `owner_token` (one round trip). The token is
    /// compared here, not returned: no caller learns another holder's token.
    pub fn is_owned_by(&self, name: impl AsRef<[u8]>, owner_token: &str) -> Result<bool, Error> {
        let keys = self.keys(name.as_ref())?;
        let b = self.backend()?;
        let holder = exclusive::holder(&*b.store, &keys)?;
        Ok(holder.is_some_and(|h| crate::base::token::same(&h, owner_token.as_bytes())))
    }
}

impl<'a> Request<'a, Exclusive> {
    /// Acquire with this owner token instead of a fresh random one (default: random, 128
    /// bits). For applications that name the owner themselves (Laravel's `$owner`); the token
    /// must be 16 to 256 printable ASCII characters and as hard to guess as a password, since
    /// whoever knows it can release the lock.
    pub fn owner_token(mut self, token: &'a str) -> Self {
        self.owner = Some(token);
        self
    }

    /// Holds the lock at least `d` after it was granted (default: no minimum): a release (or
    /// drop) before then leaves the key holding the owner token until then, its expiry set to
    /// the time left, so that nobody takes the name before it even if this process exits at
    /// once; renewal stops at the release all the same. Waiters get the name when the key
    /// expires, at their next re-check (within the client's `recheck_interval`). A release after
    /// `d` frees the lock as usual (handing it to the oldest waiter). For jobs that run on
    /// several hosts and must run once per interval: a 50 ms job holds the name for `d`, so a
    /// host whose clock is a little behind finds it held. While the lock is held its key's expiry
    /// covers `d` once renewed, so a holder that dies keeps the name at least until then, or
    /// for its lease if it dies before the first renewal.
    ///
    /// `d` must be between 1 ms and 30 days, no longer than [`at_most`](Self::at_most), and,
    /// without auto-renewal, no longer than the lease (nothing would keep the key that long):
    /// else the acquire fails with [`Error::is_invalid_argument`], holding nothing.
    pub fn at_least(mut self, d: Duration) -> Self {
        self.opts.at_least = Some(d);
        self
    }

    /// Holds the lock at most `d` after it was granted (default: no maximum): renewal never
    /// extends the lease past then (a lease longer than `d` is cut to it, and so is an
    /// [`extend`](Lock::extend)), and when that time comes the lock is reported lost
    /// ([`Lock::is_lost`], [`Lock::on_lost`], whose error says it reached its `at_most`; the
    /// metrics' reason `at_most`). The key expires on its own then. `d` must be between 1 ms
    /// and 30 days.
    pub fn at_most(mut self, d: Duration) -> Self {
        self.opts.at_most = Some(d);
        self
    }

    /// One attempt: fails with [`Error::is_held`] at once if another owner holds the lock.
    pub fn try_acquire(&self) -> Result<Lock, Error> {
        self.take(None)
    }

    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]). The waiter is
    /// woken by the holder's release, without polling.
    pub fn acquire(&self, wait: Duration) -> Result<Lock, Error> {
        self.take(Some(wait))
    }

    /// A handle for the lock held now with `owner_token` (from [`Lock::owner_token`] or
    /// [`Lock::detach`], maybe in another process), to release or extend it: the lease is reset
    /// to this request's lease, and the lock auto-renews if the request says so. Fails with
    /// [`Error::is_not_held`] when the key does not hold that token. The handle has no fencing
    /// token.
    pub fn restore(&self, owner_token: &str) -> Result<Lock, Error> {
        let token = Token::from_owner(owner_token)?;
        let keys = self.keys()?;
        let b = self.client.backend()?;
        let held = acquire::restore(&b, keys, token, &self.opts)?;
        Ok(Guard::new(held, ()))
    }

    /// Runs `f` under the lock (waiting up to `wait` for it) and releases it afterwards; see
    /// [`Client::with_lock`].
    pub fn run<R>(&self, wait: Duration, f: impl FnOnce(&Lock) -> R) -> Result<R, Error> {
        let lock = self.acquire(wait)?;
        let out = f(&lock);
        lock.release()?;
        Ok(out)
    }

    fn take(&self, wait: Option<Duration>) -> Result<Lock, Error> {
        let owner = self.owner.map(Token::from_owner).transpose()?;
        let keys = self.keys()?;
        let (held, _) = self.take_as(Box::new(ExclusiveRules), keys, owner, wait)?;
        Ok(Guard::new(held, ()))
    }
}

impl Guard<Exclusive> {
    /// The fencing token of this grant, when the lock was acquired with fencing: strictly
    /// larger than that of every earlier fenced grant of the same name. Pass it to the
    /// protected resource, which should refuse writes carrying a smaller token than it has seen.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token()
    }

    /// The fence of this grant, when the lock was acquired with fencing: its name, fencing token
    /// and, on a Sentinel group or a Cluster, epoch, to hand to the resources it protects (a
    /// [`FencedResource`](crate::FencedResource)).
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
