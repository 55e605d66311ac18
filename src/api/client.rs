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

use crate::base::config::Config;
use crate::base::error::Error;
use crate::base::inspect::LockInfo;
use crate::base::keys::LockKeys;
use crate::base::kind::LockKind;
use crate::base::metrics::{Metrics, Snapshot};
use crate::base::url::mask_url;
use crate::engine::backend::Owner;
use crate::engine::renewal::Stats;
use crate::stores::{Check, Deployment};

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
    /// The client's own settings.
    cfg: Config,
    /// Where the locks live, as the URL says: the servers' connection settings...
    info: redis::ConnectionInfo,
    /// ...and how the servers are deployed.
    deployment: Deployment,
    /// The backend this client uses in each process (for a persistent client, the process's
    /// shared one), built on first use. Each process has its own lock around it: a forked child
    /// never waits for one that a thread of its parent held at the fork.
    backend: PerProcess<RwLock<Option<Arc<Owner>>>>,
}

impl Client {
    pub(crate) fn from_config(
        cfg: Config,
        info: redis::ConnectionInfo,
        deployment: Deployment,
    ) -> Client {
        Client {
            shared: Arc::new(Shared {
                cfg,
                info,
                deployment,
                backend: PerProcess::new(),
            }),
        }
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
        let keys = self.keys(name.as_ref())?;
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

    /// The keys of the lock `name`, under the client's key prefix.
    pub(in crate::api) fn keys(&self, name: &[u8]) -> Result<LockKeys, Error> {
        LockKeys::new(&self.shared.cfg.key_prefix, name)
    }

    pub(crate) fn config(&self) -> &Config {
        &self.shared.cfg
    }

    /// How the servers that hold the locks are deployed.
    pub(crate) fn deployment(&self) -> &Deployment {
        &self.shared.deployment
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
        let Shared {
            cfg,
            info,
            deployment,
            ..
        } = &*self.shared;
        let fresh = if cfg.persistent {
            Owner::persistent(cfg, info, deployment)?
        } else {
            Owner::start(cfg, info, deployment)?
        };
        *current = Some(fresh.clone());
        Ok(fresh)
    }
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
