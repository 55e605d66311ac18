//! Redisson's RLock, spoken as Redisson writes it (its scripts at the tags redisson-3.52.0 and
//! redisson-4.7.0; docs/redisson.md), so that Java services locking with `RLock` and this
//! library lock the same resource.
//!
//! The lock is a hash at the lock's key (the name, after the client's key prefix) with one field,
//! `<client id>:<thread id>`, whose value counts the holds of that owner (reentrancy). The client
//! id is a UUID made once per client backend (per process); the thread id is the calling
//! operating-system thread's (`gettid`), so the same thread taking the lock again gets another
//! hold, and another thread waits. Release (REDISSON_UNLOCK) takes one hold off; the last one
//! deletes the hash and publishes the unlock message (`0`) on `redisson_lock__channel:{name}`
//! (`SPUBLISH` on a Cluster, as Redisson does with sharded pub/sub, its default there on Redis 7
//! and later; `PUBLISH` on an older Cluster, as Redisson falls back to), guarded by an unlock latch key so that a release repeated after a dropped
//! connection answers what the first one did. Renewal is the library's: every lease/3 (with the
//! lease of Redisson's watchdog, 30 s, every 10 s), REDISSON_RENEW.
//!
//! A waiter does as Redisson's: it subscribes to the lock's channel, then tries again at each
//! message and at the holder's remaining lease (the attempt's PTTL), whichever comes first,
//! within its wait bound: the one wait loop (`engine/wait.rs`) drives it through its session on
//! the channel (`stores/pubsub.rs`). It has no queue: a release wakes every waiter, and whoever
//! tries first takes the lock (no FIFO handoff, as with RLock).

use std::sync::atomic::{AtomicU64, Ordering};

use redis::RedisResult;

use super::{Acquiring, Rules, Waits};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::scripts::scripts;
use crate::base::token::{Token, random_hex};
use crate::engine::backend::Backend;
use crate::stores::LockStore;
use crate::stores::extend::ExtendScript;
use crate::stores::pubsub::{ChannelWaiter, publish_command, sharded};
use crate::stores::wait::Step;

scripts! {
    // Redisson's own scripts.
    [] {
        /// REDISSON_LOCK: take (or take again) Redisson's lock hash: `redisson_lock.lua`.
        static REDISSON_LOCK = ["redisson_lock.lua"];
        /// REDISSON_UNLOCK: release one hold, publish the unlock message: `redisson_unlock.lua`.
        static REDISSON_UNLOCK = ["redisson_unlock.lua"];
        /// REDISSON_RENEW: reset the lease while the owner holds it: `redisson_renew.lua`.
        static REDISSON_RENEW = ["redisson_renew.lua"];
    }
}

/// The message Redisson's unlock publishes (`LockPubSub.UNLOCK_MESSAGE`).
const UNLOCK_MESSAGE: u8 = 0;

/// Redisson's lock, held by the calling thread: one hold of it.
#[derive(Debug)]
pub(crate) struct RedissonRules {
    /// The lease, which a release that keeps a hold resets.
    lease_ms: u64,
    /// The id of this hold's unlock latch (see [`Rules::release`]).
    latch: Box<str>,
}

impl RedissonRules {
    /// A hold with `lease_ms`, its latch id new.
    pub(crate) fn new(pid: u32, lease_ms: u64) -> Result<RedissonRules, Error> {
        Ok(RedissonRules {
            lease_ms,
            latch: random_hex::<16>(pid)?.into(),
        })
    }
}

