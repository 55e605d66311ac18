//! The client: one per process (or per Redis server), shared by all threads.
//!
//! What a client needs at run time (connection pools and renewal threads) lives in a backend
//! (see `backend.rs`) built lazily for the current process: the client's own, or for a
//! persistent client the one the process shares among them. After `fork()` the child sees a
//! different pid and builds a backend of its own: it never touches the parent's sockets, and
//! never relies on threads that do not exist in the child.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;

use crate::backend::Owner;
use crate::cancel::Cancel;
use crate::config::{ClientBuilder, Config, mask_url};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::Lock;
use crate::ops;
use crate::renewal::Stats;
use crate::token::Token;

/// How long a call waits for the client's backend; only a fork taken while another thread
/// was rebuilding the backend could make it wait at all.
const BACKEND_LOCK_WAIT: Duration = Duration::from_secs(5);

/// A Redis lock client. Cheap to clone (clones share everything); `Send + Sync`, meant to be
/// created once and shared by all threads.
///
/// ```no_run
/// use std::time::Duration;
/// let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
/// let sold = client.with_lock("stock:42", Duration::from_secs(5), |_lock| {
///     // read the stock, check it, write it back: no other holder can interleave
///     1
/// })?;
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

struct Shared {
    cfg: Config,
    info: redis::ConnectionInfo,
    /// The backend this client uses in the current process (for a persistent client, the
    /// process's shared one), built on first use.
    backend: RwLock<Option<Arc<Owner>>>,
}

/// How one lock is taken: lease, auto-renewal and fencing.
#[derive(Debug, Clone)]
pub(crate) struct LockOptions {
    pub lease: Duration,
    pub auto_renew: bool,
    pub fencing: bool,
}

impl Client {
    /// A client with default settings for the given URL: `redis://[user:password@]host:port/db`,
    /// a Sentinel URL `redis-sentinel://[user:password@]h1:p1,h2:p2[/db]#master`, or a Redlock URL
    /// `redlock://[user:password@]h1:p1,h2:p2,h3:p3[/db]` (see the README's Topologies).
    /// Connects lazily.
    pub fn open(url: &str) -> Result<Client, Error> {
        Client::builder(url).build()
    }

    /// A builder to configure a client; see [`ClientBuilder`] for every setting and default.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    pub(crate) fn from_config(cfg: Config, info: redis::ConnectionInfo) -> Client {
        Client {
            shared: Arc::new(Shared {
                cfg,
                info,
                backend: RwLock::new(None),
            }),
        }
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
        let cfg = &self.shared.cfg;
        LockRequest {
            client: self,
            name: name.as_ref(),
            owner: None,
            cancel: None,
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: cfg.fencing,
            },
        }
    }

    /// Releases the lock `name` whoever holds it (or hands it to the oldest waiter), as an
    /// operator's last resort for a holder that is gone. Returns whether a holder was there.
    /// The holder is not told; its next release or extend reports [`Error::is_not_held`].
    pub fn force_release(&self, name: impl AsRef<[u8]>) -> Result<bool, Error> {
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name.as_ref())?;
        let b = self.backend()?;
        // The release script acts only for the token it is given: read the holder's, then
        // release it. A new holder in between keeps its lock (and we report it as released by
        // its own holder, which it soon will be).
        for _ in 0..3 {
            let Some(holder) = ops::holder(&b, &keys)? else {
                return Ok(false);
            };
            let holder = String::from_utf8(holder).map_err(|_| {
                Error::invalid_argument(format!(
                    "lock {} is held with a token that is not text; release it with DEL",
                    keys.shown()
                ))
            })?;
            if ops::release(&b, &keys, &Token::from_held(holder))? {
                return Ok(true);
            }
        }
        Ok(true)
    }

    /// Whether the lock `name` is held now with `owner_token` (one round trip). The token is
    /// compared here, not returned: no caller learns another holder's token.
    pub fn is_owned_by(&self, name: impl AsRef<[u8]>, owner_token: &str) -> Result<bool, Error> {
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name.as_ref())?;
        let b = self.backend()?;
        let holder = ops::holder(&b, &keys)?;
        Ok(holder.is_some_and(|h| crate::token::same(&h, owner_token.as_bytes())))
    }

    /// The lease locks get unless a request sets its own.
    pub fn default_lease(&self) -> Duration {
        self.shared.cfg.lease
    }

    /// Whether locks auto-renew unless a request says otherwise.
    pub fn default_auto_renew(&self) -> bool {
        self.shared.cfg.auto_renew
    }

    /// Whether locks get fencing tokens unless a request says otherwise.
    pub fn default_fencing(&self) -> bool {
        self.shared.cfg.fencing
    }

    /// Renewal counters of this client in this process.
    pub fn stats(&self) -> Stats {
        match self.shared.backend.try_read_for(BACKEND_LOCK_WAIT) {
            Some(b) => match b.as_ref() {
                Some(b) if b.pid == std::process::id() => b.renewer.stats(),
                _ => Stats::default(),
            },
            None => Stats::default(),
        }
    }

    pub(crate) fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// The client's backend for this process, built (or for a persistent client, found) on
    /// first use and again after a fork.
    pub(crate) fn backend(&self) -> Result<Arc<Owner>, Error> {
        let pid = std::process::id();
        let stuck = || Error::internal("the client's state stayed locked (fork while rebuilding?)");
        {
            let current = self
                .shared
                .backend
                .try_read_for(BACKEND_LOCK_WAIT)
                .ok_or_else(stuck)?;
            if let Some(b) = current.as_ref()
                && b.pid == pid
            {
                return Ok(b.clone());
            }
        }
        let mut current = self
            .shared
            .backend
            .try_write_for(BACKEND_LOCK_WAIT)
            .ok_or_else(stuck)?;
        if let Some(b) = current.as_ref()
            && b.pid == pid
        {
            return Ok(b.clone());
        }
        let (cfg, info) = (&self.shared.cfg, &self.shared.info);
        let fresh = if cfg.persistent {
            Owner::persistent(cfg, info)?
        } else {
            Owner::start(cfg, info)?
        };
        // An owner inherited across fork forgets the parent's backend when dropped.
        *current = Some(fresh.clone());
        Ok(fresh)
    }
}

