//! Redisson's RLock (`Client::redisson_lock`) against Redisson's own protocol: a driver that
//! runs Redisson's scripts byte for byte as `RedissonLock` sends them at the tags
//! redisson-3.52.0 and redisson-4.7.0 (the same at both), subscribes to the lock's channel as
//! `LockPubSub` does, and renews as its `LockTask` does. On one server, a Sentinel group and a
//! Cluster (sharded pub/sub: `SPUBLISH` / `SSUBSCRIBE`), each on Redis and on Valkey, and
//! refused on Redlock; and npm's node-redisson as a live partner, with redislock's PHP package.
//!
//! The scripts below are Redisson's (Copyright (c) 2013-2026 Nikita Koksharov, Apache License
//! 2.0, https://github.com/redisson/redisson): `RedissonLock.tryLockInnerAsync`,
//! `RedissonLock.unlockInnerAsync` and `renewal/LockTask.buildChunk`, each the concatenation of
//! its Java string literals.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redis::{PushKind, Value};
use redislock::{Client, ErrorKind};
use support::{ChildProcess, Server, Shared, Topology, child_role, eventually, unique_name};

redislock_testkit::shared_keeper!();

/// `RedissonLock.tryLockInnerAsync` (KEYS: name; ARGV: lease ms, lock name).
const LOCK: &str = "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; return redis.call('pttl', KEYS[1]);";
/// `RedissonLock.unlockInnerAsync` (KEYS: name, channel, latch; ARGV: 0, lease ms, lock name,
/// publish command, latch ms).
const UNLOCK: &str = "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; ";
/// `LockTask.buildChunk`'s renewal (KEYS: names; ARGV: lease ms, then each lock name).
const RENEW: &str = "local result = {} for i = 1, #KEYS, 1 do if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1); else table.insert(result, 0); end; end; return result;";

/// A bound for what must happen on a loaded machine; never a speed claim.
const SURELY: Duration = Duration::from_secs(20);
/// Leases that only a release can end within a test.
const FAR: Duration = Duration::from_secs(60);
/// How soon after a release a waiter must be woken: far below `FAR`.
const WAKE_BOUND: Duration = Duration::from_secs(3);

// ---------------------------------------------------------------------------------------------
// The driver: Redisson's side
// ---------------------------------------------------------------------------------------------

/// One Redisson client (`ServiceManager.getId()`: a UUID) on the set-up's server for a name.
struct Redisson {
    shared: &'static Shared,
    id: String,
    /// Sharded pub/sub (a Cluster: Redisson's default there on Redis 7).
    sharded: bool,
}

impl Redisson {
    fn new(shared: &'static Shared) -> Redisson {
        Redisson {
            shared,
            id: format!("{:08x}-0000-4000-8000-{:012x}", std::process::id(), nanos()),
            sharded: sharded(shared),
        }
    }

    /// `getLockName(threadId)`.
    fn lock_name(&self, thread: u64) -> String {
        format!("{}:{thread}", self.id)
    }

    fn conn(&self, name: &str) -> redis::Connection {
        self.shared.conn_for(name)
    }

    /// `tryAcquire`: `None` when taken, else the holder's PTTL.
    fn try_lock(&self, name: &str, thread: u64, lease: Duration) -> Option<i64> {
        redis::cmd("EVAL")
            .arg(LOCK)
            .arg(1)
            .arg(name)
            .arg(lease.as_millis() as u64)
            .arg(self.lock_name(thread))
            .query(&mut self.conn(name))
            .unwrap()
    }

