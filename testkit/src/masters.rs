//! Independent Redis masters for Redlock, on loopback.

use crate::RedisServer;

/// Independent `redis-server` processes (no replication between them, no persistence), the
/// masters of a Redlock client. Each is a [`RedisServer`]: kill, pause or restart any of them
/// (a restarted master comes back empty).
pub struct RedlockMasters {
    masters: Vec<RedisServer>,
}

impl RedlockMasters {
    /// Starts `n` masters (Redlock needs an odd number, at least 3).
    pub fn start(n: usize) -> RedlockMasters {
        RedlockMasters {
            masters: (0..n).map(|_| RedisServer::start()).collect(),
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
