//! One connection to a Redis server, and the [`Endpoint`] that opens it.
//!
//! Plain TCP and Unix-socket connections are this crate's own: a socket, one read buffer kept for
//! the connection's life (a read does not clear it first), the common replies (`+`, `:`, `$`, `*`,
//! `_`) parsed in place, the rarer ones (errors, RESP3 pushes, maps, …) by redis-rs' parser, and
//! the socket's descriptor for `poll(2)`, so that Redlock's rounds read the masters' replies in the
//! order they arrive (`stores/redlock/round.rs`). TLS connections are redis-rs' own (its rustls
//! stream has no descriptor to poll; they are read in order). Both serve redis-rs'
//! `ConnectionLike`: commands, scripts and pipelines are built with redis-rs either way.
//!
//! Within that, a connection behaves as redis-rs' does: a reply that a read timed out on is
//! skipped when it comes (pushes are never skipped), the end of the stream closes the
//! connection, and error replies are values for pipelines and errors for single commands only
//! where redis-rs makes them so (its `FromRedisValue` conversions).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use redis::{ConnectionAddr, ConnectionInfo, ConnectionLike, ErrorKind, RedisError, RedisResult};
use redis::{ServerErrorKind, Value};

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

    /// Opens a connection, authenticated and on its database, within `timeout` (connect and
    /// set-up together). Its read and write timeouts are then what is left of `timeout`. The
    /// endpoint's first connection asks for the server's version, and refuses a server older
    /// than [`MIN_VERSION`].
    pub(crate) fn connect(&self, timeout: Duration) -> RedisResult<Connection> {
        // A server found too old is asked again (and refused again, unless upgraded meanwhile).
        let known = self
            .version
            .get()
            .copied()
            .filter(|v| v.is_none_or(|v| v >= MIN_VERSION));
        if let Some(client) = &self.tls {
            let c = client.get_connection_with_timeout(timeout)?;
            let mut conn = Connection(Inner::Redis(Box::new(c)), None, 0);
            if known.is_none() {
                let protocol = match self.info.redis_settings().protocol() {
                    redis::ProtocolVersion::RESP2 => 2,
                    _ => 3,
                };
                let hello = answer(redis::cmd("HELLO").arg(protocol).query::<Value>(&mut conn))?;
                conn.1 = self.ask_version(&mut conn, hello)?;
            }
            return Ok(conn);
        }
        let deadline = Instant::now() + timeout;
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
        let left = remaining(deadline)?;
        sock.set_read_timeout(Some(left))?;
        sock.set_write_timeout(Some(left))?;
        let settings = self.info.redis_settings();
        let mut own = Own {
            sock,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
            skip: 0,
            open: true,
            db: settings.db(),
        };
        let hello = own.set_up(
            settings.username(),
            settings.password(),
            settings.db(),
            known.is_none(),
        )?;
        let mut conn = Connection(Inner::Own(own), known.flatten(), 0);
        // Not answered within HELLO_WAIT: the next connection asks again.
        if known.is_none()
            && let Some(hello) = hello
        {
            conn.1 = self.ask_version(&mut conn, answer(Ok(hello))?)?;
        }
        Ok(conn)
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

/// How long a new connection waits for the reply to its `HELLO` (see `Own::set_up`).
const HELLO_WAIT: Duration = Duration::from_millis(200);

/// The oldest Redis version the library runs on: the oldest the whole suite runs on (its
/// scripts need `LPOS`, 6.0.6, and waiters fractional `BLPOP` timeouts, 6.0; docs/servers.md).
pub(crate) const MIN_VERSION: (u32, u32) = (6, 2);

/// How large a connection's read buffer starts (it grows for a larger reply).
const BUFFER: usize = 4096;

/// One connection to a Redis server, the server's version (major, minor) when it told it, and
/// the epoch of the master it was made to (`base/grant.rs` `fencing_token`; 0 but for a
/// Sentinel group's master and a Cluster's).
pub(crate) struct Connection(Inner, Option<(u32, u32)>, u64);

enum Inner {
    Own(Own),
    /// TLS, through redis-rs.
    Redis(Box<redis::Connection>),
}

impl Connection {
    /// Sends commands already packed, without reading their replies.
    pub(crate) fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        match &mut self.0 {
            Inner::Own(c) => c.send(cmd),
            Inner::Redis(c) => c.send_packed_command(cmd),
        }
    }

    /// Reads one reply (a push, or the reply to a command sent earlier).
    pub(crate) fn recv_response(&mut self) -> RedisResult<Value> {
        match &mut self.0 {
            Inner::Own(c) => c.recv(),
            Inner::Redis(c) => c.recv_response(),
        }
    }

    /// Whether the server has sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`: Redis 7.0 and later; a
    /// server that did not tell its version is taken to).
    pub(crate) fn has_sharded_pubsub(&self) -> bool {
        self.1.is_none_or(|v| v >= (7, 0))
    }

    /// The epoch of the master this connection was made to (0 but for a Sentinel group's and a
    /// Cluster's).
    pub(crate) fn epoch(&self) -> u64 {
        self.2
    }

    /// Marks the connection as made to a master of `epoch`.
    pub(crate) fn set_epoch(&mut self, epoch: u64) {
        self.2 = epoch;
    }

    /// Sets how long a read waits (`None`: for ever).
    pub(crate) fn set_read_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        match &self.0 {
            Inner::Own(c) => Ok(c.sock.set_read_timeout(dur)?),
            Inner::Redis(c) => c.set_read_timeout(dur),
        }
    }

    /// Sets how long a write waits (`None`: for ever).
    pub(crate) fn set_write_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        match &self.0 {
            Inner::Own(c) => Ok(c.sock.set_write_timeout(dur)?),
            Inner::Redis(c) => c.set_write_timeout(dur),
        }
    }

    /// Closes the connection at once (a TCP reset): what the kernel has not delivered yet is
    /// discarded. For a connection given up on after a timeout: a request still in its send
    /// queue (the network was cut) would otherwise be retransmitted once the network heals and
    /// run on the server after the caller has moved on (an acquire then holds the name for a
    /// whole lease with nobody to release it).
    pub(crate) fn abort(self) {
        if let Inner::Own(own) = &self.0
            && let Sock::Tcp(s) = &own.sock
        {
            let _ = reset_on_close(s);
        }
    }

    /// The socket to `poll(2)` for a reply, when a reply is not already read into the buffer;
    /// `None` when the next reply can be read at once, and for TLS connections (which are read
    /// in order).
    pub(crate) fn poll_fd(&self) -> Option<RawFd> {
        match &self.0 {
            Inner::Own(c) if c.start == c.end => Some(c.sock.as_raw_fd()),
            _ => None,
        }
    }
}

