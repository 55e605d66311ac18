//! The client builder: every setting with its default, validated once in `build()`.

use std::time::Duration;

use crate::api::client::Client;
use crate::base::config::Config;
use crate::base::error::Error;
use crate::stores;

impl Client {
    /// A client with default settings for the given URL: `redis://[user:password@]host:port/db`,
    /// a Sentinel URL `redis-sentinel://[user:password@]h1:p1,h2:p2[/db]#master`, or a Redlock URL
    /// `redlock://[user:password@]h1:p1,h2:p2,h3:p3[/db]` (see `docs/topologies.md`).
    /// Connects lazily.
    pub fn open(url: &str) -> Result<Client, Error> {
        Client::builder(url).build()
    }

    /// A builder to configure a client; see [`ClientBuilder`] for every setting and default.
    pub fn builder(url: &str) -> ClientBuilder {
        ClientBuilder::new(url)
    }
}

/// Builds a [`Client`]. Every setter's documentation states its default.
///
/// ```no_run
/// use std::time::Duration;
/// let client = redislock::Client::builder("redis://127.0.0.1:6379/0")
///     .pool_size(32)
///     .lease(Duration::from_secs(10))
///     .key_prefix("shop:")
///     .fencing(true)
///     .build()?;
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct ClientBuilder {
    cfg: Config,
}

impl ClientBuilder {
    pub(crate) fn new(url: &str) -> ClientBuilder {
        ClientBuilder {
            cfg: Config::new(url),
        }
    }

