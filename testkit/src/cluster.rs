//! A Redis Cluster of three masters with a replica each, on loopback.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{PEER_SOURCE, RedisServer, Server, eventually};

/// The loopback address the first node of [`Cluster::start_with_peer_source`] connects to the
/// others from.
pub const ISOLATED_SOURCE: &str = "127.0.0.3";

/// How long a cluster may take to reach `cluster_state:ok` on every node.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);

/// Six nodes (`--cluster-enabled yes`, node timeout 2 s) joined by `redis-cli --cluster create
/// ... --cluster-replicas 1` into three masters with one replica each. Each node is a
/// [`RedisServer`]: kill, pause or restart any of them (a restarted node comes back empty and
/// without its cluster configuration's data, as with no persistence).
pub struct Cluster {
    nodes: Vec<RedisServer>,
}

impl Cluster {
    /// Starts the six nodes, creates the cluster and waits until every node reports
    /// `cluster_state:ok` and every master has a replica in sync.
    pub fn start() -> Cluster {
        Self::start_on(Server::Redis)
    }

    /// Like [`start`](Self::start), every node running `server`'s program (`redis-cli --cluster
    /// create` joins Valkey nodes too).
    pub fn start_on(server: Server) -> Cluster {
        Self::start_with(server, false)
    }

    /// A cluster whose nodes make their connections to each other (the bus, replication) from
    /// [`PEER_SOURCE`] (127.0.0.2), but the first node, a master, from [`ISOLATED_SOURCE`]
    /// (127.0.0.3): a partition can then cut that master from every other node, both ways,
    /// and leave it to its clients on 127.0.0.1 ([`Partition::cut_address`] and
    /// [`Partition::cut_port_from`]), a split brain. Every node still listens on and announces
    /// 127.0.0.1. Needs Redis 7 (`bind-source-addr`).
    ///
    /// [`Partition::cut_address`]: crate::Partition::cut_address
    /// [`Partition::cut_port_from`]: crate::Partition::cut_port_from
    pub fn start_with_peer_source() -> Cluster {
        let cluster = Self::start_with(Server::Redis, true);
        assert_eq!(
            crate::sentinel::role(&cluster.nodes[0]).as_deref(),
            Some("master"),
            "the first node was not made a master"
        );
        cluster
    }

    fn start_with(server: Server, peer_source: bool) -> Cluster {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|i| {
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ];
                if peer_source {
                    let source = if i == 0 { ISOLATED_SOURCE } else { PEER_SOURCE };
                    args.extend([
                        "--bind-source-addr",
                        source,
                        "--cluster-announce-ip",
                        "127.0.0.1",
                        // Protected mode takes only 127.0.0.1 for loopback.
                        "--protected-mode",
                        "no",
                        "--repl-diskless-sync-delay",
                        "0",
                    ]);
                }
                RedisServer::start_on(server, &args)
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(RedisServer::addr).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("cannot run redis-cli (Debian: apt-get install redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        let ok = eventually(FORM_TIMEOUT, || {
            cluster
                .nodes
                .iter()
                .all(|n| cluster_state(n).as_deref() == Some("ok"))
        });
        assert!(
            ok,
            "the cluster did not reach cluster_state:ok within {FORM_TIMEOUT:?}"
        );
        // A replica counts once it has synchronised with its master (a WAIT reaches it).
        let synced = eventually(FORM_TIMEOUT, || {
            let masters = cluster.masters();
            masters.len() == 3 && masters.iter().all(|m| online_replicas(m) >= 1)
        });
        assert!(
            synced,
            "the replicas did not synchronise within {FORM_TIMEOUT:?}"
        );
        cluster
    }

    /// `redis-cluster://127.0.0.1:P1,127.0.0.1:P2,...` (every node).
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self.nodes.iter().map(RedisServer::addr).collect();
        format!("redis-cluster://{}", addrs.join(","))
    }

    /// The six nodes, in start order (which node is a master is decided by the cluster).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The nodes that are masters now.
    pub fn masters(&self) -> Vec<&RedisServer> {
        self.nodes
            .iter()
            .filter(|n| crate::sentinel::role(n).as_deref() == Some("master"))
            .collect()
    }

    /// The master node serving `key`'s hash slot now (CLUSTER KEYSLOT and CLUSTER SLOTS).
    pub fn master_of(&self, key: &str) -> &RedisServer {
        let mut con = self
            .nodes
            .iter()
            .find_map(|n| n.try_conn().ok())
            .expect("no node answers");
        let port = slot_master_port(&mut con, key);
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("the cluster names a node that is not one of ours")
    }
}

/// The port of the master serving `key`'s hash slot, as the node on `con` sees it (CLUSTER
/// KEYSLOT and CLUSTER SLOTS).
pub(crate) fn slot_master_port(con: &mut redis::Connection, key: &str) -> u16 {
    try_slot_master_port(con, key).expect("slot not served, or no answer")
}

/// The port of the master serving `key`'s hash slot as the node on 127.0.0.1:`port` sees it;
/// `None` when that node does not answer within 200 ms or names no master for the slot (for a
/// watcher polling a cluster while a node is cut off).
pub fn slot_master_at(port: u16, key: &str) -> Option<u16> {
    let mut con = crate::conn_within(port, Duration::from_millis(200))?;
    try_slot_master_port(&mut con, key)
}

/// [`slot_master_port`], `None` when the node does not answer or serves no master for the slot.
fn try_slot_master_port(con: &mut redis::Connection, key: &str) -> Option<u16> {
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(con)
        .ok()?;
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER").arg("SLOTS").query(con).ok()?;
    // Each entry: [first, last, [host, port, id, ...], replicas...].
    slots.iter().find_map(|entry| {
        use redis::Value as V;
        let V::Array(fields) = entry else {
            return None;
        };
        match (fields.first(), fields.get(1), fields.get(2)) {
            (Some(V::Int(lo)), Some(V::Int(hi)), Some(V::Array(master)))
                if (*lo..=*hi).contains(&slot) =>
            {
                match master.get(1) {
                    Some(V::Int(p)) => Some(*p as u16),
                    _ => None,
                }
            }
            _ => None,
        }
    })
}

/// `cluster_state` from `CLUSTER INFO`.
fn cluster_state(node: &RedisServer) -> Option<String> {
    let mut con = node.try_conn().ok()?;
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).ok()?;
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix("cluster_state:"))
        .map(str::to_owned)
}

/// Replicas of `node` that are in sync with it (`INFO replication`, `state=online`).
fn online_replicas(node: &RedisServer) -> usize {
    let Ok(mut con) = node.try_conn() else {
        return 0;
    };
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut con)
        .unwrap_or_default();
    info.lines()
        .filter(|l| l.starts_with("slave") && l.contains("state=online"))
        .count()
}
