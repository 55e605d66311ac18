//! The requests: one type, [`Request`], for asking for a lock of every kind.
//!
//! A request names the lock and says how to take it (lease, auto-renewal, fencing, a cancel);
//! every setter takes and returns the request, and every acquire borrows it, so one request can
//! acquire again and again with the same settings. What one kind alone offers (an owner token,
//! the read or the write side, a number of permits) is on that kind's request only. The aliases
//! [`LockRequest`], [`RwLockRequest`], [`SemaphoreRequest`] and [`MultiLockRequest`] name the
//! request of each kind.

use std::marker::PhantomData;
use std::time::Duration;

use crate::api::client::Client;
use crate::api::guard::{
    Guard, Leadership, Lock, MultiLock, Permits, ReadLock, RedissonLock, WriteLock,
};
use crate::api::kind::{
    Exclusive, Fenced, Leader, ReadWrite, Redisson, RequestKind, Semaphore, Set,
};
use crate::base::error::Error;
use crate::base::grant::{Grant, LockOptions};
use crate::base::keys::LockKeys;
use crate::base::token::Token;
use crate::engine::acquire;
use crate::engine::cancel::Cancel;
use crate::engine::held::Held;
use crate::engine::kinds::Rules;
use crate::engine::kinds::exclusive::ExclusiveRules;
use crate::engine::kinds::leader::LeaderRules;
use crate::engine::kinds::multi::{self, SetRules};
use crate::engine::kinds::redisson::RedissonRules;
use crate::engine::kinds::rwlock::RwRules;
use crate::engine::kinds::semaphore::PermitsRules;

/// A request for a lock of kind `K`: its name(s) and how to take it. Made by
/// [`Client::lock`], [`Client::rw_lock`], [`Client::semaphore`] and [`Client::lock_all`], with
/// the client's defaults.
#[derive(Debug)]
#[must_use]
pub struct Request<'a, K: RequestKind> {
    client: &'a Client,
    /// The names: one, or a set's.
    names: Vec<&'a [u8]>,
    opts: LockOptions,
    cancel: Option<&'a Cancel>,
    /// An exclusive lock's owner token, when the application names the owner.
    owner: Option<&'a str>,
    /// A semaphore's number of permits.
    permits: u32,
    /// A campaign's identity, shown to observers.
    identity: Option<&'a str>,
    kind: PhantomData<K>,
}

// By hand: a derived `Clone` would ask the kind (an empty enum) to be `Clone`.
impl<K: RequestKind> Clone for Request<'_, K> {
    fn clone(&self) -> Self {
        Request {
            names: self.names.clone(),
            opts: self.opts.clone(),
            ..*self
        }
    }
}

/// A request for an exclusive lock.
pub type LockRequest<'a> = Request<'a, Exclusive>;
/// A request for a read/write lock: [`read`](Request::read) or [`write`](Request::write).
pub type RwLockRequest<'a> = Request<'a, ReadWrite>;
/// A request for permits of a semaphore.
pub type SemaphoreRequest<'a> = Request<'a, Semaphore>;
/// A request for a set of exclusive locks, taken all or none.
pub type MultiLockRequest<'a> = Request<'a, Set>;
/// A request for Redisson's RLock.
pub type RedissonLockRequest<'a> = Request<'a, Redisson>;
/// A campaign for the leadership of an election.
pub type LeaderRequest<'a> = Request<'a, Leader>;

