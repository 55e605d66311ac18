//! One Redis server (or the master of a Sentinel group, which `sentinel.rs` finds): a store whose
//! every lock lives on that server.

use std::time::Duration;

use crate::base::config::{Config, endpoint};
use crate::base::connection::{Connection, Endpoint};
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::pool::Connect;
use crate::stores::extend::{Extension, extend_pipeline};
use crate::stores::wait::{Queue, QueueSession, Session};
use crate::stores::{Call, LockStore, Node, NodeRef};

/// One server at a fixed address, reached through one endpoint (with the configured TLS roots):
/// what a single server's pools and each Cluster or Redlock master's connect to.
pub(crate) struct FixedServer {
    endpoint: Endpoint,
}

impl FixedServer {
    pub(crate) fn new(cfg: &Config, info: &redis::ConnectionInfo) -> Result<FixedServer, Error> {
        Ok(FixedServer {
            endpoint: endpoint(cfg, info)?,
        })
    }
}

/// A server at a fixed address: never another, so never a generation or a failover.
impl Connect for FixedServer {
    fn connect(&self, timeout: Duration) -> redis::RedisResult<Connection> {
        self.endpoint.connect(timeout)
    }

    fn generation(&self) -> u64 {
        0
    }

    fn failed_over(&self, _e: &redis::RedisError) -> bool {
        false
    }
}

/// One server as a store: its two pools (a Sentinel group's master's follow it across
/// failovers).
pub(crate) struct OneServer {
    pub cfg: Config,
    pub node: Node,
    /// Whether a Sentinel group's master serves it: its fencing tokens carry the failover
    /// epoch.
    pub failover_epochs: bool,
}

impl LockStore for OneServer {
    fn cfg(&self) -> &Config {
        &self.cfg
    }

    fn failover_epochs(&self) -> bool {
        self.failover_epochs
    }

    fn run_dyn(&self, _: &LockKeys, op: &mut Call<'_>) -> Result<(), Error> {
        self.node.main.run(None, op)
    }

    fn extend_many(&self, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
        let main = &self.node.main;
        match extend_pipeline(&self.cfg, main, locks.iter()) {
            Ok(replies) => replies
                .into_iter()
                .map(|r| r.map_err(|e| Error::from_redis(main.server(), &e)))
                .collect(),
            Err(e) => locks.iter().map(|_| Err(e.clone())).collect(),
        }
    }

    fn session<'a>(&'a self, q: &'a dyn Queue, lease: Duration) -> Box<dyn Session + 'a> {
        Box::new(QueueSession::new(self, q, lease))
    }

    fn waiter_node(&self, _: &LockKeys) -> Result<NodeRef<'_>, Error> {
        Ok(NodeRef::Fixed(&self.node))
    }
}
