//! Client configuration: a builder with documented defaults, validated once in `build()`.

use std::fmt;
use std::time::Duration;

use crate::client::Client;
use crate::error::Error;
use crate::topology::{ClusterSpec, RedlockSpec, SentinelSpec};

/// The longest lease accepted (30 days): anything longer is almost surely a unit mistake.
pub const MAX_LEASE: Duration = Duration::from_secs(30 * 24 * 3600);
/// The shortest lease an auto-renewed lock accepts: renewal runs every lease/3 and needs at
/// least a few round trips of slack.
pub const MIN_RENEWED_LEASE: Duration = Duration::from_millis(100);
/// The longest wait bound accepted by an acquire (30 days).
pub const MAX_WAIT: Duration = MAX_LEASE;
/// The largest `pool_size` and `max_waiters`.
const MAX_POOL_SIZE: u32 = 10_000;
/// The largest `max_renewed_locks`.
const MAX_RENEWED_LOCKS: usize = 1_000_000;

/// Everything a [`Client`] is configured with. Built by [`ClientBuilder`].
#[derive(Clone)]
pub(crate) struct Config {
    pub url: String,
    /// `host:port/db` of the server, for messages (never the password).
    pub server: String,
    pub pool_size: u32,
    pub max_waiters: u32,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub write_timeout: Duration,
    pub checkout_timeout: Duration,
    pub lease: Duration,
    pub auto_renew: bool,
    pub fencing: bool,
    pub key_prefix: Vec<u8>,
    pub recheck_interval: Duration,
    pub recheck_jitter: f64,
    pub max_renewed_locks: usize,
    /// PEM root certificate(s) trusted for `rediss://` instead of the system's.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Whether the client shares the process's backend for its server and connection settings.
    pub persistent: bool,
    /// For a `redis-sentinel://` URL: the sentinels and the master's name.
    pub sentinel: Option<SentinelSpec>,
    /// For a `redis-cluster://` URL: the nodes to learn the cluster's slots from.
    pub cluster: Option<ClusterSpec>,
    /// For a `redlock://` URL: the independent masters a lock needs a majority of.
    pub redlock: Option<RedlockSpec>,
    /// Replicas that must acknowledge a lock write (WAIT) before it counts.
    pub min_replicas: u32,
    /// How long a lock write waits for those acknowledgements.
    pub replica_timeout: Duration,
}