/// The requests of every kind, as the client makes them with its defaults.
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

    /// The read/write lock `name`: many readers or one writer at a time, each holding its own
    /// lease (renewed like an exclusive lock's). Options (lease, auto-renewal, fencing, cancel)
    /// default to the client's, as for [`Client::lock`]; [`read`](RwLockRequest::read) and
    /// [`write`](RwLockRequest::write) then acquire, and the request can be used again.
    ///
    /// The write side is the exclusive lock of the same name: an exclusive lock or a plain
    /// `SET name token NX PX` client excludes, and is excluded by, both writers and readers.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let doc = client.rw_lock("doc:7");
    /// let r = doc.read(Duration::from_secs(5))?; // other readers may hold it too
    /// // ... read the document ...
    /// r.release()?;
    /// let w = doc.write(Duration::from_secs(5))?; // alone; waiting readers queue behind
    /// // ... rewrite it, then let readers in without a gap:
    /// let r = w.downgrade()?;
    /// r.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn rw_lock<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> RwLockRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0)
    }

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
        Request::new(self, vec![name.as_ref()], permits).without_fencing()
    }

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
        Request::new(self, names.iter().map(AsRef::as_ref).collect(), 0)
    }

    /// Redisson's RLock `name`, shared with Java services that lock it with Redisson (its
    /// `getLock(name)`): a hash at the name whose field is this client's id and the calling
    /// thread's id, reentrant per thread, released with Redisson's unlock message on its channel
    /// (docs/redisson.md). The lease is Redisson's watchdog timeout (30 s there); with
    /// auto-renewal the lock is renewed every lease/3, as Redisson renews it. Refused with a
    /// `redlock://` URL. Options (lease, auto-renewal, cancel) default to the client's; there
    /// are no fencing tokens.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), redislock::Error> {
    /// use std::time::Duration;
    /// let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let lock = client
    ///     .redisson_lock("orders")
    ///     .lease(Duration::from_secs(30))
    ///     .acquire(Duration::from_secs(5))?;
    /// // ... the Java services' RLock "orders" waits meanwhile ...
    /// lock.release()?;
    /// # Ok(()) }
    /// ```
    pub fn redisson_lock<'a, N: AsRef<[u8]> + ?Sized>(
        &'a self,
        name: &'a N,
    ) -> RedissonLockRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0).without_fencing()
    }

    /// A campaign for the leadership of the election `name` (docs/leaders.md): give it an
    /// [`identity`](LeaderRequest::identity), then [`campaign`](LeaderRequest::campaign) (wait
    /// to lead) or [`try_campaign`](LeaderRequest::try_campaign). The leadership is an
    /// exclusive lock on `name` with a fencing token, its [`epoch`](crate::Leadership::epoch);
    /// lease, auto-renewal and cancel default to the client's. Refused with a `redlock://` URL,
    /// which has no fencing tokens.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let leadership = client
    ///     .leader("scheduler")
    ///     .identity("host-a:4242")
    ///     .campaign(Duration::from_secs(60))?;
    /// while leadership.is_leader() {
    ///     // ... one step of the leader's work, fenced with leadership.epoch() ...
    /// #   break;
    /// }
    /// leadership.resign()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn leader<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> LeaderRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0).with_fencing()
    }

    /// A request for the recipe lock `name` (cargo feature `recipe-kind`: the kind
    /// ARCHITECTURE.md's "Adding a kind" adds, for its tests; no part of the API).
    #[cfg(feature = "recipe-kind")]
    #[doc(hidden)]
    pub fn recipe_lock<'a, N: AsRef<[u8]> + ?Sized>(
        &'a self,
        name: &'a N,
    ) -> Request<'a, crate::api::kind::Recipe> {
        Request::new(self, vec![name.as_ref()], 0).without_fencing()
    }
}

impl<'a, K: RequestKind> Request<'a, K> {
    /// A request with the client's defaults (fencing off for semaphores, which have none).
    pub(crate) fn new(client: &'a Client, names: Vec<&'a [u8]>, permits: u32) -> Self {
        let cfg = client.config();
        Request {
            client,
            names,
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: cfg.fencing,
                at_least: None,
                at_most: None,
            },
            cancel: None,
            owner: None,
            permits,
            identity: None,
            kind: PhantomData,
        }
    }

    /// The request with fencing tokens (a leadership's epoch is one).
    pub(crate) fn with_fencing(mut self) -> Self {
        self.opts.fencing = true;
        self
    }

    /// The request without fencing tokens (a semaphore's grants have none).
    pub(crate) fn without_fencing(mut self) -> Self {
        self.opts.fencing = false;
        self
    }

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

    /// Lets `cancel` end a waiting acquire from another thread: it then fails with
    /// [`Error::is_cancelled`], leaving no queue entry and no lock behind (see [`Cancel`]).
    pub fn cancel_on(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// The keys of the first (or only) name.
    fn keys(&self) -> Result<LockKeys, Error> {
        let name = self.names.first().copied().unwrap_or_default();
        LockKeys::new(&self.client.config().key_prefix, name)
    }

    /// Acquires a grant of `kind` on `keys` with this request's settings, held with `token` (the
    /// kind's own without one): the one acquire of every kind.
    fn take_as(
        &self,
        kind: Box<dyn Rules>,
        keys: LockKeys,
        token: Option<Token>,
        wait: Option<Duration>,
    ) -> Result<(Held, Grant), Error> {
        let b = self.client.backend()?;
        acquire::acquire(&b, kind, keys, token, &self.opts, wait, self.cancel)
    }
}

impl<'a, K: Fenced> Request<'a, K> {
    /// Whether each grant gets a fencing token (default: the client's `fencing`): strictly
    /// larger than that of every earlier fenced grant of the name (on a Sentinel group or a
    /// Cluster ordered first by the failover epoch of the master that granted it). Readers and writers of a name
    /// share one counter (with the exclusive lock of that name): a writer's token is larger than
    /// that of every grant before it, and every reader's token is larger than that of the writer
    /// before it; readers holding at once are not ordered among themselves.
    pub fn fencing(mut self, on: bool) -> Self {
        self.opts.fencing = on;
        self
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

impl<'a> Request<'a, Leader> {
    /// The identity the leader is known by to observers ([`Client::leader_info`]): not
    /// empty, at most [`MAX_IDENTITY_LEN`](crate::MAX_IDENTITY_LEN) bytes, no control
    /// characters. Never the token. Required: a campaign without one fails with an
    /// invalid-argument error.
    pub fn identity(mut self, identity: &'a str) -> Self {
        self.identity = Some(identity);
        self
    }

    /// One attempt: leads at once if nobody leads, else fails with [`Error::is_held`].
    pub fn try_campaign(&self) -> Result<Leadership, Error> {
        self.campaign_for(None)
    }

    /// Waits up to `wait` to lead (fails with [`Error::is_wait_timeout`]; with
    /// [`cancel_on`](Self::cancel_on), a cancel ends it). Woken by a change published on the
    /// election's channel (a resign), and at the leader's remaining lease (a leader that died
    /// publishes nothing): no polling.
    pub fn campaign(&self, wait: Duration) -> Result<Leadership, Error> {
        self.campaign_for(Some(wait))
    }

    fn campaign_for(&self, wait: Option<Duration>) -> Result<Leadership, Error> {
        let Some(identity) = self.identity else {
            return Err(Error::invalid_argument(
                "a campaign needs the leader's identity (LeaderRequest::identity)",
            ));
        };
        let kind = LeaderRules::new(identity.as_bytes())?;
        let keys = self.keys()?;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, identity.into()))
    }
}