impl ConnectionLike for Connection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        match &mut self.0 {
            Inner::Own(c) => {
                c.send(cmd)?;
                loop {
                    match c.recv()? {
                        Value::Push { .. } => continue,
                        v => return Ok(v),
                    }
                }
            }
            Inner::Redis(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        match &mut self.0 {
            Inner::Own(c) => {
                c.send(cmd)?;
                let mut replies = Vec::with_capacity(count);
                let mut read = 0;
                while read < offset + count {
                    match c.recv()? {
                        Value::Push { .. } => continue,
                        // The replies before `offset` (a transaction's QUEUED) are not returned;
                        // an error among them aborted the transaction.
                        Value::ServerError(e) if read < offset => return Err(e.into()),
                        v if read >= offset => replies.push(v),
                        _ => {}
                    }
                    read += 1;
                }
                Ok(replies)
            }
            Inner::Redis(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Inner::Own(c) => c.db,
            Inner::Redis(c) => c.get_db(),
        }
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        match &self.0 {
            Inner::Own(c) => c.open,
            Inner::Redis(c) => c.is_open(),
        }
    }
}

/// A plain connection: the socket and what has been read from it but not parsed yet
/// (`buf[start..end]`).
struct Own {
    sock: Sock,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Replies to skip: a read of theirs timed out (or was interrupted), so they arrive late.
    skip: usize,
    open: bool,
    db: i64,
}

impl Own {
    /// Authenticates and selects the database, as redis-rs does on connect, and when `info`
    /// sends `HELLO 2` (its reply returned, an error reply included), which tells the server's
    /// version and keeps the connection on RESP2.
    fn set_up(
        &mut self,
        username: Option<&str>,
        password: Option<&str>,
        db: i64,
        info: bool,
    ) -> RedisResult<Option<Value>> {
        let mut pipe = redis::pipe();
        if let Some(password) = password {
            let auth = pipe.cmd("AUTH");
            if let Some(username) = username {
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
        self.send(&pipe.get_packed_pipeline())?;
        if password.is_some() {
            match self.recv()? {
                Value::Okay => {}
                _ => {
                    return Err(RedisError::from((
                        ErrorKind::AuthenticationFailed,
                        "Password authentication failed",
                    )));
                }
            }
        }
        if db != 0
            && let Value::ServerError(e) = self.recv()?
        {
            let detail = e.details().unwrap_or("").to_owned();
            return Err(RedisError::from((
                ServerErrorKind::ResponseError.into(),
                "Redis server refused to switch database",
                detail,
            )));
        }
        if !info {
            return Ok(None);
        }
        // A server that accepted the connection but does not answer (stopped, overloaded) holds
        // the caller up no longer than this: its reply is skipped when it comes, and the next
        // connection asks again. (A command sent now is answered or timed out as before.)
        let left = self.sock.read_timeout()?.unwrap_or(HELLO_WAIT);
        self.sock.set_read_timeout(Some(left.min(HELLO_WAIT)))?;
        let reply = match self.recv() {
            Ok(v) => Some(v),
            Err(e) if e.is_timeout() => None,
            Err(e) => return Err(e),
        };
        self.sock.set_read_timeout(Some(left))?;
        Ok(reply)
    }

    fn send(&mut self, bytes: &[u8]) -> RedisResult<()> {
        self.sock.write_all(bytes).map_err(|e| {
            let e = RedisError::from(e);
            if e.is_unrecoverable_error() {
                self.open = false;
            }
            e
        })
    }

    /// The next reply that is not skipped.
    fn recv(&mut self) -> RedisResult<Value> {
        loop {
            match self.read_value() {
                Ok(v) if self.skip > 0 && !matches!(v, Value::Push { .. }) => self.skip -= 1,
                Ok(v) => return Ok(v),
                Err(e) => {
                    if e.kind() == ErrorKind::Io && self.open {
                        // Timed out or interrupted: its reply comes later and is skipped then.
                        self.skip += 1;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// The next reply, reading as much as it takes.
    fn read_value(&mut self) -> RedisResult<Value> {
        loop {
            match reply(&self.buf[self.start..self.end]) {
                Ok(Some((value, used))) => {
                    self.start += used;
                    if self.start == self.end {
                        (self.start, self.end) = (0, 0);
                    }
                    return Ok(value);
                }
                Ok(None) => self.fill()?,
                Err(e) => {
                    self.close();
                    return Err(e);
                }
            }
        }
    }

    /// Reads what the socket has (waiting up to the read timeout), making room first.
    fn fill(&mut self) -> RedisResult<()> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        match self.sock.read(&mut self.buf[self.end..]) {
            Ok(0) => {
                self.close();
                Err(io::Error::from(io::ErrorKind::UnexpectedEof).into())
            }
            Ok(n) => {
                self.end += n;
                Ok(())
            }
            Err(e) => {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) {
                    self.close();
                }
                Err(e.into())
            }
        }
    }

    fn close(&mut self) {
        self.open = false;
        let _ = self.sock.shutdown();
    }
}

/// Makes the socket's close send a reset and drop what is unsent or unacknowledged
/// (`SO_LINGER` on, with a zero timeout).
#[allow(unsafe_code)] // setsockopt(2): std's `set_linger` is not stable
fn reset_on_close(s: &TcpStream) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is the stream's, open while `s` is borrowed; the option value is a
    // live `linger` of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits until one of `fds` can be read (or has failed or hung up), at most `timeout`: its index,
/// or `None` when the time passed. A signal does not end the wait.
#[allow(unsafe_code)] // poll(2): the one system call std does not wrap
pub(crate) fn first_readable(fds: &[RawFd], timeout: Duration) -> io::Result<Option<usize>> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Rounded up: a wait of 0.3 ms is 1 ms, not a busy loop.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: `polled` is a live, exclusively borrowed array of `polled.len()` pollfds.
        let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
        if n > 0 {
            return Ok(polled.iter().position(|p| p.revents != 0));
        }
        if n == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

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

enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_read_timeout(dur),
            Sock::Unix(s) => s.set_read_timeout(dur),
        }
    }
    fn read_timeout(&self) -> io::Result<Option<Duration>> {
        match self {
            Sock::Tcp(s) => s.read_timeout(),
            Sock::Unix(s) => s.read_timeout(),
        }
    }
    fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_write_timeout(dur),
            Sock::Unix(s) => s.set_write_timeout(dur),
        }
    }
    fn shutdown(&self) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.write_all(buf),
            Sock::Unix(s) => s.write_all(buf),
        }
    }
}

