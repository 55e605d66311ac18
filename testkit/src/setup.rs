//! A set-up of any topology, held as one value: what the command-line program drives and what a
//! shared set-up's keeper holds.

use crate::{Cluster, RedisServer, RedlockMasters, SentinelGroup, Server};

/// The topologies a client can be built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topology {
    /// One server (`redis://`).
    Single,
    /// A Sentinel group: a master, two replicas, three sentinels (`redis-sentinel://`).
    Sentinel,
    /// A Cluster of three masters with a replica each (`redis-cluster://`).
    Cluster,
    /// Three independent masters (`redlock://`).
    Redlock,
}

impl Topology {
    /// Every topology, in this order.
    pub const ALL: [Topology; 4] = [
        Topology::Single,
        Topology::Sentinel,
        Topology::Cluster,
        Topology::Redlock,
    ];

    /// `single`, `sentinel`, `cluster` or `redlock`.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Single => "single",
            Topology::Sentinel => "sentinel",
            Topology::Cluster => "cluster",
            Topology::Redlock => "redlock",
        }
    }

    /// The topology of that [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Topology> {
        Topology::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// A running set-up of one topology.
pub enum Setup {
    Single(RedisServer),
    Sentinel(SentinelGroup),
    Cluster(Cluster),
    Redlock(RedlockMasters),
}

impl Setup {
    /// Starts a set-up of `topology` with the kit's defaults (Redlock: three masters) and
    /// waits until it is formed.
    pub fn start(topology: Topology) -> Setup {
        Self::start_on(topology, Server::Redis)
    }

    /// Like [`start`](Self::start), every process running `server`'s program.
    pub fn start_on(topology: Topology, server: Server) -> Setup {
        match topology {
            Topology::Single => Setup::Single(RedisServer::start_on(server, &[])),
            Topology::Sentinel => Setup::Sentinel(SentinelGroup::start_on(server)),
            Topology::Cluster => Setup::Cluster(Cluster::start_on(server)),
            Topology::Redlock => Setup::Redlock(RedlockMasters::start_on(server, 3)),
        }
    }

    pub fn topology(&self) -> Topology {
        match self {
            Setup::Single(_) => Topology::Single,
            Setup::Sentinel(_) => Topology::Sentinel,
            Setup::Cluster(_) => Topology::Cluster,
            Setup::Redlock(_) => Topology::Redlock,
        }
    }

    /// The URL a client is built from.
    pub fn url(&self) -> String {
        match self {
            Setup::Single(s) => s.url(),
            Setup::Sentinel(g) => g.url(),
            Setup::Cluster(c) => c.url(),
            Setup::Redlock(m) => m.url(),
        }
    }

    /// The data nodes: the server, the group's nodes, the cluster's nodes or the masters.
    pub fn nodes(&self) -> &[RedisServer] {
        match self {
            Setup::Single(s) => std::slice::from_ref(s),
            Setup::Sentinel(g) => g.nodes(),
            Setup::Cluster(c) => c.nodes(),
            Setup::Redlock(m) => m.masters(),
        }
    }

    /// The sentinels of a Sentinel group (none for the other topologies).
    pub fn sentinels(&self) -> &[RedisServer] {
        match self {
            Setup::Sentinel(g) => g.sentinels(),
            _ => &[],
        }
    }
}
