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

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::sync::{Mutex, RwLock};

use super::single::Single;
use super::{Topology, connect_node, node_addr};
use crate::base::config::{ClusterSpec, Config, hosts};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::url::{MultiHost, after_scheme, host_list, invalid};
use crate::stores::Node;
use crate::stores::extend::{Extension, extend_pipeline, send_extends};
use crate::stores::wait::{Queue, QueueSession, Session};
use crate::stores::{Call, Check, LockStore, NodeRef};

/// Hash slots of a Redis Cluster.
const SLOTS: usize = 16384;
/// A slot that no master of the table serves.
const UNSERVED: u16 = u16::MAX;
/// Redirections (MOVED, ASK) one call follows before it gives up: a table that keeps changing
/// under it means a resharding in progress; the next call starts from the new table.
const MAX_REDIRECTS: u32 = 5;
/// The longest one node may take to answer `CLUSTER SLOTS` during a refresh: a paused node must
/// not take the whole refresh's time.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);
/// Refreshes come no closer together than this: a failing master makes every call on its slots
/// ask for one, and a burst of them needs only the first.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_millis(100);
/// The first and the longest pause before a call that got TRYAGAIN or CLUSTERDOWN is repeated.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// A node's address.
type Addr = (String, u16);
/// Slots `first..=last` served by the master at an address.
type SlotRange = (u16, u16, Addr);

/// A Redis Cluster's masters and which slots each serves.
pub(crate) struct Cluster {
    spec: ClusterSpec,
    /// For the nodes: credentials, TLS; its address is replaced by each node's.
    template: redis::ConnectionInfo,
    cfg: Config,
    table: RwLock<Table>,
    /// Held while the table is read, so that callers that need a new table at the same time
    /// wait for one read instead of each making their own.
    refreshed: Mutex<Refreshed>,
}

/// The last reading of the table.
#[derive(Default)]
struct Refreshed {
    /// When it ended (None: never tried).
    at: Option<Instant>,
    /// Why it failed, if it did: told to callers that come before the next reading.
    failure: Option<Error>,
}

/// The slot table: for each slot, the index of its master in `masters`.
#[derive(Default)]
struct Table {
    /// Empty until first read.
    slots: Vec<u16>,
    masters: Vec<Master>,
}

struct Master {
    addr: Addr,
    node: Arc<Node>,
}

impl Table {
    fn node(&self, slot: u16) -> Option<&Arc<Node>> {
        let i = *self.slots.get(usize::from(slot))?;
        self.masters.get(usize::from(i)).map(|m| &m.node)
    }

    fn position(&self, addr: &Addr) -> Option<usize> {
        self.masters.iter().position(|m| &m.addr == addr)
    }
}

/// What an error reply asks of a cluster client.
pub(crate) enum Redirect {
    /// `MOVED slot host:port`: the slot lives there now.
    Moved(Addr),
    /// `ASK slot host:port`: this call goes there, preceded by `ASKING`.
    Ask(Addr),
    /// `TRYAGAIN` or `CLUSTERDOWN`: the slot is not served at the moment; repeat shortly.
    Busy,
}

impl Redirect {
    /// The redirection an error reply asks for, if any.
    pub(crate) fn of(e: &redis::RedisError) -> Option<Redirect> {
        use redis::ServerErrorKind as S;
        let redis::ErrorKind::Server(kind) = e.kind() else {
            return None;
        };
        match kind {
            S::Moved | S::Ask => {
                let (addr, _slot) = e.redirect_node()?;
                let (host, port) = addr.rsplit_once(':')?;
                let addr = (host.to_owned(), port.parse().ok()?);
                if addr.0.is_empty() {
                    // The node does not know the address of the slot's master ("?" or empty
                    // in some set-ups): the table, read again, will.
                    return Some(Redirect::Busy);
                }
                Some(if kind == S::Moved {
                    Redirect::Moved(addr)
                } else {
                    Redirect::Ask(addr)
                })
            }
            S::TryAgain | S::ClusterDown => Some(Redirect::Busy),
            _ => None,
        }
    }
}

