//! The stores: where a client's locks live, each behind one trait, [`LockStore`].
//!
//! - [`single`]: one server (`redis://`, `rediss://`, `unix://`), or the master of a Redis
//!   Sentinel group (`redis-sentinel://`, `rediss-sentinel://`), found through the sentinels and
//!   followed across failovers ([`sentinel`]).
//! - [`cluster`]: the masters of a Redis Cluster (`redis-cluster://`, `rediss-cluster://`), each
//!   lock on the master that serves its hash slot; a pool of each kind per master.
//! - [`redlock`]: independent masters (`redlock://`, `rediss-redlock://`), each lock held by a
//!   majority of them.
//!
//! Each parses its own URL form ([`parse_url`] asks them in turn). A store routes; the scripts
//! are the kinds' (`engine/kinds/`). Everything above the stores (acquire, the wait loop,
//! renewal) is the same for every topology: it asks the store to run a kind's calls on the
//! server that holds the lock (one attempt, a release, an extend), for renewal's pipelines
//! (`extend.rs`) and for a waiter's rounds (`wait.rs`), and the store decides which servers and
//! connections they take. Redlock's masters hold the exclusive lock by majority
//! ([`Majority`]).

pub(crate) mod cluster;
pub(crate) mod deployment;
pub(crate) mod extend;
pub(crate) mod inspect;
pub(crate) mod pubsub;
pub(crate) mod redlock;
pub(crate) mod sentinel;
pub(crate) mod single;
pub(crate) mod wait;

use std::io;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::config::{Config, endpoint};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::inspect::LockInfo;
use crate::base::keys::LockKeys;
use crate::base::kind::LockKind;
use crate::base::metrics::Metrics;
use crate::base::pool::{ConnPool, Connect};
use crate::base::scripts;
use crate::base::token::Token;
use crate::base::url::{invalid, mask_url, scrub};
pub(crate) use crate::stores::deployment::Deployment;
use crate::stores::extend::Extension;
use crate::stores::wait::{Queue, Session, Step};

/// Parses a client's URL: a plain one (`redis://`, `rediss://`, `unix://`) or the URL of a
/// Sentinel group, a Cluster or Redlock's masters, each parsed by its store; the error never
/// repeats the URL's secrets. For a Sentinel or Cluster URL the connection info is the data
/// nodes' (credentials, database, TLS) at the first listed address, which is replaced by a node's
/// when connecting; for a Redlock URL it is the first master's.
pub(crate) fn parse_url(url: &str) -> Result<(redis::ConnectionInfo, Deployment), Error> {
    use redis::IntoConnectionInfo;
    let usage = "Redis URL must look like redis://[user:password@]host:port/db, \
                 redis-sentinel://[user:password@]host:port,host:port[/db]#master, \
                 redis-cluster://[user:password@]host:port,host:port or \
                 redlock://[user:password@]host:port,host:port,host:port[/db]";
    let (plain, deployment) = if let Some(parsed) = sentinel::parse_url(url) {
        let (plain, spec) = parsed?;
        (plain, Deployment::Sentinel(spec))
    } else if let Some(parsed) = cluster::parse_url(url) {
        let (plain, spec) = parsed?;
        (plain, Deployment::Cluster(spec))
    } else if let Some(parsed) = redlock::parse_url(url) {
        let (plain, spec) = parsed?;
        (plain, Deployment::Redlock(spec))
    } else {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(Error::invalid_argument(usage));
        }
        (url.to_owned(), Deployment::Single)
    };
    let info = plain.as_str().into_connection_info().map_err(|e| {
        let detail = scrub(&e.to_string(), &plain);
        Error::invalid_argument(format!("invalid Redis URL {}: {detail}", mask_url(&plain)))
    })?;
    if matches!(deployment, Deployment::Cluster(_)) && info.redis_settings().db() != 0 {
        return Err(invalid(
            "Cluster",
            &plain,
            "Redis Cluster has only database 0",
        ));
    }
    Ok((info, deployment))
}

