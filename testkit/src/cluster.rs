//! A Redis Cluster of three masters with a replica each, on loopback.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{RedisServer, eventually};

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
    /// `cluster_state:ok`.
    pub fn start() -> Cluster {
        let nodes: Vec<RedisServer> = (0..6)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
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
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con)
            .expect("CLUSTER KEYSLOT failed");
        let slots: Vec<(i64, i64, Vec<redis::Value>)> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query(&mut con)
            .expect("CLUSTER SLOTS failed");
        let (_, _, master) = slots
            .into_iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
            .expect("slot not served");
        let port = match master.get(1) {
            Some(redis::Value::Int(p)) => *p as u16,
            other => panic!("unexpected CLUSTER SLOTS entry {other:?}"),
        };
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("the cluster names a node that is not one of ours")
    }
}

/// `cluster_state` from `CLUSTER INFO`.
fn cluster_state(node: &RedisServer) -> Option<String> {
    let mut con = node.try_conn().ok()?;
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).ok()?;
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix("cluster_state:"))
        .map(str::to_owned)
}
