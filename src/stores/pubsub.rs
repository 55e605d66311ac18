//! A waiter's subscription to a lock's channel, for the kinds whose release publishes instead of
//! handing over (`Waits::Channel` of `engine/kinds/mod.rs`), and its rounds in the one wait
//! loop ([`ChannelSession`]).
//!
//! The subscription lives on one connection of the waiters' pool of the server that holds the
//! lock (`LockStore::waiter_node`: the server, a Sentinel group's master, the master of the
//! lock's Cluster slot), so subscribed waiters never starve releases and renewals of
//! connections, and at most `max_waiters` of them are subscribed per server at once. The
//! connection is switched to RESP3 (`HELLO 3`) so that a message arrives as a push, told apart
//! from replies also after a read timed out; it is closed, never reused, when the wait ends. No
//! thread: the waiter reads its own connection.

use std::thread;
use std::time::{Duration, Instant};

use redis::{PushKind, RedisResult, Value};

use crate::base::backoff::Backoff;
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::pool::{Conn, mark_broken};
use crate::stores::wait::{Mode, Round, Session, Step};
use crate::stores::{LockStore, NodeRef};

/// Whether `store` publishes and subscribes sharded (a Cluster; on Redis 7 and later, see
/// `Connection::has_sharded_pubsub`).
pub(crate) fn sharded(store: &dyn LockStore) -> bool {
    store.sharded_pubsub()
}

/// The command that publishes on a lock's channel through `c`, as its subscribers subscribe:
/// SPUBLISH where they subscribe sharded (`sharded`: a Cluster; from Redis 7 on, see
/// `Connection::has_sharded_pubsub`), else PUBLISH (before Redis 7 too).
pub(crate) fn publish_command(sharded: bool, c: &Connection) -> &'static str {
    if sharded && c.has_sharded_pubsub() {
        "spublish"
    } else {
        "publish"
    }
}

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

/// A waiter on a lock's channel: its attempt and its channel (the engine's kinds implement it).
pub(crate) trait Subscriber {
    /// The keys of the lock: they pick the server.
    fn keys(&self) -> &LockKeys;
    /// The channel a release publishes on.
    fn channel(&self) -> &[u8];
    /// Bytes of the waiter's own (anything random): they spread its pauses from other waiters'.
    fn seed(&self) -> &[u8];
    /// One attempt on `c`: take the grant, or find the holder's remaining lease. `retry`: the
    /// call is repeated after a dropped connection, and the first may have been applied.
    /// `sharded`: the store publishes sharded ([`sharded`]), for an attempt that publishes.
    fn attempt(&self, c: &mut Connection, retry: bool, sharded: bool) -> RedisResult<Step>;
}

/// A waiter on a lock's channel made of its parts, the one [`Subscriber`] of every kind that
/// waits on a channel: the lock's keys, the channel,
/// the bytes that spread its pauses, and its attempt (given the connection, whether it is a
/// retry and whether the store publishes sharded).
pub(crate) struct ChannelWaiter<'a, F> {
    pub keys: &'a LockKeys,
    pub channel: Vec<u8>,
    pub seed: &'a [u8],
    pub attempt: F,
}

impl<F> Subscriber for ChannelWaiter<'_, F>
where
    F: Fn(&mut Connection, bool, bool) -> RedisResult<Step>,
{
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn channel(&self) -> &[u8] {
        &self.channel
    }

    fn seed(&self) -> &[u8] {
        self.seed
    }

    fn attempt(&self, c: &mut Connection, retry: bool, sharded: bool) -> RedisResult<Step> {
        (self.attempt)(c, retry, sharded)
    }
}

