//! Where connections go, and how one is opened: connect within a timeout, authenticate, select
//! the database, learn the server's version (and refuse one too old).

use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use redis::Value;
use redis::{
    ConnectionAddr, ConnectionInfo, ErrorKind, RedisConnectionInfo, RedisError, RedisResult,
};

use super::socket::{Own, Sock};
use super::{Connection, Inner};

/// Where connections go: the address and the settings of the connection (password, database),
/// and for TLS the redis-rs client that holds the TLS configuration.
#[derive(Clone)]
pub(crate) struct Endpoint {
    info: ConnectionInfo,
    tls: Option<redis::Client>,
    /// The server's version (major, minor; `None` when it did not tell), asked for by the
    /// first connection that got an answer and shared by the endpoint's clones: later
    /// connections set up without a round trip more.
    version: Arc<OnceLock<Option<(u32, u32)>>>,
}

impl Endpoint {
    /// A plain (TCP or Unix socket) endpoint, or a TLS one through `tls`.
    pub(crate) fn new(info: ConnectionInfo, tls: Option<redis::Client>) -> Endpoint {
        Endpoint {
            info,
            tls,
            version: Arc::default(),
        }
    }

    /// Opens a connection, authenticated and on its database, within `timeout`: every step
    /// (TCP connect, the TLS handshake, `AUTH`, `SELECT`, `HELLO`) within it, whatever the peer
    /// does. Its read and write timeouts are then what is left of `timeout`. The endpoint's
    /// first connection asks for the server's version, and refuses a server older than
    /// [`MIN_VERSION`]. A failure before the server's first reply says what the peer's
    /// behaviour suggests (a TLS port reached with `redis://`, a plain one with `rediss://`).
    pub(crate) fn connect(&self, timeout: Duration) -> RedisResult<Connection> {
        // A server found too old is asked again (and refused again, unless upgraded meanwhile).
        let known = self
            .version
            .get()
            .copied()
            .filter(|v| v.is_none_or(|v| v >= MIN_VERSION));
        let deadline = Instant::now() + timeout;
        // Over TLS, setting up the client (its root certificates) can take the whole timeout on
        // a slow machine: the error then says that no TLS connection was made in time.
        let inner = self
            .open(deadline)
            .map_err(|e| self.tls_timed_out(e, timeout))?;
        let mut conn = Connection(inner, known.flatten(), 0);
        let left = remaining(deadline).map_err(|e| self.tls_timed_out(e, timeout))?;
        conn.set_read_timeout(Some(left))?;
        conn.set_write_timeout(Some(left))?;
        let settings = self.info.redis_settings();
        let hello = set_up(
            &mut conn,
            settings,
            known.is_none(),
            self.tls.is_some(),
            left,
        )
        .map_err(|e| self.before_any_reply(e, timeout))?;
        // Not answered within HELLO_WAIT: the next connection asks again.
        if known.is_none()
            && let Some(hello) = hello
        {
            conn.1 = self.ask_version(&mut conn, answer(Ok(hello))?)?;
        }
        Ok(conn)
    }

    /// The transport within `deadline`: a TCP or Unix socket of the crate's own, or redis-rs'
    /// TLS stream (its client holds the TLS settings and nothing else, so redis-rs sends
    /// nothing: the handshake comes with the first bytes [`set_up`] sends, within the timeouts
    /// set here).
    fn open(&self, deadline: Instant) -> RedisResult<Inner> {
        if let Some(client) = &self.tls {
            let c = client.get_connection_with_timeout(remaining(deadline)?)?;
            return Ok(Inner::Redis(Box::new(c)));
        }
        let sock = match self.info.addr() {
            ConnectionAddr::Tcp(host, port) => {
                let s = connect_tcp(host, *port, deadline)?;
                s.set_nodelay(self.info.tcp_settings().nodelay())?;
                Sock::Tcp(s)
            }
            ConnectionAddr::Unix(path) => Sock::Unix(UnixStream::connect(path)?),
            _ => {
                return Err(RedisError::from((
                    ErrorKind::InvalidClientConfig,
                    "a TLS address needs a TLS endpoint",
                )));
            }
        };
        Ok(Inner::Own(Own::new(sock, self.info.redis_settings().db())))
    }