impl Cluster {
    /// The cluster of a `redis-cluster://` URL; touches no network.
    pub(crate) fn new(cfg: &Config, info: &redis::ConnectionInfo, spec: &ClusterSpec) -> Cluster {
        Cluster {
            spec: spec.clone(),
            template: info.clone(),
            cfg: cfg.clone(),
            table: RwLock::new(Table::default()),
            refreshed: Mutex::new(Refreshed::default()),
        }
    }

    /// How long a call waits out TRYAGAIN and CLUSTERDOWN before it reports them: as long as a
    /// reply may take.
    pub(crate) fn patience(&self) -> Duration {
        self.cfg.read_timeout
    }

    /// The master that serves `slot`, reading the table first if it knows none.
    pub(crate) fn node_for(&self, slot: u16) -> Result<Arc<Node>, Error> {
        if let Some(node) = self.table.read().node(slot) {
            return Ok(node.clone());
        }
        self.refresh(Instant::now(), None, None)?;
        self.table.read().node(slot).cloned().ok_or_else(|| {
            Error::connection(
                &self.cfg.server,
                format!(
                    "no master serves hash slot {slot} (is the cluster still forming, or down?)"
                ),
                false,
            )
        })
    }

    /// The node at `addr`: a master of the table, or a node of its own (an ASK target the table
    /// does not name yet).
    fn node_at(&self, addr: &Addr) -> Result<Arc<Node>, Error> {
        {
            let t = self.table.read();
            if let Some(i) = t.position(addr) {
                return Ok(t.masters[i].node.clone());
            }
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
        let topology = Topology::ClusterNode(Single::new(&cfg, &info)?);
        Ok(Arc::new(Node::new(&cfg, Arc::new(topology))))
    }

    /// A MOVED reply: `slot` lives on `addr` now. The table says so at once, and is read again
    /// (a slot rarely moves alone).
    pub(crate) fn moved(&self, slot: u16, addr: &Addr) -> Result<(), Error> {
        let asked = Instant::now();
        {
            let mut t = self.table.write();
            let i = match t.position(addr) {
                Some(i) => i,
                None => {
                    let node = self.make_node(addr)?;
                    t.masters.push(Master {
                        addr: addr.clone(),
                        node,
                    });
                    t.masters.len() - 1
                }
            };
            if t.slots.is_empty() {
                t.slots = vec![UNSERVED; SLOTS];
            }
            t.slots[usize::from(slot)] = i as u16;
        }
        log::info!(
            "cluster hash slot {slot} moved to {}:{}: following it",
            addr.0,
            addr.1
        );
        // Best effort: the slot itself is known now.
        let _ = self.refresh(asked, Some(addr), None);
        Ok(())
    }

    /// Reads the slot table again, unless it was read since `asked` or very recently. Asks
    /// `prefer` first, then the masters of the table other than `avoid`, then the URL's nodes.
    pub(crate) fn refresh(
        &self,
        asked: Instant,
        prefer: Option<&Addr>,
        avoid: Option<&Arc<Node>>,
    ) -> Result<(), Error> {
        let budget = self.cfg.connect_timeout;
        let Some(mut last) = self.refreshed.try_lock_for(budget) else {
            // Another call has been reading the table for the whole budget: go on with the
            // table as it is.
            return Ok(());
        };
        if let Some(at) = last.at
            && (at >= asked || at.elapsed() < MIN_REFRESH_INTERVAL)
        {
            return last.failure.clone().map_or(Ok(()), Err);
        }
        let mut candidates: Vec<Addr> = prefer.into_iter().cloned().collect();
        {
            let t = self.table.read();
            for m in &t.masters {
                if !avoid.is_some_and(|a| Arc::ptr_eq(a, &m.node)) {
                    candidates.push(m.addr.clone());
                }
            }
        }
        candidates.extend(self.spec.seeds.iter().cloned());
        let mut seen = Vec::with_capacity(candidates.len());
        candidates.retain(|a| {
            let new = !seen.contains(a);
            seen.push(a.clone());
            new
        });
        let deadline = Instant::now() + budget;
        let mut failures = Vec::new();
        let result = loop {
            let Some(addr) = candidates.first().cloned() else {
                break Err(failures.join("; "));
            };
            candidates.remove(0);
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                failures.push("out of time".to_owned());
                break Err(failures.join("; "));
            }
            match self.ask_slots(&addr, left.min(ASK_TIMEOUT)) {
                Ok(ranges) if !ranges.is_empty() => {
                    break self.install(ranges).map_err(|e| e.to_string());
                }
                Ok(_) => failures.push(format!("{}:{} serves no slots yet", addr.0, addr.1)),
                Err(e) => failures.push(format!("{}:{}: {e}", addr.0, addr.1)),
            }
        };
        let result = result.map_err(|detail| {
            Error::connection(
                &self.cfg.server,
                format!("no node told the cluster's slots ({detail})"),
                false,
            )
        });
        last.at = Some(Instant::now());
        last.failure = result.as_ref().err().cloned();
        result
    }

