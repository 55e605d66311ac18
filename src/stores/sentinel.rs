//! The master of a Redis Sentinel group, followed across failovers.
//!
//! The sentinels are asked for the master's address (`SENTINEL GET-MASTER-ADDR-BY-NAME`), in
//! the order given, the first that answers wins (the Sentinel client guidelines). A new
//! connection is used only after the node confirms it is a master (`ROLE`), so nothing is ever
//! written to a replica. The answer is kept, and asked again:
//! - when a connect to the kept master fails, or a call on one of its connections fails for
//!   want of an answer (the master may have died or been paused);
//! - when a master answers READONLY (it was demoted): the call is repeated on a new connection;
//! - when it is older than [`RECHECK`] at a checkout, so that a master that was paused past a
//!   failover and came back (still believing itself master until the sentinels demote it) is
//!   not written to through connections idle since before.
//!
//! When the answer names another master, the generation moves on and the pools close their
//! idle connections to the old one.
//!
//! The sentinels are asked over connections kept from one question to the next (one per
//! sentinel per backend, with the same timeouts as any other), and the questions are paced:
//! one at a time, and none within [`MIN_ASK_INTERVAL`] of the last. During a failover every
//! failing call wants a new answer, and without this each would open a connection of its own
//! (thousands per second from a busy process, left in TIME-WAIT).

use std::io;
use std::time::{Duration, Instant};

use crate::base::sync::Mutex;

use redis::IntoConnectionInfo;

use super::connect_node;
use crate::base::config::{Config, SentinelSpec};
use crate::base::connection::{Connection, Endpoint};
use crate::base::error::Error;
use crate::base::url::{MultiHost, after_scheme, host_list, invalid};

/// How old the sentinels' answer may be at a checkout before it is asked for again.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);
/// The longest a sentinel may take to answer (it answers from memory); a paused sentinel must
/// not stall a checkout for a whole read timeout.
const SENTINEL_TIMEOUT: Duration = Duration::from_millis(500);
/// Questions to the sentinels come no closer together than this: the callers in between get
/// the last answer.
pub(crate) const MIN_ASK_INTERVAL: Duration = Duration::from_millis(100);

/// A Sentinel group's master.
pub(crate) struct Sentinel {
    spec: SentinelSpec,
    /// For the data nodes: credentials, database, TLS; its address is replaced by the master's.
    template: redis::ConnectionInfo,
    cfg: Config,
    connect_timeout: Duration,
    master: Mutex<Master>,
    /// Held while the sentinels are asked, so that callers that want an answer at the same time
    /// wait for one question instead of each asking their own.
    asking: Mutex<Asking>,
}

/// The sentinels' answer: the master's address, or why none was found.
type Answer = Result<(String, u16), String>;

/// The sentinels' connections and the last question.
struct Asking {
    /// One per sentinel, in the URL's order: how to reach it, and the connection kept to it.
    sentinels: Vec<(Endpoint, Option<Connection>)>,
    /// When the last question ended, and its answer: the master, or why none was found.
    last: Option<(Instant, Answer)>,
}

#[derive(Default)]
struct Master {
    addr: Option<(String, u16)>,
    generation: u64,
    /// When the sentinels last confirmed `addr` (None: never, or to be asked again).
    checked: Option<Instant>,
}