/// Checks settings that a deployment cannot honour (Redlock: fencing, `min_replicas`).
pub(crate) fn check_config(cfg: &Config, deployment: &Deployment) -> Result<(), Error> {
    match deployment {
        Deployment::Redlock(_) => redlock::check_config(cfg),
        _ => Ok(()),
    }
}

/// A connection, within `timeout`, to another node of the deployment: `template`'s settings at
/// `addr` (a Sentinel group's master candidate, a cluster node asked for its slots).
pub(crate) fn connect_node(
    cfg: &Config,
    template: &redis::ConnectionInfo,
    addr: &(String, u16),
    timeout: Duration,
) -> redis::RedisResult<Connection> {
    let info = template.clone().set_addr(node_addr(template.addr(), addr));
    let endpoint = endpoint(cfg, &info).map_err(|e| {
        redis::RedisError::from(io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
    })?;
    endpoint.connect(timeout.max(Duration::from_millis(1)))
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

/// Where a client's locks live: one server (or a Sentinel group's master), a Redis Cluster, or
/// Redlock's independent masters. Every call to Redis about a lock goes through one, so only a
/// store picks a connection pool; the engine above asks it for what it needs, whatever the
/// topology. A store routes: what each kind's scripts say is the kind's (`engine/kinds/`). A
/// store that holds locks by majority says so ([`majority`](Self::majority)), and the exclusive
/// lock, the one kind it offers, asks it for its attempt, release, extend and holder.
pub(crate) trait LockStore: Send + Sync {
    /// The client's configuration (`min_replicas`, timeouts, the re-check interval).
    fn cfg(&self) -> &Config;

    /// Runs `op` on a lock-call connection to the server that holds the lock of `keys`, as
    /// `ConnPool::run` does: on a connection the server dropped, `op` runs again with
    /// `attempt` ≥ 1, so it must be safe to repeat. Through [`run`](Self::run), which returns
    /// `op`'s value.
    fn run_dyn(&self, keys: &LockKeys, op: &mut Call<'_>) -> Result<(), Error>;

    /// One attempt at a free lock: `attempt` (the kind's script, or the exclusive lock's `SET NX
    /// PX`) on the server that holds `keys`, repeated with `retry` on a connection the server
    /// dropped, its grant's lease counted from when it was sent. `Ok(None)`: held by another
    /// owner. `sent` is set when the attempt went out: one that failed afterwards may have been
    /// applied, so the caller gives the grant back.
    fn attempt(
        &self,
        keys: &LockKeys,
        lease: Duration,
        sent: &mut bool,
        attempt: &mut dyn FnMut(&mut Connection, bool) -> redis::RedisResult<Step>,
    ) -> Result<Option<Grant>, Error> {
        let mut sent_at = Instant::now();
        let mut epoch = 0;
        let step = run_on(self, keys, |c, n| {
            *sent = true;
            sent_at = Instant::now();
            epoch = c.epoch();
            attempt(c, n > 0)
        })?;
        Ok(step.into_grant(lease, sent_at, epoch).ok())
    }

    /// Redlock's masters: the exclusive lock held by a majority of them.
    fn majority(&self) -> Option<&dyn Majority> {
        None
    }

    /// Whether its fencing tokens carry the failover epoch of the master that granted them
    /// (a Sentinel group's, a Cluster's): a [`Fence`](crate::Fence) then shows it.
    fn failover_epochs(&self) -> bool {
        false
    }

    /// Whether its lock channels are sharded (a Cluster's: SPUBLISH and SSUBSCRIBE, from Redis
    /// 7 on; `pubsub.rs`).
    fn sharded_pubsub(&self) -> bool {
        false
    }

    /// A look at the lock of `keys` without holding it, with `kind`'s waiters (`inspect.rs`):
    /// reads only. Provided for the stores of one server per lock.
    fn inspect(&self, keys: &LockKeys, kind: LockKind) -> Result<LockInfo, Error> {
        inspect::on_one_server(self, keys, kind)
    }

    /// The EXTENDs of many grants (renewal), each its kind's: one pipeline per server. One
    /// outcome per grant, in order: `Ok(true)` extended, `Ok(false)` no longer ours.
    fn extend_many(&self, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>>;

    /// A waiter's session (`wait.rs`): the rounds of one wait, on this store.
    fn session<'a>(&'a self, q: &'a dyn Queue, lease: Duration) -> Box<dyn Session + 'a>;

    /// The server waiters of `keys`' lock block on: the one that holds the lock now.
    fn waiter_node(&self, keys: &LockKeys) -> Result<NodeRef<'_>, Error>;

    /// For a waiter whose call failed on `node`: whether the lock now lives on another server,
    /// or is being moved there, so that the waiter must go on at
    /// [`waiter_node`](Self::waiter_node) (a cluster's MOVED, ASK, TRYAGAIN or CLUSTERDOWN,
    /// after a pause of at most `limit`; a master that stopped answering and has a successor).
    fn waiter_follows(
        &self,
        _keys: &LockKeys,
        _node: &NodeRef<'_>,
        _e: &redis::RedisError,
        _limit: Duration,
    ) -> bool {
        false
    }

    /// For a waiter that found the server of `keys`' lock unreachable (`node`): a store that
    /// can look for the lock's new server does so now (a cluster reads its slot table again),
    /// so that the waiter's next round, through [`waiter_node`](Self::waiter_node), goes
    /// there. (A Sentinel group's pools ask the sentinels on their next connect.)
    fn server_unreachable(&self, _keys: &LockKeys, _node: &NodeRef<'_>) {}

    /// Whether this store can do `what` (before anything is sent).
    fn check(&self, _what: Check<'_>) -> Result<(), Error> {
        Ok(())
    }

    /// SIGNAL_CANCEL: pushes `mark` onto a blocked waiter's signal list (on the server it
    /// blocks on), which lives for `lifetime` if nobody pops it.
    fn signal_cancel(
        &self,
        keys: &LockKeys,
        signal: &[u8],
        mark: &[u8],
        lifetime: Duration,
    ) -> Result<(), Error> {
        run_on(self, keys, |c, _| {
            scripts::SIGNAL_CANCEL
                .key(signal)
                .arg(mark)
                .arg(lifetime.as_millis() as u64)
                .invoke::<i64>(c)
        })?;
        Ok(())
    }
}

/// A call on a connection, repeated with `attempt` ≥ 1 on another (see [`LockStore::run_dyn`]).
pub(crate) type Call<'a> = dyn FnMut(&mut Connection, u32) -> redis::RedisResult<()> + 'a;

/// What a store may not offer.
pub(crate) enum Check<'a> {
    /// A kind of lock other than the exclusive lock (`what` names it, `shown` the lock).
    Kind { what: &'a str, shown: &'a str },
    /// Fencing tokens.
    Fencing,
    /// One call on the keys of several locks at once (a set): one server must hold them all.
    OneServer {
        keys: &'a [LockKeys],
        shown: &'a str,
    },
}

/// The exclusive lock held by a majority of independent masters (Redlock, `redlock/`): each
/// operation on every master at once, counted by majority.
pub(crate) trait Majority {
    /// `SET NX PX` on every master. A refusal is an error that says what every master
    /// answered; a failed attempt clears its keys itself.
    fn try_acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
    ) -> Result<Option<Grant>, Error>;
    /// Frees the lock, or hands it to a waiter, where it holds `token`; whether a majority did.
    fn release(&self, keys: &LockKeys, token: &Token) -> Result<bool, Error>;
    /// Resets the lease where the lock holds `token`; whether a majority did.
    fn extend(&self, keys: &LockKeys, token: &Token, lease: Duration) -> Result<bool, Error>;
    /// The token a majority of the masters hold the lock with, if any.
    fn holder(&self, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error>;
}

/// [`LockStore::run_dyn`] on `store`, returning `op`'s value.
pub(crate) fn run_on<S: LockStore + ?Sized, T>(
    store: &S,
    keys: &LockKeys,
    mut op: impl FnMut(&mut Connection, u32) -> redis::RedisResult<T>,
) -> Result<T, Error> {
    let mut out = None;
    store.run_dyn(keys, &mut |c, attempt| {
        out = Some(op(c, attempt)?);
        Ok(())
    })?;
    out.ok_or_else(|| Error::internal("a call returned no reply"))
}

impl dyn LockStore + '_ {
    /// [`LockStore::run_dyn`], returning `op`'s value: how the kinds of lock run their
    /// scripts, on the server the store picks.
    pub(crate) fn run<T>(
        &self,
        keys: &LockKeys,
        op: impl FnMut(&mut Connection, u32) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        run_on(self, keys, op)
    }
}

/// The store of a configuration: pools for its servers, which connect lazily, counting into
/// the backend's `metrics`.
pub(crate) fn open(
    cfg: &Config,
    info: &redis::ConnectionInfo,
    deployment: &Deployment,
    metrics: &Arc<Metrics>,
) -> Result<Box<dyn LockStore>, Error> {
    Ok(match deployment {
        Deployment::Cluster(spec) => Box::new(cluster::Cluster::new(cfg, info, spec, metrics)),
        Deployment::Redlock(spec) => Box::new(redlock::Masters::new(cfg, info, spec, metrics)?),
        Deployment::Single | Deployment::Sentinel(_) => Box::new(single::OneServer {
            cfg: cfg.clone(),
            node: Node::new(cfg, metrics, server(cfg, info, deployment, metrics)?),
            failover_epochs: matches!(deployment, Deployment::Sentinel(_)),
        }),
    })
}

/// The server that holds a one-server store's locks: a Sentinel group's master, found and followed
/// through its sentinels, or a server at a fixed address. Touches no network.
fn server(
    cfg: &Config,
    info: &redis::ConnectionInfo,
    deployment: &Deployment,
    metrics: &Arc<Metrics>,
) -> Result<Arc<dyn Connect>, Error> {
    Ok(match deployment {
        Deployment::Sentinel(spec) => Arc::new(sentinel::Sentinel::new(
            cfg,
            info,
            spec.clone(),
            metrics.clone(),
        )?),
        _ => Arc::new(single::FixedServer::new(cfg, info)?),
    })
}

/// The value a cancel pushes onto a waiter's signal list (a grant is a number).
pub(crate) const CANCEL_MARK: &[u8] = b"cancel";

/// The connection pools of one server that holds locks.
pub(crate) struct Node {
    /// For acquire, release, extend and renewal.
    pub main: ConnPool,
    /// For waiters blocked in BLPOP, so that they never starve the others of connections.
    pub wait: ConnPool,
}

/// A node as an operation holds it: borrowed from the backend (one server: no counting, no
/// lock), or shared with a cluster's slot table, which may let go of it meanwhile (a
/// resharding, a failover).
pub(crate) enum NodeRef<'b> {
    Fixed(&'b Node),
    Shared(Arc<Node>),
}

impl Deref for NodeRef<'_> {
    type Target = Node;
    fn deref(&self) -> &Node {
        match self {
            NodeRef::Fixed(node) => node,
            NodeRef::Shared(node) => node,
        }
    }
}

impl Node {
    /// The two pools of a server, reached through `topology`, counting into `metrics`; they
    /// connect lazily.
    pub(crate) fn new(cfg: &Config, metrics: &Arc<Metrics>, topology: Arc<dyn Connect>) -> Node {
        Node {
            main: ConnPool::new(cfg, metrics, topology.clone(), cfg.pool_size),
            wait: ConnPool::new(cfg, metrics, topology, cfg.max_waiters),
        }
    }
}