    /// One node's `CLUSTER SLOTS`: (first slot, last slot, master address) ranges.
    fn ask_slots(&self, addr: &Addr, timeout: Duration) -> redis::RedisResult<Vec<SlotRange>> {
        let timeout = timeout.max(Duration::from_millis(1));
        let mut con = connect_node(&self.cfg, &self.template, addr, timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        let reply: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut con)?;
        Ok(parse_slots(reply, addr))
    }

    /// Makes `ranges` the table, keeping the nodes (and their pools) of masters it names again.
    fn install(&self, ranges: Vec<SlotRange>) -> Result<(), Error> {
        let mut t = self.table.write();
        let mut masters: Vec<Master> = Vec::new();
        let mut slots = vec![UNSERVED; SLOTS];
        for (first, last, addr) in ranges {
            let i = match masters.iter().position(|m| m.addr == addr) {
                Some(i) => i,
                None => {
                    let node = match t.position(&addr) {
                        Some(old) => t.masters[old].node.clone(),
                        None => self.make_node(&addr)?,
                    };
                    masters.push(Master { addr, node });
                    masters.len() - 1
                }
            };
            for slot in first..=last {
                slots[usize::from(slot)] = i as u16;
            }
        }
        let before: Vec<&Addr> = t.masters.iter().map(|m| &m.addr).collect();
        let after: Vec<&Addr> = masters.iter().map(|m| &m.addr).collect();
        if !t.slots.is_empty() && before != after {
            let shown: Vec<String> = after.iter().map(|(h, p)| format!("{h}:{p}")).collect();
            log::info!(
                "cluster {}: masters now {}",
                hosts(&self.spec.seeds),
                shown.join(",")
            );
        }
        *t = Table { slots, masters };
        Ok(())
    }