impl AsRawFd for Sock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
}

/// The complete reply at the start of `b` and where it ends; `None` while it is not complete.
/// Framed first (no allocation), parsed once whole: a large reply that comes in many reads is not
/// built again after each.
fn reply(b: &[u8]) -> RedisResult<Option<(Value, usize)>> {
    match frame(b, 0, 0)? {
        Some(_) => parse(b, 0),
        None => Ok(None),
    }
}

/// The reply that starts at `b[at]` and where it ends; `None` while it is not complete.
fn parse(b: &[u8], at: usize) -> RedisResult<Option<(Value, usize)>> {
    let Some(&kind) = b.get(at) else {
        return Ok(None);
    };
    if !matches!(kind, b'+' | b':' | b'$' | b'*' | b'_') {
        // Rarer replies: framed here, read by redis-rs' parser.
        return Ok(match frame(b, at, 0)? {
            Some(end) => Some((redis::parse_redis_value(&b[at..end])?, end)),
            None => None,
        });
    }
    let Some((line, next)) = line(b, at + 1)? else {
        return Ok(None);
    };
    let value = match kind {
        b'+' if line == b"OK" => Value::Okay,
        b'+' => Value::SimpleString(String::from_utf8_lossy(line).into_owned()),
        b':' => Value::Int(number(line, at)?),
        b'_' => Value::Nil,
        b'$' => {
            let Ok(n) = usize::try_from(length(line, at)?) else {
                return Ok(Some((Value::Nil, next)));
            };
            let Some(data) = b.get(next..next + n + 2) else {
                return Ok(None);
            };
            if !data.ends_with(b"\r\n") {
                return Err(parse_error(at, "a bulk string does not end with CRLF"));
            }
            return Ok(Some((Value::BulkString(data[..n].to_vec()), next + n + 2)));
        }
        _ => {
            let Ok(n) = usize::try_from(length(line, at)?) else {
                return Ok(Some((Value::Nil, next)));
            };
            let mut items = Vec::with_capacity(n.min(1024));
            let mut pos = next;
            for _ in 0..n {
                let Some((item, end)) = parse(b, pos)? else {
                    return Ok(None);
                };
                items.push(item);
                pos = end;
            }
            return Ok(Some((Value::Array(items), pos)));
        }
    };
    Ok(Some((value, next)))
}