impl Sentinel {
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        spec: SentinelSpec,
    ) -> Result<Sentinel, Error> {
        let mut sentinels = Vec::with_capacity(spec.sentinels.len());
        for (host, port) in &spec.sentinels {
            let info = redis::ConnectionAddr::Tcp(host.clone(), *port)
                .into_connection_info()
                .map_err(|e| Error::from_redis(&cfg.server, &e))?;
            let settings = info.redis_settings().clone().set_skip_set_lib_name();
            let info = info
                .set_redis_settings(settings)
                .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(true));
            sentinels.push((Endpoint::new(info, None), None));
        }
        Ok(Sentinel {
            spec,
            template: info.clone(),
            cfg: cfg.clone(),
            connect_timeout: cfg.connect_timeout,
            master: Mutex::new(Master::default()),
            asking: Mutex::new(Asking {
                sentinels,
                last: None,
            }),
        })
    }

    pub(crate) fn generation(&self) -> u64 {
        let stale = {
            let m = self.master.lock();
            m.checked.is_none_or(|at| at.elapsed() >= RECHECK)
        };
        if stale && self.resolve(Instant::now() + self.connect_timeout).is_err() {
            // No sentinel answers: keep the master we know (the connect that follows finds out
            // whether it still answers), and ask again after RECHECK.
            let mut m = self.master.lock();
            if m.addr.is_some() {
                m.checked = Some(Instant::now());
            }
        }
        self.master.lock().generation
    }

    pub(crate) fn connect(&self, timeout: Duration) -> redis::RedisResult<Connection> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        for _ in 0..2 {
            let known = self.master.lock().addr.clone();
            let addr = match known {
                Some(addr) => addr,
                None => self.resolve(deadline)?,
            };
            match self.connect_master(&addr, deadline) {
                Ok(conn) => return Ok(conn),
                Err(e) => {
                    // Dead, or not a master (any more): ask the sentinels again.
                    self.forget(&addr);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| not_found(&self.spec, "no master")))
    }

    pub(crate) fn failed_over(&self, e: &redis::RedisError) -> bool {
        let demoted = e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if demoted || e.is_io_error() {
            let mut m = self.master.lock();
            m.checked = None;
            if demoted {
                m.addr = None;
            }
        }
        demoted
    }

    /// Asks the sentinels for the master, in order, until one answers; keeps the answer. Within
    /// [`MIN_ASK_INTERVAL`] of the last question, or while another caller asks, the answer (or
    /// failure) that question gives is taken instead.
    fn resolve(&self, deadline: Instant) -> redis::RedisResult<(String, u16)> {
        let mut asking = self.asking.lock();
        if let Some((at, answer)) = &asking.last
            && at.elapsed() < MIN_ASK_INTERVAL
        {
            // Also when the master was forgotten since (a connect to it failed): the sentinels
            // named it a moment ago, so it is tried again rather than asked about again.
            return answer
                .clone()
                .map_err(|failure| not_found(&self.spec, &failure));
        }
        let mut errors = Vec::new();
        let mut found = None;
        for (i, (host, port)) in self.spec.sentinels.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                errors.push("out of time".to_owned());
                break;
            }
            match self.ask(&mut asking.sentinels[i], left) {
                Ok(Some(addr)) => {
                    found = Some(addr);
                    break;
                }
                Ok(None) => errors.push(format!("{host}:{port} does not know it")),
                Err(e) => errors.push(format!("{host}:{port}: {e}")),
            }
        }
        let Some(addr) = found else {
            let failure = errors.join("; ");
            asking.last = Some((Instant::now(), Err(failure.clone())));
            return Err(not_found(&self.spec, &failure));
        };
        asking.last = Some((Instant::now(), Ok(addr.clone())));
        drop(asking);
        let mut m = self.master.lock();
        if m.addr.as_ref() != Some(&addr) {
            if m.addr.is_some() {
                self.cfg.metrics.sentinel_switches.inc();
                log::info!(
                    "Sentinel master {} is now at {}:{}",
                    self.spec.master_name,
                    addr.0,
                    addr.1
                );
            }
            m.addr = Some(addr.clone());
            m.generation += 1;
        }
        m.checked = Some(Instant::now());
        Ok(addr)
    }

    /// One sentinel's answer, on the connection kept to it (opened first if there is none; a
    /// connection that failed is dropped).
    fn ask(
        &self,
        (endpoint, kept): &mut (Endpoint, Option<Connection>),
        timeout: Duration,
    ) -> redis::RedisResult<Option<(String, u16)>> {
        let timeout = timeout.min(SENTINEL_TIMEOUT).max(Duration::from_millis(1));
        let mut con = match kept.take() {
            Some(con) => con,
            None => endpoint.connect(timeout)?,
        };
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        let addr: Option<(String, String)> = redis::cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.spec.master_name)
            .query(&mut con)?;
        *kept = Some(con);
        Ok(addr.and_then(|(h, p)| Some((h, p.parse().ok()?))))
    }

    /// A connection to `addr`, used only if the node says it is a master.
    fn connect_master(
        &self,
        addr: &(String, u16),
        deadline: Instant,
    ) -> redis::RedisResult<Connection> {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut con = connect_node(&self.cfg, &self.template, addr, left)?;
        con.set_read_timeout(Some(self.connect_timeout))?;
        let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut con)?;
        let is_master = matches!(role.first(), Some(redis::Value::BulkString(r)) if r == b"master");
        if !is_master {
            return Err(redis::RedisError::from(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("{}:{} is not a master (yet)", addr.0, addr.1),
            )));
        }
        Ok(con)
    }

    fn forget(&self, addr: &(String, u16)) {
        let mut m = self.master.lock();
        if m.addr.as_ref() == Some(addr) {
            m.addr = None;
            m.checked = None;
        }
    }
}

fn not_found(spec: &SentinelSpec, detail: &str) -> redis::RedisError {
    redis::RedisError::from(io::Error::new(
        io::ErrorKind::NotConnected,
        format!(
            "no sentinel named the master {:?} ({detail})",
            spec.master_name
        ),
    ))
}

/// Parses a `redis-sentinel://` or `rediss-sentinel://` URL: the plain URL of the data nodes
/// (at the first sentinel's address) and the group. `None` for other URLs.
pub(crate) fn parse_url(url: &str) -> Option<Result<(String, SentinelSpec), Error>> {
    let (tls, rest) = after_scheme(url, "redis-sentinel", "rediss-sentinel")?;
    let bad = |what: &str| Some(Err(invalid("Sentinel", url, what)));
    let Some((rest, master_name)) = rest.rsplit_once('#') else {
        return bad("the master's name is missing (…#mymaster)");
    };
    if master_name.is_empty() {
        return bad("the master's name is empty");
    }
    let parts = MultiHost::split(rest, tls);
    let sentinels = match host_list(parts.hosts, 26379, "a sentinel") {
        Ok(sentinels) => sentinels,
        Err(what) => return bad(&what),
    };
    let spec = SentinelSpec {
        master_name: master_name.to_owned(),
        sentinels,
    };
    Some(Ok((parts.plain(&spec.sentinels[0]), spec)))
}
