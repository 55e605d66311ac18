//! One Redis server.

use std::time::Duration;

use crate::config::{Config, redis_client};
use crate::error::Error;

/// One server, reached through one redis-rs client (with the configured TLS roots).
pub(crate) struct Single {
    client: redis::Client,
}

impl Single {
    pub(crate) fn new(cfg: &Config, info: &redis::ConnectionInfo) -> Result<Single, Error> {
        Ok(Single {
            client: redis_client(cfg, info)?,
        })
    }

    pub(crate) fn connect(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        self.client.get_connection_with_timeout(timeout)
    }
}
