//! Fencing tokens: strictly increasing per lock name across every kind of grant.

mod support;

use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use support::{RedisServer, eventually, unique_name};

fn queued(con: &mut redis::Connection, name: &str) -> i64 {
    redis::cmd("LLEN")
        .arg(format!("{{{name}}}:q"))
        .query(con)
        .unwrap()
}

fn fence_counter(con: &mut redis::Connection, name: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(format!("{{{name}}}:fence"))
        .query(con)
        .unwrap()
}

#[test]
fn tokens_increase_across_grants_takeover_and_handoff() {
    let srv = RedisServer::start();
    let name = unique_name("fence");
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let other = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let mut con = srv.conn();
    let mut seen: Vec<u64> = Vec::new();

    // Plain grants.
    for _ in 0..3 {
        let l = c.try_acquire(&name).unwrap();
        seen.push(l.fencing_token().expect("fenced grant without a token"));
        l.release().unwrap();
    }

    // Takeover after expiry, by another client.
    let stale = c
        .lock(name.as_bytes())
        .lease(Duration::from_millis(200))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    seen.push(stale.fencing_token().unwrap());
    assert!(eventually(Duration::from_secs(5), || {
        redis::cmd("EXISTS")
            .arg(&name)
            .query::<i64>(&mut con)
            .unwrap()
            == 0
    }));
    let taker = other.try_acquire(&name).unwrap();
    seen.push(taker.fencing_token().unwrap());
    assert!(stale.release().unwrap_err().is_not_held());

    // Handoff to two queued waiters, in order.
    let handed = Mutex::new(Vec::new());
    thread::scope(|s| {
        let mut hs = Vec::new();
        for i in 0..2 {
            let (c, handed, name) = (&c, &handed, &name);
            hs.push(s.spawn(move || {
                let l = c.acquire(name, Duration::from_secs(30)).unwrap();
                handed.lock().unwrap().push(l.fencing_token().unwrap());
                l.release().unwrap();
            }));
            assert!(eventually(Duration::from_secs(10), || {
                queued(&mut con, name) == i + 1
            }));
        }
        taker.release().unwrap();
        for h in hs {
            h.join().unwrap();
        }
    });
    seen.extend(handed.into_inner().unwrap());

    // A grant through `with_lock`.
    let t = c
        .with_lock(&name, Duration::from_secs(1), |l| l.fencing_token())
        .unwrap();
    seen.push(t.unwrap());

    assert_eq!(seen.len(), 8);
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens not strictly increasing: {seen:?}"
    );
    assert!(seen[0] >= 1);
    assert_eq!(fence_counter(&mut con, &name), Some(*seen.last().unwrap()));
}

#[test]
fn waiter_woken_by_release_gets_a_larger_token() {
    let srv = RedisServer::start();
    let name = unique_name("fence-wake");
    let holder = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let waiter = Client::builder(&srv.url())
        .fencing(true)
        .recheck_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut con = srv.conn();
    let h = holder.try_acquire(&name).unwrap();
    let t0 = h.fencing_token().unwrap();
    srv.reset_stats();
    thread::scope(|s| {
        let w = s.spawn(|| {
            let t = Instant::now();
            let l = waiter.acquire(&name, Duration::from_secs(30)).unwrap();
            (l.fencing_token(), t.elapsed())
        });
        assert!(eventually(Duration::from_secs(10), || queued(
            &mut con, &name
        ) == 1));
        thread::sleep(Duration::from_millis(200));
        h.release().unwrap();
        let (t1, took) = w.join().unwrap();
        let t1 = t1.expect("woken waiter has no fencing token");
        assert!(t1 > t0, "{t1} <= {t0}");
        assert!(
            took < Duration::from_secs(5),
            "not woken by the release: {took:?}"
        );
    });
    // The waiter really went through BLPOP (the handoff path), not a later re-check.
    assert!(srv.command_calls("blpop") >= 1);
    assert!(srv.command_calls("blpop") <= 2);
}

#[test]
fn waiter_granted_on_expiry_gets_a_larger_token() {
    let srv = RedisServer::start();
    let name = unique_name("fence-exp");
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let h = c
        .lock(name.as_bytes())
        .lease(Duration::from_millis(400))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let t0 = h.fencing_token().unwrap();
    std::mem::forget(h);
    let l = c.acquire(&name, Duration::from_secs(10)).unwrap();
    assert!(l.fencing_token().unwrap() > t0);
}

#[test]
fn unfenced_grants_have_no_token_and_do_not_count() {
    let srv = RedisServer::start();
    let name = unique_name("nofence");
    let c = Client::open(&srv.url()).unwrap();
    let l = c.try_acquire(&name).unwrap();
    assert_eq!(l.fencing_token(), None);
    l.release().unwrap();
    let mut con = srv.conn();
    assert_eq!(fence_counter(&mut con, &name), None);
    // Per-request override on a client without fencing.
    let a = c.lock(name.as_bytes()).fencing(true).try_acquire().unwrap();
    let ta = a.fencing_token().unwrap();
    a.release().unwrap();
    let b = c.lock(name.as_bytes()).fencing(true).try_acquire().unwrap();
    assert!(b.fencing_token().unwrap() > ta);
}

#[test]
fn tokens_are_per_name() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let a = unique_name("fa");
    let b = unique_name("fb");
    let la = c.try_acquire(&a).unwrap();
    let lb = c.try_acquire(&b).unwrap();
    assert_eq!(la.fencing_token(), Some(1));
    assert_eq!(lb.fencing_token(), Some(1));
}

#[test]
fn concurrent_fenced_grants_are_all_distinct_and_ordered() {
    let srv = RedisServer::start();
    let name = unique_name("fence-conc");
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let log = Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..6 {
            let (c, log, name) = (&c, &log, &name);
            s.spawn(move || {
                for _ in 0..5 {
                    let l = c.acquire(name, Duration::from_secs(60)).unwrap();
                    // Recorded while held: the log order is the grant order.
                    log.lock().unwrap().push(l.fencing_token().unwrap());
                    l.release().unwrap();
                }
            });
        }
    });
    let log = log.into_inner().unwrap();
    assert_eq!(log.len(), 30);
    assert!(
        log.windows(2).all(|w| w[0] < w[1]),
        "tokens out of grant order: {log:?}"
    );
}