impl Config {
    /// Whether a backend built for `self` serves a client configured with `other` exactly as
    /// one of its own would: same server, credentials, TLS roots and connection settings. (Lock
    /// defaults and the key prefix belong to each client, not to its backend.)
    pub(crate) fn same_backend(&self, other: &Config) -> bool {
        self.url == other.url
            && self.pool_size == other.pool_size
            && self.max_waiters == other.max_waiters
            && self.connect_timeout == other.connect_timeout
            && self.read_timeout == other.read_timeout
            && self.write_timeout == other.write_timeout
            && self.checkout_timeout == other.checkout_timeout
            && self.recheck_interval == other.recheck_interval
            && self.recheck_jitter == other.recheck_jitter
            && self.max_renewed_locks == other.max_renewed_locks
            && self.tls_ca_pem == other.tls_ca_pem
            && self.min_replicas == other.min_replicas
            && self.replica_timeout == other.replica_timeout
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("url", &mask_url(&self.url))
            .field("pool_size", &self.pool_size)
            .field("max_waiters", &self.max_waiters)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("checkout_timeout", &self.checkout_timeout)
            .field("lease", &self.lease)
            .field("auto_renew", &self.auto_renew)
            .field("fencing", &self.fencing)
            .field("key_prefix", &String::from_utf8_lossy(&self.key_prefix))
            .field("recheck_interval", &self.recheck_interval)
            .field("recheck_jitter", &self.recheck_jitter)
            .field("max_renewed_locks", &self.max_renewed_locks)
            .field("persistent", &self.persistent)
            .field("min_replicas", &self.min_replicas)
            .field("replica_timeout", &self.replica_timeout)
            .field(
                "tls_ca_pem",
                &self
                    .tls_ca_pem
                    .as_ref()
                    .map(|p| format!("{} bytes", p.len())),
            )
            .finish()
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
            cfg: Config {
                url: url.to_owned(),
                server: String::new(),
                pool_size: 16,
                max_waiters: 128,
                connect_timeout: Duration::from_secs(2),
                read_timeout: Duration::from_secs(2),
                write_timeout: Duration::from_secs(2),
                checkout_timeout: Duration::from_secs(3),
                lease: Duration::from_secs(30),
                auto_renew: true,
                fencing: false,
                key_prefix: Vec::new(),
                recheck_interval: Duration::from_secs(1),
                recheck_jitter: 0.2,
                max_renewed_locks: 4096,
                tls_ca_pem: None,
                persistent: false,
                sentinel: None,
                cluster: None,
                redlock: None,
                min_replicas: 0,
                replica_timeout: Duration::from_millis(500),
            },
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
        let (info, topology) = parse_url(&cfg.url)?;
        let db = info.redis_settings().db();
        cfg.server = match &topology {
            Parsed::Single => format!("{}/{db}", info.addr()),
            Parsed::Cluster(spec) => format!("cluster {}", spec.shown()),
            Parsed::Redlock(spec) => format!("redlock masters {}/{db}", spec.hosts()),
            Parsed::Sentinel(spec) => {
                let hosts: Vec<String> = spec
                    .sentinels
                    .iter()
                    .map(|(h, p)| format!("{h}:{p}"))
                    .collect();
                format!(
                    "master {:?} of sentinels {}/{db}",
                    spec.master_name,
                    hosts.join(",")
                )
            }
        };
        match topology {
            Parsed::Single => {}
            Parsed::Sentinel(spec) => cfg.sentinel = Some(spec),
            Parsed::Cluster(spec) => cfg.cluster = Some(spec),
            Parsed::Redlock(spec) => {
                crate::quorum::check_config(&cfg)?;
                cfg.redlock = Some(spec);
            }
        }
        let positive = |what: &str, d: Duration| {
            if d < Duration::from_millis(1) || d > MAX_LEASE {
                Err(Error::invalid_argument(format!(
                    "{what} must be between 1 ms and 30 days, got {d:?}"
                )))
            } else {
                Ok(())
            }
        };
        positive("connect_timeout", cfg.connect_timeout)?;
        positive("read_timeout", cfg.read_timeout)?;
        positive("write_timeout", cfg.write_timeout)?;
        positive("checkout_timeout", cfg.checkout_timeout)?;
        positive("recheck_interval", cfg.recheck_interval)?;
        check_lease(cfg.lease, cfg.auto_renew)?;
        if !(1..=MAX_POOL_SIZE).contains(&cfg.pool_size) {
            return Err(Error::invalid_argument(format!(
                "pool_size must be between 1 and {MAX_POOL_SIZE}, got {}",
                cfg.pool_size
            )));
        }
        if !(1..=MAX_POOL_SIZE).contains(&cfg.max_waiters) {
            return Err(Error::invalid_argument(format!(
                "max_waiters must be between 1 and {MAX_POOL_SIZE}, got {}",
                cfg.max_waiters
            )));
        }
        if !(0.0..=1.0).contains(&cfg.recheck_jitter) {
            return Err(Error::invalid_argument(format!(
                "recheck_jitter must be between 0 and 1, got {}",
                cfg.recheck_jitter
            )));
        }
        if cfg.min_replicas > 100 {
            return Err(Error::invalid_argument(format!(
                "min_replicas must be between 0 and 100, got {}",
                cfg.min_replicas
            )));
        }
        let replica_timeout_ok = cfg.replica_timeout >= Duration::from_millis(1)
            && (cfg.min_replicas == 0 || cfg.replica_timeout < cfg.read_timeout);
        if !replica_timeout_ok {
            return Err(Error::invalid_argument(format!(
                "replica_timeout must be at least 1 ms and less than read_timeout ({:?}), got {:?}",
                cfg.read_timeout, cfg.replica_timeout
            )));
        }
        if cfg.max_renewed_locks > MAX_RENEWED_LOCKS {
            return Err(Error::invalid_argument(format!(
                "max_renewed_locks must be between 0 and {MAX_RENEWED_LOCKS}, got {}",
                cfg.max_renewed_locks
            )));
        }
        if cfg.key_prefix.len() > crate::keys::MAX_NAME_LEN {
            return Err(Error::invalid_argument(format!(
                "key_prefix must be at most {} bytes long, got {} bytes",
                crate::keys::MAX_NAME_LEN,
                cfg.key_prefix.len()
            )));
        }
        if cfg.tls_ca_pem.is_some() {
            // Parses the certificates now, so a bad PEM is reported by build().
            redis_client(&cfg, &info)?;
        }
        Ok(Client::from_config(cfg, info))
    }
}