    /// A failure of the set-up before the server's first reply, with what it suggests: over TLS
    /// no handshake (a plain server, or a port that does not answer), over a plain connection
    /// a peer that hung up at once (a TLS port does).
    fn before_any_reply(&self, e: SetUpError, timeout: Duration) -> RedisError {
        let SetUpError { error, answered } = e;
        if answered || !error.is_io_error() {
            return error;
        }
        let hung_up = error.is_connection_dropped();
        let io = if error.is_timeout() {
            io::ErrorKind::TimedOut
        } else if hung_up {
            io::ErrorKind::ConnectionReset
        } else {
            io::ErrorKind::Other
        };
        let text = if self.tls.is_none() {
            if !hung_up {
                return error;
            }
            format!(
                "the server closed the connection before any reply ({error}): a TLS port does \
                 so, and needs a rediss:// URL"
            )
        } else if error.is_timeout() {
            format!(
                "no TLS handshake within {} ms: the server accepted the connection but did not \
                 answer TLS (a plain Redis server needs a redis:// URL, not rediss://)",
                timeout.as_millis()
            )
        } else if hung_up || error.to_string().contains("corrupt message") {
            format!(
                "the TLS handshake failed ({error}): the server does not speak TLS (a plain Redis \
                 server needs a redis:// URL, not rediss://)"
            )
        } else {
            format!("the TLS handshake failed: {error}")
        };
        io::Error::new(io, text).into()
    }

    /// A connect timed out before the set-up began: over TLS, the message says so (redis-rs'
    /// alone reads "Connection timed out", which does not tell TLS from TCP).
    fn tls_timed_out(&self, error: RedisError, timeout: Duration) -> RedisError {
        if self.tls.is_none() || !error.is_timeout() {
            return error;
        }
        let text = format!(
            "no TLS connection within {} ms: connecting and setting up TLS took the whole \
             connect timeout ({error})",
            timeout.as_millis()
        );
        io::Error::new(io::ErrorKind::TimedOut, text).into()
    }

    /// The server's version from its reply to `HELLO` (every user may send it, whatever its
    /// ACL rules), or when `HELLO` was refused (Redis before 6.0, a proxy) from `INFO server`'s
    /// `redis_version`; refused below [`MIN_VERSION`]. A server that tells neither is taken as
    /// it is.
    fn ask_version(
        &self,
        conn: &mut Connection,
        hello: Option<Value>,
    ) -> RedisResult<Option<(u32, u32)>> {
        let version = match hello {
            Some(hello) => version_in(&hello),
            None => answer(redis::cmd("INFO").arg("server").query::<Value>(conn))?
                .as_ref()
                .and_then(version_in),
        };
        let Some(version) = version else {
            let _ = self.version.set(None);
            return Ok(None);
        };
        let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let major_minor = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        if major_minor < MIN_VERSION {
            let _ = self.version.set(Some(major_minor));
            return Err(RedisError::from((
                ErrorKind::InvalidClientConfig,
                TOO_OLD,
                format!(
                    "the server at {} is Redis {version}; redislock needs Redis {}.{} or newer \
                     (or Valkey)",
                    self.info.addr(),
                    MIN_VERSION.0,
                    MIN_VERSION.1
                ),
            )));
        }
        let _ = self.version.set(Some(major_minor));
        Ok(Some(major_minor))
    }
}

/// A reply, `None` for an error reply; `Err` only when no reply came.
fn answer(reply: RedisResult<Value>) -> RedisResult<Option<Value>> {
    match reply {
        Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => Err(e),
        Err(_) | Ok(Value::ServerError(_)) => Ok(None),
        Ok(v) => Ok(Some(v)),
    }
}

/// How long a new plain connection waits for the reply to its `HELLO` (see [`set_up`]).
const HELLO_WAIT: Duration = Duration::from_millis(200);

/// A set-up's failure, and whether the server had answered anything before it.
struct SetUpError {
    error: RedisError,
    answered: bool,
}

