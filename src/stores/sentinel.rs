//! The master of a Redis Sentinel group, followed across failovers.
//!
//! The sentinels are asked for the master's address (`SENTINEL GET-MASTER-ADDR-BY-NAME`) and
//! the group's configuration epoch (`SENTINEL MASTER`), in the order given; the first that
//! answers wins (the Sentinel client guidelines), unless its epoch is older than one another
//! sentinel gave (it has not heard of a failover yet): then the next is asked too. A new
//! connection is used only after the node confirms it is a master (`ROLE`), so nothing is ever
//! written to a replica, and it carries the epoch it was named in, which orders the fencing
//! tokens it grants (`base/grant.rs`, `fencing_token`): a master cut off from the sentinels
//! while they promote another still grants, but below every grant of the new one. The answer is
//! kept, and asked again:
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
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::sync::Mutex;

use redis::IntoConnectionInfo;

use super::connect_node;
use crate::base::config::Config;
use crate::base::connection::{Connection, Endpoint};
use crate::base::error::Error;
use crate::base::metrics::Metrics;
use crate::base::pool::Connect;
use crate::base::url::{MultiHost, after_scheme, host_list, invalid};

/// A Sentinel URL's group: the sentinels to ask and the name of the master they monitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelSpec {
    pub sentinels: Vec<(String, u16)>,
    pub master_name: String,
}

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
    /// The backend's metrics: the switches to a new master count there.
    metrics: Arc<Metrics>,
    connect_timeout: Duration,
    master: Mutex<MasterState>,
    /// Held while the sentinels are asked, so that callers that want an answer at the same time
    /// wait for one question instead of each asking their own.
    asking: Mutex<Asking>,
}

/// A sentinel's answer: the master's address, and the configuration epoch it is master in.
#[derive(Clone, PartialEq, Eq)]
struct Named {
    addr: (String, u16),
    epoch: u64,
}

/// The sentinels' answer, or why none was found.
type Answer = Result<Named, String>;

/// The sentinels' connections and the last question.
struct Asking {
    /// One per sentinel, in the URL's order: how to reach it, and the connection kept to it.
    sentinels: Vec<(Endpoint, Option<Connection>)>,
    /// When the last question ended, and its answer: the master, or why none was found.
    last: Option<(Instant, Answer)>,
}

#[derive(Default)]
struct MasterState {
    named: Option<Named>,
    /// The highest epoch a sentinel has named a master in.
    epoch: u64,
    generation: u64,
    /// When the sentinels last confirmed `named` (None: never, or to be asked again).
    checked: Option<Instant>,
}

impl Sentinel {
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        spec: SentinelSpec,
        metrics: Arc<Metrics>,
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
            metrics,
            connect_timeout: cfg.connect_timeout,
            master: Mutex::new(MasterState::default()),
            asking: Mutex::new(Asking {
                sentinels,
                last: None,
            }),
        })
    }

    /// Asks the sentinels for the master, in order, until one answers with an epoch no older
    /// than any named before; keeps the answer (the newest of those given, if none is that
    /// fresh). Within [`MIN_ASK_INTERVAL`] of the last question, or while another caller asks,
    /// the answer (or failure) that question gives is taken instead.
    fn resolve(&self, deadline: Instant) -> redis::RedisResult<Named> {
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
        let newest = self.master.lock().epoch;
        let mut errors = Vec::new();
        let mut found: Option<Named> = None;
        for (i, (host, port)) in self.spec.sentinels.iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                errors.push("out of time".to_owned());
                break;
            }
            match self.ask(&mut asking.sentinels[i], left) {
                Ok(Some(named)) => {
                    let fresh = named.epoch >= newest;
                    if found.as_ref().is_none_or(|f| named.epoch > f.epoch) {
                        found = Some(named);
                    }
                    if fresh {
                        break;
                    }
                }
                Ok(None) => errors.push(format!(
                    "{host}:{port} does not know it: the name after # in the URL must be one \
                     its sentinels monitor"
                )),
                Err(e) => errors.push(format!("{host}:{port}: {e}")),
            }
        }
        let Some(named) = found else {
            let failure = errors.join("; ");
            asking.last = Some((Instant::now(), Err(failure.clone())));
            return Err(not_found(&self.spec, &failure));
        };
        asking.last = Some((Instant::now(), Ok(named.clone())));
        drop(asking);
        let mut m = self.master.lock();
        if m.named.as_ref() != Some(&named) {
            let moved = m.named.as_ref().is_some_and(|n| n.addr != named.addr);
            if moved {
                self.metrics.sentinel_switches.inc();
                log::info!(
                    "Sentinel master {} is now at {}:{} (epoch {})",
                    self.spec.master_name,
                    named.addr.0,
                    named.addr.1,
                    named.epoch
                );
            }
            // A new epoch at the same address (a master demoted and promoted again) moves the
            // generation on too: connections made in the old one carry its epoch.
            m.named = Some(named.clone());
            m.generation += 1;
        }
        m.epoch = m.epoch.max(named.epoch);
        m.checked = Some(Instant::now());
        Ok(named)
    }

    /// One sentinel's answer, on the connection kept to it (opened first if there is none; a
    /// connection that failed is dropped). The epoch is asked first, in the same pipeline: a
    /// failover between the two replies can only pair the new master with the old epoch
    /// (tokens too low, refused by the resource), never the old master with the new one.
    fn ask(
        &self,
        (endpoint, kept): &mut (Endpoint, Option<Connection>),
        timeout: Duration,
    ) -> redis::RedisResult<Option<Named>> {
        let timeout = timeout.min(SENTINEL_TIMEOUT).max(Duration::from_millis(1));
        let mut con = match kept.take() {
            Some(con) => con,
            None => endpoint.connect(timeout)?,
        };
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        let name = &self.spec.master_name;
        let mut pipe = redis::pipe();
        pipe.cmd("SENTINEL").arg("MASTER").arg(name);
        pipe.cmd("SENTINEL")
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(name);
        let replies: Vec<redis::Value> = match pipe.query(&mut con) {
            Ok(replies) => replies,
            // "No such master with that name": the sentinel does not know it. An unknown
            // command: the server is no sentinel (a redis-sentinel:// URL naming a Redis server).
            Err(e)
                if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
            {
                *kept = Some(con);
                // The first reply's words (a pipeline's error lists every reply).
                let said = e
                    .clone()
                    .into_server_errors()
                    .and_then(|all| {
                        let (_, first) = all.first()?;
                        Some(format!(
                            "{} {}",
                            first.code(),
                            first.details().unwrap_or("")
                        ))
                    })
                    .unwrap_or_else(|| e.to_string());
                let said = said.trim_end();
                if said.contains("unknown command") {
                    return Err(redis::RedisError::from(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "not a sentinel ({said}): a redis-sentinel:// URL lists the \
                             sentinels' addresses (often port 26379), not the servers'"
                        ),
                    )));
                }
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        *kept = Some(con);
        let [master, addr] = &replies[..] else {
            return Ok(None);
        };
        let addr: Option<(String, String)> = redis::from_redis_value(addr.clone())?;
        let Some((host, port)) = addr else {
            return Ok(None);
        };
        let Ok(port) = port.parse() else {
            return Ok(None);
        };
        Ok(Some(Named {
            addr: (host, port),
            epoch: config_epoch(master),
        }))
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

    fn forget(&self, named: &Named) {
        let mut m = self.master.lock();
        if m.named.as_ref() == Some(named) {
            m.named = None;
            m.checked = None;
        }
    }
}