    /// Runs `op` on a connection to the master that serves `slot`, following MOVED and ASK,
    /// waiting out TRYAGAIN and CLUSTERDOWN for up to `patience`, and repeating it once on the
    /// slot's new master when its master stopped answering. `op` gets `attempt` ≥ 1 when an
    /// earlier run may have been applied (see [`crate::base::pool::ConnPool::run`]).
    pub(crate) fn run<T>(
        &self,
        slot: u16,
        patience: Duration,
        mut op: impl FnMut(&mut Connection, u32) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        let started = Instant::now();
        let mut ask: Option<Arc<Node>> = None;
        let mut redirects = 0;
        let mut pause = FIRST_PAUSE;
        let mut refreshed = false;
        // Whether an earlier run may have been applied before its connection failed.
        let mut maybe_applied = 0;
        loop {
            let asking = ask.is_some();
            let node = match ask.take() {
                Some(node) => node,
                None => self.node_for(slot)?,
            };
            let mut redirect = None;
            let result = node.main.run(None, |c, attempt| {
                redirect = None;
                if asking {
                    redis::cmd("ASKING").exec(c)?;
                }
                let r = op(c, attempt + maybe_applied);
                if let Err(e) = &r {
                    redirect = Redirect::of(e);
                }
                r
            });
            let e = match result {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match redirect {
                Some(Redirect::Moved(addr)) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    self.cfg.metrics.cluster_moved.inc();
                    self.moved(slot, &addr)?;
                    continue;
                }
                Some(Redirect::Ask(addr)) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    self.cfg.metrics.cluster_ask.inc();
                    ask = Some(self.node_at(&addr)?);
                    continue;
                }
                Some(Redirect::Busy) => {
                    if started.elapsed() + pause <= patience {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(MAX_PAUSE);
                        // An ASK that ends in TRYAGAIN comes round again after the pause: the
                        // pauses bound those rounds, the count bounds redirections between two.
                        redirects = 0;
                        // CLUSTERDOWN "hash slot not served" and the like: the table may be
                        // out of date too. It is asked of the other masters first: a master
                        // that says the cluster is down may be the one cut off from it, whose
                        // table still names itself after its replica took over.
                        let _ = self.refresh(Instant::now(), None, Some(&node));
                        continue;
                    }
                    return Err(self.unavailable(slot, started.elapsed(), &e));
                }
                _ => {}
            }
            if e.is_connection() && !refreshed && !asking {
                refreshed = true;
                maybe_applied = 1;
                // The master may have failed over: retry once if the table names another.
                let _ = self.refresh(Instant::now(), None, Some(&node));
                let moved_on = self
                    .table
                    .read()
                    .node(slot)
                    .is_some_and(|n| !Arc::ptr_eq(n, &node));
                if moved_on {
                    continue;
                }
            }
            return Err(e);
        }
    }

    /// The error for a slot that stayed unavailable (TRYAGAIN, CLUSTERDOWN): a connection error,
    /// as for a server that cannot be reached, which callers retry.
    pub(crate) fn unavailable(&self, slot: u16, waited: Duration, e: &Error) -> Error {
        Error::connection(
            &self.cfg.server,
            format!(
                "hash slot {slot} was not served for {} ms ({})",
                waited.as_millis(),
                e.message()
            ),
            false,
        )
    }

    /// For a waiter whose call failed on `node`: whether it must go on at the slot's master as
    /// the table names it now (MOVED; a migration or a failover in progress, after a pause of at
    /// most `limit`; a connection error, if the table read again names another master).
    pub(crate) fn waiter_follows(
        &self,
        slot: u16,
        node: &Arc<Node>,
        e: &redis::RedisError,
        limit: Duration,
    ) -> bool {
        match Redirect::of(e) {
            Some(Redirect::Moved(addr)) => {
                self.cfg.metrics.cluster_moved.inc();
                self.moved(slot, &addr).is_ok()
            }
            // A waiter needs the lock's keys on one node (its queue script uses several keys):
            // during a migration it waits, then queues where the slot lives.
            Some(Redirect::Ask(_)) | Some(Redirect::Busy) => {
                std::thread::sleep(MAX_PAUSE.min(limit));
                let _ = self.refresh(Instant::now(), None, Some(node));
                true
            }
            None if e.is_io_error() || e.is_connection_dropped() => {
                let _ = self.refresh(Instant::now(), None, Some(node));
                self.table
                    .read()
                    .node(slot)
                    .is_some_and(|n| !Arc::ptr_eq(n, node))
            }
            None => false,
        }
    }
}