/// A lock request with its own lease, auto-renewal and fencing settings. Made by
/// [`Client::lock`].
#[derive(Debug, Clone)]
#[must_use]
pub struct LockRequest<'a> {
    client: &'a Client,
    name: &'a [u8],
    owner: Option<&'a str>,
    cancel: Option<&'a Cancel>,
    opts: LockOptions,
}

impl<'a> LockRequest<'a> {
    /// The lease of this lock (default: the client's `lease`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.opts.lease = lease;
        self
    }
    /// Whether a renewal thread keeps the lock alive (default: the client's `auto_renew`).
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.opts.auto_renew = on;
        self
    }
    /// Whether this grant gets a fencing token (default: the client's `fencing`).
    pub fn fencing(mut self, on: bool) -> Self {
        self.opts.fencing = on;
        self
    }
    /// Acquire with this owner token instead of a fresh random one (default: random, 128
    /// bits). For applications that name the owner themselves (Laravel's `$owner`); the token
    /// must be 16 to 256 printable ASCII characters and as hard to guess as a password, since
    /// whoever knows it can release the lock.
    pub fn owner_token(mut self, token: &'a str) -> Self {
        self.owner = Some(token);
        self
    }
    /// One attempt: fails with [`Error::is_held`] at once if another owner holds the lock.
    pub fn try_acquire(self) -> Result<Lock, Error> {
        self.client
            .acquire_with(self.name, self.owner, self.cancel, &self.opts, None)
    }
    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]).
    pub fn acquire(self, wait: Duration) -> Result<Lock, Error> {
        self.client
            .acquire_with(self.name, self.owner, self.cancel, &self.opts, Some(wait))
    }
    /// Lets `cancel` end this acquire's wait from another thread: the acquire then fails with
    /// [`Error::is_cancelled`], leaving no queue entry and no lock behind (see [`Cancel`]).
    pub fn cancel_on(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }
    /// A handle for the lock held now with `owner_token` (from [`Lock::owner_token`] or
    /// [`Lock::detach`], maybe in another process), to release or extend it: the lease is reset
    /// to this request's lease, and the lock auto-renews if the request says so. Fails with
    /// [`Error::is_not_held`] when the key does not hold that token. The handle has no fencing
    /// token.
    pub fn restore(self, owner_token: &str) -> Result<Lock, Error> {
        self.client.restore_with(self.name, owner_token, &self.opts)
    }
    /// Runs `f` under the lock; see [`Client::with_lock`].
    pub fn run<R>(self, wait: Duration, f: impl FnOnce(&Lock) -> R) -> Result<R, Error> {
        let lock = self.acquire(wait)?;
        let out = f(&lock);
        lock.release()?;
        Ok(out)
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &mask_url(&self.shared.cfg.url))
            .finish_non_exhaustive()
    }
}