/// A waiter on a lock's channel: each round subscribes (when not
/// subscribed yet), then makes one attempt and, refused, has the wait loop listen
/// ([`Round::Listen`]) until a message, the holder's remaining lease (the attempt's PTTL) or
/// the loop's re-check, whichever comes first. It has no queue: a release wakes every waiter,
/// and whoever tries first takes the lock. A subscription that cannot be made (every waiter
/// connection in use, the server unreachable) or that fails (a dropped connection, a failover,
/// a moved slot) is made again at the next round; meanwhile the waiter re-checks at the same
/// times, unwoken.
struct ChannelSession<'a> {
    store: &'a dyn LockStore,
    w: &'a dyn Subscriber,
    lease: Duration,
    sub: Option<Subscription<'a>>,
    /// The pauses between rounds whose server cannot serve.
    backoff: Backoff,
    /// The failure of the last round's attempt while its server could not serve: the error of
    /// a wait whose bound ran out meanwhile.
    unreachable: Option<Error>,
    /// The grant of the last round: ours, also when the wait is left (a cancel came meanwhile).
    granted: Option<Grant>,
}

/// A waiter's session on `w`'s channel (see [`ChannelSession`]), as
/// [`LockStore::session`](crate::stores::LockStore::session) makes one on a queue.
pub(crate) fn session<'a>(
    store: &'a dyn LockStore,
    w: &'a dyn Subscriber,
    lease: Duration,
) -> Box<dyn Session + 'a> {
    Box::new(ChannelSession {
        store,
        w,
        lease,
        sub: None,
        backoff: Backoff::new(w.seed()),
        unreachable: None,
        granted: None,
    })
}

impl Session for ChannelSession<'_> {
    fn round(&mut self, _: Mode, planned: Duration, deadline: Instant) -> Result<Round, Error> {
        let store = self.store;
        let keys = self.w.keys();
        let left = || deadline.saturating_duration_since(Instant::now());
        if self.sub.is_none() {
            // Subscribed before the attempt, so that no release after it goes unheard.
            match Subscription::open(store, keys, self.w.channel(), sharded(store), left()) {
                Ok(s) => self.sub = Some(s),
                Err(e) => log::debug!("{}: waiting without a subscription: {e}", keys.shown()),
            }
        }
        let mut sent = Instant::now();
        let mut epoch = 0;
        let step = match store.run(keys, |c, n| {
            sent = Instant::now();
            epoch = c.epoch();
            self.w.attempt(c, n > 0, sharded(store))
        }) {
            Ok(step) => step,
            // Its server died or cannot serve yet (a failover): ridden out within the bound,
            // back to the lock's server as the store finds it then.
            Err(e) if e.is_transient() && !left().is_zero() => {
                let pause = self.backoff.pause().min(left());
                log::debug!(
                    "{}: its server cannot serve ({e}); back in {pause:?}",
                    keys.shown()
                );
                self.sub = None;
                self.unreachable = Some(e);
                return Ok(Round::Pause(pause));
            }
            Err(e) => return Err(e),
        };
        if self.unreachable.take().is_some() {
            self.backoff = Backoff::new(self.w.seed());
        }
        let pttl = match step.into_grant(self.lease, sent, epoch) {
            Ok(grant) => {
                self.granted = Some(grant.clone());
                return Ok(Round::Granted(grant));
            }
            Err(pttl) => pttl,
        };
        if left().is_zero() {
            return Ok(Round::Blocked(None));
        }
        let mut block = planned;
        if pttl >= 0 {
            block = block.min(Duration::from_millis(pttl as u64 + 1));
        }
        Ok(Round::Listen((Instant::now() + block).min(deadline)))
    }

    fn listen(&mut self, d: Duration) -> bool {
        let Some(sub) = self.sub.as_mut() else {
            thread::sleep(d);
            return false;
        };
        match sub.next(d) {
            Ok(heard) => heard,
            Err(e) => {
                log::debug!("{}: the subscription failed: {e}", self.w.keys().shown());
                self.sub = None;
                true
            }
        }
    }

    /// A subscription has no queue entry to take out: the wait ends with the last round's
    /// grant, if it was one.
    fn leave(&mut self) -> Result<Option<Grant>, Error> {
        self.sub = None;
        Ok(self.granted.take())
    }

    fn timed_out(&self, shown: &str, waited: Duration) -> Error {
        match &self.unreachable {
            Some(e) => e.clone(),
            None => Error::wait_timeout(shown, waited),
        }
    }
}
