//! The client: one per process (or per Redis server), shared by all threads.
//!
//! What a client needs at run time (connection pools and renewal threads) lives in a
//! [`Backend`] built lazily for the current process. After `fork()` the child sees a different
//! pid and builds a backend of its own: it never touches the parent's sockets, and never relies
//! on threads that do not exist in the child. The parent's backend is forgotten in the child,
//! not dropped, so nothing of it runs there.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::RwLock;

use crate::config::{ClientBuilder, Config, check_lease, check_wait, mask_url};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::{Lock, LockState, release_key};
use crate::pool::ConnPool;
use crate::renewal::{Renewer, Stats};
use crate::scripts;
use crate::token::Token;
use crate::waiting::{self, Grant};

/// How long a call waits for the client's backend slot; only a fork taken while another thread
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
    backend: RwLock<Option<Arc<Backend>>>,
}

/// Connection pools and renewal threads of a client in one process.
pub(crate) struct Backend {
    pub pid: u32,
    pub cfg: Config,
    /// For acquire, release, extend and renewal.
    pub main: ConnPool,
    /// For waiters blocked in BLPOP.
    pub wait: ConnPool,
    pub renewer: Renewer,
}

/// How one lock is taken: lease, auto-renewal and fencing.
#[derive(Debug, Clone)]
pub(crate) struct LockOptions {
    pub lease: Duration,
    pub auto_renew: bool,
    pub fencing: bool,
}

impl Client {
    /// A client with default settings for the given URL,
    /// `redis://[user:password@]host:port/db`. Connects lazily.
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
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: cfg.fencing,
            },
        }
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

    /// The client's backend for this process, built on first use and again after a fork.
    pub(crate) fn backend(&self) -> Result<Arc<Backend>, Error> {
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
        let mut slot = self
            .shared
            .backend
            .try_write_for(BACKEND_LOCK_WAIT)
            .ok_or_else(stuck)?;
        if let Some(b) = slot.as_ref()
            && b.pid == pid
        {
            return Ok(b.clone());
        }
        let cfg = &self.shared.cfg;
        let info = &self.shared.info;
        let fresh = Arc::new(Backend {
            pid,
            cfg: cfg.clone(),
            main: ConnPool::new(cfg, info, cfg.pool_size)?,
            wait: ConnPool::new(cfg, info, cfg.max_waiters)?,
            renewer: Renewer::new(cfg.max_renewed_locks),
        });
        if let Some(parents) = slot.replace(fresh.clone()) {
            // Inherited across fork: its sockets are the parent's and its threads do not exist
            // here. Never drop it in this process.
            std::mem::forget(parents);
        }
        Ok(fresh)
    }

    fn acquire_with(
        &self,
        name: &[u8],
        opts: &LockOptions,
        wait: Option<Duration>,
    ) -> Result<Lock, Error> {
        check_lease(opts.lease, opts.auto_renew)?;
        if let Some(w) = wait {
            check_wait(w)?;
        }
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name)?;
        let b = self.backend()?;
        // A place among the renewed locks is taken before the first attempt, so that a refusal
        // costs no round trip; a waiter gives it back while it waits.
        let reserve = || {
            if opts.auto_renew {
                b.renewer.reserve().map(Some)
            } else {
                Ok(None)
            }
        };
        let mut slot = reserve()?;
        let token = Token::new(b.pid)?;
        let started = Instant::now();
        let grant = match try_once(&b, &keys, &token, opts)? {
            Some(grant) => Some(grant),
            None => match wait {
                Some(w) if !w.is_zero() => {
                    drop(slot.take());
                    let grant = waiting::wait(&b, &keys, &token, opts, started + w)?;
                    if grant.is_some() {
                        slot = match reserve() {
                            Ok(slot) => slot,
                            Err(e) => {
                                let _ = release_key(&b.main, &keys, &token);
                                return Err(e);
                            }
                        };
                    }
                    grant
                }
                _ => None,
            },
        };
        let Some(grant) = grant else {
            return Err(match wait {
                Some(_) => Error::wait_timeout(&keys.shown(), started.elapsed()),
                None => Error::held(&keys.shown()),
            });
        };
        let state = Arc::new(LockState::new(
            b.clone(),
            keys,
            token,
            opts.fencing.then_some(grant.fence),
            slot,
            opts.lease,
            grant.lease_from,
        ));
        let lock = Lock {
            state: state.clone(),
        };
        if state.auto_renew {
            b.renewer.watch(state)?;
        }
        Ok(lock)
    }
}

/// One attempt on the main pool: the classic `SET key token NX PX lease` (or the ACQUIRE script
/// with fencing). `Ok(None)`: held by another owner.
fn try_once(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
) -> Result<Option<Grant>, Error> {
    let ms = opts.lease.as_millis() as u64;
    let mut sent = false;
    let mut sent_at = Instant::now();
    let result = b.main.run(None, |c, attempt| {
        sent = true;
        sent_at = Instant::now();
        // A retry (after the connection dropped mid-call) uses the script, which also accepts
        // the key already holding our token: the first SET may have been applied.
        if !opts.fencing && attempt == 0 {
            let set: Option<String> = redis::cmd("SET")
                .arg(&keys.lock)
                .arg(token.as_str())
                .arg("NX")
                .arg("PX")
                .arg(ms)
                .query(c)?;
            Ok(set.map(|_| 0))
        } else {
            let (ok, fence): (i64, i64) = scripts::ACQUIRE
                .key(&keys.lock)
                .key(&keys.fence)
                .arg(token.as_str())
                .arg(ms)
                .arg(if opts.fencing { "1" } else { "0" })
                .invoke(c)?;
            Ok((ok == 1).then_some(fence.max(0) as u64))
        }
    });
    match result {
        Ok(fence) => Ok(fence.map(|fence| Grant {
            fence,
            lease_from: sent_at,
        })),
        Err(e) => {
            if sent && e.is_timeout() {
                // The SET may have been applied before the reply was lost: the lock may be held
                // with our token. Remove it if so; never assume either way.
                let _ = release_key(&b.main, keys, token);
            }
            Err(e)
        }
    }
}

/// A lock request with its own lease, auto-renewal and fencing settings. Made by
/// [`Client::lock`].
#[derive(Debug, Clone)]
#[must_use]
pub struct LockRequest<'a> {
    client: &'a Client,
    name: &'a [u8],
    opts: LockOptions,
}

impl LockRequest<'_> {
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
    /// One attempt: fails with [`Error::is_held`] at once if another owner holds the lock.
    pub fn try_acquire(self) -> Result<Lock, Error> {
        self.client.acquire_with(self.name, &self.opts, None)
    }
    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]).
    pub fn acquire(self, wait: Duration) -> Result<Lock, Error> {
        self.client.acquire_with(self.name, &self.opts, Some(wait))
    }
    /// Runs `f` under the lock; see [`Client::with_lock`].
    pub fn run<R>(self, wait: Duration, f: impl FnOnce(&Lock) -> R) -> Result<R, Error> {
        let lock = self.acquire(wait)?;
        let out = f(&lock);
        lock.release()?;
        Ok(out)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // In a forked child the backend is the parent's: never run its destructors here.
        if let Some(backend) = self.backend.get_mut().take()
            && backend.pid != std::process::id()
        {
            std::mem::forget(backend);
        }
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &mask_url(&self.shared.cfg.url))
            .finish_non_exhaustive()
    }
}