/// Where the reply that starts at `b[at]` ends, whatever its type; `None` while incomplete.
/// `depth`: how many aggregates it is inside of (a peer that is not Redis must not exhaust the
/// stack with `*1` after `*1`).
fn frame(b: &[u8], at: usize, depth: usize) -> RedisResult<Option<usize>> {
    let Some(&kind) = b.get(at) else {
        return Ok(None);
    };
    if !b"+-:_#,($=!*~>%|".contains(&kind) {
        return Err(parse_error(at, "not a RESP type"));
    }
    if depth > MAX_DEPTH {
        return Err(parse_error(at, "aggregates nested too deep"));
    }
    let Some((line, next)) = line(b, at + 1)? else {
        return Ok(None);
    };
    let items = match kind {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => return Ok(Some(next)),
        b'$' | b'=' | b'!' => {
            let Ok(n) = usize::try_from(length(line, at)?) else {
                return Ok(Some(next));
            };
            return Ok((b.len() >= next + n + 2).then_some(next + n + 2));
        }
        b'*' | b'~' | b'>' => length(line, at)?,
        _ => length(line, at)?.saturating_mul(2),
    };
    let mut pos = next;
    for _ in 0..items.max(0) {
        match frame(b, pos, depth + 1)? {
            Some(end) => pos = end,
            None => return Ok(None),
        }
    }
    Ok(Some(pos))
}

/// The line that starts at `b[at]` (without its CRLF) and where the next one starts; `None`
/// while incomplete. A line longer than Redis' own inline limit (64 KB) is refused: a peer that is
/// not Redis must not make the buffer grow without end.
fn line(b: &[u8], at: usize) -> RedisResult<Option<(&[u8], usize)>> {
    let Some(rest) = b.get(at..) else {
        return Ok(None);
    };
    match rest.iter().position(|&c| c == b'\r') {
        Some(cr) => Ok((rest.len() > cr + 1).then(|| (&rest[..cr], at + cr + 2))),
        None if rest.len() > MAX_LINE => Err(parse_error(at, "a line longer than 64 KB")),
        None => Ok(None),
    }
}

