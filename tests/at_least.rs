//! `at_least` and `at_most` of an exclusive lock, on real servers: a release before `at_least`
//! leaves the key ours until then (waiters get it at their next re-check after it expires), a
//! release after it frees the lock; `at_most` cuts the lease and reports the lock lost; bad
//! bounds are refused holding nothing. On one server and on Redlock's masters.

mod support;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{RedisServer, RedlockMasters, eventually, exists, get, pttl, unique_name};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Auto-renewed every 100 ms.
fn client(url: &str) -> Client {
    Client::builder(url).lease(MS(300)).build().unwrap()
}

#[test]
fn a_release_before_at_least_keeps_the_key_until_then() {
    let srv = RedisServer::start();
    let name = unique_name("least-keep");
    let c = client(&srv.url());
    let other = client(&srv.url());
    let mut con = srv.conn();
    let before = Instant::now();
    let lock = c
        .lock(name.as_bytes())
        .at_least(MS(1200))
        .try_acquire()
        .unwrap();
    let granted = Instant::now();
    let token = lock.owner_token().to_owned();
    lock.release().unwrap();
    // The key holds our token with what is left of the 1.2 s (longer than the 300 ms lease).
    assert_eq!(get(&mut con, &name).as_deref(), Some(token.as_str()));
    let p = pttl(&mut con, &name);
    assert!((900..=1200).contains(&p), "PTTL {p}");
    assert_eq!(
        other.try_acquire(&name).unwrap_err().kind(),
        ErrorKind::Held
    );
    // Nobody renews it: it expires on its own, not before the 1.2 s counted from the grant.
    assert!(eventually(Duration::from_secs(5), || !exists(
        &mut con, &name
    )));
    assert!(granted.elapsed() >= MS(1200), "{:?}", before.elapsed());
    other.try_acquire(&name).unwrap().release().unwrap();
}

#[test]
fn a_drop_before_at_least_keeps_the_key_too() {
    let srv = RedisServer::start();
    let name = unique_name("least-drop");
    let c = client(&srv.url());
    let mut con = srv.conn();
    let lock = c
        .lock(name.as_bytes())
        .at_least(MS(2000))
        .try_acquire()
        .unwrap();
    let token = lock.owner_token().to_owned();
    drop(lock);
    assert_eq!(get(&mut con, &name).as_deref(), Some(token.as_str()));
    let p = pttl(&mut con, &name);
    assert!((1500..=2000).contains(&p), "PTTL {p}");
}

#[test]
fn renewal_keeps_the_key_alive_for_at_least_while_held() {
    let srv = RedisServer::start();
    let name = unique_name("least-renew");
    let c = client(&srv.url());
    let mut con = srv.conn();
    let lock = c
        .lock(name.as_bytes())
        .at_least(MS(3000))
        .try_acquire()
        .unwrap();
    let granted = Instant::now();
    // After a renewal (every 100 ms) the key's expiry covers the 3 s, not only the lease.
    thread::sleep(MS(400));
    let p = pttl(&mut con, &name) as u128;
    let left = MS(3000).saturating_sub(granted.elapsed()).as_millis();
    assert!(
        p + 150 >= left && p > 300,
        "PTTL {p}, {left} ms of at_least left"
    );
    lock.release().unwrap();
    assert!(exists(&mut con, &name));
}

#[test]
fn a_release_after_at_least_frees_the_lock() {
    let srv = RedisServer::start();
    let name = unique_name("least-after");
    let c = client(&srv.url());
    let mut con = srv.conn();
    let lock = c
        .lock(name.as_bytes())
        .at_least(MS(200))
        .try_acquire()
        .unwrap();
    thread::sleep(MS(300));
    lock.release().unwrap();
    assert!(!exists(&mut con, &name));
}

#[test]
fn waiters_get_the_name_within_the_recheck_interval_of_its_expiry() {
    let srv = RedisServer::start();
    let name = unique_name("least-wait");
    let recheck = MS(300);
    let holder = client(&srv.url());
    let waiter = Client::builder(&srv.url())
        .lease(MS(300))
        .recheck_interval(recheck)
        .build()
        .unwrap();
    let least = MS(1500);
    let lock = holder
        .lock(name.as_bytes())
        .at_least(least)
        .try_acquire()
        .unwrap();
    let granted = Instant::now();
    let got = Arc::new(Mutex::new(None));
    let t = {
        let (got, name) = (got.clone(), name.clone());
        thread::spawn(move || {
            let l = waiter.acquire(&name, Duration::from_secs(10)).unwrap();
            *got.lock().unwrap() = Some(Instant::now());
            l.release().unwrap();
        })
    };
    // The waiter is queued; the release leaves the key to its 1.5 s.
    thread::sleep(MS(200));
    lock.release().unwrap();
    t.join().unwrap();
    let after = got.lock().unwrap().unwrap().duration_since(granted);
    assert!(
        after >= least,
        "the waiter got the name {after:?} after the grant"
    );
    // Woken by its re-check: within the interval (less jitter) of the expiry, and some slack.
    assert!(
        after <= least + recheck + MS(400),
        "the waiter got the name {after:?} after the grant"
    );
}

