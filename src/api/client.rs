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

use crate::base::sync::{PerProcess, RwLock};

use crate::api::guard::Lock;
use crate::base::config::{Config, check_wait};
use crate::base::error::Error;
use crate::base::inspect::{LockInfo, LockKind};
use crate::base::keys::LockKeys;
use crate::base::metrics::{Metrics, Snapshot};
use crate::base::token::Token;
use crate::base::url::mask_url;
use crate::engine::backend::Owner;
use crate::engine::kinds::Rules;
use crate::engine::kinds::exclusive::{self, ExclusiveRules};
use crate::engine::kinds::leader::{self, LeaderInfo};
use crate::engine::renewal::Stats;
use crate::stores::Check;

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
    /// The backend this client uses in each process (for a persistent client, the process's
    /// shared one), built on first use. Each process has its own lock around it: a forked child
    /// never waits for one that a thread of its parent held at the fork.
    backend: PerProcess<RwLock<Option<Arc<Owner>>>>,
}

impl Client {
    pub(crate) fn from_config(cfg: Config, info: redis::ConnectionInfo) -> Client {
        Client {
            shared: Arc::new(Shared {
                cfg,
                info,
                backend: PerProcess::new(),
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

    /// Who leads the election `name` now, without campaigning: its identity, epoch and
    /// remaining lease, or `None` when nobody leads. Fails with an invalid-argument error when
    /// the name is held as a plain lock.
    pub fn leader_info(&self, name: impl AsRef<[u8]>) -> Result<Option<LeaderInfo>, Error> {
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name.as_ref())?;
        let b = self.backend()?;
        offers_elections(&*b.store, &keys)?;
        leader::read(&*b.store, &keys)
    }

    /// Waits up to `timeout` until the election `name` is led by another epoch than `since`
    /// (`None`: nobody led; pass the epoch of the last [`leader_info`](Self::leader_info)), and
    /// returns who leads then (`None`: nobody, after a resign or a leader's lease ran out).
    /// Woken by the change published on the election's channel, or at the leader's remaining
    /// lease (a killed leader publishes nothing): no polling. Fails with
    /// [`Error::is_wait_timeout`] when nothing changed within `timeout`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let mut now = client.leader_info("scheduler")?;
    /// loop {
    ///     match client.wait_for_leader_change("scheduler", now.as_ref().map(|l| l.epoch), Duration::from_secs(60)) {
    ///         Ok(next) => now = next,
    ///         Err(e) if e.is_wait_timeout() => continue,
    ///         Err(e) => return Err(e),
    ///     }
    ///     println!("leader: {:?}", now.as_ref().map(|l| &l.identity));
    /// #   break;
    /// }
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn wait_for_leader_change(
        &self,
        name: impl AsRef<[u8]>,
        since: Option<u64>,
        timeout: Duration,
    ) -> Result<Option<LeaderInfo>, Error> {
        check_wait(timeout)?;
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name.as_ref())?;
        let b = self.backend()?;
        offers_elections(&*b.store, &keys)?;
        leader::wait_change(&*b.store, &keys, since, timeout)
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
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name.as_ref())?;
        let b = self.backend()?;
        let holder = exclusive::holder(&*b.store, &keys)?;
        Ok(holder.is_some_and(|h| crate::base::token::same(&h, owner_token.as_bytes())))
    }

    /// A look at the lock `name` without holding it (one round trip; with Redlock, one to every
    /// master): whether it is held and as what, by how many, for how long yet, how many wait,
    /// and its fencing counter, never a token. `kind` picks whose waiters are counted;
    /// [`LockKind::Any`] counts every kind's. Redlock offers exclusive locks only: another kind
    /// is [invalid](Error::is_invalid_argument) there.
    ///
    /// ```no_run
    /// use redislock::LockKind;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let info = client.inspect("nightly-backup", LockKind::Exclusive)?;
    /// println!("held: {}, waiters: {:?}", info.held, info.waiters);
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn inspect(&self, name: impl AsRef<[u8]>, kind: LockKind) -> Result<LockInfo, Error> {
        let keys = LockKeys::new(&self.shared.cfg.key_prefix, name.as_ref())?;
        let b = self.backend()?;
        if let Some(what) = kind.what() {
            b.store.check(Check::Kind {
                what,
                shown: &keys.shown(),
            })?;
        }
        b.store.inspect(&keys, kind)
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

    /// Renewal counters of this client's backend in this process (a few of
    /// [`metrics`](Self::metrics)).
    pub fn stats(&self) -> Stats {
        match self.current_backend() {
            Some(b) => b.renewer.stats(&b.metrics),
            None => Stats::default(),
        }
    }

    /// The metrics of this client's backend in this process: acquisitions by outcome, wait and
    /// hold times, handoffs, renewals, lost locks, locks held and waiters now, connections and
    /// topology events (every metric is listed in `docs/metrics.md`).
    /// [`Snapshot::to_prometheus`](crate::metrics::Snapshot::to_prometheus) gives its
    /// Prometheus text.
    ///
    /// The numbers are the backend's: persistent clients with the same server and connection
    /// settings share one backend, and so its numbers. A client that has not connected yet in
    /// this process (or whose backend is its parent's, after a fork) has all zero.
    pub fn metrics(&self) -> Snapshot {
        match self.current_backend() {
            Some(b) => b
                .metrics
                .snapshot(&renewal_gauges(b.renewer.stats(&b.metrics))),
            None => Metrics::new(&self.shared.cfg.metric_names)
                .snapshot(&renewal_gauges(Stats::default())),
        }
    }

    /// This process's backend of the client, if it has one yet.
    fn current_backend(&self) -> Option<Arc<Owner>> {
        self.shared.backend.of(std::process::id()).read().clone()
    }

    pub(crate) fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// The client's backend for this process, built (or for a persistent client, found) on
    /// first use and again after a fork.
    pub(crate) fn backend(&self) -> Result<Arc<Owner>, Error> {
        let slot = self.shared.backend.of(std::process::id());
        if let Some(b) = slot.read().as_ref() {
            return Ok(b.clone());
        }
        let mut current = slot.write();
        if let Some(b) = current.as_ref() {
            return Ok(b.clone());
        }
        let (cfg, info) = (&self.shared.cfg, &self.shared.info);
        let fresh = if cfg.persistent {
            Owner::persistent(cfg, info)?
        } else {
            Owner::start(cfg, info)?
        };
        *current = Some(fresh.clone());
        Ok(fresh)
    }
}

/// Whether `store` offers leader elections (all but Redlock's masters).
fn offers_elections(store: &dyn crate::stores::LockStore, keys: &LockKeys) -> Result<(), Error> {
    store.check(Check::Kind {
        what: "a leader election",
        shown: &keys.shown(),
    })
}

/// The renewal machinery's gauges in the metrics.
fn renewal_gauges(s: Stats) -> [(&'static str, &'static str, i64); 3] {
    let n = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
    [
        (
            "redislock_renewal_threads",
            "Renewal threads alive (busy or parked).",
            n(s.renewal_threads),
        ),
        (
            "redislock_renewal_threads_idle",
            "Renewal threads parked, waiting for a lock.",
            n(s.idle_renewal_threads),
        ),
        (
            "redislock_renewed_locks",
            "Auto-renewed locks held now (counted against max_renewed_locks).",
            n(s.renewed_locks),
        ),
    ]
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &mask_url(&self.shared.cfg.url))
            .finish_non_exhaustive()
    }
}