/// An integer reply, or a length.
fn number(line: &[u8], at: usize) -> RedisResult<i64> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| parse_error(at, "not a number"))
}

/// A length. Lengths beyond Redis' own limit on a bulk string (512 MB) are refused: a peer that
/// is not Redis must not make the buffer grow without end.
fn length(line: &[u8], at: usize) -> RedisResult<i64> {
    match number(line, at)? {
        n if n > MAX_LENGTH => Err(parse_error(at, "a length beyond 512 MB")),
        n => Ok(n),
    }
}

const MAX_LENGTH: i64 = 512 << 20;
const MAX_LINE: usize = 64 << 10;
/// Far deeper than any reply of Redis (the lock scripts' replies are one level deep).
const MAX_DEPTH: usize = 128;

/// A stream that is not RESP: worded as redis-rs' parser words it ("Parse error at …"), which is
/// how `Error::from_redis` tells a peer that is not a Redis server.
fn parse_error(at: usize, what: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Parse,
        "Invalid response",
        format!("Parse error at {at}: {what}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(bytes: &[u8]) -> RedisResult<Option<(Value, usize)>> {
        reply(bytes)
    }

    #[test]
    fn parses_the_common_replies_in_place() {
        assert_eq!(one(b"+OK\r\n").unwrap(), Some((Value::Okay, 5)));
        assert_eq!(
            one(b"+PONG\r\n").unwrap(),
            Some((Value::SimpleString("PONG".into()), 7))
        );
        assert_eq!(one(b":-42\r\n").unwrap(), Some((Value::Int(-42), 6)));
        assert_eq!(one(b"$-1\r\n").unwrap(), Some((Value::Nil, 5)));
        assert_eq!(one(b"*-1\r\n").unwrap(), Some((Value::Nil, 5)));
        assert_eq!(one(b"_\r\n").unwrap(), Some((Value::Nil, 3)));
        assert_eq!(
            one(b"$3\r\na\r\n\r\n").unwrap(),
            Some((Value::BulkString(b"a\r\n".to_vec()), 9))
        );
        assert_eq!(
            one(b"*2\r\n:1\r\n$1\r\nx\r\n+rest").unwrap(),
            Some((
                Value::Array(vec![Value::Int(1), Value::BulkString(b"x".to_vec())]),
                15
            ))
        );
    }

    #[test]
    fn an_incomplete_reply_waits_for_more() {
        for whole in [
            &b"$5\r\nhello\r\n"[..],
            b"*2\r\n:1\r\n-ERR no\r\n",
            b">2\r\n+a\r\n+b\r\n",
        ] {
            for cut in 0..whole.len() {
                assert_eq!(one(&whole[..cut]).unwrap(), None, "{cut} of {whole:?}");
            }
            assert!(one(whole).unwrap().is_some());
        }
    }

    #[test]
    fn rarer_replies_are_redis_rs_values() {
        let (v, end) = one(b"-NOSCRIPT No matching script\r\n").unwrap().unwrap();
        assert_eq!(end, 30);
        assert!(
            matches!(&v, Value::ServerError(e) if e.code() == "NOSCRIPT"),
            "{v:?}"
        );
        let (v, _) = one(b"*2\r\n:1\r\n-ERR no\r\n").unwrap().unwrap();
        assert!(matches!(&v, Value::Array(a) if matches!(a[1], Value::ServerError(_))));
        let (v, end) = one(b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\np\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(end, 31);
        assert!(matches!(v, Value::Push { .. }), "{v:?}");
        assert_eq!(
            one(b"%1\r\n+a\r\n:1\r\n").unwrap().map(|(_, e)| e),
            Some(12)
        );
    }

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

    #[test]
    fn a_stream_that_is_not_resp_is_a_parse_error() {
        for bytes in [
            &b"HTTP/1.1 400 Bad Request\r\n"[..],
            b"SSH-2.0-OpenSSH\r\n",
            b":x\r\n",
            b"$999999999999\r\n",
            b"\x15\x03\x03\x00\x02\x02\x32",
            &[&b"+"[..], &[b'a'; 70_000]].concat(),
            &[&b"*1\r\n".repeat(200)[..], b":1\r\n"].concat(),
        ] {
            let e = one(bytes).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Parse, "{bytes:?}");
            assert!(e.detail().unwrap().starts_with("Parse error at"), "{e}");
        }
    }
}
