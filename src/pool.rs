//! The r2d2 connection pools of a client, with a connection manager that sets every timeout.
//!
//! redis-rs' own r2d2 manager sets no connect timeout and clears the read/write timeouts, and
//! r2d2 PINGs on every checkout by default. This manager connects with a timeout, keeps read and
//! write timeouts on every connection, and never PINGs on checkout: a connection that failed is
//! marked broken and dropped by the pool instead.

use std::time::Duration;

use r2d2::{ManageConnection, Pool, PooledConnection};

use crate::config::{Config, redis_client};
use crate::error::Error;

/// One pooled Redis connection and whether it must be thrown away.
pub(crate) struct Conn {
    pub redis: redis::Connection,
    broken: bool,
}

/// Connects with `connect_timeout` and keeps the configured read/write timeouts.
pub(crate) struct Manager {
    client: redis::Client,
    connect_timeout: Duration,
    read_timeout: Duration,
    write_timeout: Duration,
}

impl ManageConnection for Manager {
    type Connection = Conn;
    type Error = redis::RedisError;

    fn connect(&self) -> Result<Conn, redis::RedisError> {
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
    read_timeout: Duration,
    server: String,
}

impl ConnPool {
    /// A pool of at most `size` connections; it connects lazily, on first use.
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        size: u32,
    ) -> Result<ConnPool, Error> {
        let client = redis_client(cfg, info)?;
        let manager = Manager {
            client,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            write_timeout: cfg.write_timeout,
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
            read_timeout: cfg.read_timeout,
            server: cfg.server.clone(),
        })
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// A connection within `limit` (at most the checkout timeout).
    pub(crate) fn get(&self, limit: Option<Duration>) -> Result<PooledConnection<Manager>, Error> {
        let timeout = limit.map_or(self.checkout_timeout, |l| l.min(self.checkout_timeout));
        self.pool
            .get_timeout(timeout.max(Duration::from_millis(1)))
            .map_err(|e| {
                Error::connection(
                    &self.server,
                    format!("no connection within {} ms: {e}", timeout.as_millis()),
                    true,
                )
            })
    }

    /// Whether every connection of the pool is in use (a checkout timeout then means "busy",
    /// not "unreachable").
    pub(crate) fn exhausted(&self) -> bool {
        let s = self.pool.state();
        s.connections >= self.max_size && s.idle_connections == 0
    }

    /// Runs `op` on a pooled connection. A connection that fails with anything but an error
    /// reply is dropped from the pool; when it had been dropped by the server (killed, server
    /// restarted), `op` runs once more on a fresh connection with `attempt` 1, so every op must
    /// be safe to repeat in its attempt-1 form.
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
                    if attempt == 0 && e.is_connection_dropped() && !e.is_timeout() {
                        attempt = 1;
                        continue;
                    }
                    return Err(Error::from_redis(&self.server, &e));
                }
            }
        }
    }
}

/// Marks a connection broken so the pool drops it (used by waiters after a failed BLPOP).
pub(crate) fn mark_broken(conn: &mut PooledConnection<Manager>) {
    conn.broken = true;
}
