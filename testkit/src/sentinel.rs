//! A Sentinel group: one master, two replicas and three sentinels, all on loopback.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::{RedisServer, Server, eventually};

/// The name the sentinels monitor the master under.
pub const MASTER_NAME: &str = "mymaster";
/// The source address of the connections between the nodes and sentinels of a group started
/// with [`SentinelGroup::start_with_peer_source`].
pub const PEER_SOURCE: &str = "127.0.0.2";
/// How long a group may take to form (replicas synced, sentinels aware of each other).
const FORM_TIMEOUT: Duration = Duration::from_secs(20);

/// One master, two replicas and three sentinels (quorum 2), with a fast failover: the master
/// is judged down after 1 s, a failover may take 3 s. Each node and sentinel is a
/// [`RedisServer`]: kill, pause or restart any of them.
pub struct SentinelGroup {
    /// The data nodes: the initial master first, then its two replicas.
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
}

impl SentinelGroup {
    /// Starts the group and waits until it is formed: both replicas in sync and every sentinel
    /// aware of the master, both replicas and the two other sentinels.
    pub fn start() -> SentinelGroup {
        Self::start_on(Server::Redis)
    }

    /// Like [`start`](Self::start), every node and sentinel running `server`'s program.
    pub fn start_on(server: Server) -> SentinelGroup {
        Self::start_with(server, None)
    }

    /// Like [`start`](Self::start), with every connection that a node or a sentinel opens to
    /// another (replication, monitoring, hellos) made from [`PEER_SOURCE`] (127.0.0.2), while
    /// clients connect from 127.0.0.1: a partition can then cut a master from its replicas and
    /// sentinels and leave it to its clients ([`Partition::cut_port_from`]). Every node and
    /// sentinel still listens on and announces 127.0.0.1. Needs Redis 7 (`bind-source-addr`).
    ///
    /// [`Partition::cut_port_from`]: crate::Partition::cut_port_from
    pub fn start_with_peer_source() -> SentinelGroup {
        Self::start_with(Server::Redis, Some(PEER_SOURCE))
    }

    fn start_with(server: Server, peer_source: Option<&str>) -> SentinelGroup {
        let source: Vec<&str> = match peer_source {
            Some(addr) => vec![
                "--bind-source-addr",
                addr,
                "--replica-announce-ip",
                "127.0.0.1",
                // Protected mode takes only 127.0.0.1 for loopback; the nodes still listen on
                // 127.0.0.1 alone.
                "--protected-mode",
                "no",
                // A promoted replica's replicas sync at once, not after 5 s.
                "--repl-diskless-sync-delay",
                "0",
            ],
            None => vec![],
        };
        let master = RedisServer::start_on(server, &source);
        let port = master.port().to_string();
        let mut nodes = vec![master];
        for _ in 0..2 {
            let mut args = vec!["--replicaof", "127.0.0.1", &port];
            args.extend(&source);
            nodes.push(RedisServer::start_on(server, &args));
        }
        let source_conf = match peer_source {
            Some(addr) => format!(
                "bind-source-addr {addr}\nprotected-mode no\nsentinel announce-ip 127.0.0.1\n"
            ),
            None => String::new(),
        };
        let conf = format!(
            "{source_conf}sentinel resolve-hostnames no\n\
             sentinel monitor {MASTER_NAME} 127.0.0.1 {port} 2\n\
             sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
             sentinel failover-timeout {MASTER_NAME} 3000\n\
             sentinel parallel-syncs {MASTER_NAME} 2"
        );
        let sentinels: Vec<RedisServer> = (0..3)
            .map(|_| RedisServer::start_sentinel_on(server, &conf))
            .collect();
        let group = SentinelGroup { nodes, sentinels };
        let formed = eventually(FORM_TIMEOUT, || {
            group.sentinels.iter().all(|s| {
                sentinel_master(s).is_some_and(|m| {
                    m.get("num-slaves").map(String::as_str) == Some("2")
                        && m.get("num-other-sentinels").map(String::as_str) == Some("2")
                })
            }) && group.synced_replicas(&group.nodes[0]) == 2
        });
        assert!(
            formed,
            "the Sentinel group did not form within {FORM_TIMEOUT:?}\n{}",
            group.nodes[0].log_tail()
        );
        group
    }

    /// `redis-sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/#mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(RedisServer::addr).collect();
        format!("redis-sentinel://{}/#{MASTER_NAME}", hosts.join(","))
    }

    /// The data nodes: the initial master first, then the two initial replicas.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The three sentinels.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The port of the master as the first sentinel that answers reports it.
    pub fn master_port(&self) -> Option<u16> {
        master_port_of(self.sentinels.iter().map(RedisServer::try_conn))
    }

    /// The data node that is the master now (as the sentinels report it).
    pub fn master(&self) -> &RedisServer {
        let port = self.master_port().expect("no sentinel answers");
        self.nodes
            .iter()
            .find(|n| n.port() == port)
            .expect("the sentinels name a master that is not one of the group's nodes")
    }

    /// Waits until the sentinels report a master other than the one on `old_port` and that
    /// node answers as a master; returns its port and how long it took from the call.
    pub fn wait_for_failover(&self, old_port: u16, timeout: Duration) -> Option<(u16, Duration)> {
        let start = Instant::now();
        let mut found = None;
        eventually(timeout, || {
            let Some(port) = self.master_port().filter(|&p| p != old_port) else {
                return false;
            };
            let node = self.nodes.iter().find(|n| n.port() == port);
            if node.is_some_and(|n| role(n).as_deref() == Some("master")) {
                found = Some((port, start.elapsed()));
                return true;
            }
            false
        });
        found
    }

    /// Replicas of `master` whose link is up.
    fn synced_replicas(&self, master: &RedisServer) -> usize {
        let Ok(mut con) = master.try_conn() else {
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
}

/// The port of the master as the first of these sentinel connections that answers reports it.
pub(crate) fn master_port_of(
    sentinels: impl IntoIterator<Item = redis::RedisResult<redis::Connection>>,
) -> Option<u16> {
    sentinels.into_iter().find_map(|con| {
        let mut con = con.ok()?;
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(MASTER_NAME)
            .query(&mut con)
            .ok()?;
        addr?.1.parse().ok()
    })
}

/// `ROLE`'s first element: "master", "slave" or "sentinel".
pub(crate) fn role(server: &RedisServer) -> Option<String> {
    let mut con = server.try_conn().ok()?;
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut con).ok()?;
    match role.first()? {
        redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        redis::Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// `SENTINEL MASTER mymaster` as field → value.
fn sentinel_master(sentinel: &RedisServer) -> Option<HashMap<String, String>> {
    let mut con = sentinel.try_conn().ok()?;
    redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(MASTER_NAME)
        .query(&mut con)
        .ok()
}