impl Rules for RedissonRules {
    fn descriptor(&self) -> &'static Descriptor {
        &kind::REDISSON
    }

    /// The hash field of the calling thread: `<client id>:<thread id>`.
    fn token(&self, b: &Backend) -> Result<Token, Error> {
        Ok(Token::from_held(field(&b.id, thread_id())))
    }

    fn try_once(
        &self,
        a: &Acquiring<'_>,
        store: &dyn LockStore,
        sent: &mut bool,
    ) -> Result<Option<Grant>, Error> {
        store.attempt(a.keys, a.lease, sent, &mut |c, _| {
            attempt(c, a.keys, a.token, self.lease_ms)
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        // Redisson's waiter: the lock's channel, and the attempt; its pauses spread by the
        // hold's latch id (random).
        let (keys, token, lease_ms) = (a.keys, a.token, self.lease_ms);
        Ok(Waits::Channel(Box::new(ChannelWaiter {
            keys,
            channel: channel(keys),
            seed: self.latch.as_bytes(),
            attempt: move |c: &mut Connection, _retry: bool, _sharded: bool| {
                attempt(c, keys, token, lease_ms)
            },
        })))
    }

    /// REDISSON_UNLOCK, then the latch deleted, as Redisson does: takes one hold off, and the
    /// last one publishes the unlock message. The latch id is the hold's own: a release
    /// repeated after an unanswered one (a failover) finds the latch the first left and takes
    /// no second hold off.
    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        let store = &*b.store;
        let cfg = store.cfg();
        let mut latch = prefixed("redisson_unlock_latch", keys.lock());
        latch.push(b':');
        latch.extend_from_slice(self.latch.as_bytes());
        // As long as the release may be repeated after dropped connections (Redisson: its
        // timeout and retry delay times its retry attempts).
        let latch_ms = (3 * (cfg.connect_timeout + cfg.read_timeout + cfg.write_timeout))
            .as_millis()
            .max(1) as u64;
        let released: Option<i64> = store.run(keys, |c, _| {
            let publish = publish_command(sharded(store), c);
            REDISSON_UNLOCK
                .key(keys.lock())
                .key(channel(keys))
                .key(&latch)
                .arg(UNLOCK_MESSAGE)
                .arg(self.lease_ms)
                .arg(token.as_str())
                .arg(publish)
                .arg(latch_ms)
                .invoke(c)
        })?;
        let _ = store.run(keys, |c, _| redis::cmd("DEL").arg(&latch).exec(c));
        Ok(released.is_some())
    }
}

/// REDISSON_RENEW: the hash's lease, if the owner's field is there.
impl ExtendScript for RedissonRules {
    fn script(&self) -> &'static redis::Script {
        &REDISSON_RENEW
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        pipe.arg(1)
            .arg(keys.lock())
            .arg(lease_ms)
            .arg(token.as_str());
    }
}

/// REDISSON_LOCK: one attempt (also the waiter's). Repeated after a dropped connection it may
/// count a hold twice; the lock then outlives its last release by at most one lease (renewal has
/// stopped).
fn attempt(c: &mut Connection, keys: &LockKeys, token: &Token, lease_ms: u64) -> RedisResult<Step> {
    let pttl: Option<i64> = REDISSON_LOCK
        .key(keys.lock())
        .arg(lease_ms)
        .arg(token.as_str())
        .invoke(c)?;
    Ok(match pttl {
        None => Step::granted(0, lease_ms as i64),
        Some(pttl) => Step::Queued { pttl },
    })
}

/// The hash field of an owner: Redisson's `getLockName(threadId)`, `id + ":" + threadId`.
pub(crate) fn field(client_id: &str, thread: u64) -> String {
    format!("{client_id}:{thread}")
}

/// The calling operating-system thread's id (Linux's tid, read once per thread from
/// `/proc/thread-self`); where there is none, a number of this process's own for the thread.
pub(crate) fn thread_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TID: u64 = std::fs::read_link("/proc/thread-self")
            .ok()
            .and_then(|p| p.file_name()?.to_str()?.parse().ok())
            .unwrap_or_else(|| NEXT.fetch_add(1, Ordering::Relaxed));
    }
    TID.with(|t| *t)
}

/// Redisson's `prefixName(prefix, name)`: `prefix:{name}`, or `prefix:name` when the name has a
/// `{` (its own hash tag).
fn prefixed(prefix: &str, name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + name.len() + 3);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b':');
    if name.contains(&b'{') {
        out.extend_from_slice(name);
    } else {
        out.push(b'{');
        out.extend_from_slice(name);
        out.push(b'}');
    }
    out
}

/// The lock's channel: `redisson_lock__channel:{name}`.
pub(crate) fn channel(keys: &LockKeys) -> Vec<u8> {
    prefixed("redisson_lock__channel", keys.lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_redissons() {
        assert_eq!(
            prefixed("redisson_lock__channel", b"orders"),
            b"redisson_lock__channel:{orders}"
        );
        assert_eq!(
            prefixed("redisson_lock__channel", b"{o}:7"),
            b"redisson_lock__channel:{o}:7"
        );
        assert_eq!(field("u", 12), "u:12");
    }
}
