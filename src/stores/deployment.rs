//! How the servers that hold the locks are deployed, as the client's URL says ([`Deployment`]):
//! each topology's settings are its store's (`SentinelSpec` in `sentinel.rs`, `ClusterSpec` in
//! `cluster/url.rs`, `RedlockSpec` in `redlock/mod.rs`), and the client keeps them beside its own
//! settings (`Config`), which say nothing of where the locks live.

use crate::base::url::hosts;
use crate::stores::cluster::ClusterSpec;
use crate::stores::redlock::RedlockSpec;
use crate::stores::sentinel::SentinelSpec;

/// How the servers that hold the locks are deployed, as the client's URL says; each store
/// parses its own URL form (`stores/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Deployment {
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

impl Deployment {
    /// The servers, for messages: `host:port/db`, or what the URL lists (never a password).
    pub(crate) fn server(&self, info: &redis::ConnectionInfo) -> String {
        let db = info.redis_settings().db();
        match self {
            Deployment::Single => format!("{}/{db}", info.addr()),
            Deployment::Cluster(spec) => format!("cluster {}", hosts(&spec.seeds)),
            Deployment::Redlock(spec) => format!("redlock masters {}/{db}", hosts(&spec.masters)),
            Deployment::Sentinel(spec) => format!(
                "master {:?} of sentinels {}/{db}",
                spec.master_name,
                hosts(&spec.sentinels)
            ),
        }
    }
}