    /// `tryLock(waitTime, leaseTime)`: subscribe, then try at each message and at the
    /// holder's PTTL. Returns whether it got the lock.
    fn lock(&self, name: &str, thread: u64, lease: Duration, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        if self.try_lock(name, thread, lease).is_none() {
            return true;
        }
        let mut sub = self.subscribe(name);
        loop {
            let Some(ttl) = self.try_lock(name, thread, lease) else {
                return true;
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let block = if ttl >= 0 {
                left.min(Duration::from_millis(ttl as u64 + 1))
            } else {
                left
            };
            next_message(&mut sub, block);
        }
    }

    /// A connection subscribed to `redisson_lock__channel:{name}` (SSUBSCRIBE when sharded).
    fn subscribe(&self, name: &str) -> redis::Connection {
        let mut c = self.conn(name);
        redis::cmd("HELLO").arg(3).exec(&mut c).unwrap();
        let cmd = if self.sharded {
            "SSUBSCRIBE"
        } else {
            "SUBSCRIBE"
        };
        c.send_packed_command(&redis::cmd(cmd).arg(channel(name)).get_packed_command())
            .unwrap();
        loop {
            if let Value::Push { kind, .. } = c.recv_response().unwrap()
                && matches!(kind, PushKind::Subscribe | PushKind::SSubscribe)
            {
                return c;
            }
        }
    }

    /// `unlockInnerAsync`, then the latch deleted: `Some(true)` released (published),
    /// `Some(false)` still held (reentrant), `None` not held.
    fn unlock(&self, name: &str, thread: u64, lease: Duration) -> Option<bool> {
        let latch = format!("redisson_unlock_latch:{{{name}}}:{:x}", nanos());
        let mut c = self.conn(name);
        let r: Option<i64> = redis::cmd("EVAL")
            .arg(UNLOCK)
            .arg(3)
            .arg(name)
            .arg(channel(name))
            .arg(&latch)
            .arg(0)
            .arg(lease.as_millis() as u64)
            .arg(self.lock_name(thread))
            .arg(if self.sharded { "spublish" } else { "publish" })
            .arg(16_000)
            .query(&mut c)
            .unwrap();
        redis::cmd("DEL").arg(&latch).exec(&mut c).unwrap();
        r.map(|n| n == 1)
    }

    /// `LockTask`'s renewal of one lock: whether it was still held.
    fn renew(&self, name: &str, thread: u64, lease: Duration) -> bool {
        let r: Vec<i64> = redis::cmd("EVAL")
            .arg(RENEW)
            .arg(1)
            .arg(name)
            .arg(lease.as_millis() as u64)
            .arg(self.lock_name(thread))
            .query(&mut self.conn(name))
            .unwrap();
        r == [1]
    }
}

/// Waits up to `limit` for a message on a subscribed connection: whether one came.
fn next_message(c: &mut redis::Connection, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        let rest = until.saturating_duration_since(Instant::now());
        if rest.is_zero() {
            return false;
        }
        c.set_read_timeout(Some(rest)).unwrap();
        match c.recv_response() {
            Ok(Value::Push {
                kind: PushKind::Message | PushKind::SMessage,
                ..
            }) => return true,
            Ok(_) => {}
            Err(e) if e.is_timeout() => return false,
            Err(e) => panic!("subscription failed: {e}"),
        }
    }
}