impl Request<'_, Redisson> {
    /// One attempt: fails with [`Error::is_held`] at once if another owner (another thread, or
    /// another client) holds the lock; taken again (one hold more) if this thread holds it.
    pub fn try_acquire(&self) -> Result<RedissonLock, Error> {
        self.take(None)
    }

    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]), woken by the
    /// holder's unlock message on the lock's channel, or trying again when the holder's lease
    /// runs out.
    pub fn acquire(&self, wait: Duration) -> Result<RedissonLock, Error> {
        self.take(Some(wait))
    }

    fn take(&self, wait: Option<Duration>) -> Result<RedissonLock, Error> {
        let keys = self.keys()?;
        let lease_ms = self.opts.lease.as_millis() as u64;
        let kind = RedissonRules::new(std::process::id(), lease_ms)?;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, ()))
    }
}

#[cfg(feature = "recipe-kind")]
impl Request<'_, crate::api::kind::Recipe> {
    /// One attempt: fails with [`Error::is_held`] at once if another owner holds the lock.
    pub fn try_acquire(&self) -> Result<Guard<crate::api::kind::Recipe>, Error> {
        self.take(None)
    }

    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]), woken by the
    /// holder's release on the lock's channel.
    pub fn acquire(&self, wait: Duration) -> Result<Guard<crate::api::kind::Recipe>, Error> {
        self.take(Some(wait))
    }

    fn take(&self, wait: Option<Duration>) -> Result<Guard<crate::api::kind::Recipe>, Error> {
        let keys = self.keys()?;
        let kind = crate::engine::kinds::recipe::RecipeRules;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, ()))
    }
}

impl Request<'_, ReadWrite> {
    /// Waits up to `wait` for a read lock (fails with [`Error::is_wait_timeout`]). Granted at
    /// once while readers hold the name and nobody waits; otherwise in arrival order.
    pub fn read(&self, wait: Duration) -> Result<ReadLock, Error> {
        self.take(false, Some(wait))
            .map(|held| Guard::new(held, ()))
    }

    /// One attempt at a read lock: fails with [`Error::is_held`] when a writer holds the name
    /// or anyone waits for it.
    pub fn try_read(&self) -> Result<ReadLock, Error> {
        self.take(false, None).map(|held| Guard::new(held, ()))
    }

    /// Waits up to `wait` for the write lock (fails with [`Error::is_wait_timeout`]).
    pub fn write(&self, wait: Duration) -> Result<WriteLock, Error> {
        self.take(true, Some(wait)).map(|held| Guard::new(held, ()))
    }

    /// One attempt at the write lock: fails with [`Error::is_held`] when anyone holds the name
    /// or waits for it.
    pub fn try_write(&self) -> Result<WriteLock, Error> {
        self.take(true, None).map(|held| Guard::new(held, ()))
    }

    fn take(&self, write: bool, wait: Option<Duration>) -> Result<Held, Error> {
        let keys = self.keys()?;
        let (held, _) = self.take_as(Box::new(RwRules { write }), keys, None, wait)?;
        Ok(held)
    }
}

impl Request<'_, Semaphore> {
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
        let keys = self.keys()?;
        let kind = PermitsRules::new(&keys, k, self.permits)?;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, k))
    }
}

impl Request<'_, Set> {
    /// Waits up to `wait` for every lock of the set (fails with [`Error::is_wait_timeout`]).
    pub fn acquire(&self, wait: Duration) -> Result<MultiLock, Error> {
        self.take(Some(wait))
    }

    /// One attempt: fails with [`Error::is_held`] when any name of the set is held.
    pub fn try_acquire(&self) -> Result<MultiLock, Error> {
        self.take(None)
    }

    fn take(&self, wait: Option<Duration>) -> Result<MultiLock, Error> {
        let keys = multi::keys(&self.client.config().key_prefix, &self.names)?;
        let names = keys.iter().map(|k| k.name().to_vec()).collect();
        let first = keys[0].clone();
        let kind = SetRules {
            names: keys.into_boxed_slice(),
        };
        let (held, grant) = self.take_as(Box::new(kind), first, None, wait)?;
        let fences = self.opts.fencing.then(|| grant.tokens());
        Ok(Guard::set(held, names, fences))
    }
}