/// The redis-rs client for a configuration: with the configured TLS root certificates, if any.
pub(crate) fn redis_client(
    cfg: &Config,
    info: &redis::ConnectionInfo,
) -> Result<redis::Client, Error> {
    match &cfg.tls_ca_pem {
        None => redis::Client::open(info.clone()).map_err(|e| Error::from_redis(&cfg.server, &e)),
        #[cfg(feature = "tls")]
        Some(pem) => {
            if !matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
                return Err(Error::invalid_argument(
                    "tls_root_cert_pem needs a rediss:// URL",
                ));
            }
            if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                return Err(Error::invalid_argument(
                    "tls_root_cert_pem holds no PEM certificate",
                ));
            }
            let certs = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.clone()),
            };
            redis::Client::build_with_tls(info.clone(), certs)
                .map_err(|e| Error::invalid_argument(format!("TLS root certificate: {e}")))
        }
        #[cfg(not(feature = "tls"))]
        Some(_) => Err(Error::invalid_argument(
            "TLS needs redislock's `tls` feature",
        )),
    }
}

/// Checks a lease for a lock with or without auto-renewal. The message states the whole
/// accepted range (the PHP package states the same one for a negative lease).
pub(crate) fn check_lease(lease: Duration, auto_renew: bool) -> Result<(), Error> {
    if lease < Duration::from_millis(1) || lease > MAX_LEASE {
        return Err(Error::invalid_argument(format!(
            "lease must be between 1 ms and 30 days (at least 100 ms if auto-renewed), got \
             {lease:?}"
        )));
    }
    if auto_renew && lease < MIN_RENEWED_LEASE {
        return Err(Error::invalid_argument(format!(
            "an auto-renewed lease must be between 100 ms and 30 days, got {lease:?}"
        )));
    }
    Ok(())
}

/// Checks the wait bound of an acquire.
pub(crate) fn check_wait(wait: Duration) -> Result<(), Error> {
    if wait > MAX_WAIT {
        return Err(Error::invalid_argument(format!(
            "wait bound must be between 0 ms and 30 days, got {wait:?}"
        )));
    }
    Ok(())
}

/// What a URL names besides the connection info of its data nodes.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// One server: the connection info is its own.
    Single,
    /// A Sentinel group: the connection info is the data nodes' at the first sentinel's address.
    Sentinel(SentinelSpec),
    /// A Redis Cluster: the connection info is the nodes' at the first listed address.
    Cluster(ClusterSpec),
    /// Independent masters for Redlock: the connection info is the first master's, and the
    /// others' differ from it only in their address.
    Redlock(RedlockSpec),
}

/// Parses a `redis://` (or `rediss://`, `unix://`) URL, a Sentinel URL
/// `redis-sentinel://[user:password@]host1:port1,host2:port2[/db]#master` (`rediss-sentinel://`
/// for TLS to the data nodes), a Cluster URL `redis-cluster://[user:password@]host1:port1,
/// host2:port2[/]` (`rediss-cluster://` for TLS) or a Redlock URL
/// `redlock://[user:password@]h1:p1,h2:p2,h3:p3[/db]` (`rediss-redlock://` for TLS); the error
/// never repeats the URL's secrets. For a Sentinel or Cluster URL the connection info is the data
/// nodes' (credentials, database, TLS) at the first listed address, which is replaced by a node's
/// when connecting; for a Redlock URL it is the first master's.
pub(crate) fn parse_url(url: &str) -> Result<(redis::ConnectionInfo, Parsed), Error> {
    use redis::IntoConnectionInfo;
    let usage = "Redis URL must look like redis://[user:password@]host:port/db, \
                 redis-sentinel://[user:password@]host:port,host:port[/db]#master, \
                 redis-cluster://[user:password@]host:port,host:port or \
                 redlock://[user:password@]host:port,host:port,host:port[/db]";
    let (url, parsed) = if let Some(parsed) = sentinel_url(url) {
        let (plain, spec) = parsed?;
        (plain, Parsed::Sentinel(spec))
    } else if let Some(parsed) = cluster_url(url) {
        let (plain, spec) = parsed?;
        (plain, Parsed::Cluster(spec))
    } else if let Some(parsed) = redlock_url(url) {
        let (plain, spec) = parsed?;
        (plain, Parsed::Redlock(spec))
    } else {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(Error::invalid_argument(usage));
        }
        (url.to_owned(), Parsed::Single)
    };
    let info = url.as_str().into_connection_info().map_err(|e| {
        let detail = scrub(&e.to_string(), &url);
        Error::invalid_argument(format!("invalid Redis URL {}: {detail}", mask_url(&url)))
    })?;
    if matches!(parsed, Parsed::Cluster(_)) && info.redis_settings().db() != 0 {
        return Err(Error::invalid_argument(format!(
            "invalid Cluster URL {}: Redis Cluster has only database 0",
            mask_url(&url)
        )));
    }
    Ok((info, parsed))
}

