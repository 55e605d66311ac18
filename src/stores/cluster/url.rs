//! The URL of a Redis Cluster: `redis-cluster://` or `rediss-cluster://` and its nodes.

use crate::base::error::Error;
use crate::base::url::{MultiHost, after_scheme, host_list, invalid};

/// A Cluster URL's nodes, to ask for the cluster's slots first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterSpec {
    pub seeds: Vec<(String, u16)>,
}

/// Parses a `redis-cluster://` or `rediss-cluster://` URL: the plain URL of the nodes (at the
/// first listed address) and the nodes. `None` for other URLs.
pub(crate) fn parse_url(url: &str) -> Option<Result<(String, ClusterSpec), Error>> {
    let (tls, rest) = after_scheme(url, "redis-cluster", "rediss-cluster")?;
    let bad = |what: &str| Some(Err(invalid("Cluster", url, what)));
    if rest.contains('#') {
        return bad("a cluster URL has no #name (that is a Sentinel URL's master)");
    }
    let parts = MultiHost::split(rest, tls);
    let seeds = match host_list(parts.hosts, 6379, "a node") {
        Ok(seeds) => seeds,
        Err(what) => return bad(&what),
    };
    Some(Ok((parts.plain(&seeds[0]), ClusterSpec { seeds })))
}
