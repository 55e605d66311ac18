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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::RedisResult;

use super::{Holding, Kind, Waits, other_kind};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::LockOptions;
use crate::base::keys::LockKeys;
use crate::base::scripts;
use crate::base::token::{Token, random_hex};
use crate::engine::acquire;
use crate::engine::backend::{Backend, Owner};
use crate::engine::cancel::Cancel;
use crate::engine::lock::Held;
use crate::stores::pubsub::{Subscriber, sharded};
use crate::stores::wait::Step;
use crate::stores::{Check, LockStore};

/// The message Redisson's unlock publishes (`LockPubSub.UNLOCK_MESSAGE`).
const UNLOCK_MESSAGE: u8 = 0;

/// Redisson's lock on `keys`, held by the calling thread (see [`acquire`](acquire::acquire)).
pub(crate) fn acquire(
    owner: &Arc<Owner>,
    keys: &LockKeys,
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
) -> Result<Held, Error> {
    acquire::check(opts, wait, cancel, || keys.shown())?;
    let b = owner.backend();
    b.store.check(Check::Kind {
        what: "a Redisson lock",
        shown: &keys.shown(),
    })?;
    let token = Token::from_held(field(&b.id, thread_id()));
    let kind = Redisson {
        keys,
        token: &token,
        lease: opts.lease,
        latch: random_hex::<16>(b.pid)?.into(),
        channel: channel(keys),
    };
    acquire::acquire(owner, &kind, opts, wait, cancel).map(|(held, _)| held)
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

/// A client id in Redisson's form (`UUID.randomUUID()`): 128 random bits as a version-4 UUID.
pub(crate) fn client_id(pid: u32) -> Result<String, Error> {
    let hex = random_hex::<16>(pid)?.into_bytes();
    let mut s = String::with_capacity(36);
    for (i, &c) in hex.iter().enumerate() {
        if matches!(i, 8 | 12 | 16 | 20) {
            s.push('-');
        }
        s.push(match i {
            12 => '4',
            16 => ['8', '9', 'a', 'b'][usize::from(c) % 4],
            _ => c as char,
        });
    }
    Ok(s)
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

/// Redisson's lock, as one acquire asks for it.
struct Redisson<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    lease: Duration,
    /// The id of this hold's unlock latch (see [`release`]).
    latch: Box<str>,
    /// The lock's channel, which a waiter listens on.
    channel: Vec<u8>,
}

impl Kind for Redisson<'_> {
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn try_once(
        &self,
        c: &mut Connection,
        retry: bool,
        _store: &dyn LockStore,
    ) -> RedisResult<Step> {
        self.attempt(c, retry)
    }

    fn waiter(&self) -> Result<Waits<'_>, Error> {
        Ok(Waits::Channel(self))
    }

    fn holding(&self) -> Holding {
        Holding::Redisson {
            lease_ms: self.lease.as_millis() as u64,
            latch: self.latch.clone(),
        }
    }

    fn explain(&self, e: Error) -> Error {
        other_kind(e, &self.keys.shown(), "a Redisson lock")
    }
}

/// Redisson's waiter: the lock's channel, and the attempt (also [`Kind::try_once`]'s).
impl Subscriber for Redisson<'_> {
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn channel(&self) -> &[u8] {
        &self.channel
    }

    /// The hold's latch id: random.
    fn seed(&self) -> &[u8] {
        self.latch.as_bytes()
    }

    /// REDISSON_LOCK. Repeated after a dropped connection it may count a hold twice; the lock
    /// then outlives its last release by at most one lease (renewal has stopped).
    fn attempt(&self, c: &mut Connection, _retry: bool) -> RedisResult<Step> {
        let lease_ms = self.lease.as_millis() as i64;
        let pttl: Option<i64> = scripts::REDISSON_LOCK
            .key(self.keys.lock())
            .arg(lease_ms)
            .arg(self.token.as_str())
            .invoke(c)?;
        Ok(match pttl {
            None => Step::granted(0, lease_ms),
            Some(pttl) => Step::Queued { pttl },
        })
    }
}

/// Takes one hold of the lock off (REDISSON_UNLOCK, then the latch deleted, as Redisson does).
/// Returns whether the owner held it. `latch_id` is the hold's own: a release repeated after an
/// unanswered one (a failover) finds the latch the first left and takes no second hold off.
pub(crate) fn release(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    lease_ms: u64,
    latch_id: &str,
) -> Result<bool, Error> {
    let store = &*b.store;
    let cfg = store.cfg();
    let mut latch = prefixed("redisson_unlock_latch", keys.lock());
    latch.push(b':');
    latch.extend_from_slice(latch_id.as_bytes());
    // As long as the release may be repeated after dropped connections (Redisson: its timeout
    // and retry delay times its retry attempts).
    let latch_ms = (3 * (cfg.connect_timeout + cfg.read_timeout + cfg.write_timeout))
        .as_millis()
        .max(1) as u64;
    let released: Option<i64> = store.run(keys, |c, _| {
        // Before Redis 7 a Cluster has no sharded pub/sub: PUBLISH, as Redisson falls back to.
        let publish = if sharded(store) && c.has_sharded_pubsub() {
            "spublish"
        } else {
            "publish"
        };
        scripts::REDISSON_UNLOCK
            .key(keys.lock())
            .key(channel(keys))
            .key(&latch)
            .arg(UNLOCK_MESSAGE)
            .arg(lease_ms)
            .arg(token.as_str())
            .arg(publish)
            .arg(latch_ms)
            .invoke(c)
    })?;
    let _ = store.run(keys, |c, _| redis::cmd("DEL").arg(&latch).exec(c));
    Ok(released.is_some())
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
        let id = client_id(std::process::id()).unwrap();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(id.split('-').map(str::len).eq([8, 4, 4, 4, 12]));
    }
}