    /// Connections for acquire, release, extend and renewal (default 16; with a Redis Cluster,
    /// for each master). Waiters use a pool of their own (see
    /// [`max_waiters`](Self::max_waiters)), so they never starve these.
    pub fn pool_size(mut self, n: u32) -> Self {
        self.cfg.pool_size = n;
        self
    }
    /// Threads of this process that may block waiting for locks at the same time, each on a
    /// connection of the waiter pool (default 128; with a Redis Cluster, for each master).
    /// Further waiters queue for a connection.
    pub fn max_waiters(mut self, n: u32) -> Self {
        self.cfg.max_waiters = n;
        self
    }
    /// TCP connect timeout (default 2 s).
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.cfg.connect_timeout = d;
        self
    }
    /// Socket read timeout for every command (default 2 s). A blocked waiter's BLPOP gets its
    /// block time added to it.
    pub fn read_timeout(mut self, d: Duration) -> Self {
        self.cfg.read_timeout = d;
        self
    }
    /// Socket write timeout (default 2 s).
    pub fn write_timeout(mut self, d: Duration) -> Self {
        self.cfg.write_timeout = d;
        self
    }
    /// The longest a call waits for a pooled connection, including connecting one (default 3 s).
    pub fn checkout_timeout(mut self, d: Duration) -> Self {
        self.cfg.checkout_timeout = d;
        self
    }
    /// How long a release or an extend keeps trying while the server that holds the lock
    /// cannot be reached, as during a Sentinel or Cluster failover (default 10 s; zero: no
    /// longer than its first try). It tries again with back-off, asking the sentinels or the
    /// cluster for the new master each time, and never past the lock's lease (after it the
    /// key is gone anyway). A release that still has no answer when the bound runs out
    /// returns its error and goes on trying on a thread of the library until the lease ends;
    /// so does a lock dropped without [`release`](crate::Lock::release), without blocking the
    /// thread that drops it. A release only ever deletes a key that holds its own token.
    pub fn release_timeout(mut self, d: Duration) -> Self {
        self.cfg.release_timeout = d;
        self
    }
    /// Default lease of a lock (default 30 s). With auto-renewal the key is extended every
    /// lease/3 while held; without it the lock simply expires after the lease.
    pub fn lease(mut self, d: Duration) -> Self {
        self.cfg.lease = d;
        self
    }
    /// Whether locks auto-renew by default (default true).
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.cfg.auto_renew = on;
        self
    }
    /// Whether locks get fencing tokens by default (default false). Each fenced grant of a name
    /// increments a counter kept next to the lock key and returns it. Refused with a Redlock URL
    /// (`build()` fails with `InvalidArgument`): counters on independent masters are not ordered.
    pub fn fencing(mut self, on: bool) -> Self {
        self.cfg.fencing = on;
        self
    }
    /// A prefix put in front of every lock name to form its key (default empty).
    pub fn key_prefix(mut self, prefix: impl AsRef<[u8]>) -> Self {
        self.cfg.key_prefix = prefix.as_ref().to_vec();
        self
    }
    /// How often a waiter re-checks the lock when no release wakes it (default 1 s), never
    /// later than the lock's remaining lifetime. This only matters when a holder vanishes or a
    /// foreign client releases with a plain DEL; a release by this library wakes the waiter.
    pub fn recheck_interval(mut self, d: Duration) -> Self {
        self.cfg.recheck_interval = d;
        self
    }
    /// Random fraction (0 to 1) taken off each re-check interval so waiters spread out
    /// (default 0.2).
    pub fn recheck_jitter(mut self, fraction: f64) -> Self {
        self.cfg.recheck_jitter = fraction;
        self
    }
    /// Upper bound on auto-renewed locks held at once through this client (default 4096); each
    /// has a renewal thread. A lock counts from its grant until its release returns (or it is
    /// found lost). An acquire beyond the bound fails with [`ErrorKind::LimitReached`] before
    /// touching Redis; a waiter, which holds no place while it waits, checks again when it is
    /// handed the lock and, if the bound is full by then, releases it and fails the same way.
    ///
    /// [`ErrorKind::LimitReached`]: crate::ErrorKind::LimitReached
    pub fn max_renewed_locks(mut self, n: usize) -> Self {
        self.cfg.max_renewed_locks = n;
        self
    }

    /// Whether this client shares one backend (connections, renewal threads) with every other
    /// persistent client of this process that has the same URL and connection settings
    /// (default false: the client has its own). A persistent backend lives until the process
    /// exits, so making a persistent client again (in every request of a PHP-FPM worker, say)
    /// costs no connect and starts no thread after the first; a private client's threads end,
    /// and its connections close, when the client and its last lock are dropped. Lock defaults
    /// and the key prefix stay each client's own. At most [`MAX_PERSISTENT_BACKENDS`] different
    /// settings per process.
    ///
    /// [`MAX_PERSISTENT_BACKENDS`]: crate::MAX_PERSISTENT_BACKENDS
    pub fn persistent(mut self, on: bool) -> Self {
        self.cfg.persistent = on;
        self
    }

    /// Lock names with metric series of their own (`redislock_name_*`, see `docs/metrics.md`):
    /// each entry is a name, or a prefix ending in `*` (`"jobs:*"`); a lock counts under the
    /// first entry that matches it. At most [`MAX_TRACKED_NAMES`] entries, so the number of
    /// series stays bounded; no other name gets series of its own. Persistent clients that
    /// share a backend share its series: the first client's list is the backend's.
    ///
    /// [`MAX_TRACKED_NAMES`]: crate::metrics::MAX_TRACKED_NAMES
    pub fn metric_names<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.cfg.metric_names = names.into_iter().map(Into::into).collect();
        self
    }

    /// Adds one name or prefix to [`metric_names`](Self::metric_names) (the C API's way).
    pub(crate) fn add_metric_name(mut self, name: &str) -> Self {
        self.cfg.metric_names.push(name.to_owned());
        self
    }

    /// Replicas that must acknowledge every lock write — acquire (with its fencing counter),
    /// handoff, extend, renewal — before it counts (default 0: none). Each such write is
    /// followed by `WAIT n timeout`; an acquire that fewer replicas acknowledge in time is
    /// released again and fails with a connection error that says how many did, and a renewal
    /// that fewer acknowledge is retried like an unreachable server. With a Sentinel group and
    /// `min_replicas(1)`, an acknowledged lock, and its fencing counter, survive the promotion
    /// of a replica; without it, a failover can lose a lock the old master had not replicated.
    /// In a Redis Cluster the WAIT goes to the lock's own master and counts that shard's
    /// replicas. Refused with a Redlock URL, where the majority of masters takes its place.
    pub fn min_replicas(mut self, n: u32) -> Self {
        self.cfg.min_replicas = n;
        self
    }
    /// How long a lock write waits for [`min_replicas`](Self::min_replicas) acknowledgements
    /// (default 500 ms; 1 ms up to, not including, the read timeout).
    pub fn replica_timeout(mut self, d: Duration) -> Self {
        self.cfg.replica_timeout = d;
        self
    }

    /// For `rediss://` URLs: trust these PEM root certificates (for example a private CA)
    /// instead of the system's (default: the system's). The server certificate is always
    /// verified, host name included. Needs the `tls` feature (on by default).
    pub fn tls_root_cert_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.cfg.tls_ca_pem = Some(pem.into());
        self
    }

    /// Validates the configuration and builds the client. Connects lazily: building never
    /// touches the network, so it succeeds while Redis is down.
    pub fn build(self) -> Result<Client, Error> {
        let mut cfg = self.cfg;
        let (info, deployment) = stores::parse_url(&cfg.url)?;
        cfg.server = deployment.server(&info);
        stores::check_config(&cfg, &deployment)?;
        cfg.check(&info)?;
        Ok(Client::from_config(cfg, info, deployment))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::url::hosts;
    use crate::stores::Deployment;

    #[test]
    fn passwords_are_masked_in_debug_output() {
        let b = ClientBuilder::new("redis://u:s3cret@127.0.0.1:1/0");
        assert!(!format!("{b:?}").contains("s3cret"));
        let c = b.build().unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn cluster_urls() {
        let (info, parsed) =
            stores::parse_url("redis-cluster://u:s3cret@10.0.0.1:7000,10.0.0.2").unwrap();
        let Deployment::Cluster(spec) = parsed else {
            panic!("not a cluster: {parsed:?}")
        };
        assert_eq!(
            spec.seeds,
            vec![("10.0.0.1".to_owned(), 7000), ("10.0.0.2".to_owned(), 6379)]
        );
        assert_eq!(info.redis_settings().password(), Some("s3cret"));
        assert_eq!(hosts(&spec.seeds), "10.0.0.1:7000,10.0.0.2:6379");
        let (info, parsed) = stores::parse_url("rediss-cluster://h:7000/").unwrap();
        assert!(matches!(parsed, Deployment::Cluster(_)));
        assert!(matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }));
        let c = ClientBuilder::new("redis-cluster://u:s3cret@h1:7000,h2:7001")
            .build()
            .unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        for bad in [
            "redis-cluster://h:7000/1",
            "redis-cluster://h:0",
            "redis-cluster://:7000",
            "redis-cluster://h:7000,",
            "redis-cluster://h:7000#name",
            "redis-cluster://u:s3cret@h:x",
        ] {
            let e = ClientBuilder::new(bad).build().unwrap_err();
            assert!(e.is_invalid_argument(), "{bad}: {e}");
            assert!(!e.to_string().contains("s3cret"), "{e}");
        }
    }

    #[test]
    fn bad_configuration_is_an_error() {
        let bad = |b: ClientBuilder| b.build().unwrap_err().is_invalid_argument();
        let b = || ClientBuilder::new("redis://127.0.0.1:1/");
        assert!(bad(ClientBuilder::new("http://127.0.0.1/")));
        assert!(bad(ClientBuilder::new("redis://127.0.0.1:notaport/")));
        assert!(bad(ClientBuilder::new("")));
        assert!(bad(b().pool_size(0)));
        assert!(bad(b().max_waiters(0)));
        assert!(bad(b().lease(Duration::ZERO)));
        assert!(bad(b().lease(Duration::from_millis(50))));
        assert!(
            b().lease(Duration::from_millis(50))
                .auto_renew(false)
                .build()
                .is_ok()
        );
        assert!(bad(b().lease(Duration::MAX)));
        assert!(bad(b().read_timeout(Duration::ZERO)));
        assert!(bad(b().recheck_jitter(1.5)));
        assert!(bad(b().recheck_jitter(f64::NAN)));
        assert!(b().build().is_ok());
    }
}
