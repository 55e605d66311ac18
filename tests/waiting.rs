//! Waiting for an exclusive lock, beyond what every kind shares (`topologies.rs`: woken by a
//! release, the wait bound, cancel, arrival order): a zero wait, wake-up by release without
//! polling, no barging, holders that vanish, foreign releases with a plain DEL, odd names, more
//! waiters than waiter connections, and renewal next to blocked waiters.

mod support;

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{RedisServer, eventually, get, unique_name};

/// The waiter queue of a lock whose key has no hash tag.
fn queue_key(name: &str) -> String {
    format!("{{{name}}}:q")
}

fn queued(con: &mut redis::Connection, name: &str) -> i64 {
    redis::cmd("LLEN").arg(queue_key(name)).query(con).unwrap()
}

/// Waits until `n` waiters are queued on `name`.
fn wait_queued(con: &mut redis::Connection, name: &str, n: i64) {
    assert!(
        eventually(Duration::from_secs(10), || queued(con, name) == n),
        "expected {n} queued waiters, have {}",
        queued(con, name)
    );
}

#[test]
fn zero_wait_is_a_single_attempt() {
    let srv = RedisServer::start();
    let name = unique_name("zero-wait");
    let c = Client::open(&srv.url()).unwrap();
    let _h = c.try_acquire(&name).unwrap();
    let e = c.acquire(&name, Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    let mut con = srv.conn();
    assert_eq!(queued(&mut con, &name), 0);
}

#[test]
fn release_wakes_the_waiter_without_polling() {
    let srv = RedisServer::start();
    let name = unique_name("wake");
    let holder = Client::builder(&srv.url())
        .auto_renew(false)
        .lease(Duration::from_secs(60))
        .build()
        .unwrap();
    let waiter = Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(10))
        .recheck_jitter(0.0)
        .build()
        .unwrap();
    let h = holder.try_acquire(&name).unwrap();
    let mut con = srv.conn();
    srv.reset_stats();
    thread::scope(|s| {
        let w = s.spawn(|| {
            let l = waiter.acquire(&name, Duration::from_secs(30)).unwrap();
            let got = Instant::now();
            assert!(l.is_held());
            (l, got)
        });
        wait_queued(&mut con, &name, 1);
        // Blocked for a while: a poll loop would show up in the command counts.
        thread::sleep(Duration::from_millis(1500));
        let blpops_while_blocked = srv.command_calls("blpop");
        let released = Instant::now();
        h.release().unwrap();
        let (l, got) = w.join().unwrap();
        let latency = got.saturating_duration_since(released);
        assert!(latency < Duration::from_secs(1), "woke after {latency:?}");
        assert!(blpops_while_blocked <= 1, "{blpops_while_blocked} BLPOPs");
        let tok: String = get(&mut con, &name).unwrap();
        assert_eq!(tok.len(), 32);
        l.release().unwrap();
    });
    let blpop = srv.command_calls("blpop");
    let evalsha = srv.command_calls("evalsha");
    let set = srv.command_calls("set");
    assert!((1..=2).contains(&blpop), "BLPOP calls: {blpop}");
    // ENQUEUE and two RELEASEs, each EVALSHA possibly repeated once after a NOSCRIPT.
    assert!(evalsha <= 6, "EVALSHA calls: {evalsha}");
    // The waiter's SET NX, its ENQUEUE's SET of its liveness key, the handover's SET.
    assert!(set <= 3, "SET calls: {set}");
    assert_eq!(get(&mut con, &name), None);
}

#[test]
fn releaser_cannot_barge_ahead_of_a_waiter() {
    let srv = RedisServer::start();
    let name = unique_name("barge");
    let c = Client::open(&srv.url()).unwrap();
    let h = c.try_acquire(&name).unwrap();
    let mut con = srv.conn();
    thread::scope(|s| {
        let w = s.spawn(|| {
            let l = c.acquire(&name, Duration::from_secs(30)).unwrap();
            thread::sleep(Duration::from_millis(200));
            l.release().unwrap();
        });
        wait_queued(&mut con, &name, 1);
        h.release().unwrap();
        // The lock went straight to the waiter: an immediate try_acquire is refused.
        let e = c.try_acquire(&name).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Held, "{e}");
        w.join().unwrap();
    });
}

#[test]
fn waiter_gets_the_lock_when_the_holder_vanishes() {
    let srv = RedisServer::start();
    let name = unique_name("vanish");
    let holder = Client::open(&srv.url()).unwrap();
    let waiter = Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(20))
        .build()
        .unwrap();
    let lease = Duration::from_millis(1000);
    let h = holder
        .lock(name.as_bytes())
        .lease(lease)
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let acquired = Instant::now();
    // The holder vanishes: no release, no renewal.
    std::mem::forget(h);
    let wait = Duration::from_secs(8);
    let t = Instant::now();
    let l = waiter.acquire(&name, wait).unwrap();
    let took = t.elapsed();
    assert!(l.is_held());
    assert!(
        acquired.elapsed() >= lease - Duration::from_millis(50),
        "granted before the holder's lease ran out"
    );
    // Re-checked at the lock's expiry, not after the 20 s re-check interval or the wait bound.
    assert!(took < Duration::from_secs(4), "{took:?}");
    l.release().unwrap();
}

