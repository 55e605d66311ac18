//! The connection pools of a client: connections opened on the calling thread with a connect
//! timeout, read and write timeouts kept on every connection, and a bounded wait for a free one.
//!
//! A pool starts no thread. (r2d2, which served here before, opens every connection on threads
//! of its own that can be neither joined nor used after fork, and lets a caller learn of a
//! refused connect only when its checkout times out; a connect on the caller's thread reports the
//! refusal at once and leaves nothing running when the pool is gone.) A connection that failed
//! with anything but an error reply is dropped instead of being returned, so no PING is needed
//! on checkout.

use std::io;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::sync::{Condvar, Mutex};

use crate::base::config::Config;
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::metrics::Metrics;

/// How a pool reaches the server that holds the locks now: the stores implement it (one
/// server, the master of a Sentinel group, one node of a cluster).
pub(crate) trait Connect: Send + Sync {
    /// A connection to the server that holds the locks now, within `timeout`.
    fn connect(&self, timeout: Duration) -> redis::RedisResult<Connection>;

    /// Which generation of the lock server new and idle connections must belong to: it moves on
    /// when the server that holds the locks changed (a failover), and idle connections of an
    /// older generation are closed instead of used.
    fn generation(&self) -> u64;

    /// Learns from a failed call: whether the error means that the server that holds the locks
    /// changed, so that the call should be repeated on a new connection.
    fn failed_over(&self, e: &redis::RedisError) -> bool;
}

/// One Redis connection of a pool and whether it must be thrown away.
pub(crate) struct Conn {
    pub redis: Connection,
    broken: bool,
    /// The topology's generation when it was opened (see [`Connect::generation`]).
    generation: u64,
}

struct State {
    idle: Vec<(Connection, u64)>,
    /// Connections that exist or are being opened: idle, checked out, or connecting.
    open: u32,
}

/// A pool of at most `max_size` connections to one server, and how to reach and name it.
pub(crate) struct ConnPool {
    topology: Arc<dyn Connect>,
    state: Mutex<State>,
    /// Signalled when a connection comes back or a place for a new one frees up.
    returned: Condvar,
    max_size: u32,
    checkout_timeout: Duration,
    connect_timeout: Duration,
    read_timeout: Duration,
    write_timeout: Duration,
    server: String,
    /// The backend's metrics: connections opened, broken, open now.
    metrics: Arc<Metrics>,
}

/// A connection checked out of a pool; it goes back when dropped (or is closed, if broken).
pub(crate) struct PooledConn<'a> {
    pool: &'a ConnPool,
    conn: Option<Conn>,
}

impl Deref for PooledConn<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn
            .as_ref()
            .expect("a pooled connection is present until dropped")
    }
}

impl DerefMut for PooledConn<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn
            .as_mut()
            .expect("a pooled connection is present until dropped")
    }
}

impl PooledConn<'_> {
    /// The connection itself, still counted as checked out of its pool: for a holder that
    /// keeps it longer than a borrow can say (a waiter across its rounds), which must give it
    /// back with [`ConnPool::put_back`].
    pub(crate) fn into_inner(mut self) -> Conn {
        self.conn
            .take()
            .expect("a pooled connection is present until dropped")
    }
}

impl Drop for ConnPool {
    fn drop(&mut self) {
        // Its idle connections close with it.
        let idle = self.state.get_mut().idle.len();
        self.metrics.connections(-(idle as i64));
    }
}

impl Drop for PooledConn<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.put_back(conn);
        }
    }
}

impl ConnPool {
    /// A pool of at most `size` connections to the topology's lock server; it connects lazily,
    /// on first use.
    pub(crate) fn new(
        cfg: &Config,
        metrics: &Arc<Metrics>,
        topology: Arc<dyn Connect>,
        size: u32,
    ) -> ConnPool {
        ConnPool {
            topology,
            state: Mutex::new(State {
                idle: Vec::new(),
                open: 0,
            }),
            returned: Condvar::new(),
            max_size: size,
            checkout_timeout: cfg.checkout_timeout,
            connect_timeout: cfg.connect_timeout,
            read_timeout: cfg.read_timeout,
            write_timeout: cfg.write_timeout,
            server: cfg.server.clone(),
            metrics: metrics.clone(),
        }
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// A connection within `limit` (at most the checkout timeout): an idle one, else a new one
    /// opened on this thread, else the first one returned. A failed connect is reported at once
    /// with its own kind (refused, timed out, authentication failed).
    pub(crate) fn get(&self, limit: Option<Duration>) -> Result<PooledConn<'_>, Error> {
        let timeout = limit
            .map_or(self.checkout_timeout, |l| l.min(self.checkout_timeout))
            .max(Duration::from_millis(1));
        let deadline = Instant::now() + timeout;
        let generation = self.topology.generation();
        let mut st = self.state.lock();
        loop {
            while let Some((redis, opened_in)) = st.idle.pop() {
                if opened_in == generation {
                    return Ok(self.pooled(redis, generation));
                }
                // A connection to a server that no longer holds the locks (a failover).
                st.open -= 1;
                drop(redis);
                self.metrics.connections(-1);
            }
            if st.open < self.max_size {
                st.open += 1;
                drop(st);
                let left = deadline.saturating_duration_since(Instant::now());
                return match self.connect(self.connect_timeout.min(left)) {
                    Ok(redis) => Ok(self.pooled(redis, self.topology.generation())),
                    Err(e) => {
                        self.metrics.connect_failures.inc();
                        log::debug!("connecting to {} failed: {e}", self.server);
                        self.state.lock().open -= 1;
                        self.returned.notify_one();
                        Err(Error::from_redis(&self.server, &e))
                    }
                };
            }
            if self.returned.wait_until(&mut st, deadline).timed_out() {
                if let Some(i) = st.idle.iter().position(|(_, g)| *g == generation) {
                    let (redis, _) = st.idle.swap_remove(i);
                    return Ok(self.pooled(redis, generation));
                }
                return Err(Error::connection(
                    &self.server,
                    format!(
                        "no connection free within {} ms: all {} connections of the pool are in use",
                        timeout.as_millis(),
                        self.max_size
                    ),
                    true,
                ));
            }
        }
    }

