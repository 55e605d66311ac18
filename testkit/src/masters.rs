//! Independent Redis masters for Redlock, on loopback.

use crate::{RedisServer, Server};

/// Independent `redis-server` processes (no replication between them, no persistence), the
/// masters of a Redlock client. Each is a [`RedisServer`]: kill, pause or restart any of them
/// (a restarted master comes back empty).
pub struct RedlockMasters {
    masters: Vec<RedisServer>,
}

impl RedlockMasters {
    /// Starts `n` masters (Redlock needs an odd number, at least 3).
    pub fn start(n: usize) -> RedlockMasters {
        Self::start_on(Server::Redis, n)
    }

    /// Like [`start`](Self::start), running `server`'s program.
    pub fn start_on(server: Server, n: usize) -> RedlockMasters {
        RedlockMasters {
            masters: (0..n).map(|_| RedisServer::start_on(server, &[])).collect(),
        }
    }

    /// `redlock://127.0.0.1:P1,127.0.0.1:P2,...` (every master, in start order).
    pub fn url(&self) -> String {
        let addrs: Vec<String> = self.masters.iter().map(RedisServer::addr).collect();
        format!("redlock://{}", addrs.join(","))
    }

    /// The masters, in the URL's order.
    pub fn masters(&self) -> &[RedisServer] {
        &self.masters
    }
}