/// The `host:port` list of a Sentinel or Cluster URL's authority, each port `default_port`
/// when left out; `Err` says what is wrong.
fn host_list(hosts: &str, default_port: u16, what: &str) -> Result<Vec<(String, u16)>, String> {
    let mut list = Vec::new();
    for host in hosts.split(',') {
        let (h, p) = match host.rsplit_once(':') {
            Some((h, p)) => match p.parse::<u16>() {
                Ok(p) if p > 0 => (h, p),
                _ => return Err(format!("{what}'s port is not a number from 1 to 65535")),
            },
            None => (host, default_port),
        };
        if h.is_empty() {
            return Err(format!("{what}'s host is empty"));
        }
        list.push((h.to_owned(), p));
    }
    Ok(list)
}

/// For a `redis-cluster://` or `rediss-cluster://` URL: the plain URL of the nodes (at the first
/// listed address) and the Cluster part. `None` for other URLs.
fn cluster_url(url: &str) -> Option<Result<(String, ClusterSpec), Error>> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis-cluster://") {
        ("redis", rest)
    } else if let Some(rest) = url.strip_prefix("rediss-cluster://") {
        ("rediss", rest)
    } else {
        return None;
    };
    let bad = |what: &str| {
        Some(Err(Error::invalid_argument(format!(
            "invalid Cluster URL {}: {what}",
            mask_url(url)
        ))))
    };
    if rest.contains('#') {
        return bad("a cluster URL has no #name (that is a Sentinel URL's master)");
    }
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let seeds = match host_list(hosts, 6379, "a node") {
        Ok(seeds) => seeds,
        Err(what) => return bad(&what),
    };
    let (first_host, first_port) = seeds[0].clone();
    let plain = format!("{scheme}://{userinfo}{first_host}:{first_port}{path}");
    Some(Ok((plain, ClusterSpec { seeds })))
}

/// For a `redis-sentinel://` or `rediss-sentinel://` URL: the plain URL of the data nodes (at
/// the first sentinel's address) and the Sentinel part. `None` for other URLs.
fn sentinel_url(url: &str) -> Option<Result<(String, SentinelSpec), Error>> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis-sentinel://") {
        ("redis", rest)
    } else if let Some(rest) = url.strip_prefix("rediss-sentinel://") {
        ("rediss", rest)
    } else {
        return None;
    };
    let bad = |what: &str| {
        Some(Err(Error::invalid_argument(format!(
            "invalid Sentinel URL {}: {what}",
            mask_url(url)
        ))))
    };
    let Some((rest, master_name)) = rest.rsplit_once('#') else {
        return bad("the master's name is missing (…#mymaster)");
    };
    if master_name.is_empty() {
        return bad("the master's name is empty");
    }
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let sentinels = match host_list(hosts, 26379, "a sentinel") {
        Ok(sentinels) => sentinels,
        Err(what) => return bad(&what),
    };
    let (first_host, first_port) = sentinels[0].clone();
    let plain = format!("{scheme}://{userinfo}{first_host}:{first_port}{path}");
    Some(Ok((
        plain,
        SentinelSpec {
            sentinels,
            master_name: master_name.to_owned(),
        },
    )))
}