/// The `config-epoch` field of a `SENTINEL MASTER` reply (a flat list of names and values, or
/// a map in RESP3); 0 when it has none.
fn config_epoch(reply: &redis::Value) -> u64 {
    use redis::Value;
    let text = |v: &Value| match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok().map(str::to_owned),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    };
    let pairs: Vec<(&Value, &Value)> = match reply {
        Value::Array(items) => items.chunks_exact(2).map(|p| (&p[0], &p[1])).collect(),
        Value::Map(items) => items.iter().map(|(k, v)| (k, v)).collect(),
        _ => Vec::new(),
    };
    pairs
        .into_iter()
        .find(|(k, _)| text(k).as_deref() == Some("config-epoch"))
        .and_then(|(_, v)| text(v)?.parse().ok())
        .unwrap_or(0)
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

/// The master of a Sentinel group, as a backend's pools connect to it.
impl Connect for Sentinel {
    /// Which generation of the master new and idle connections must belong to: it moves on
    /// with each master the sentinels name.
    fn generation(&self) -> u64 {
        let stale = {
            let m = self.master.lock();
            m.checked.is_none_or(|at| at.elapsed() >= RECHECK)
        };
        if stale && self.resolve(Instant::now() + self.connect_timeout).is_err() {
            // No sentinel answers: keep the master we know (the connect that follows finds out
            // whether it still answers), and ask again after RECHECK.
            let mut m = self.master.lock();
            if m.named.is_some() {
                m.checked = Some(Instant::now());
            }
        }
        self.master.lock().generation
    }

    /// A connection to the master the sentinels name now, within `timeout`.
    fn connect(&self, timeout: Duration) -> redis::RedisResult<Connection> {
        let deadline = Instant::now() + timeout;
        let mut last = None;
        for _ in 0..2 {
            let known = self.master.lock().named.clone();
            let named = match known {
                Some(named) => named,
                // After a master that failed, its failure says more than "out of time".
                None => match self.resolve(deadline) {
                    Ok(named) => named,
                    Err(e) => return Err(last.unwrap_or(e)),
                },
            };
            match self.connect_master(&named.addr, deadline) {
                Ok(mut conn) => {
                    conn.set_epoch(named.epoch);
                    return Ok(conn);
                }
                Err(e) => {
                    // Dead, or not a master (any more): ask the sentinels again.
                    self.forget(&named);
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| not_found(&self.spec, "no master")))
    }

    /// A READONLY reply (a demoted master) means the master changed; a connection error makes
    /// the next connect ask the sentinels again.
    fn failed_over(&self, e: &redis::RedisError) -> bool {
        let demoted = e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if demoted || e.is_io_error() {
            let mut m = self.master.lock();
            m.checked = None;
            if demoted {
                m.named = None;
            }
        }
        demoted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn the_config_epoch_is_read_from_a_sentinel_master_reply() {
        let flat = Value::Array(vec![
            bulk("name"),
            bulk("mymaster"),
            bulk("ip"),
            bulk("127.0.0.1"),
            bulk("config-epoch"),
            bulk("7"),
            bulk("flags"),
            bulk("master"),
        ]);
        assert_eq!(config_epoch(&flat), 7);
        let map = Value::Map(vec![(bulk("config-epoch"), Value::Int(3))]);
        assert_eq!(config_epoch(&map), 3);
        // None given, or not a number: epoch 0 (the counter alone, as a single server).
        assert_eq!(
            config_epoch(&Value::Array(vec![bulk("name"), bulk("m")])),
            0
        );
        assert_eq!(
            config_epoch(&Value::Array(vec![bulk("config-epoch"), bulk("x")])),
            0
        );
        assert_eq!(config_epoch(&Value::Nil), 0);
    }
}