    /// Takes back a connection checked out of this pool (or closes it, if broken).
    pub(crate) fn put_back(&self, conn: Conn) {
        let keep = !conn.broken && redis::ConnectionLike::is_open(&conn.redis);
        let mut st = self.state.lock();
        if keep {
            st.idle.push((conn.redis, conn.generation));
            drop(st);
        } else {
            st.open -= 1;
            drop(st);
            // A call on it failed: nothing it sent and the server has not had yet may reach
            // the server later.
            conn.redis.abort();
        }
        if !keep {
            self.metrics.connections_broken.inc();
            self.metrics.connections(-1);
        }
        self.returned.notify_one();
    }

    fn pooled(&self, redis: Connection, generation: u64) -> PooledConn<'_> {
        PooledConn {
            pool: self,
            conn: Some(Conn {
                redis,
                broken: false,
                generation,
            }),
        }
    }

    fn connect(&self, timeout: Duration) -> redis::RedisResult<Connection> {
        let mut redis = self
            .topology
            .connect(timeout.max(Duration::from_millis(1)))?;
        redis.set_read_timeout(Some(self.read_timeout))?;
        redis.set_write_timeout(Some(self.write_timeout))?;
        self.metrics.connections_opened.inc();
        self.metrics.connections(1);
        Ok(redis)
    }

    /// Whether every connection of the pool is in use (a checkout timeout then means "busy",
    /// not "unreachable").
    pub(crate) fn exhausted(&self) -> bool {
        let st = self.state.lock();
        st.open >= self.max_size && st.idle.is_empty()
    }

    /// Runs `op` on a pooled connection. A connection that fails with anything but an error
    /// reply is dropped from the pool. When it had been dropped by the server (killed, server
    /// restarted), `op` runs again on the next connection with `attempt` ≥ 1, until every idle
    /// connection the pool had may have been tried; so every op must be safe to repeat in its
    /// retry form.
    pub(crate) fn run<T>(
        &self,
        limit: Option<Duration>,
        mut op: impl FnMut(&mut Connection, u32) -> redis::RedisResult<T>,
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
                    // A demoted master's READONLY: the call goes to the new master.
                    let failed_over = self.topology.failed_over(&e);
                    if !reply || failed_over {
                        conn.broken = true;
                    }
                    if attempt <= self.max_size && (failed_over || worth_retrying(&e)) {
                        log::info!("retrying on another connection to {}: {e}", self.server);
                        attempt += 1;
                        continue;
                    }
                    return Err(Error::from_redis(&self.server, &e));
                }
            }
        }
    }
}

impl ConnPool {
    /// For callers that use a connection directly (waiters): whether a failed call may be
    /// repeated on a new connection — [`worth_retrying`], or the lock server changed (a
    /// failover). Call once per error: it also tells the topology about it.
    pub(crate) fn retryable(&self, e: &redis::RedisError) -> bool {
        self.topology.failed_over(e) || worth_retrying(e)
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
    e.is_connection_dropped() || is_interrupted(e)
}

/// Whether the call failed with EINTR, recognised by the I/O error's kind (not its text, which
/// depends on the C library and the locale).
pub(crate) fn is_interrupted(e: &redis::RedisError) -> bool {
    io_error(e).is_some_and(|io| io.kind() == io::ErrorKind::Interrupted)
}

/// The I/O error behind a redis-rs error. redis-rs keeps it as an `Arc<dyn Error>`, which is
/// what its `source()` hands out.
fn io_error(e: &redis::RedisError) -> Option<&io::Error> {
    std::error::Error::source(e)?
        .downcast_ref::<Arc<dyn std::error::Error + Send + Sync>>()?
        .downcast_ref::<io::Error>()
}

/// Marks a connection broken so the pool drops it (used by waiters after a failed BLPOP).
pub(crate) fn mark_broken(conn: &mut Conn) {
    conn.broken = true;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupted_is_recognised_by_its_kind() {
        let eintr = redis::RedisError::from(io::Error::from(io::ErrorKind::Interrupted));
        assert!(is_interrupted(&eintr));
        assert!(worth_retrying(&eintr));
        // The text alone means nothing: another kind with the same words is not EINTR.
        let other = redis::RedisError::from(io::Error::other("Interrupted system call"));
        assert!(!is_interrupted(&other));
        let timeout = redis::RedisError::from(io::Error::from(io::ErrorKind::WouldBlock));
        assert!(!worth_retrying(&timeout));
    }
}
