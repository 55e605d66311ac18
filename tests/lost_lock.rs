//! Lost-lock detection by the renewal thread, beyond a deleted key (every kind, every topology:
//! `topologies.rs`): the key overwritten behind the holder's back, or Redis restarted empty;
//! recovery afterwards, and the `on_lost` callback.

mod support;

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind, Lock};
use support::{RedisServer, eventually, get, pttl, unique_name};

const LEASE: Duration = Duration::from_millis(300);
/// Generous bound for "about one renewal interval" (lease/3 = 100 ms) on a loaded machine.
const DETECT: Duration = Duration::from_secs(3);

fn renewing_client(srv: &RedisServer) -> Client {
    Client::builder(&srv.url()).lease(LEASE).build().unwrap()
}

fn assert_reported_lost(l: &Lock) {
    let t = Instant::now();
    assert!(
        eventually(DETECT, || l.is_lost()),
        "loss not reported within {DETECT:?}"
    );
    assert!(!l.is_held(), "is_held() on a lost lock");
    assert_eq!(l.remaining(), Duration::ZERO);
    let e = l.extend(Duration::from_secs(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    eprintln!("loss reported after {:?}", t.elapsed());
}

#[test]
fn overwritten_key_is_reported_lost_and_left_alone() {
    let srv = RedisServer::start();
    let name = unique_name("lost-over");
    let c = renewing_client(&srv);
    let l = c.try_acquire(&name).unwrap();
    let mut con = srv.conn();
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("intruder")
        .arg("PX")
        .arg(60_000)
        .query(&mut con)
        .unwrap();
    assert_reported_lost(&l);
    let e = l.release().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    // Neither renewal nor release touched the intruder's key or its expiry.
    assert_eq!(get(&mut con, &name).as_deref(), Some("intruder"));
    let p = pttl(&mut con, &name);
    assert!(p > 50_000, "PTTL {p}");
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
}

#[test]
fn redis_restarted_empty_is_reported_lost_and_acquire_works_after() {
    let srv = RedisServer::start();
    let name = unique_name("lost-restart");
    let c = renewing_client(&srv);
    let l = c.try_acquire(&name).unwrap();
    srv.restart();
    assert_reported_lost(&l);
    assert_eq!(l.release().unwrap_err().kind(), ErrorKind::NotHeld);

    let l2 = c.try_acquire(&name).expect("acquire after the restart");
    assert!(l2.is_held());
    let mut con = srv.conn();
    assert!(get(&mut con, &name).is_some());
    // And it is renewed normally on the new server.
    thread::sleep(LEASE * 3);
    assert!(l2.is_held());
    assert!(get(&mut con, &name).is_some());
    l2.release().unwrap();
    assert_eq!(get(&mut con, &name), None);
}

#[test]
fn first_acquire_after_restart_succeeds_with_several_pooled_connections() {
    // The pool retries an operation once when its connection was dropped by the server. After a
    // restart every idle pooled connection is dead, so the retry must not land on another one.
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .auto_renew(false)
        .pool_size(8)
        .build()
        .unwrap();
    // Have four connections in use at once so the pool keeps four idle ones afterwards.
    let barrier = Barrier::new(4);
    thread::scope(|s| {
        for i in 0..4 {
            let (c, barrier) = (&c, &barrier);
            s.spawn(move || {
                let l = c.try_acquire(format!("warm-{i}")).unwrap();
                barrier.wait();
                l.release().unwrap();
                barrier.wait();
            });
        }
    });
    let clients: i64 = {
        let mut con = srv.conn();
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
        list.lines().count() as i64 - 1
    };
    assert!(clients >= 2, "the pool holds only {clients} connection(s)");

    srv.restart();
    let name = unique_name("after-restart");
    let r = c.try_acquire(&name);
    assert!(
        r.is_ok(),
        "the first acquire after a restart failed although Redis is up: {:?}",
        r.err()
    );
}

#[test]
fn waiter_blocked_during_restart_does_not_hang() {
    // A waiter blocked in BLPOP when Redis restarts either gets the lock or an error well
    // within its wait bound: it never hangs past it.
    let srv = RedisServer::start();
    let name = unique_name("lost-waiter");
    let holder = Client::open(&srv.url()).unwrap();
    let waiter = Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let _h = holder.try_acquire(&name).unwrap();
    thread::scope(|s| {
        let w = s.spawn(|| {
            let t = Instant::now();
            let r = waiter.acquire(&name, Duration::from_secs(8));
            (r.map(|l| l.is_held()), t.elapsed())
        });
        let mut con = srv.conn();
        let q = format!("{{{name}}}:q");
        assert!(eventually(Duration::from_secs(5), || {
            redis::cmd("LLEN").arg(&q).query::<i64>(&mut con).unwrap() == 1
        }));
        srv.restart();
        let (r, took) = w.join().unwrap();
        assert!(
            took < Duration::from_secs(8) + Duration::from_secs(3),
            "{took:?}"
        );
        match r {
            Ok(held) => assert!(held),
            Err(e) => assert!(
                matches!(e.kind(), ErrorKind::Connection | ErrorKind::WaitTimeout),
                "{e}"
            ),
        }
    });
}

#[test]
fn on_lost_is_called_once_with_the_reason() {
    let srv = RedisServer::start();
    let name = unique_name("lost-callback");
    let c = renewing_client(&srv);
    let l = c.try_acquire(&name).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let tx2 = tx.clone();
    l.on_lost(move |e| tx.send((e.kind(), e.to_string())).unwrap());
    let mut con = srv.conn();
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    let (kind, text) = rx.recv_timeout(DETECT).expect("on_lost was not called");
    assert_eq!(kind, ErrorKind::NotHeld);
    assert!(text.contains(&name) && text.contains("gone"), "{text}");
    assert!(!text.contains(l.owner_token()), "token in {text}");
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "called twice"
    );
    assert!(l.is_lost());
    // Set on a lock that is lost already: called at once, on this thread.
    l.on_lost(move |e| tx2.send((e.kind(), e.to_string())).unwrap());
    assert!(rx.try_recv().is_ok());
    // A release or a detach never calls it.
    let held = c.try_acquire(&name).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    held.on_lost(move |_| tx.send(()).unwrap());
    held.release().unwrap();
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
}
