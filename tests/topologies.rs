//! One suite of lock behaviours, run for every topology a client can be built for: each behaviour
//! is written once, against a `Setup` (a URL to give the client, and plain connections to the
//! servers that hold a given key), and the `suite!` lines at the end run it for a single server,
//! a Sentinel group, a Redis Cluster and three Redlock masters. The fault tests of each topology
//! are in their own files (`faults.rs`, `sentinel.rs`, `cluster.rs`, `redlock.rs`).

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use support::{
    CHILD_ROLE_ENV, Cluster, RedisServer, RedlockMasters, SentinelGroup, child_env, eventually,
    exists, get, pttl, spawn_self, unique_name, wait_child_ok,
};

/// A running topology, as the behaviours see it.
trait Setup {
    /// The URL a client is built from.
    fn url(&self) -> String;
    /// A plain connection to the server that holds `key` now.
    fn conn_for(&self, key: &str) -> redis::Connection;
    /// Plain connections to every server that holds a copy of `key` (Redlock: every master;
    /// a lock is held where a majority of them hold its key).
    fn conns_for(&self, key: &str) -> Vec<redis::Connection> {
        vec![self.conn_for(key)]
    }
    /// Whether waiters are served in arrival order (not across Redlock's masters).
    fn fifo(&self) -> bool {
        true
    }
}

impl Setup for RedisServer {
    fn url(&self) -> String {
        RedisServer::url(self)
    }
    fn conn_for(&self, _key: &str) -> redis::Connection {
        self.conn()
    }
}

impl Setup for SentinelGroup {
    fn url(&self) -> String {
        SentinelGroup::url(self)
    }
    fn conn_for(&self, _key: &str) -> redis::Connection {
        self.master().conn()
    }
}

impl Setup for Cluster {
    fn url(&self) -> String {
        Cluster::url(self)
    }
    fn conn_for(&self, key: &str) -> redis::Connection {
        self.master_of(key).conn()
    }
}

impl Setup for RedlockMasters {
    fn url(&self) -> String {
        RedlockMasters::url(self)
    }
    fn conn_for(&self, _key: &str) -> redis::Connection {
        self.masters()[0].conn()
    }
    fn conns_for(&self, _key: &str) -> Vec<redis::Connection> {
        self.masters().iter().map(RedisServer::conn).collect()
    }
    fn fifo(&self) -> bool {
        false
    }
}

const RACE_THREADS: usize = 16;
const RACE_INCREMENTS: u64 = 15;
const CHILD_ROLE: &str = "topology-racer";

/// The protected resource of the race: a counter in a file, outside Redis, incremented with a
/// non-atomic read and write. Entering creates a marker file with `create_new`, which fails if
/// another holder (in any process) is inside: that counts an overlap.
struct Resource {
    counter: PathBuf,
    inside: PathBuf,
}

impl Resource {
    fn at(dir: &Path) -> Resource {
        Resource {
            counter: dir.join("counter"),
            inside: dir.join("inside"),
        }
    }

    /// One increment under the lock; returns false if another holder was inside.
    fn increment(&self, widen: bool) -> bool {
        let alone = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&self.inside)
            .is_ok();
        let v: u64 = fs::read_to_string(&self.counter)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        if widen {
            thread::sleep(Duration::from_millis(1));
        }
        fs::write(&self.counter, (v + 1).to_string()).unwrap();
        if alone {
            fs::remove_file(&self.inside).unwrap();
        }
        alone
    }

    fn value(&self) -> u64 {
        fs::read_to_string(&self.counter)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }
}

