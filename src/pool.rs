//! The r2d2 connection pools of a client, with a connection manager that sets every timeout.
//!
//! redis-rs' own r2d2 manager sets no connect timeout and clears the read/write timeouts, and
//! r2d2 PINGs on every checkout by default. This manager connects with a timeout, keeps read and
//! write timeouts on every connection, and never PINGs on checkout: a connection that failed is
//! marked broken and dropped by the pool instead.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use r2d2::{ManageConnection, Pool, PooledConnection};

use crate::config::{Config, redis_client};
use crate::error::Error;

/// How long after a failed connect checkouts stay short (see [`ConnPool::get`]).
const FAILING_FOR: Duration = Duration::from_secs(10);

/// One pooled Redis connection and whether it must be thrown away.
pub(crate) struct Conn {
    pub redis: redis::Connection,
    broken: bool,
}

/// The last failed connect, kept until a connect succeeds: r2d2 reports only "timed out" for a
/// checkout whose connects failed, and callers deserve the real reason (refused, bad password).
type LastError = Arc<Mutex<Option<(Instant, redis::RedisError)>>>;

/// Connects with `connect_timeout` and keeps the configured read/write timeouts.
pub(crate) struct Manager {
    client: redis::Client,
    connect_timeout: Duration,
    read_timeout: Duration,
    write_timeout: Duration,
    last_error: LastError,
}

impl Manager {
    fn open(&self) -> Result<Conn, redis::RedisError> {
        let redis = self
            .client
            .get_connection_with_timeout(self.connect_timeout)?;
        redis.set_read_timeout(Some(self.read_timeout))?;
        redis.set_write_timeout(Some(self.write_timeout))?;
        Ok(Conn {
            redis,
            broken: false,
        })
    }
}

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<Conn, redis::RedisError> {
        let result = self.open();
        *self.last_error.lock() = result.as_ref().err().map(|e| (Instant::now(), e.clone()));
        result
    }

    fn is_valid(&self, conn: &mut Conn) -> Result<(), redis::RedisError> {
        redis::cmd("PING").query(&mut conn.redis)
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken || !redis::ConnectionLike::is_open(&conn.redis)
    }
}

/// A pool of connections to one server, and how to reach and name it.
pub(crate) struct ConnPool {
    pool: Pool<Manager>,
    max_size: u32,
    checkout_timeout: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    server: String,
    last_error: LastError,
}

impl ConnPool {
    /// A pool of at most `size` connections; it connects lazily, on first use.
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        size: u32,
    ) -> Result<ConnPool, Error> {
        let client = redis_client(cfg, info)?;
        let last_error = LastError::default();
        let manager = Manager {
            client,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            write_timeout: cfg.write_timeout,
            last_error: last_error.clone(),
        };
        let pool = Pool::builder()
            .max_size(size)
            .min_idle(Some(0))
            .test_on_check_out(false)
            .connection_timeout(cfg.checkout_timeout)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(manager);
        Ok(ConnPool {
            pool,
            max_size: size,
            checkout_timeout: cfg.checkout_timeout,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            server: cfg.server.clone(),
            last_error,
        })
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// A connection within `limit` (at most the checkout timeout). While connects keep failing,
    /// a checkout gives up after about one connect attempt, with the connect error's own kind
    /// (refused, timed out, authentication failed) rather than the whole checkout timeout.
    pub(crate) fn get(&self, limit: Option<Duration>) -> Result<PooledConnection<Manager>, Error> {
        let mut timeout = limit.map_or(self.checkout_timeout, |l| l.min(self.checkout_timeout));
        let failing = self
            .last_error
            .lock()
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < FAILING_FOR);
        if failing {
            timeout = timeout.min(self.connect_timeout + Duration::from_millis(50));
        }
        self.pool
            .get_timeout(timeout.max(Duration::from_millis(1)))
            .map_err(|e| {
                let last = self.last_error.lock().clone();
                match last {
                    Some((_, cause)) if !self.exhausted() => {
                        Error::from_redis(&self.server, &cause)
                    }
                    _ => Error::connection(
                        &self.server,
                        format!("no connection within {} ms: {e}", timeout.as_millis()),
                        true,
                    ),
                }
            })
    }

    /// Whether every connection of the pool is in use (a checkout timeout then means "busy",
    /// not "unreachable").
    pub(crate) fn exhausted(&self) -> bool {
        let s = self.pool.state();
        s.connections >= self.max_size && s.idle_connections == 0
    }

    /// Runs `op` on a pooled connection. A connection that fails with anything but an error
    /// reply is dropped from the pool. When it had been dropped by the server (killed, server
    /// restarted), `op` runs again on the next connection with `attempt` ≥ 1, until every idle
    /// connection the pool had may have been tried; so every op must be safe to repeat in its
    /// retry form.
    pub(crate) fn run<T>(
        &self,
        limit: Option<Duration>,
        mut op: impl FnMut(&mut redis::Connection, u32) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        let mut attempt = 0;
        loop {
            let mut conn = self.get(limit)?;
            match op(&mut conn.redis, attempt) {
                Ok(v) => return Ok(v),
                Err(e) => {
                    let reply = matches!(
                        e.kind(),
                        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                    );
                    if !reply {
                        conn.broken = true;
                    }
                    if attempt <= self.max_size && worth_retrying(&e) {
                        attempt += 1;
                        continue;
                    }
                    return Err(Error::from_redis(&self.server, &e));
                }
            }
        }
    }
}

/// Whether a failed call may be repeated on another connection: the server dropped the
/// connection (killed, restarted), or a signal interrupted the blocking read or write (EINTR;
/// the socket's timeouts keep the kernel from restarting it). The connection itself is
/// discarded either way, as a reply may still be on its way.
pub(crate) fn worth_retrying(e: &redis::RedisError) -> bool {
    if e.is_timeout() {
        return false;
    }
    // redis-rs keeps the io::Error behind an `Arc<dyn Error>`, out of reach of a downcast.
    let interrupted = e.is_io_error() && e.to_string().contains("Interrupted system call");
    e.is_connection_dropped() || interrupted
}

/// Marks a connection broken so the pool drops it (used by waiters after a failed BLPOP).
pub(crate) fn mark_broken(conn: &mut PooledConnection<Manager>) {
    conn.broken = true;
}
