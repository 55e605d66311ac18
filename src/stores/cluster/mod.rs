//! A Redis Cluster: each lock lives on the master that serves its hash slot. Every key of a lock
//! shares the lock key's slot (`keys.rs`), so each lock call goes to one master, as with a
//! single server.
//!
//! The slot table (which master serves which of the 16384 slots) is read with `CLUSTER SLOTS`
//! from the first node that answers (the node a redirection named, the masters of the table,
//! then the URL's nodes) and kept. It is read again:
//! - on `MOVED` (the slot now lives on another master: a resharding, or a failover the table
//!   missed): the slot is pointed at the named master at once, the call repeated there, and the
//!   whole table read again;
//! - when a call to a master fails for want of an answer (it may have died and its replica been
//!   promoted): the call is repeated once if the table read again names another master;
//! - when the table knows no master for a slot.
//!
//! `ASK` (the slot is being migrated and the keys are not on the old master any more) sends
//! `ASKING` and the call to the named node, without changing the table. `TRYAGAIN` (a lock's
//! keys are split between the two masters of a migration, or a multi-key call on the new one
//! before the migration ends) and `CLUSTERDOWN` (a master failed and its replica is not promoted
//! yet) are waited out for a while before they are reported as a connection error.
//!
//! Each master gets a [`Node`] (a pool for lock calls and one for waiters, both reaching that one
//! address as a single server), made when a table first names it; its pools connect on first
//! use. A master the table no longer names is dropped, with its idle connections, once no call
//! holds it any more.
//!
//! The files: `slots.rs`, the slot table and its readings; `redirect.rs`, what an error reply
//! asks for and the one decision of how a failed call goes on, which [`Cluster::run`] (lock
//! calls), waiters and `extend.rs` share; `extend.rs`, the renewal of many locks, one pipeline
//! to each master; `epoch.rs`, a master's configuration epoch for fencing tokens; `url.rs`, the
//! `redis-cluster://` URL.

mod epoch;
mod extend;
mod redirect;
mod slots;
mod url;

pub(crate) use url::ClusterSpec;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::sync::{Mutex, RwLock};

use super::node_addr;
use super::single::FixedServer;
use crate::base::config::Config;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::metrics::Metrics;
use crate::stores::Node;
use crate::stores::extend::Extension;
use crate::stores::wait::{Queue, QueueSession, Session};
use crate::stores::{Call, Check, LockStore, NodeRef};

pub(crate) use redirect::Redirect;
pub(crate) use url::parse_url;

use epoch::ClusterNode;
use extend::extend_many_in_cluster;
use slots::{Refreshed, Table};

/// A node's address.
type Addr = (String, u16);

/// A Redis Cluster's masters and which slots each serves.
pub(crate) struct Cluster {
    spec: ClusterSpec,
    /// For the nodes: credentials, TLS; its address is replaced by each node's.
    template: redis::ConnectionInfo,
    cfg: Config,
    /// The backend's metrics, which the nodes' pools and the redirections count into.
    metrics: Arc<Metrics>,
    table: RwLock<Table>,
    /// Held while the table is read, so that callers that need a new table at the same time
    /// wait for one read instead of each making their own.
    refreshed: Mutex<Refreshed>,
}

impl Cluster {
    /// The cluster of a `redis-cluster://` URL; touches no network.
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        spec: &ClusterSpec,
        metrics: &Arc<Metrics>,
    ) -> Cluster {
        Cluster {
            spec: spec.clone(),
            template: info.clone(),
            cfg: cfg.clone(),
            metrics: metrics.clone(),
            table: RwLock::new(Table::default()),
            refreshed: Mutex::new(Refreshed::default()),
        }
    }

    /// How long a call waits out TRYAGAIN and CLUSTERDOWN before it reports them: as long as a
    /// reply may take.
    pub(crate) fn patience(&self) -> Duration {
        self.cfg.read_timeout
    }

    /// The node at `addr`: a master of the table, or a node of its own (an ASK target the table
    /// does not name yet).
    fn node_at(&self, addr: &Addr) -> Result<Arc<Node>, Error> {
        if let Some(node) = self.table.read().master_at(addr) {
            return Ok(node.clone());
        }
        self.make_node(addr)
    }

    fn make_node(&self, addr: &Addr) -> Result<Arc<Node>, Error> {
        let mut cfg = self.cfg.clone();
        cfg.server = format!("cluster node {}:{}", addr.0, addr.1);
        let info = self
            .template
            .clone()
            .set_addr(node_addr(self.template.addr(), addr));
        let node = ClusterNode(FixedServer::new(&cfg, &info)?);
        Ok(Arc::new(Node::new(&cfg, &self.metrics, Arc::new(node))))
    }
}

/// A Redis Cluster as a store: each lock on the master of its slot, redirections followed.
impl LockStore for Cluster {
    fn cfg(&self) -> &Config {
        &self.cfg
    }

    fn failover_epochs(&self) -> bool {
        true
    }

    fn sharded_pubsub(&self) -> bool {
        true
    }

    fn run_dyn(&self, keys: &LockKeys, op: &mut Call<'_>) -> Result<(), Error> {
        self.run(keys.slot(), self.patience(), op)
    }

    fn extend_many(&self, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
        extend_many_in_cluster(self, locks)
    }

    fn session<'a>(&'a self, q: &'a dyn Queue, lease: Duration) -> Box<dyn Session + 'a> {
        Box::new(QueueSession::new(self, q, lease))
    }

    fn waiter_node(&self, keys: &LockKeys) -> Result<NodeRef<'_>, Error> {
        self.node_for(keys.slot()).map(NodeRef::Shared)
    }

    fn waiter_follows(
        &self,
        keys: &LockKeys,
        node: &NodeRef<'_>,
        e: &redis::RedisError,
        limit: Duration,
    ) -> bool {
        match node {
            NodeRef::Shared(node) => Cluster::waiter_follows(self, keys.slot(), node, e, limit),
            NodeRef::Fixed(_) => false,
        }
    }

    fn server_unreachable(&self, _keys: &LockKeys, node: &NodeRef<'_>) {
        if let NodeRef::Shared(node) = node {
            let _ = self.refresh(Instant::now(), None, Some(node));
        }
    }

    /// A script runs on one master: the names of a set must share one hash slot.
    fn check(&self, what: Check<'_>) -> Result<(), Error> {
        let Check::OneServer { keys, shown } = what else {
            return Ok(());
        };
        let Some(first) = keys.first() else {
            return Ok(());
        };
        if keys.iter().all(|k| k.slot() == first.slot()) {
            return Ok(());
        }
        Err(Error::invalid_argument(format!(
            "the set of locks {shown} spans several Redis Cluster hash slots: on a cluster all \
             names of a set must share one slot; give them one {{hash tag}}, as in \
             {{order:7}}:stock and {{order:7}}:payment"
        )))
    }
}