/// The ranges of a `CLUSTER SLOTS` reply: `[[first, last, [host, port, id, ...], replicas...],
/// ...]`. A master without a known address (an empty host) is the node asked, `asked`.
fn parse_slots(reply: redis::Value, asked: &Addr) -> Vec<SlotRange> {
    use redis::Value as V;
    let V::Array(entries) = reply else {
        return Vec::new();
    };
    let mut ranges = Vec::new();
    for entry in entries {
        let V::Array(fields) = entry else { continue };
        let (Some(V::Int(first)), Some(V::Int(last)), Some(V::Array(master))) =
            (fields.first(), fields.get(1), fields.get(2))
        else {
            continue;
        };
        let host = match master.first() {
            Some(V::BulkString(h)) => String::from_utf8_lossy(h).into_owned(),
            Some(V::SimpleString(h)) => h.clone(),
            _ => continue,
        };
        let Some(V::Int(port)) = master.get(1) else {
            continue;
        };
        let (Ok(first), Ok(last), Ok(port)) = (
            u16::try_from(*first),
            u16::try_from(*last),
            u16::try_from(*port),
        ) else {
            continue;
        };
        if first > last || usize::from(last) >= SLOTS || host == "?" {
            continue;
        }
        let host = if host.is_empty() {
            asked.0.clone()
        } else {
            host
        };
        ranges.push((first, last, (host, port)));
    }
    ranges
}

