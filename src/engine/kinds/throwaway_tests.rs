//! A kind of lock added as ARCHITECTURE.md's "Adding a kind" says, to show that the steps are
//! all it takes: this file (the kind, its scripts, its waiter) and the one line in `mod.rs` that
//! names it. It runs through acquire, wait, renewal, extend and release on a real server.
//!
//! The throwaway kind, a "posted" lock: its key holds the holder's token as an exclusive lock's
//! does, and its release deletes the key and publishes on the lock's own channel, which its
//! waiters listen on (no queue, as Redisson's lock waits).

use std::sync::LazyLock;
use std::thread;
use std::time::{Duration, Instant};

use redis::RedisResult;
use redislock_testkit::{RedisServer, pttl};

use super::{Acquiring, Rules, Waits, done};
use crate::base::config::Config;
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::{Grant, LockOptions};
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::token::Token;
use crate::engine::acquire;
use crate::engine::backend::{Backend, Owner};
use crate::stores::extend::ExtendScript;
use crate::stores::pubsub::Subscriber;
use crate::stores::wait::Step;
use crate::stores::{self, LockStore};

/// Takes the key if it is free; else replies the holder's PTTL.
static TAKE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return nil end \
         return redis.call('pttl', KEYS[1])",
    )
});
/// Deletes the key if it holds the token, and publishes on the channel.
static GIVE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end \
         redis.call('del', KEYS[1]) redis.call('publish', KEYS[2], 'free') return 1",
    )
});
/// Resets the lease if the key holds the token.
static KEEP: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end \
         return redis.call('pexpire', KEYS[1], ARGV[2])",
    )
});

/// The posted lock.
#[derive(Debug)]
struct Posted;

fn channel(keys: &LockKeys) -> Vec<u8> {
    [b"posted:".as_slice(), keys.lock()].concat()
}

fn take(c: &mut Connection, keys: &LockKeys, token: &Token, lease: Duration) -> RedisResult<Step> {
    let ms = lease.as_millis() as u64;
    let held: Option<i64> = TAKE
        .key(keys.lock())
        .arg(token.as_str())
        .arg(ms)
        .invoke(c)?;
    Ok(match held {
        None => Step::granted(0, ms as i64),
        Some(pttl) => Step::Queued { pttl },
    })
}

impl Rules for Posted {
    /// The metrics' label and what it offers are borrowed from the exclusive lock.
    fn descriptor(&self) -> &'static Descriptor {
        &kind::EXCLUSIVE
    }

    fn what(&self) -> &'static str {
        "a posted lock"
    }

    fn try_once(
        &self,
        a: &Acquiring<'_>,
        store: &dyn LockStore,
        sent: &mut bool,
    ) -> Result<Option<Grant>, Error> {
        store.attempt(a.keys, a.lease, sent, &mut |c, _| {
            take(c, a.keys, a.token, a.lease)
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        Ok(Waits::Channel(Box::new(PostedWaiter {
            keys: a.keys,
            token: a.token,
            lease: a.lease,
            channel: channel(a.keys),
        })))
    }

    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        done(&*b.store, keys, |c| {
            GIVE.key(keys.lock())
                .key(channel(keys))
                .arg(token.as_str())
                .invoke(c)
        })
    }
}

impl ExtendScript for Posted {
    fn script(&self) -> &'static redis::Script {
        &KEEP
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        pipe.arg(1)
            .arg(keys.lock())
            .arg(token.as_str())
            .arg(lease_ms);
    }
}

/// The posted lock's waiter: the lock's channel, and the attempt.
struct PostedWaiter<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    lease: Duration,
    channel: Vec<u8>,
}

impl Subscriber for PostedWaiter<'_> {
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn channel(&self) -> &[u8] {
        &self.channel
    }

    fn seed(&self) -> &[u8] {
        self.token.as_str().as_bytes()
    }

    fn attempt(&self, c: &mut Connection, _retry: bool) -> RedisResult<Step> {
        take(c, self.keys, self.token, self.lease)
    }
}

#[test]
fn a_kind_added_by_the_guide_is_acquired_waited_for_renewed_extended_and_released() {
    let srv = RedisServer::start();
    let mut cfg = Config::new(&srv.url());
    // Re-checks far apart: a waiter that gets the lock soon was woken by the release.
    cfg.recheck_interval = Duration::from_secs(20);
    let (info, deployment) = stores::parse_url(&cfg.url).unwrap();
    cfg.server = deployment.server(&info);
    cfg.deployment = deployment;
    let owner = Owner::start(&cfg, &info).unwrap();
    let keys = LockKeys::new(&cfg.key_prefix, b"posted").unwrap();
    let key = std::str::from_utf8(keys.lock()).unwrap().to_owned();
    let mut con = srv.conn();
    let opts = |lease_ms, auto_renew| LockOptions {
        lease: Duration::from_millis(lease_ms),
        auto_renew,
        fencing: false,
        at_least: None,
        at_most: None,
    };
    let take = |opts: &LockOptions, wait| {
        acquire::acquire(
            &owner,
            Box::new(Posted),
            keys.clone(),
            None,
            opts,
            wait,
            None,
        )
    };

    // Acquired and renewed: a lease of 600 ms outlived three times over.
    let (renewed, _) = take(&opts(600, true), None).unwrap();
    thread::sleep(Duration::from_millis(1_800));
    assert!(renewed.is_held());
    assert!(pttl(&mut con, &key) > 0, "renewal kept the key");
    renewed.release().unwrap();

    // Refused while held.
    let (first, _) = take(&opts(10_000, false), None).unwrap();
    match take(&opts(10_000, false), None) {
        Err(e) => assert!(e.is_held(), "{e}"),
        Ok(_) => panic!("a second holder was granted the posted lock"),
    }

    // A waiter listens on the channel and is woken by the release, long before the lease ends.
    let waiter = thread::scope(|s| {
        let w = s.spawn(|| take(&opts(10_000, false), Some(Duration::from_secs(8))));
        thread::sleep(Duration::from_millis(300));
        assert!(!w.is_finished(), "the waiter waits while the lock is held");
        let released = Instant::now();
        first.release().unwrap();
        let (held, _) = w.join().unwrap().unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(2),
            "woken by the release"
        );
        held
    });

    // Extended, then released: the key is gone, and a second release says not held.
    waiter.extend(Duration::from_secs(30)).unwrap();
    assert!(pttl(&mut con, &key) > 20_000);
    waiter.release().unwrap();
    assert_eq!(pttl(&mut con, &key), -2);
    let (again, _) = take(&opts(10_000, false), None).unwrap();
    again.release().unwrap();
}