/// For a `redlock://` or `rediss-redlock://` URL: the plain URL of the first master and the
/// masters. An odd number of at least three distinct masters is required: with an even number a
/// majority buys no more fault tolerance than with one master fewer, and a master named twice
/// would count twice towards the majority. `None` for other URLs.
fn redlock_url(url: &str) -> Option<Result<(String, RedlockSpec), Error>> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redlock://") {
        ("redis", rest)
    } else if let Some(rest) = url.strip_prefix("rediss-redlock://") {
        ("rediss", rest)
    } else {
        return None;
    };
    let bad = |what: String| {
        Some(Err(Error::invalid_argument(format!(
            "invalid Redlock URL {}: {what}",
            mask_url(url)
        ))))
    };
    if rest.contains('#') {
        return bad("a fragment (#...) has no meaning here".into());
    }
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => (&authority[..=at], &authority[at + 1..]),
        None => ("", authority),
    };
    let mut masters: Vec<(String, u16)> = Vec::new();
    for host in hosts.split(',') {
        let addr = host
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok().filter(|p| *p > 0)?)))
            .filter(|(h, _)| !h.is_empty());
        let Some((h, p)) = addr else {
            return bad(format!(
                "{host:?} is not host:port (every master needs its host and a port from 1 to \
                 65535)"
            ));
        };
        let addr = (h.to_owned(), p);
        if masters.contains(&addr) {
            return bad(format!(
                "the master {}:{} is named twice (it would count twice towards the majority)",
                addr.0, addr.1
            ));
        }
        masters.push(addr);
    }
    if masters.len() < 3 || masters.len().is_multiple_of(2) {
        return bad(format!(
            "Redlock needs an odd number of at least 3 independent masters, got {}",
            masters.len()
        ));
    }
    let (first_host, first_port) = masters[0].clone();
    let plain = format!("{scheme}://{userinfo}{first_host}:{first_port}{path}");
    Some(Ok((plain, RedlockSpec { masters })))
}

/// The byte ranges of a URL that hold secrets: the password of its user info (everything after
/// the first `:` up to the last `@` of the authority, so an unencoded `@` in a password is still
/// covered) and the values of `pass` / `password` query parameters (unix socket URLs).
fn secret_ranges(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let Some(scheme_end) = url.find("://") else {
        return ranges;
    };
    let start = scheme_end + 3;
    let authority_len = url[start..]
        .find(['/', '?', '#'])
        .unwrap_or(url.len() - start);
    let authority = &url[start..start + authority_len];
    if let Some(at) = authority.rfind('@')
        && let Some(colon) = authority[..at].find(':')
        && colon + 1 < at
    {
        ranges.push(start + colon + 1..start + at);
    }
    if let Some(q) = url.find('?') {
        let mut pos = q + 1;
        for param in url[q + 1..].split(['&', '#']) {
            if let Some((name, value)) = param.split_once('=')
                && (name == "pass" || name == "password")
                && !value.is_empty()
            {
                let value_start = pos + name.len() + 1;
                ranges.push(value_start..value_start + value.len());
            }
            pos += param.len() + 1;
        }
    }
    ranges
}

/// The URL with its secrets replaced by `***`, for Debug output and messages.
pub(crate) fn mask_url(url: &str) -> String {
    let mut out = url.to_owned();
    let mut ranges = secret_ranges(url);
    ranges.sort_by_key(|r| std::cmp::Reverse(r.start));
    for r in ranges {
        out.replace_range(r, "***");
    }
    out
}

/// `text` with every secret of `url` in it replaced by `***`.
fn scrub(text: &str, url: &str) -> String {
    secret_ranges(url)
        .into_iter()
        .fold(text.to_owned(), |t, r| t.replace(&url[r], "***"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(mask_url("redis://u:s3cret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(mask_url("redis://:s3cret@h:1"), "redis://:***@h:1");
        assert_eq!(mask_url("redis://h:1"), "redis://h:1");
        assert_eq!(mask_url("redis://u:a@b@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(
            mask_url("unix:///s.sock?db=1&pass=pw&x=1"),
            "unix:///s.sock?db=1&pass=***&x=1"
        );
        assert_eq!(
            mask_url("redis+unix:///s?password=pw"),
            "redis+unix:///s?password=***"
        );
        assert_eq!(mask_url("redis://user@h:1"), "redis://user@h:1");
        let b = ClientBuilder::new("redis://u:s3cret@127.0.0.1:1/0");
        assert!(!format!("{b:?}").contains("s3cret"));
        let c = b.build().unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn cluster_urls() {
        let (info, parsed) = parse_url("redis-cluster://u:s3cret@10.0.0.1:7000,10.0.0.2").unwrap();
        let Parsed::Cluster(spec) = parsed else {
            panic!("not a cluster: {parsed:?}")
        };
        assert_eq!(
            spec.seeds,
            vec![("10.0.0.1".to_owned(), 7000), ("10.0.0.2".to_owned(), 6379)]
        );
        assert_eq!(info.redis_settings().password(), Some("s3cret"));
        assert_eq!(spec.shown(), "10.0.0.1:7000,10.0.0.2:6379");
        let (info, parsed) = parse_url("rediss-cluster://h:7000/").unwrap();
        assert!(matches!(parsed, Parsed::Cluster(_)));
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