#[test]
fn at_most_stops_renewal_and_reports_the_lock_lost() {
    let srv = RedisServer::start();
    let name = unique_name("most-lost");
    let c = client(&srv.url());
    let mut con = srv.conn();
    let lock = c
        .lock(name.as_bytes())
        .at_most(MS(1000))
        .try_acquire()
        .unwrap();
    let granted = Instant::now();
    let why = Arc::new(Mutex::new(None));
    {
        let why = why.clone();
        lock.on_lost(move |e| {
            *why.lock().unwrap() = Some((e.kind(), e.to_string(), Instant::now()))
        });
    }
    // Renewed meanwhile (the lease is 300 ms), never past the 1 s.
    thread::sleep(MS(600));
    assert!(lock.is_held() && !lock.is_lost());
    let p = pttl(&mut con, &name) as u128;
    assert!(p <= 1000 - 550, "PTTL {p} reaches past at_most");
    assert!(eventually(Duration::from_secs(3), || lock.is_lost()));
    let (kind, text, at) = why.lock().unwrap().clone().unwrap();
    assert_eq!(kind, ErrorKind::NotHeld);
    assert!(text.contains("at_most"), "{text}");
    let at = at.duration_since(granted);
    assert!(
        at >= MS(900) && at <= MS(1300),
        "reported lost {at:?} after the grant"
    );
    assert!(eventually(MS(500), || !exists(&mut con, &name)));
    let e = lock.release().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
}

#[test]
fn a_lease_or_an_extend_longer_than_at_most_is_cut_to_it() {
    let srv = RedisServer::start();
    let name = unique_name("most-cut");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    // The client's 30 s lease, cut to the 2 s.
    let lock = c
        .lock(name.as_bytes())
        .at_most(MS(2000))
        .try_acquire()
        .unwrap();
    let p = pttl(&mut con, &name);
    assert!((1500..=2000).contains(&p), "PTTL {p}");
    assert!(lock.remaining() <= MS(2000));
    drop(lock);
    let lock = c
        .lock(name.as_bytes())
        .auto_renew(false)
        .lease(MS(1000))
        .at_most(MS(2000))
        .try_acquire()
        .unwrap();
    lock.extend(Duration::from_secs(60)).unwrap();
    let p = pttl(&mut con, &name);
    assert!((1500..=2000).contains(&p), "PTTL {p}");
    lock.release().unwrap();
}

#[test]
fn bad_bounds_are_refused_holding_nothing() {
    let srv = RedisServer::start();
    let name = unique_name("bounds-bad");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let refused = |r: Result<redislock::Lock, redislock::Error>, says: &str| {
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    };
    let req = || c.lock(name.as_bytes());
    refused(
        req().at_least(Duration::ZERO).try_acquire(),
        "at_least must be",
    );
    refused(
        req().at_most(Duration::ZERO).try_acquire(),
        "at_most must be",
    );
    let month = Duration::from_secs(31 * 24 * 3600);
    refused(
        req().at_least(month).acquire(MS(100)),
        "between 1 ms and 30 days",
    );
    refused(
        req().at_most(month).try_acquire(),
        "between 1 ms and 30 days",
    );
    refused(
        req().at_least(MS(2000)).at_most(MS(1000)).try_acquire(),
        "must not be longer than at_most",
    );
    refused(
        req()
            .auto_renew(false)
            .lease(MS(1000))
            .at_least(MS(2000))
            .try_acquire(),
        "not auto-renewed",
    );
    assert!(!exists(&mut con, &name));
    // A restore cannot count from a grant it did not see.
    let held = c.try_acquire(&name).unwrap();
    let token = held.detach().unwrap();
    refused(req().at_least(MS(500)).restore(&token), "restore");
    assert_eq!(get(&mut con, &name).as_deref(), Some(token.as_str()));
    // Within the bounds: accepted (at_least equal to at_most, and to a fixed lease).
    let _ = redis::cmd("DEL").arg(&name).query::<i64>(&mut con);
    req()
        .auto_renew(false)
        .lease(MS(1000))
        .at_least(MS(1000))
        .at_most(MS(1000))
        .try_acquire()
        .unwrap()
        .detach()
        .unwrap();
}

#[test]
fn on_redlock_a_release_before_at_least_keeps_the_majority() {
    let masters = RedlockMasters::start(3);
    let name = unique_name("least-redlock");
    let c = client(&masters.url());
    let other = client(&masters.url());
    let lock = c
        .lock(name.as_bytes())
        .at_least(MS(1500))
        .try_acquire()
        .unwrap();
    let token = lock.owner_token().to_owned();
    lock.release().unwrap();
    let mut kept = 0;
    for m in masters.masters() {
        let mut con = m.conn();
        if get(&mut con, &name).as_deref() == Some(token.as_str()) {
            let p = pttl(&mut con, &name);
            assert!((1000..=1500).contains(&p), "PTTL {p}");
            kept += 1;
        }
    }
    assert!(kept >= 2, "{kept} masters keep the token");
    assert!(other.try_acquire(&name).unwrap_err().is_held());
    assert!(eventually(Duration::from_secs(5), || other
        .try_acquire(&name)
        .map(|l| l.release().unwrap())
        .is_ok()));
}