/// `prefixName("redisson_lock__channel", name)`.
fn channel(name: &str) -> String {
    if name.contains('{') {
        format!("redisson_lock__channel:{name}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A Java-like thread id for the driver's threads (distinct from any OS tid here).
fn java_thread(i: u64) -> u64 {
    1_000_000_000 + i
}

fn client(t: &Shared, lease: Duration) -> Client {
    Client::builder(t.url())
        .lease(lease)
        .recheck_interval(FAR)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// The behaviours, on one topology
// ---------------------------------------------------------------------------------------------

/// Redislock threads and Redisson threads race on one name over a counter kept outside Redis:
/// every increment is counted, and no two are ever inside at once.
fn a_race_with_redisson_is_exact(t: &'static Shared) {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 25;
    let name = unique_name("rsn-race");
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicU64::new(0));
    let critical = {
        let (counter, inside, overlaps) = (counter.clone(), inside.clone(), overlaps.clone());
        move || {
            if inside.swap(true, Ordering::SeqCst) {
                overlaps.fetch_add(1, Ordering::SeqCst);
            }
            let v = counter.load(Ordering::SeqCst);
            thread::sleep(Duration::from_micros(200));
            counter.store(v + 1, Ordering::SeqCst);
            inside.store(false, Ordering::SeqCst);
        }
    };
    let mut handles = Vec::new();
    let c = Arc::new(client(t, FAR));
    for _ in 0..THREADS {
        let (c, name, critical) = (c.clone(), name.clone(), critical.clone());
        handles.push(thread::spawn(move || {
            for _ in 0..ROUNDS {
                let g = c.redisson_lock(&name).acquire(SURELY).unwrap();
                critical();
                g.release().unwrap();
            }
        }));
    }
    let r = Arc::new(Redisson::new(t));
    for i in 0..THREADS {
        let (r, name, critical) = (r.clone(), name.clone(), critical.clone());
        handles.push(thread::spawn(move || {
            for _ in 0..ROUNDS {
                assert!(
                    r.lock(&name, java_thread(i), FAR, SURELY),
                    "Redisson waited in vain"
                );
                critical();
                assert_eq!(r.unlock(&name, java_thread(i), FAR), Some(true));
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(counter.load(Ordering::SeqCst), 2 * THREADS * ROUNDS);
    assert!(!support::exists(&mut t.conn_for(&name), &name));
}

/// A redislock waiter is woken by Redisson's unlock message, long before the holder's lease
/// would have let it in.
fn a_waiter_is_woken_by_redissons_unlock(t: &'static Shared) {
    let name = unique_name("rsn-wake");
    let r = Redisson::new(t);
    assert!(r.try_lock(&name, java_thread(1), FAR).is_none());
    let c = client(t, FAR);
    assert!(c.redisson_lock(&name).try_acquire().unwrap_err().is_held());
    let waiter = {
        let url = t.url().to_string();
        let name = name.clone();
        thread::spawn(move || {
            let c = Client::builder(&url).recheck_interval(FAR).build().unwrap();
            let g = c.redisson_lock(&name).acquire(SURELY).unwrap();
            let at = Instant::now();
            g.release().unwrap();
            at
        })
    };
    // The waiter is subscribed once the channel has a subscriber.
    assert!(eventually(SURELY, || subscribers(t, &name) > 0));
    let released = Instant::now();
    assert_eq!(r.unlock(&name, java_thread(1), FAR), Some(true));
    let woken = waiter.join().unwrap().duration_since(released);
    println!("redislock waiter woken {woken:?} after Redisson's unlock");
    assert!(woken < WAKE_BOUND, "woken {woken:?} after the unlock");
}

/// A Redisson waiter is woken by redislock's release (its unlock message).
fn redisson_is_woken_by_the_release(t: &'static Shared) {
    let name = unique_name("rsn-wake2");
    let c = client(t, FAR);
    let g = c.redisson_lock(&name).try_acquire().unwrap();
    let waiter = {
        let name = name.clone();
        thread::spawn(move || {
            let r = Redisson::new(t);
            assert!(r.lock(&name, java_thread(2), FAR, SURELY));
            let at = Instant::now();
            assert_eq!(r.unlock(&name, java_thread(2), FAR), Some(true));
            at
        })
    };
    assert!(eventually(SURELY, || subscribers(t, &name) > 0));
    let released = Instant::now();
    g.release().unwrap();
    let woken = waiter.join().unwrap().duration_since(released);
    println!("Redisson waiter woken {woken:?} after redislock's release");
    assert!(woken < WAKE_BOUND, "woken {woken:?} after the release");
}

/// Whether Redisson publishes sharded there: on a Cluster whose servers have `SPUBLISH` (Redis 7
/// and later; it falls back to PUBLISH before).
fn sharded(t: &Shared) -> bool {
    if t.topology() != Topology::Cluster {
        return false;
    }
    let info: Vec<Value> = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("SPUBLISH")
        .query(&mut t.conn_for("any"))
        .unwrap();
    !matches!(info.first(), None | Some(Value::Nil))
}

/// The subscribers of the lock's channel (sharded where Redisson publishes sharded).
fn subscribers(t: &Shared, name: &str) -> i64 {
    let sub = if sharded(t) { "SHARDNUMSUB" } else { "NUMSUB" };
    let r: (String, i64) = redis::cmd("PUBSUB")
        .arg(sub)
        .arg(channel(name))
        .query(&mut t.conn_for(name))
        .unwrap();
    r.1
}

/// Reentrant per thread as RLock is: the same thread takes it again (count 2 in the hash),
/// another thread (and Redisson) is refused; the first release keeps it held, the second frees
/// it.
fn reentrant_per_thread(t: &'static Shared) {
    let name = unique_name("rsn-reentrant");
    let c = Arc::new(client(t, FAR));
    let outer = c.redisson_lock(&name).try_acquire().unwrap();
    let inner = c.redisson_lock(&name).try_acquire().unwrap();
    let mut con = t.conn_for(&name);
    let fields: Vec<(String, i64)> = redis::cmd("HGETALL").arg(&name).query(&mut con).unwrap();
    assert_eq!(fields.len(), 1, "{fields:?}");
    assert_eq!(fields[0].1, 2, "{fields:?}");
    let (field_id, field_thread) = fields[0].0.rsplit_once(':').unwrap();
    assert_eq!(field_id.len(), 36, "a UUID: {field_id}");
    assert!(field_thread.parse::<u64>().is_ok(), "{field_thread}");
    let other = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || {
            c.redisson_lock(&name)
                .try_acquire()
                .map(|_| ())
                .unwrap_err()
        })
    };
    assert!(other.join().unwrap().is_held());
    let r = Redisson::new(t);
    assert!(r.try_lock(&name, java_thread(3), FAR).is_some());
    inner.release().unwrap();
    let count: i64 = redis::cmd("HGET")
        .arg(&name)
        .arg(&fields[0].0)
        .query(&mut con)
        .unwrap();
    assert_eq!(count, 1);
    assert!(outer.is_held());
    outer.release().unwrap();
    assert!(!support::exists(&mut con, &name));
    assert!(r.try_lock(&name, java_thread(3), FAR).is_none());
    assert_eq!(r.unlock(&name, java_thread(3), FAR), Some(true));
}

/// Auto-renewal keeps the lock past its lease (every lease/3, as Redisson's watchdog), and
/// Redisson stays out throughout; a lock whose hash is deleted is reported lost.
fn renewal_keeps_it_past_the_lease(t: &'static Shared) {
    let name = unique_name("rsn-renew");
    let lease = Duration::from_millis(600);
    let c = Client::builder(t.url()).lease(lease).build().unwrap();
    let g = c.redisson_lock(&name).try_acquire().unwrap();
    let r = Redisson::new(t);
    let until = Instant::now() + 3 * lease;
    while Instant::now() < until {
        assert!(
            r.try_lock(&name, java_thread(4), lease).is_some(),
            "renewal lapsed"
        );
        thread::sleep(Duration::from_millis(50));
    }
    assert!(g.is_held());
    let lost = Arc::new(AtomicBool::new(false));
    let seen = lost.clone();
    g.on_lost(move |_| seen.store(true, Ordering::SeqCst));
    redis::cmd("DEL")
        .arg(&name)
        .exec(&mut t.conn_for(&name))
        .unwrap();
    assert!(eventually(SURELY, || lost.load(Ordering::SeqCst)));
    assert!(g.is_lost());
    assert_eq!(g.release().unwrap_err().kind(), ErrorKind::NotHeld);
}

/// Redisson's renewal and holds keep redislock out; a redislock lock is renewed by Redisson's
/// renewal script only for Redisson's own field.
fn redissons_renewal_is_respected(t: &'static Shared) {
    let name = unique_name("rsn-jrenew");
    let lease = Duration::from_millis(600);
    let r = Redisson::new(t);
    assert!(r.try_lock(&name, java_thread(5), lease).is_none());
    let c = client(t, lease);
    for _ in 0..6 {
        assert!(r.renew(&name, java_thread(5), lease));
        assert!(c.redisson_lock(&name).try_acquire().unwrap_err().is_held());
        thread::sleep(lease / 3);
    }
    assert!(
        !r.renew(&name, java_thread(6), lease),
        "another thread's field renewed"
    );
    assert_eq!(r.unlock(&name, java_thread(5), lease), Some(true));
    c.redisson_lock(&name)
        .try_acquire()
        .unwrap()
        .release()
        .unwrap();
}

/// A redislock holder killed with `kill -9` frees the lock within its lease for Redisson.
fn a_killed_holder_frees_it_for_redisson(t: &'static Shared) {
    let name = unique_name("rsn-killed");
    let lease = Duration::from_secs(1);
    let mut child = start_holder(t, &name);
    let r = Redisson::new(t);
    thread::sleep(lease + lease / 2);
    assert!(
        r.try_lock(&name, java_thread(7), FAR).is_some(),
        "renewal lapsed"
    );
    let killed = child.kill9();
    assert!(r.lock(&name, java_thread(7), FAR, SURELY));
    let freed = killed.elapsed();
    assert!(
        freed <= lease + Duration::from_secs(2),
        "freed {freed:?} after the kill"
    );
    assert_eq!(r.unlock(&name, java_thread(7), FAR), Some(true));
}

/// A process holding the Redisson lock `name` with a 1 s lease, renewed, until it is killed.
fn start_holder(t: &Shared, name: &str) -> ChildProcess {
    let mut child = ChildProcess::start(
        "child_redisson_holder",
        "child_redisson_holder",
        &[
            ("REDISLOCK_TEST_URL", t.url().to_string()),
            ("REDISLOCK_TEST_NAME", name.to_string()),
        ],
    );
    child.wait_ready(SURELY);
    child
}

#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_redisson_holder() {
    let Some(role) = child_role("child_redisson_holder") else {
        return;
    };
    let c = Client::builder(&role.var("REDISLOCK_TEST_URL"))
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let _g = c
        .redisson_lock(&role.var("REDISLOCK_TEST_NAME"))
        .try_acquire()
        .unwrap();
    role.ready("");
    role.hold();
}

/// A Redisson holder that stops (killed: its renewal ends) frees the lock within its lease for
/// a redislock waiter, which re-checks at the remaining lease.
fn a_vanished_redisson_holder_frees_it_within_its_lease(t: &'static Shared) {
    let name = unique_name("rsn-vanished");
    let lease = Duration::from_secs(1);
    let r = Redisson::new(t);
    assert!(r.try_lock(&name, java_thread(8), lease).is_none());
    let started = Instant::now();
    let c = client(t, FAR);
    let g = c.redisson_lock(&name).acquire(SURELY).unwrap();
    let waited = started.elapsed();
    assert!(
        waited <= lease + Duration::from_secs(2),
        "waited {waited:?} for a lease of {lease:?}"
    );
    g.release().unwrap();
}

/// Redisson meets redislock's plain lock on the same name with WRONGTYPE, and redislock's
/// Redisson lock says so for a name held as another kind.
fn another_kind_on_the_name_is_refused_clearly(t: &'static Shared) {
    let name = unique_name("rsn-other");
    let c = client(t, FAR);
    let plain = c.lock(&name).try_acquire().unwrap();
    let e = c.redisson_lock(&name).try_acquire().unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("another kind of lock"), "{e}");
    plain.release().unwrap();
    // The other way round: a plain lock that would wait for a name Redisson's lock holds says
    // so too.
    let redisson = c.redisson_lock(&name).try_acquire().unwrap();
    let e = c
        .lock(&name)
        .acquire(Duration::from_millis(300))
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("another kind of lock"), "{e}");
    redisson.release().unwrap();
}

/// A plain lock's try (without waiting, with or without fencing) of a name Redisson holds is
/// refused as its waiting acquire is: the name is in use as another kind, not held by another
/// owner of the same kind. Whether redislock's Redisson lock or Redisson itself holds it.
fn a_plain_try_on_redissons_name_is_refused_clearly(t: &'static Shared) {
    let name = unique_name("rsn-other-try");
    let c = client(t, FAR);
    let check = |c: &Client| {
        for fencing in [false, true] {
            let e = c.lock(&name).fencing(fencing).try_acquire().unwrap_err();
            assert!(e.is_invalid_argument(), "fencing {fencing}: {e}");
            assert!(e.to_string().contains("another kind of lock"), "{e}");
        }
        let e = c.try_acquire(&name).unwrap_err();
        assert!(e.is_invalid_argument(), "{e}");
    };
    let redisson = c.redisson_lock(&name).try_acquire().unwrap();
    check(&c);
    redisson.release().unwrap();
    let r = Redisson::new(t);
    assert!(r.try_lock(&name, java_thread(9), FAR).is_none());
    check(&c);
    let _: i64 = redis::cmd("DEL")
        .arg(&name)
        .query(&mut r.conn(&name))
        .unwrap();
    // Free again: the plain lock takes it.
    c.try_acquire(&name).unwrap().release().unwrap();
}

/// A wait ends at its bound, or at once when cancelled, leaving no subscription behind.
fn a_wait_times_out_or_is_cancelled(t: &'static Shared) {
    let name = unique_name("rsn-cancel");
    let r = Redisson::new(t);
    assert!(r.try_lock(&name, java_thread(9), FAR).is_none());
    let c = Arc::new(client(t, FAR));
    let started = Instant::now();
    let e = c
        .redisson_lock(&name)
        .acquire(Duration::from_millis(300))
        .unwrap_err();
    assert!(e.is_wait_timeout(), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert!(eventually(SURELY, || subscribers(t, &name) == 0));
    let cancel = redislock::Cancel::new();
    let waiter = {
        let (c, name, cancel) = (c.clone(), name.clone(), cancel.clone());
        thread::spawn(move || {
            c.redisson_lock(&name)
                .cancel_on(&cancel)
                .acquire(SURELY)
                .unwrap_err()
        })
    };
    assert!(eventually(SURELY, || subscribers(t, &name) > 0));
    let cancelled = Instant::now();
    cancel.cancel();
    let e = waiter.join().unwrap();
    assert!(e.is_cancelled(), "{e}");
    assert!(
        cancelled.elapsed() < WAKE_BOUND,
        "{:?}",
        cancelled.elapsed()
    );
    assert!(eventually(SURELY, || subscribers(t, &name) == 0));
    assert_eq!(r.unlock(&name, java_thread(9), FAR), Some(true));
}

/// One test per behaviour, named after it, on one topology.
macro_rules! topology {
    ($module:ident, $topology:expr) => {
        topology!($module, $topology, Server::Redis);
    };
    ($module:ident, $topology:expr, $server:expr) => {
        mod $module {
            use super::*;
            topology!(@tests $topology, $server;
                a_race_with_redisson_is_exact,
                a_waiter_is_woken_by_redissons_unlock,
                redisson_is_woken_by_the_release,
                reentrant_per_thread,
                renewal_keeps_it_past_the_lease,
                redissons_renewal_is_respected,
                a_killed_holder_frees_it_for_redisson,
                a_vanished_redisson_holder_frees_it_within_its_lease,
                a_wait_times_out_or_is_cancelled,
                another_kind_on_the_name_is_refused_clearly,
                a_plain_try_on_redissons_name_is_refused_clearly);
        }
    };
    (@tests $topology:expr, $server:expr; $($behaviour:ident),*) => {
        $(
            #[test]
            fn $behaviour() {
                crate::$behaviour(Shared::get_on($topology, $server));
            }
        )*
    };
}

topology!(single, Topology::Single);
topology!(sentinel, Topology::Sentinel);
topology!(cluster, Topology::Cluster);

/// The same on Valkey (docs/servers.md).
mod valkey {
    use super::*;
    topology!(single, Topology::Single, Server::Valkey);
    topology!(sentinel, Topology::Sentinel, Server::Valkey);
    topology!(cluster, Topology::Cluster, Server::Valkey);
}

/// The same on Redis 6.2 (a Cluster there has no sharded pub/sub: PUBLISH, as Redisson falls
/// back to) and Redis 7.4 (docs/servers.md).
mod redis62 {
    use super::*;
    topology!(single, Topology::Single, Server::Redis62);
    topology!(sentinel, Topology::Sentinel, Server::Redis62);
    topology!(cluster, Topology::Cluster, Server::Redis62);
}
mod redis74 {
    use super::*;
    topology!(single, Topology::Single, Server::Redis74);
    topology!(sentinel, Topology::Sentinel, Server::Redis74);
    topology!(cluster, Topology::Cluster, Server::Redis74);
}

/// Refused on Redlock's masters, with an error that says so.
#[test]
fn refused_on_redlock() {
    let t = Shared::get(Topology::Redlock);
    let c = Client::open(t.url()).unwrap();
    let e = c.redisson_lock("rsn-redlock").try_acquire().unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("Redisson"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// npm's node-redisson as a live partner (tests/redisson_partner/, installed by scripts/setup.sh)
// ---------------------------------------------------------------------------------------------

/// A partner process (`node partner.js` or `php php_worker.php`) on the single server; its
/// output lines as they come.
struct Node {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

fn partner_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/redisson_partner")
}

impl Node {
    /// node-redisson (`partner.js`) with Redisson's `lockWatchdogTimeout` = `watchdog`.
    fn start(t: &Shared, name: &str, mode: &[&str], watchdog: Duration) -> Node {
        let dir = partner_dir();
        assert!(
            dir.join("node_modules/node-redisson/package.json").exists(),
            "node-redisson is not installed in {}: run `bash scripts/setup.sh`",
            dir.display()
        );
        let mut cmd = std::process::Command::new("node");
        cmd.arg(dir.join("partner.js"))
            .env("WATCHDOG_MS", watchdog.as_millis().to_string());
        Self::spawn(cmd, t, name, mode)
    }

    /// redislock's PHP package (`php_worker.php`) through the library this test was built with.
    fn php(t: &Shared, name: &str, mode: &[&str]) -> Node {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let exe = std::env::current_exe().unwrap();
        let lib = exe.parent().unwrap().join("libredislock.so");
        assert!(lib.is_file(), "{} not built", lib.display());
        let mut cmd = std::process::Command::new("php");
        cmd.args(["-d", "ffi.enable=1"])
            .arg(partner_dir().join("php_worker.php"))
            .env("REDISLOCK_LIB", lib)
            .env("REDISLOCK_HEADER", root.join("include/redislock_php.h"));
        Self::spawn(cmd, t, name, mode)
    }

    fn spawn(mut cmd: std::process::Command, t: &Shared, name: &str, mode: &[&str]) -> Node {
        use std::io::BufRead;
        cmd.arg(t.nodes()[0].to_string())
            .arg(name)
            .args(mode)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped());
        let program = format!("{:?}", cmd.get_program());
        let mut child = support::spawn_anchored(cmd)
            .unwrap_or_else(|e| panic!("cannot run {program} ({e}): run `bash scripts/setup.sh`"));
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut node = Node { child, lines };
        node.expect("ready");
        node
    }

    /// Waits for a line starting with `what`; the rest of it.
    fn expect(&mut self, what: &str) -> String {
        let line = self
            .lines
            .recv_timeout(SURELY)
            .unwrap_or_else(|_| panic!("the partner did not say {what}: {:?}", self.finish()));
        line.strip_prefix(what)
            .unwrap_or_else(|| panic!("the partner said {line:?}, not {what}"))
            .trim()
            .to_string()
    }

    /// A unix time in ms that node printed, as an `Instant` here.
    fn instant(unix_ms: &str) -> Instant {
        let then = Duration::from_millis(unix_ms.parse().unwrap());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        Instant::now() - now.saturating_sub(then)
    }

    fn finish(&mut self) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + SURELY;
        while Instant::now() < until {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The critical section of a race across processes: a counter in a file, and an `O_EXCL`
/// marker file that tells whether two holders were ever inside at once (as partner.js does).
fn bump(counter: &std::path::Path) {
    let marker = counter.with_extension("inside");
    let entered = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
        .is_ok();
    if !entered {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(counter.with_extension("overlaps"))
            .unwrap();
        std::io::Write::write_all(&mut f, b"rust\n").unwrap();
    }
    let v: u64 = std::fs::read_to_string(counter)
        .unwrap()
        .trim()
        .parse()
        .unwrap_or(0);
    thread::sleep(Duration::from_millis(1));
    std::fs::write(counter, (v + 1).to_string()).unwrap();
    if entered {
        std::fs::remove_file(&marker).unwrap();
    }
}

mod node_redisson {
    use super::*;

    fn single() -> &'static Shared {
        Shared::get(Topology::Single)
    }

    /// Two node-redisson processes, two redislock threads and a redislock PHP process race on
    /// one name over a counter file: exact, never two inside.
    #[test]
    fn race_is_exact() {
        const ROUNDS: u64 = 30;
        let t = single();
        let name = unique_name("rsn-node-race");
        let dir = std::env::temp_dir().join(unique_name("rsn-node-race-dir"));
        std::fs::create_dir_all(&dir).unwrap();
        let counter = dir.join("counter");
        std::fs::write(&counter, "0").unwrap();
        let rounds = ROUNDS.to_string();
        let nodes: Vec<Node> = (0..2)
            .map(|_| {
                Node::start(
                    t,
                    &name,
                    &["race", counter.to_str().unwrap(), &rounds],
                    // A node-redisson waiter that subscribed after the release it waited for
                    // (it tries first, then subscribes) tries again at the holder's PTTL.
                    Duration::from_secs(2),
                )
            })
            .collect();
        let php = Node::php(t, &name, &["race", counter.to_str().unwrap(), &rounds]);
        let c = Arc::new(client(t, FAR));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (c, name, counter) = (c.clone(), name.clone(), counter.clone());
                thread::spawn(move || {
                    for _ in 0..ROUNDS {
                        let g = c.redisson_lock(&name).acquire(SURELY).unwrap();
                        bump(&counter);
                        g.release().unwrap();
                    }
                })
            })
            .collect();
        for h in threads {
            h.join().unwrap();
        }
        for mut n in nodes.into_iter().chain([php]) {
            assert_eq!(
                n.finish().map(|s| s.success()),
                Some(true),
                "a partner failed"
            );
        }
        assert!(
            !counter.with_extension("overlaps").exists(),
            "two holders at once: {:?}",
            std::fs::read_to_string(counter.with_extension("overlaps"))
        );
        let total: u64 = std::fs::read_to_string(&counter).unwrap().parse().unwrap();
        assert_eq!(total, 5 * ROUNDS);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// From PHP the lock is reentrant within the process, as from Rust within a thread.
    #[test]
    fn php_is_reentrant_within_its_process() {
        let t = single();
        let name = unique_name("rsn-php-reentrant");
        let mut php = Node::php(t, &name, &["reentrant"]);
        php.expect("ok");
        assert_eq!(php.finish().map(|s| s.success()), Some(true));
    }

    /// A node-redisson waiter is woken by redislock's release.
    #[test]
    fn node_waiter_is_woken_by_the_release() {
        let t = single();
        let name = unique_name("rsn-node-wake");
        let c = client(t, FAR);
        let g = c.redisson_lock(&name).try_acquire().unwrap();
        let mut node = Node::start(t, &name, &["wait"], Duration::from_secs(30));
        assert!(eventually(SURELY, || subscribers(t, &name) > 0));
        // node-redisson attaches its message listener only once its SUBSCRIBE's reply is in
        // (`subscribeOnce`: `await subscribe(...)`, then `once(...)`): a release published in
        // between is lost to it, and it waits out the holder's lease (30 s). Give it that turn.
        thread::sleep(Duration::from_millis(200));
        let released = Instant::now();
        g.release().unwrap();
        let got = Node::instant(&node.expect("got"));
        let woken = got.saturating_duration_since(released);
        println!("node-redisson waiter woken {woken:?} after redislock's release");
        assert!(woken < WAKE_BOUND, "woken {woken:?} after the release");
        assert_eq!(node.finish().map(|s| s.success()), Some(true));
    }

    /// A redislock waiter is woken by node-redisson's unlock.
    #[test]
    fn waiter_is_woken_by_node_redissons_unlock() {
        let t = single();
        let name = unique_name("rsn-node-wake2");
        let mut node = Node::start(t, &name, &["holdfor", "1500"], Duration::from_secs(30));
        node.expect("held");
        let c = client(t, FAR);
        let g = c.redisson_lock(&name).acquire(SURELY).unwrap();
        let got = Instant::now();
        let released = Node::instant(&node.expect("released"));
        let woken = got.saturating_duration_since(released);
        println!("redislock waiter woken {woken:?} after node-redisson's unlock");
        assert!(woken < WAKE_BOUND, "woken {woken:?} after the unlock");
        g.release().unwrap();
        assert_eq!(node.finish().map(|s| s.success()), Some(true));
    }

    /// node-redisson's watchdog keeps its lock past the lease; killed with `kill -9`, it frees
    /// the lock within its lease for a redislock waiter.
    #[test]
    fn a_killed_node_holder_frees_it_within_its_lease() {
        let t = single();
        let name = unique_name("rsn-node-killed");
        let watchdog = Duration::from_secs(1);
        let mut node = Node::start(t, &name, &["hold"], watchdog);
        node.expect("held");
        let c = client(t, FAR);
        thread::sleep(watchdog + watchdog / 2);
        assert!(c.redisson_lock(&name).try_acquire().unwrap_err().is_held());
        node.child.kill().unwrap();
        let killed = Instant::now();
        let g = c.redisson_lock(&name).acquire(SURELY).unwrap();
        let freed = killed.elapsed();
        assert!(
            freed <= watchdog + Duration::from_secs(2),
            "freed {freed:?} after the kill"
        );
        g.release().unwrap();
    }

    /// A redislock holder killed with `kill -9` frees the lock within its lease for a
    /// node-redisson waiter.
    #[test]
    fn a_killed_redislock_holder_frees_it_for_node_redisson() {
        let t = single();
        let name = unique_name("rsn-node-killed2");
        let mut child = start_holder(t, &name);
        let mut node = Node::start(t, &name, &["wait"], Duration::from_secs(30));
        let killed = child.kill9();
        let got = Node::instant(&node.expect("got"));
        let freed = got.saturating_duration_since(killed);
        assert!(
            freed <= Duration::from_secs(3),
            "freed {freed:?} after the kill (lease 1 s)"
        );
        assert_eq!(node.finish().map(|s| s.success()), Some(true));
    }
}
