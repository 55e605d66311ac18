//! A waiter's subscription to a lock's channel, for the kinds whose release publishes instead of
//! handing over (Redisson's RLock, `engine/kinds/redisson.rs`).
//!
//! The subscription lives on one connection of the waiters' pool of the server that holds the
//! lock (`LockStore::waiter_node`: the server, a Sentinel group's master, the master of the
//! lock's Cluster slot), so subscribed waiters never starve releases and renewals of
//! connections, and at most `max_waiters` of them are subscribed per server at once. The
//! connection is switched to RESP3 (`HELLO 3`) so that a message arrives as a push, told apart
//! from replies also after a read timed out; it is closed, never reused, when the wait ends. No
//! thread: the waiter reads its own connection.

use std::time::Duration;

use redis::{PushKind, Value};

use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::pool::{Conn, mark_broken};
use crate::stores::{LockStore, NodeRef};

/// One waiter's subscription to one channel.
pub(crate) struct Subscription<'a> {
    node: NodeRef<'a>,
    conn: Option<Conn>,
}

impl<'a> Subscription<'a> {
    /// Subscribes to `channel` (`SSUBSCRIBE` when `sharded`, else `SUBSCRIBE`) on the server
    /// that holds `keys`' lock, waiting at most `limit` for a connection.
    pub(crate) fn open(
        store: &'a dyn LockStore,
        keys: &LockKeys,
        channel: &[u8],
        sharded: bool,
        limit: Duration,
    ) -> Result<Subscription<'a>, Error> {
        let node = store.waiter_node(keys)?;
        let conn = node.wait.get(Some(limit))?.into_inner();
        let mut sub = Subscription {
            node,
            conn: Some(conn),
        };
        let server = sub.node.wait.server().to_owned();
        let c = &mut sub.conn.as_mut().expect("set above").redis;
        let sharded = sharded && c.has_sharded_pubsub(); // none before Redis 7
        let subscribe = if sharded { "SSUBSCRIBE" } else { "SUBSCRIBE" };
        let confirmed = (|| -> redis::RedisResult<()> {
            redis::cmd("HELLO").arg(3).exec(c)?;
            c.send_packed_command(&redis::cmd(subscribe).arg(channel).get_packed_command())?;
            // The confirmation: a push of kind (s)subscribe.
            loop {
                if let Value::Push { kind, .. } = c.recv_response()?
                    && matches!(kind, PushKind::Subscribe | PushKind::SSubscribe)
                {
                    return Ok(());
                }
            }
        })();
        confirmed.map_err(|e| Error::from_redis(&server, &e))?;
        Ok(sub)
    }

    /// Waits up to `timeout` (at least 1 ms) for a message on the channel: `true` when one came,
    /// `false` when the time passed.
    pub(crate) fn next(&mut self, timeout: Duration) -> Result<bool, Error> {
        let server = self.node.wait.server();
        let c = &mut self.conn.as_mut().expect("present until dropped").redis;
        let timeout = timeout.max(Duration::from_millis(1));
        c.set_read_timeout(Some(timeout))
            .map_err(|e| Error::from_redis(server, &e))?;
        loop {
            match c.recv_response() {
                Ok(Value::Push {
                    kind: PushKind::Message | PushKind::SMessage,
                    ..
                }) => return Ok(true),
                // A confirmation, or another push: not a release.
                Ok(_) => {}
                Err(e) if e.is_timeout() => return Ok(false),
                Err(e) => return Err(Error::from_redis(server, &e)),
            }
        }
    }
}

impl Drop for Subscription<'_> {
    fn drop(&mut self) {
        if let Some(mut conn) = self.conn.take() {
            // Subscribed and in RESP3: never handed to another caller.
            mark_broken(&mut conn);
            self.node.wait.put_back(conn);
        }
    }
}
