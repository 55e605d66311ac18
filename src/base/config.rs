//! A client's configuration, as the builder (`api/builder.rs`) fills it in, and its checks: once
//! for the whole configuration when the client is built, and for each lock's lease and wait.

use std::fmt;
use std::time::Duration;

use crate::base::connection::Endpoint;
use crate::base::error::Error;
use crate::base::metrics;
use crate::base::url::mask_url;

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

/// Everything a client is configured with. Filled in by `ClientBuilder`.
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
    /// How long a release or an extend keeps trying while the server that holds the lock cannot
    /// be reached (a failover), on top of its first try; never past the lock's lease.
    pub release_timeout: Duration,
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
    /// Replicas that must acknowledge a lock write (WAIT) before it counts.
    pub min_replicas: u32,
    /// How long a lock write waits for those acknowledgements.
    pub replica_timeout: Duration,
    /// Lock names (or prefixes ending in `*`) with metric series of their own.
    pub metric_names: Vec<String>,
}

impl Config {
    /// The defaults, for `url` (the builder's, before its setters).
    pub(crate) fn new(url: &str) -> Config {
        Config {
            url: url.to_owned(),
            server: String::new(),
            pool_size: 16,
            max_waiters: 128,
            connect_timeout: Duration::from_secs(2),
            read_timeout: Duration::from_secs(2),
            write_timeout: Duration::from_secs(2),
            checkout_timeout: Duration::from_secs(3),
            release_timeout: Duration::from_secs(10),
            lease: Duration::from_secs(30),
            auto_renew: true,
            fencing: false,
            key_prefix: Vec::new(),
            recheck_interval: Duration::from_secs(1),
            recheck_jitter: 0.2,
            max_renewed_locks: 4096,
            tls_ca_pem: None,
            persistent: false,
            min_replicas: 0,
            replica_timeout: Duration::from_millis(500),
            metric_names: Vec::new(),
        }
    }

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
            && self.release_timeout == other.release_timeout
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
            .field("release_timeout", &self.release_timeout)
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

impl Config {
    /// Checks every setting once, when the client is built (the URL was parsed already).
    pub(crate) fn check(&self, info: &redis::ConnectionInfo) -> Result<(), Error> {
        let cfg = self;
        metrics::check_tracked(&cfg.metric_names)?;
        let positive = |what: &str, d: Duration| {
            if d < Duration::from_millis(1) || d > MAX_LEASE {
                Err(Error::invalid_argument(format!(
                    "{what} must be between 1 ms and 30 days, got {}",
                    ms(d)
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
        if cfg.release_timeout > MAX_LEASE {
            return Err(Error::invalid_argument(format!(
                "release_timeout must be at most 30 days, got {}",
                ms(cfg.release_timeout)
            )));
        }
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
                "replica_timeout must be at least 1 ms and less than read_timeout ({}), got {}",
                ms(cfg.read_timeout),
                ms(cfg.replica_timeout)
            )));
        }
        if cfg.max_renewed_locks > MAX_RENEWED_LOCKS {
            return Err(Error::invalid_argument(format!(
                "max_renewed_locks must be between 0 and {MAX_RENEWED_LOCKS}, got {}",
                cfg.max_renewed_locks
            )));
        }
        if cfg.key_prefix.len() > crate::base::keys::MAX_NAME_LEN {
            return Err(Error::invalid_argument(format!(
                "key_prefix must be at most {} bytes long, got {} bytes",
                crate::base::keys::MAX_NAME_LEN,
                cfg.key_prefix.len()
            )));
        }
        if cfg.tls_ca_pem.is_some() {
            // Parses the certificates now, so a bad PEM is reported by build().
            endpoint(cfg, info)?;
        }
        Ok(())
    }
}

/// Where a configuration's connections go: with the configured TLS root certificates, if any.
pub(crate) fn endpoint(cfg: &Config, info: &redis::ConnectionInfo) -> Result<Endpoint, Error> {
    // Without CLIENT SETINFO on connect: redis-rs reads each of its two replies with the whole
    // connect timeout, so a server that accepts connections and never answers would take twice
    // the timeout to fail. (Connections then show no library name in CLIENT LIST.)
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    // Without Nagle's delay (plain and TLS connections alike): a request larger than a TCP
    // segment (a script loaded, a long renewal pipeline) is not held back waiting for the
    // server's delayed ACK.
    let info = info
        .clone()
        .set_redis_settings(settings)
        .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
    let is_tls = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
    // The TLS client holds the transport alone: redis-rs then sends nothing on connect, and the
    // endpoint authenticates and selects the database itself, within its connect timeout, on
    // plain and TLS connections alike (`base/connection/endpoint.rs`).
    let transport = info
        .clone()
        .set_redis_settings(redis::RedisConnectionInfo::default().set_skip_set_lib_name());
    let tls = match &cfg.tls_ca_pem {
        None if !is_tls => None,
        None => {
            Some(redis::Client::open(transport).map_err(|e| Error::from_redis(&cfg.server, &e))?)
        }
        #[cfg(feature = "tls")]
        Some(pem) => {
            if !is_tls {
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
            Some(
                redis::Client::build_with_tls(transport, certs)
                    .map_err(|e| Error::invalid_argument(format!("TLS root certificate: {e}")))?,
            )
        }
        #[cfg(not(feature = "tls"))]
        Some(_) => {
            return Err(Error::invalid_argument(
                "TLS needs redislock's `tls` feature",
            ));
        }
    };
    Ok(Endpoint::new(info, tls))
}

/// A duration in messages, in milliseconds as the ranges are stated (and as the C and PHP
/// callers give them): `0 ms`, `99 ms`, `0.5 ms`, `2592000001 ms`.
pub(crate) fn ms(d: Duration) -> String {
    let whole = d.as_millis();
    match d.subsec_nanos() % 1_000_000 {
        0 => format!("{whole} ms"),
        part => {
            let frac = format!("{part:06}");
            format!("{whole}.{} ms", frac.trim_end_matches('0'))
        }
    }
}

/// Checks a lease for a lock with or without auto-renewal. The message states the whole
/// accepted range (the PHP package states the same one for a negative lease).
pub(crate) fn check_lease(lease: Duration, auto_renew: bool) -> Result<(), Error> {
    if lease < Duration::from_millis(1) || lease > MAX_LEASE {
        return Err(Error::invalid_argument(format!(
            "lease must be between 1 ms and 30 days (at least 100 ms if auto-renewed), got \
             {}",
            ms(lease)
        )));
    }
    if auto_renew && lease < MIN_RENEWED_LEASE {
        return Err(Error::invalid_argument(format!(
            "an auto-renewed lease must be between 100 ms and 30 days, got {}",
            ms(lease)
        )));
    }
    Ok(())
}

/// Checks an exclusive lock's `at_least` and `at_most` beside its lease: each between 1 ms and
/// 30 days, `at_least` no longer than `at_most`, and without auto-renewal no longer than the
/// lease (nothing would keep the key that long).
pub(crate) fn check_bounds(
    lease: Duration,
    auto_renew: bool,
    at_least: Option<Duration>,
    at_most: Option<Duration>,
) -> Result<(), Error> {
    for (what, d) in [("at_least", at_least), ("at_most", at_most)] {
        if let Some(d) = d
            && (d < Duration::from_millis(1) || d > MAX_LEASE)
        {
            return Err(Error::invalid_argument(format!(
                "{what} must be between 1 ms and 30 days, got {}",
                ms(d)
            )));
        }
    }
    if let (Some(least), Some(most)) = (at_least, at_most)
        && least > most
    {
        return Err(Error::invalid_argument(format!(
            "at_least ({}) must not be longer than at_most ({})",
            ms(least),
            ms(most)
        )));
    }
    if let Some(least) = at_least
        && !auto_renew
        && least > lease
    {
        return Err(Error::invalid_argument(format!(
            "at_least ({}) is longer than the lease ({}) of a lock that is not \
             auto-renewed: nothing would keep it held that long (lengthen the lease or turn \
             auto-renewal on)",
            ms(least),
            ms(lease)
        )));
    }
    Ok(())
}

/// Checks the wait bound of an acquire.
pub(crate) fn check_wait(wait: Duration) -> Result<(), Error> {
    if wait > MAX_WAIT {
        return Err(Error::invalid_argument(format!(
            "wait bound must be between 0 ms and 30 days, got {}",
            ms(wait)
        )));
    }
    Ok(())
}
