//! Where locks live: how the connection pools of a backend reach the Redis server that holds
//! the locks, chosen from the URL when the client is built.
//!
//! - [`single`]: one server (`redis://`, `rediss://`, `unix://`).
//! - [`sentinel`]: the master of a Redis Sentinel group (`redis-sentinel://`,
//!   `rediss-sentinel://`), found through the sentinels and followed across failovers.
//! - [`cluster`]: the masters of a Redis Cluster (`redis-cluster://`, `rediss-cluster://`),
//!   each lock on the master that serves its hash slot; a pool of each kind per master, each
//!   reaching one address as a single server.
//!
//! Redlock (`redlock://`, `rediss-redlock://`) is several single servers, each with pools of its
//! own; what a majority of them means for a lock is in `quorum/`.
//!
//! Everything above the pools (acquire, release, renewal, waiting) is the same for every
//! topology: a topology only opens connections to the server that holds the locks now, and says
//! when an error means that server changed.

pub(crate) mod cluster;
pub(crate) mod sentinel;
pub(crate) mod single;

use std::time::Duration;

use crate::config::Config;
use crate::error::Error;

/// A parsed Sentinel URL: the sentinels to ask and the name of the master they monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelSpec {
    pub sentinels: Vec<(String, u16)>,
    pub master_name: String,
}

/// A parsed Cluster URL: the nodes to ask for the cluster's slots first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterSpec {
    pub seeds: Vec<(String, u16)>,
}

impl ClusterSpec {
    /// `host:port,host:port`, for messages.
    pub(crate) fn shown(&self) -> String {
        let hosts: Vec<String> = self.seeds.iter().map(|(h, p)| format!("{h}:{p}")).collect();
        hosts.join(",")
    }
}

/// A parsed Redlock URL: the independent masters, in the URL's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedlockSpec {
    pub masters: Vec<(String, u16)>,
}

impl RedlockSpec {
    /// `h1:p1,h2:p2,...`, for messages.
    pub(crate) fn hosts(&self) -> String {
        let hosts: Vec<String> = self
            .masters
            .iter()
            .map(|(h, p)| format!("{h}:{p}"))
            .collect();
        hosts.join(",")
    }
}

/// The template's address kind (plain or TLS, with its TLS settings) at another node's address:
/// a Sentinel group's master, a cluster's node, a Redlock master.
pub(crate) fn node_addr(
    template: &redis::ConnectionAddr,
    (host, port): &(String, u16),
) -> redis::ConnectionAddr {
    match template {
        redis::ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => redis::ConnectionAddr::TcpTls {
            host: host.clone(),
            port: *port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => redis::ConnectionAddr::Tcp(host.clone(), *port),
    }
}

/// The servers a backend's pools connect to. One per backend, behind an `Arc`: the size of a
/// variant does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Topology {
    Single(single::Single),
    Sentinel(sentinel::Sentinel),
}

impl Topology {
    /// The topology of a configuration; touches no network.
    pub(crate) fn new(cfg: &Config, info: &redis::ConnectionInfo) -> Result<Topology, Error> {
        Ok(match &cfg.sentinel {
            None => Topology::Single(single::Single::new(cfg, info)?),
            Some(spec) => Topology::Sentinel(sentinel::Sentinel::new(cfg, info, spec.clone())?),
        })
    }

    /// A connection to the server that holds the locks now, within `timeout`.
    pub(crate) fn connect(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        match self {
            Topology::Single(t) => t.connect(timeout),
            Topology::Sentinel(t) => t.connect(timeout),
        }
    }

    /// Which generation of the lock server new and idle connections must belong to: it moves on
    /// when the server that holds the locks changed (a failover), and idle connections of an
    /// older generation are closed instead of used. Always 0 for a single server.
    pub(crate) fn generation(&self) -> u64 {
        match self {
            Topology::Single(_) => 0,
            Topology::Sentinel(t) => t.generation(),
        }
    }

    /// Learns from a failed call: whether the error means that the server that holds the locks
    /// changed (a READONLY reply from a demoted master), so that the call should be repeated on
    /// a new connection. Connection errors also make a Sentinel topology ask the sentinels
    /// again on the next connect.
    pub(crate) fn failed_over(&self, e: &redis::RedisError) -> bool {
        match self {
            Topology::Single(_) => false,
            Topology::Sentinel(t) => t.failed_over(e),
        }
    }
}
