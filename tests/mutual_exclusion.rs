//! Mutual exclusion under contention: many threads in two processes increment a counter with a
//! non-atomic GET + SET under the lock; no update may be lost and no two holders may overlap.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use support::{
    CHILD_ROLE_ENV, RedisServer, child_env, exists, spawn_self, unique_name, wait_child_ok,
};

const THREADS: usize = 16;
const INCREMENTS: u64 = 30;
const CHILD_ROLE: &str = "mutex-incrementer";

fn get_i64(con: &mut redis::Connection, key: &str) -> Option<i64> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// Waits (up to 30 s) until `key` exists.
fn wait_for_key(con: &mut redis::Connection, key: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !exists(con, key) {
        assert!(Instant::now() < deadline, "{key} never appeared");
        thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `THREADS` threads doing `INCREMENTS` non-atomic increments each under the lock.
/// Returns the number of overlaps seen (a second holder inside the critical section).
fn hammer(url: &str, lock: &str, counter: &str, inside: &str) -> u64 {
    let client = Client::builder(url).build().unwrap();
    let overlaps = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|i| {
            let client = client.clone();
            let (url, lock, counter, inside) = (
                url.to_owned(),
                lock.to_owned(),
                counter.to_owned(),
                inside.to_owned(),
            );
            let overlaps = overlaps.clone();
            thread::spawn(move || {
                let rc = redis::Client::open(url.as_str()).unwrap();
                let mut con = rc
                    .get_connection_with_timeout(Duration::from_secs(5))
                    .unwrap();
                con.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                for n in 0..INCREMENTS {
                    client
                        .with_lock(&lock, Duration::from_secs(60), |l| {
                            assert!(l.is_held());
                            let now_inside: i64 =
                                redis::cmd("INCR").arg(&inside).query(&mut con).unwrap();
                            if now_inside != 1 {
                                overlaps.fetch_add(1, Ordering::Relaxed);
                            }
                            let v = get_i64(&mut con, &counter).unwrap_or(0);
                            if (i as u64 + n).is_multiple_of(4) {
                                // Widen the window between read and write now and then.
                                thread::sleep(Duration::from_millis(1));
                            }
                            let () = redis::cmd("SET")
                                .arg(&counter)
                                .arg(v + 1)
                                .query(&mut con)
                                .unwrap();
                            let _: i64 = redis::cmd("DECR").arg(&inside).query(&mut con).unwrap();
                        })
                        .unwrap_or_else(|e| panic!("with_lock failed: {e}"));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("an incrementing thread panicked");
    }
    overlaps.load(Ordering::Relaxed)
}

#[test]
fn two_processes_sixteen_threads_lose_no_update() {
    let srv = RedisServer::start();
    let lock = unique_name("mx-lock");
    let counter = unique_name("mx-counter");
    let inside = unique_name("mx-inside");
    let ready = unique_name("mx-ready");
    let go = unique_name("mx-go");
    let child = spawn_self(
        "child_incrementer",
        &[
            (CHILD_ROLE_ENV, CHILD_ROLE.to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", lock.clone()),
            ("REDISLOCK_TEST_COUNTER", counter.clone()),
            ("REDISLOCK_TEST_INSIDE", inside.clone()),
            ("REDISLOCK_TEST_READY", ready.clone()),
            ("REDISLOCK_TEST_GO", go.clone()),
        ],
    );
    // Start both halves together so that they really contend.
    let mut con = srv.conn();
    wait_for_key(&mut con, &ready);
    let () = redis::cmd("SET").arg(&go).arg(1).query(&mut con).unwrap();

    let overlaps = hammer(&srv.url(), &lock, &counter, &inside);
    let out = wait_child_ok(child, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 passed"), "{stdout}");

    let total = 2 * THREADS as i64 * INCREMENTS as i64;
    assert_eq!(overlaps, 0, "the parent saw overlapping holders");
    assert_eq!(
        get_i64(&mut con, &counter),
        Some(total),
        "lost updates: the lock did not exclude"
    );
    assert_eq!(get_i64(&mut con, &inside), Some(0));
    // Everything is released: the lock key is gone and no waiter is left queued.
    assert!(!exists(&mut con, &lock), "lock key left behind");
    let queued: i64 = redis::cmd("LLEN")
        .arg(format!("{{{lock}}}:q"))
        .query(&mut con)
        .unwrap();
    assert_eq!(queued, 0, "waiters left in the queue");
}

/// Child role of `two_processes_sixteen_threads_lose_no_update`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_incrementer() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some(CHILD_ROLE) {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let url = var("REDISLOCK_TEST_URL");
    let rc = redis::Client::open(url.as_str()).unwrap();
    let mut con = rc
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    let () = redis::cmd("SET")
        .arg(var("REDISLOCK_TEST_READY"))
        .arg(1)
        .query(&mut con)
        .unwrap();
    wait_for_key(&mut con, &var("REDISLOCK_TEST_GO"));
    let overlaps = hammer(
        &url,
        &var("REDISLOCK_TEST_LOCK"),
        &var("REDISLOCK_TEST_COUNTER"),
        &var("REDISLOCK_TEST_INSIDE"),
    );
    assert_eq!(overlaps, 0, "the child saw overlapping holders");
}

#[test]
fn threads_in_one_process_with_fixed_leases_lose_no_update() {
    // Same check without auto-renewal and with try_acquire-style contention through `acquire`.
    let srv = RedisServer::start();
    let lock = unique_name("mx1-lock");
    let counter = unique_name("mx1-counter");
    let client = Client::builder(&srv.url())
        .auto_renew(false)
        .lease(Duration::from_secs(20))
        .build()
        .unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let client = client.clone();
            let (lock, counter, url) = (lock.clone(), counter.clone(), srv.url());
            thread::spawn(move || {
                let rc = redis::Client::open(url.as_str()).unwrap();
                let mut con = rc
                    .get_connection_with_timeout(Duration::from_secs(5))
                    .unwrap();
                for _ in 0..20 {
                    let l = client.acquire(&lock, Duration::from_secs(60)).unwrap();
                    let v = get_i64(&mut con, &counter).unwrap_or(0);
                    thread::yield_now();
                    let () = redis::cmd("SET")
                        .arg(&counter)
                        .arg(v + 1)
                        .query(&mut con)
                        .unwrap();
                    l.release().unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut con = srv.conn();
    assert_eq!(get_i64(&mut con, &counter), Some(160));
    assert!(!exists(&mut con, &lock));
}