/// `RACE_THREADS` threads of this process increment the resource `RACE_INCREMENTS` times each
/// under the lock; returns the overlaps seen.
fn race(url: &str, name: &str, resource: &Resource) -> u64 {
    let client = Client::open(url).unwrap();
    let overlaps = AtomicU64::new(0);
    thread::scope(|s| {
        for i in 0..RACE_THREADS {
            let (client, overlaps) = (&client, &overlaps);
            s.spawn(move || {
                for n in 0..RACE_INCREMENTS {
                    client
                        .with_lock(name, Duration::from_secs(60), |l| {
                            assert!(l.is_held());
                            if !resource.increment((i as u64 + n).is_multiple_of(4)) {
                                overlaps.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                        .unwrap_or_else(|e| panic!("with_lock failed: {e}"));
                }
            });
        }
    });
    overlaps.load(Ordering::Relaxed)
}

/// Mutual exclusion: 16 threads in each of two processes lose no update and never overlap, and
/// nothing of the lock is left in Redis afterwards.
fn mutual_exclusion(t: &dyn Setup) {
    let dir = std::env::temp_dir().join(unique_name("redislock-race"));
    fs::create_dir_all(&dir).unwrap();
    let resource = Resource::at(&dir);
    let name = unique_name("race");
    let go = dir.join("go");
    let child = spawn_self(
        "child_racer",
        &[
            (CHILD_ROLE_ENV, CHILD_ROLE.to_string()),
            ("REDISLOCK_TEST_URL", t.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
            ("REDISLOCK_TEST_DIR", dir.display().to_string()),
        ],
    );
    // Start both halves together so that they really contend.
    fs::write(&go, "").unwrap();
    let overlaps = race(&t.url(), &name, &resource);
    let out = wait_child_ok(child, Duration::from_secs(300));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    assert_eq!(overlaps, 0, "the parent saw overlapping holders");
    assert_eq!(
        resource.value(),
        2 * RACE_THREADS as u64 * RACE_INCREMENTS,
        "lost updates: the lock did not exclude"
    );
    let queue = format!("{{{name}}}:q");
    for mut con in t.conns_for(&name) {
        assert!(!exists(&mut con, &name), "lock key left behind");
        assert!(!exists(&mut con, &queue), "waiter queue left behind");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Child role of `mutual_exclusion`, for every topology.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_racer() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some(CHILD_ROLE) {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let dir = PathBuf::from(var("REDISLOCK_TEST_DIR"));
    assert!(eventually(Duration::from_secs(30), || dir
        .join("go")
        .exists()));
    let overlaps = race(
        &var("REDISLOCK_TEST_URL"),
        &var("REDISLOCK_TEST_LOCK"),
        &Resource::at(&dir),
    );
    assert_eq!(overlaps, 0, "the child saw overlapping holders");
}

/// A lock that is not renewed is free once its lease runs out; the next owner takes it, and the
/// first one's release reports that it was no longer held.
fn lease_expiry_and_takeover(t: &dyn Setup) {
    let name = unique_name("expiry");
    let fixed = Client::builder(&t.url())
        .auto_renew(false)
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let other = Client::open(&t.url()).unwrap();
    let first = fixed.try_acquire(&name).unwrap();
    assert!(other.try_acquire(&name).unwrap_err().is_held());
    thread::sleep(Duration::from_millis(400));
    assert!(!first.is_held(), "the holder's view follows its lease");
    let second = other.try_acquire(&name).expect("free after its lease");
    assert!(first.release().unwrap_err().is_not_held());
    assert!(second.is_held());
    second.release().unwrap();
}

/// An auto-renewed lock outlives its lease many times over.
fn renewal(t: &dyn Setup) {
    let name = unique_name("renewal");
    let c = Client::builder(&t.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let other = Client::open(&t.url()).unwrap();
    let lock = c.try_acquire(&name).unwrap();
    thread::sleep(Duration::from_millis(1200));
    assert!(lock.is_held());
    assert!(other.try_acquire(&name).unwrap_err().is_held());
    let mut conns = t.conns_for(&name);
    for con in &mut conns {
        let left = pttl(con, &name);
        assert!(left > 0 && left <= 300, "renewed lease {left} ms");
    }
    lock.release().unwrap();
    for con in &mut conns {
        assert!(!exists(con, &name));
    }
}

/// A lock whose key is deleted behind its holder's back is found lost by renewal: the holder is
/// told (on_lost), its handle says so, and its release reports it.
fn lost_lock_detection(t: &dyn Setup) {
    let name = unique_name("lost");
    let c = Client::builder(&t.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = c.try_acquire(&name).unwrap();
    let told = Arc::new(Mutex::new(None));
    let told2 = told.clone();
    lock.on_lost(move |e| *told2.lock().unwrap() = Some(e.to_string()));
    for mut con in t.conns_for(&name) {
        let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    }
    assert!(
        eventually(Duration::from_secs(5), || lock.is_lost()),
        "renewal never noticed the lost key"
    );
    assert!(told.lock().unwrap().is_some(), "on_lost was not called");
    assert!(lock.release().unwrap_err().is_not_held());
}

/// Waiters are handed the lock in the order they came, one per release (with Redlock, which
/// has no order across masters: [`woken_by_releases`]).
fn waiting_and_handoff(t: &dyn Setup) {
    if !t.fifo() {
        return woken_by_releases(t);
    }
    let name = unique_name("handoff");
    let c = Client::open(&t.url()).unwrap();
    let holder = c.try_acquire(&name).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let queue = format!("{{{name}}}:q");
    let mut con = t.conn_for(&name);
    let waiters: Vec<_> = (0..4)
        .map(|i| {
            let (c, name, order) = (c.clone(), name.clone(), order.clone());
            let w = thread::spawn(move || {
                let lock = c.acquire(&name, Duration::from_secs(30)).unwrap();
                order.lock().unwrap().push(i);
                thread::sleep(Duration::from_millis(20));
                lock.release().unwrap();
            });
            // The next waiter comes once this one is queued.
            assert!(eventually(Duration::from_secs(10), || {
                redis::cmd("LLEN")
                    .arg(&queue)
                    .query::<i64>(&mut con)
                    .unwrap()
                    == i + 1
            }));
            w
        })
        .collect();
    holder.release().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3]);
    assert!(!exists(&mut con, &name));
    assert!(!exists(&mut con, &queue));
}

/// Waiters that do not queue are each woken by a release, and get the lock in turn: their
/// re-check interval, and the holders' leases, are longer than the wait bound, so a waiter that
/// a release did not wake would time out.
fn woken_by_releases(t: &dyn Setup) {
    let name = unique_name("woken");
    let c = Client::builder(&t.url())
        .recheck_interval(Duration::from_secs(120))
        .lease(Duration::from_secs(60))
        .build()
        .unwrap();
    let holder = c.try_acquire(&name).unwrap();
    let served = Arc::new(Mutex::new(Vec::new()));
    let inside = Arc::new(AtomicU64::new(0));
    let waiters: Vec<_> = (0..4)
        .map(|i| {
            let (c, name, served, inside) =
                (c.clone(), name.clone(), served.clone(), inside.clone());
            thread::spawn(move || {
                let lock = c
                    .acquire(&name, Duration::from_secs(20))
                    .unwrap_or_else(|e| panic!("waiter {i}: {e}"));
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                served.lock().unwrap().push(i);
                thread::sleep(Duration::from_millis(20));
                inside.fetch_sub(1, Ordering::SeqCst);
                lock.release().unwrap();
            })
        })
        .collect();
    // The waiters mark the lock as wanted before they block.
    let wanted = format!("{{{name}}}:wanted");
    let mut conns = t.conns_for(&name);
    assert!(eventually(Duration::from_secs(10), || conns
        .iter_mut()
        .all(|con| exists(con, &wanted))));
    thread::sleep(Duration::from_millis(200));
    holder.release().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    let mut served = served.lock().unwrap().clone();
    served.sort();
    assert_eq!(served, vec![0, 1, 2, 3]);
    for con in &mut conns {
        assert!(!exists(con, &name));
    }
}

/// The classic `SET key token NX PX` + compare-and-delete on the same name (on every master,
/// with Redlock, where the lock is the majority's) excludes, and is excluded by, the library.
fn interop_with_plain_set_nx(t: &dyn Setup) {
    const PLAIN: &str = "plain-client-token";
    let name = unique_name("interop");
    let c = Client::open(&t.url()).unwrap();
    let mut conns = t.conns_for(&name);
    // The plain client's SET NX PX on every server; whether it got a majority.
    let set = |conns: &mut [redis::Connection]| -> bool {
        let mut granted = 0;
        for con in conns.iter_mut() {
            let set: Option<String> = redis::cmd("SET")
                .arg(&name)
                .arg(PLAIN)
                .arg("NX")
                .arg("PX")
                .arg(5000)
                .query(con)
                .unwrap();
            granted += usize::from(set.is_some());
        }
        granted > conns.len() / 2
    };
    // Its compare-and-delete on every server.
    let release = |conns: &mut [redis::Connection]| {
        for con in conns.iter_mut() {
            if get(con, &name).as_deref() == Some(PLAIN) {
                let _: i64 = redis::cmd("DEL").arg(&name).query(con).unwrap();
            }
        }
    };
    assert!(set(&mut conns));
    assert!(c.try_acquire(&name).unwrap_err().is_held());
    // A waiter gets it once the plain client deletes its key.
    let waiter = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || {
            c.acquire(&name, Duration::from_secs(10))
                .map(|l| l.release())
        })
    };
    thread::sleep(Duration::from_millis(100));
    release(&mut conns);
    waiter.join().unwrap().unwrap().unwrap();
    let lock = c.try_acquire(&name).unwrap();
    assert!(!set(&mut conns), "the plain client got a held lock");
    release(&mut conns);
    let started = Instant::now();
    lock.release().unwrap();
    assert!(set(&mut conns), "not free after release");
    assert!(started.elapsed() < Duration::from_secs(5));
    release(&mut conns);
}

/// The behaviours, as tests of one topology.
macro_rules! suite {
    ($topology:ident, $start:expr) => {
        mod $topology {
            use super::*;

            #[test]
            fn mutual_exclusion_16_threads_2_processes() {
                mutual_exclusion(&$start);
            }
            #[test]
            fn lease_expiry_and_takeover() {
                super::lease_expiry_and_takeover(&$start);
            }
            #[test]
            fn renewal_keeps_a_lock_past_its_lease() {
                renewal(&$start);
            }
            #[test]
            fn lost_lock_is_detected() {
                lost_lock_detection(&$start);
            }
            #[test]
            fn waiters_are_handed_the_lock_by_releases() {
                waiting_and_handoff(&$start);
            }
            #[test]
            fn interop_with_plain_set_nx_px() {
                interop_with_plain_set_nx(&$start);
            }
        }
    };
}

suite!(single, RedisServer::start());
suite!(sentinel, SentinelGroup::start());
suite!(cluster, Cluster::start());
suite!(redlock, RedlockMasters::start(3));