#[test]
fn foreign_del_does_not_strand_a_waiter() {
    let srv = RedisServer::start();
    let name = unique_name("foreign-del");
    let recheck = Duration::from_millis(500);
    let waiter = Client::builder(&srv.url())
        .recheck_interval(recheck)
        .build()
        .unwrap();
    let mut con = srv.conn();
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("plain-holder")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(&mut con)
        .unwrap();
    thread::scope(|s| {
        let w = s.spawn(|| {
            let l = waiter.acquire(&name, Duration::from_secs(20)).unwrap();
            (Instant::now(), l)
        });
        wait_queued(&mut con, &name, 1);
        thread::sleep(Duration::from_millis(100));
        let deleted = Instant::now();
        let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
        let (got, l) = w.join().unwrap();
        let after = got.saturating_duration_since(deleted);
        assert!(
            after < recheck + Duration::from_millis(1500),
            "waiter took {after:?} after the DEL"
        );
        assert!(l.is_held());
        let tok = get(&mut con, &name).unwrap();
        assert_ne!(tok, "plain-holder");
        l.release().unwrap();
    });
    assert_eq!(get(&mut con, &name), None);
}

#[test]
fn waiting_works_for_binary_and_hash_tagged_names() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut con = srv.conn();
    let base = unique_name("wbin");
    let names: Vec<Vec<u8>> = vec![
        [b"\x00\xff{}".as_slice(), base.as_bytes()].concat(),
        format!("{{tag}}:{base}").into_bytes(),
        format!("{base}}}odd").into_bytes(),
    ];
    for name in &names {
        let h = c.lock(name).try_acquire().unwrap();
        thread::scope(|s| {
            let w = s.spawn(|| {
                let t = Instant::now();
                let l = c.lock(name).acquire(Duration::from_secs(20)).unwrap();
                (l, t.elapsed())
            });
            // No queue key name to poll for these shapes: give the waiter time to block.
            thread::sleep(Duration::from_millis(500));
            h.release().unwrap();
            let (l, took) = w.join().unwrap();
            assert!(l.is_held());
            // Woken by the release, not by the 10 s re-check.
            assert!(took < Duration::from_secs(5), "{took:?}");
            assert_eq!(l.name(), name.as_slice());
            let tok: Option<Vec<u8>> = redis::cmd("GET").arg(name).query(&mut con).unwrap();
            assert_eq!(tok.map(|t| t.len()), Some(32));
            l.release().unwrap();
        });
        let exists: i64 = redis::cmd("EXISTS").arg(name).query(&mut con).unwrap();
        assert_eq!(exists, 0);
    }
}

#[test]
fn waiters_beyond_max_waiters_still_get_the_lock() {
    // One waiter connection for three waiters: the others wait for the connection, and every
    // one of them still gets the lock once.
    let srv = RedisServer::start();
    let name = unique_name("max-waiters");
    let c = Client::builder(&srv.url())
        .max_waiters(1)
        .checkout_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let h = c.try_acquire(&name).unwrap();
    let granted = Mutex::new(0);
    thread::scope(|s| {
        for _ in 0..3 {
            let (c, name, granted) = (&c, &name, &granted);
            s.spawn(move || {
                let l = c.acquire(name, Duration::from_secs(30)).unwrap();
                *granted.lock().unwrap() += 1;
                thread::sleep(Duration::from_millis(20));
                l.release().unwrap();
            });
        }
        thread::sleep(Duration::from_millis(700));
        assert_eq!(*granted.lock().unwrap(), 0);
        h.release().unwrap();
    });
    assert_eq!(*granted.lock().unwrap(), 3);
    let mut con = srv.conn();
    assert_eq!(get(&mut con, &name), None);
}

#[test]
fn blocked_waiters_do_not_starve_release_and_renewal() {
    // Waiters block on a pool of their own: with a main pool of one connection, the holder's
    // renewal and release still go through while several waiters are blocked.
    let srv = RedisServer::start();
    let name = unique_name("starve");
    let c = Client::builder(&srv.url())
        .pool_size(1)
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let h = c.try_acquire(&name).unwrap();
    let mut con = srv.conn();
    let done = Mutex::new(0);
    thread::scope(|s| {
        for _ in 0..4 {
            let (c, name, done) = (&c, &name, &done);
            s.spawn(move || {
                let l = c.acquire(name, Duration::from_secs(30)).unwrap();
                assert!(l.is_held());
                l.release().unwrap();
                *done.lock().unwrap() += 1;
            });
        }
        wait_queued(&mut con, &name, 4);
        // Several leases pass while the waiters block: renewal must keep the lock.
        thread::sleep(Duration::from_millis(1200));
        assert!(h.is_held(), "renewal starved by blocked waiters");
        assert!(!h.is_lost());
        h.release().unwrap();
    });
    assert_eq!(*done.lock().unwrap(), 4);
    assert!(c.stats().renewals >= 3);
    assert_eq!(get(&mut con, &name), None);
}