/// Authenticates and selects the database, as redis-rs does on connect, and when `info` sends
/// `HELLO 2` (its reply returned, an error reply included), which tells the server's version
/// and keeps the connection on RESP2. A refused `AUTH` or `SELECT` is the server's own error
/// reply, its words kept (`WRONGPASS invalid username-password pair or user is disabled.`).
///
/// A plain connection waits for `HELLO`'s reply at most [`HELLO_WAIT`]: a server that accepted
/// the connection but does not answer (stopped, overloaded) holds the caller up no longer than
/// this; its reply is skipped when it comes, and the next connection asks again (a command sent
/// then is answered or timed out as before, its read timeout counted from the `HELLO`). A TLS connection waits for it within the connect
/// timeout: its handshake is not done before a reply came.
fn set_up(
    conn: &mut Connection,
    settings: &RedisConnectionInfo,
    info: bool,
    tls: bool,
    left: Duration,
) -> Result<Option<Value>, SetUpError> {
    let mut answered = false;
    let fail = |error: RedisError, answered: bool| SetUpError { error, answered };
    let (password, db) = (settings.password(), settings.db());
    let mut pipe = redis::pipe();
    if let Some(password) = password {
        let auth = pipe.cmd("AUTH");
        if let Some(username) = settings.username() {
            auth.arg(username);
        }
        auth.arg(password);
    }
    if db != 0 {
        pipe.cmd("SELECT").arg(db);
    }
    if info {
        pipe.cmd("HELLO").arg(2);
    }
    if pipe.is_empty() {
        return Ok(None);
    }
    let sent = Instant::now();
    conn.send_packed_command(&pipe.get_packed_pipeline())
        .map_err(|e| fail(e, false))?;
    if password.is_some() {
        match conn.recv_response().map_err(|e| fail(e, answered))? {
            Value::Okay => {}
            Value::ServerError(e) => return Err(fail(e.into(), true)),
            _ => {
                return Err(fail(
                    RedisError::from((
                        ErrorKind::AuthenticationFailed,
                        "Password authentication failed",
                    )),
                    true,
                ));
            }
        }
        answered = true;
    }
    if db != 0 {
        if let Value::ServerError(e) = conn.recv_response().map_err(|e| fail(e, answered))? {
            let detail = format!(
                "{} (the URL's database {db}: the server has fewer, see its `databases` setting)",
                e.details().unwrap_or("")
            );
            return Err(fail(
                RedisError::from((
                    redis::ServerErrorKind::ResponseError.into(),
                    "Redis server refused to switch database",
                    detail,
                )),
                true,
            ));
        }
        answered = true;
    }
    if !info {
        return Ok(None);
    }
    if tls {
        return conn
            .recv_response()
            .map(Some)
            .map_err(|e| fail(e, answered));
    }
    conn.set_read_timeout(Some(left.min(HELLO_WAIT)))
        .map_err(|e| fail(e, answered))?;
    let reply = match conn.recv_response() {
        Ok(v) => Some(v),
        Err(e) if e.is_timeout() => None,
        Err(e) => return Err(fail(e, answered)),
    };
    conn.set_read_timeout(Some(left))
        .map_err(|e| fail(e, true))?;
    if reply.is_none() {
        conn.hello_unanswered(sent);
    }
    Ok(reply)
}

/// The version in a reply to `HELLO` (its `version` field) or `INFO server` (`redis_version`).
fn version_in(reply: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    };
    match reply {
        Value::Array(items) => items
            .chunks(2)
            .find(|kv| text(&kv[0]).as_deref() == Some("version"))
            .and_then(|kv| kv.get(1).and_then(text)),
        Value::Map(pairs) => pairs
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some("version"))
            .and_then(|(_, v)| text(v)),
        _ => text(reply)?
            .lines()
            .find_map(|l| l.trim_end().strip_prefix("redis_version:"))
            .map(str::to_owned),
    }
}

/// The description of the error that refuses a server older than [`MIN_VERSION`] (its detail
/// says which server and version; `Error::from_redis` shows the detail alone).
pub(crate) const TOO_OLD: &str = "unsupported server version";

/// The oldest Redis version the library runs on: the oldest the whole suite runs on (its
/// scripts need `LPOS`, 6.0.6, and waiters fractional `BLPOP` timeouts, 6.0; docs/servers.md).
pub(crate) const MIN_VERSION: (u32, u32) = (6, 2);

/// Connects to the first address of `host` that accepts before `deadline`.
fn connect_tcp(host: &str, port: u16, deadline: Instant) -> RedisResult<TcpStream> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, remaining(deadline)?) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(match last {
        Some(e) => e.into(),
        None => RedisError::from((
            ErrorKind::InvalidClientConfig,
            "could not resolve to any addresses",
        )),
    })
}

/// The time left before `deadline`, or a timeout error once it passed.
fn remaining(deadline: Instant) -> RedisResult<Duration> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(left) if !left.is_zero() => Ok(left),
        _ => Err(io::Error::new(io::ErrorKind::TimedOut, "Connection timed out").into()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    /// The endpoint's TCP settings decide Nagle's algorithm for its own connections too.
    #[test]
    fn tcp_connections_follow_the_endpoints_nodelay() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Answers each request (`HELLO`, then `INFO`) with an error: a server that does not
        // tell its version.
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut buf = [0; 256];
                    while s.read(&mut buf).is_ok_and(|n| n > 0) {
                        let _ = s.write_all(b"-ERR unknown command\r\n");
                    }
                });
            }
        });
        for nodelay in [true, false] {
            let info = format!("redis://127.0.0.1:{port}/")
                .parse::<ConnectionInfo>()
                .unwrap()
                .set_tcp_settings(redis::io::tcp::TcpSettings::default().set_nodelay(nodelay));
            let c = Endpoint::new(info, None)
                .connect(Duration::from_secs(5))
                .unwrap();
            let Connection(
                Inner::Own(Own {
                    sock: Sock::Tcp(s), ..
                }),
                None,
                0,
            ) = &c
            else {
                panic!("a plain TCP connection of our own");
            };
            assert_eq!(s.nodelay().unwrap(), nodelay);
        }
    }
}
