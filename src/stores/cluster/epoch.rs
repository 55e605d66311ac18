//! The configuration epoch of a cluster master, which orders the fencing tokens it grants.

use std::time::Duration;

use crate::base::connection::Connection;
use crate::base::pool::Connect;
use crate::stores::single::FixedServer;

/// A cluster master, as its pools connect to it: a server at a fixed address whose connections
/// carry its configuration epoch.
pub(crate) struct ClusterNode(pub FixedServer);

impl Connect for ClusterNode {
    fn connect(&self, timeout: Duration) -> redis::RedisResult<Connection> {
        self.0.connect(timeout).and_then(with_epoch)
    }

    /// A node is followed by the slot table, not by its pools: never a new generation.
    fn generation(&self) -> u64 {
        0
    }

    fn failed_over(&self, _e: &redis::RedisError) -> bool {
        false
    }
}

/// `conn`, a new connection to a cluster master, marked with the master's configuration epoch
/// (`CLUSTER INFO`'s `cluster_my_epoch`), which orders the fencing tokens it grants
/// (`base/grant.rs`, `fencing_token`): a replica promoted in a failover takes a configuration
/// epoch above every other, so its grants sort above those the old master made while cut off
/// from the cluster (its counter missed them). A node's epoch only grows, so the mark is never
/// above the master's. A server that refuses `CLUSTER INFO` (an ACL without it) leaves the mark
/// at 0 on every connection: tokens are then the counter alone.
fn with_epoch(mut conn: Connection) -> redis::RedisResult<Connection> {
    let info: redis::RedisResult<String> = redis::cmd("CLUSTER").arg("INFO").query(&mut conn);
    match info {
        Ok(info) => conn.set_epoch(my_epoch(&info)),
        Err(e)
            if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
                || e.code() == Some("NOPERM") =>
        {
            log::debug!("CLUSTER INFO refused ({e}): fencing tokens without the epoch");
        }
        Err(e) => return Err(e),
    }
    Ok(conn)
}

/// `cluster_my_epoch` of a `CLUSTER INFO` text (0 when absent).
fn my_epoch(info: &str) -> u64 {
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix("cluster_my_epoch:"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_epoch_is_read_from_cluster_info() {
        let info = "cluster_state:ok\r\ncluster_current_epoch:9\r\ncluster_my_epoch:7\r\n";
        assert_eq!(my_epoch(info), 7);
        assert_eq!(my_epoch("cluster_state:ok\r\n"), 0);
        assert_eq!(my_epoch("cluster_my_epoch:x\r\n"), 0);
    }
}
