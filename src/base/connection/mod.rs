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
//!
//! One file per concern: `endpoint.rs` opens connections (connect, authenticate, the server's
//! version), `socket.rs` is a plain connection's socket and read buffer, `resp.rs` the RESP
//! parser, `poll.rs` the wait on many sockets; this file is the connection itself.

mod endpoint;
mod poll;
mod resp;
mod socket;

use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

pub(crate) use endpoint::{Endpoint, TOO_OLD};
pub(crate) use poll::first_readable;
#[cfg(feature = "fuzzing")]
pub use resp::reply;
use socket::{Own, Sock, reset_on_close};

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
    pub(crate) fn set_read_timeout(&mut self, dur: Option<Duration>) -> RedisResult<()> {
        match &mut self.0 {
            Inner::Own(c) => Ok(c.set_read_timeout(dur)?),
            Inner::Redis(c) => c.set_read_timeout(dur),
        }
    }

    /// Marks the `HELLO` sent at `since` as not answered within the set-up's wait (a plain
    /// connection's first reply then waits counting from it).
    fn hello_unanswered(&mut self, since: std::time::Instant) {
        if let Inner::Own(c) = &mut self.0 {
            c.hello_unanswered(since);
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