/// `conn`, a new connection to a cluster master, marked with the master's configuration epoch
/// (`CLUSTER INFO`'s `cluster_my_epoch`), which orders the fencing tokens it grants
/// (`base/grant.rs`, `fencing_token`): a replica promoted in a failover takes a configuration
/// epoch above every other, so its grants sort above those the old master made while cut off
/// from the cluster (its counter missed them). A node's epoch only grows, so the mark is never
/// above the master's. A server that refuses `CLUSTER INFO` (an ACL without it) leaves the mark
/// at 0 on every connection: tokens are then the counter alone.
pub(crate) fn with_epoch(mut conn: Connection) -> redis::RedisResult<Connection> {
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

/// A Redis Cluster as a store: each lock on the master of its slot, redirections followed.
impl LockStore for Cluster {
    fn cfg(&self) -> &Config {
        &self.cfg
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

/// [`LockStore::extend_many`] in a cluster: the locks grouped by the master of their slot, one pipeline to
/// each. Locks whose slot moved (MOVED) are sent again to their new master, and so are those of
/// a master that stopped answering if the table read again names another one: once, so that
/// renewal is never held up for long (a lock that fails here is retried by its renewal thread).
/// A lock whose slot is being migrated (ASK) is extended on its own.
fn extend_many_in_cluster(c: &Cluster, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
    let mut out: Vec<Option<Result<bool, Error>>> = locks.iter().map(|_| None).collect();
    let mut pending: Vec<usize> = (0..locks.len()).collect();
    // Masters that failed to answer, and how: their locks are not sent to them again.
    let mut failed: Vec<(Arc<Node>, Error)> = Vec::new();
    for round in 0..2 {
        let last_round = round == 1;
        let mut groups: Vec<(Arc<Node>, Vec<usize>)> = Vec::new();
        for i in pending.drain(..) {
            let node = match c.node_for(locks[i].keys.slot()) {
                Ok(node) => node,
                Err(e) => {
                    out[i] = Some(Err(e));
                    continue;
                }
            };
            if let Some((_, e)) = failed.iter().find(|(n, _)| Arc::ptr_eq(n, &node)) {
                out[i] = Some(Err(e.clone()));
                continue;
            }
            match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, &node)) {
                Some((_, group)) => group.push(i),
                None => groups.push((node, vec![i])),
            }
        }
        let mut unreachable = false;
        for (node, group) in groups {
            match extend_pipeline(&c.cfg, &node.main, group.iter().map(|&i| &locks[i])) {
                Ok(replies) => {
                    for (i, reply) in group.into_iter().zip(replies) {
                        let e = match reply {
                            Ok(extended) => {
                                out[i] = Some(Ok(extended));
                                continue;
                            }
                            Err(e) => e,
                        };
                        match Redirect::of(&e) {
                            Some(Redirect::Moved(addr)) if !last_round => {
                                c.cfg.metrics.cluster_moved.inc();
                                let _ = c.moved(locks[i].keys.slot(), &addr);
                                pending.push(i);
                            }
                            Some(Redirect::Ask(_)) => {
                                c.cfg.metrics.cluster_ask.inc();
                                let l = &locks[i];
                                out[i] = Some(extend_routed(c, l));
                            }
                            _ => out[i] = Some(Err(Error::from_redis(node.main.server(), &e))),
                        }
                    }
                }
                Err(e) if e.is_connection() && !last_round => {
                    unreachable = true;
                    pending.extend(group);
                    failed.push((node, e));
                }
                Err(e) => {
                    for i in group {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        if unreachable {
            // A master may have failed over: its locks go to the new one, if the table says so.
            let _ = c.refresh(Instant::now(), None, None);
        }
        if pending.is_empty() {
            break;
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(Error::internal("a renewal got no outcome"))))
        .collect()
}

/// The EXTEND of one lock in a cluster (its kind's), following redirections, not waiting out a
/// migration (renewal retries soon anyway).
fn extend_routed(c: &Cluster, l: &Extension<'_>) -> Result<bool, Error> {
    c.run(l.keys.slot(), Duration::ZERO, |con, _| {
        let mut replies = send_extends(con, &c.cfg, std::iter::once(l))?;
        // Its error, a redirection among them, is the call's.
        replies.pop().unwrap_or(Ok(false))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value as V;

    fn bulk(s: &str) -> V {
        V::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_nodes_epoch_is_read_from_cluster_info() {
        let info = "cluster_state:ok\r\ncluster_current_epoch:9\r\ncluster_my_epoch:7\r\n";
        assert_eq!(my_epoch(info), 7);
        assert_eq!(my_epoch("cluster_state:ok\r\n"), 0);
        assert_eq!(my_epoch("cluster_my_epoch:x\r\n"), 0);
    }

    #[test]
    fn slots_reply_is_parsed() {
        let reply = V::Array(vec![
            V::Array(vec![
                V::Int(0),
                V::Int(5460),
                V::Array(vec![bulk("127.0.0.1"), V::Int(7000), bulk("id0")]),
                V::Array(vec![bulk("127.0.0.1"), V::Int(7003), bulk("id3")]),
            ]),
            V::Array(vec![
                V::Int(5461),
                V::Int(10922),
                V::Array(vec![bulk(""), V::Int(7001), bulk("id1")]),
            ]),
            // Not usable: unknown endpoint, slot out of range, wrong shape.
            V::Array(vec![
                V::Int(10923),
                V::Int(16383),
                V::Array(vec![bulk("?"), V::Int(7002)]),
            ]),
            V::Array(vec![
                V::Int(10923),
                V::Int(16384),
                V::Array(vec![bulk("h"), V::Int(7002)]),
            ]),
            V::Int(3),
        ]);
        let asked = ("10.0.0.1".to_owned(), 7001);
        assert_eq!(
            parse_slots(reply, &asked),
            vec![
                (0, 5460, ("127.0.0.1".to_owned(), 7000)),
                (5461, 10922, ("10.0.0.1".to_owned(), 7001)),
            ]
        );
        assert!(parse_slots(V::Nil, &asked).is_empty());
    }

    #[test]
    fn redirections_are_recognised() {
        let err = |text: &[u8]| {
            redis::parse_redis_value(text)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        match Redirect::of(&err(b"-MOVED 3999 127.0.0.1:6381\r\n")) {
            Some(Redirect::Moved(addr)) => assert_eq!(addr, ("127.0.0.1".to_owned(), 6381)),
            _ => panic!("MOVED not recognised"),
        }
        match Redirect::of(&err(b"-ASK 3999 ::1:6381\r\n")) {
            Some(Redirect::Ask(addr)) => assert_eq!(addr, ("::1".to_owned(), 6381)),
            _ => panic!("ASK not recognised"),
        }
        assert!(matches!(
            Redirect::of(&err(
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
            )),
            Some(Redirect::Busy)
        ));
        assert!(matches!(
            Redirect::of(&err(b"-CLUSTERDOWN The cluster is down\r\n")),
            Some(Redirect::Busy)
        ));
        assert!(matches!(
            Redirect::of(&err(b"-MOVED 3999 :6381\r\n")),
            Some(Redirect::Busy)
        ));
        assert!(Redirect::of(&err(b"-ERR unknown command\r\n")).is_none());
    }
}
