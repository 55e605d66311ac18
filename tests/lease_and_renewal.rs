//! Leases, expiry, takeover, extend, auto-renewal, the renewed-lock limit and `with_lock`.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{RedisServer, eventually, get, pttl, unique_name};

/// Waits until `key` no longer exists (the lease ran out).
fn wait_gone(con: &mut redis::Connection, key: &str) {
    assert!(
        eventually(Duration::from_secs(5), || pttl(con, key) == -2),
        "{key} did not expire"
    );
}

#[test]
fn fixed_lease_expires_and_another_client_takes_over() {
    let srv = RedisServer::start();
    let name = unique_name("lease");
    let a = Client::open(&srv.url()).unwrap();
    let b = Client::open(&srv.url()).unwrap();
    let lease = Duration::from_millis(300);
    let la = a
        .lock(name.as_bytes())
        .lease(lease)
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    assert!(la.is_held());
    assert!(!la.auto_renews());
    assert_eq!(la.lease(), lease);
    assert!(la.remaining() <= lease);
    let mut con = srv.conn();
    let p = pttl(&mut con, &name);
    assert!(p > 0 && p <= 300, "PTTL {p}");

    // While the lease runs, the other client is refused.
    assert_eq!(b.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);

    wait_gone(&mut con, &name);
    assert!(!la.is_held(), "is_held() after the lease ran out");
    assert_eq!(la.remaining(), Duration::ZERO);

    let lb = b.try_acquire(&name).unwrap();
    assert!(lb.is_held());
    let tok_b = get(&mut con, &name).expect("new holder's key");
    // The stale guard's drop must not free the new holder's lock.
    drop(la);
    assert_eq!(get(&mut con, &name).as_deref(), Some(tok_b.as_str()));
    lb.release().unwrap();
    assert_eq!(get(&mut con, &name), None);
}

#[test]
fn stale_holder_release_and_extend_do_not_touch_new_holder() {
    let srv = RedisServer::start();
    let name = unique_name("stale");
    let a = Client::open(&srv.url()).unwrap();
    let b = Client::open(&srv.url()).unwrap();
    let stale = a
        .lock(name.as_bytes())
        .lease(Duration::from_millis(200))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let mut con = srv.conn();
    let tok_a = get(&mut con, &name).unwrap();
    wait_gone(&mut con, &name);
    let fresh = b.try_acquire(&name).unwrap();
    let tok_b = get(&mut con, &name).unwrap();
    assert_ne!(tok_a, tok_b);
    let ttl_before = pttl(&mut con, &name);

    let e = stale.extend(Duration::from_secs(100)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    assert!(e.is_not_held());
    assert!(stale.is_lost(), "a failed extend marks the lock lost");
    assert_eq!(get(&mut con, &name).as_deref(), Some(tok_b.as_str()));
    let ttl_after = pttl(&mut con, &name);
    assert!(
        ttl_after <= ttl_before && ttl_after > 0,
        "the stale extend changed the new holder's PTTL: {ttl_before} -> {ttl_after}"
    );

    let e = stale.release().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    assert_eq!(get(&mut con, &name).as_deref(), Some(tok_b.as_str()));
    assert!(fresh.is_held());
    fresh.release().unwrap();
    assert_eq!(get(&mut con, &name), None);
}

#[test]
fn stale_holder_release_without_extend_is_not_held() {
    // Release straight after the takeover (no failed extend first to mark it lost locally).
    let srv = RedisServer::start();
    let name = unique_name("stale2");
    let a = Client::open(&srv.url()).unwrap();
    let stale = a
        .lock(name.as_bytes())
        .lease(Duration::from_millis(150))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let mut con = srv.conn();
    wait_gone(&mut con, &name);
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("someone-else")
        .arg("PX")
        .arg(30_000)
        .query(&mut con)
        .unwrap();
    assert!(!stale.is_lost(), "nothing told the holder yet");
    assert!(stale.release().unwrap_err().is_not_held());
    assert_eq!(get(&mut con, &name).as_deref(), Some("someone-else"));
}

#[test]
fn extend_after_expiry_fails_with_not_held() {
    let srv = RedisServer::start();
    let name = unique_name("ext-expired");
    let c = Client::open(&srv.url()).unwrap();
    let l = c
        .lock(name.as_bytes())
        .lease(Duration::from_millis(200))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let mut con = srv.conn();
    wait_gone(&mut con, &name);
    let e = l.extend(Duration::from_secs(10)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
    // The failed extend must not resurrect the key.
    assert_eq!(pttl(&mut con, &name), -2);
    assert!(!l.is_held());
    assert!(l.release().unwrap_err().is_not_held());
}

#[test]
fn extend_while_held_lengthens_the_lease() {
    let srv = RedisServer::start();
    let name = unique_name("ext-held");
    let c = Client::open(&srv.url()).unwrap();
    let l = c
        .lock(name.as_bytes())
        .lease(Duration::from_secs(2))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let mut con = srv.conn();
    let tok = get(&mut con, &name).unwrap();
    let before = pttl(&mut con, &name);
    assert!(before > 0 && before <= 2000, "{before}");
    l.extend(Duration::from_secs(60)).unwrap();
    let after = pttl(&mut con, &name);
    assert!(
        after > 2000 && after <= 60_000,
        "PTTL after extend: {after}"
    );
    assert_eq!(l.lease(), Duration::from_secs(60));
    assert!(l.remaining() > Duration::from_secs(2));
    assert!(l.is_held());
    assert_eq!(get(&mut con, &name).as_deref(), Some(tok.as_str()));

    // Extending to a shorter lease is allowed too, and sets exactly that.
    l.extend(Duration::from_millis(500)).unwrap();
    let short = pttl(&mut con, &name);
    assert!(short > 0 && short <= 500, "{short}");
    // The lock then expires at the new, shorter lease.
    wait_gone(&mut con, &name);
    assert!(l.release().unwrap_err().is_not_held());
}

#[test]
fn auto_renewal_keeps_the_lock_for_many_leases() {
    let srv = RedisServer::start();
    let name = unique_name("renew");
    let lease = Duration::from_millis(400);
    let c = Client::builder(&srv.url()).lease(lease).build().unwrap();
    let other = Client::open(&srv.url()).unwrap();
    let l = c.try_acquire(&name).unwrap();
    assert!(l.auto_renews());
    let mut con = srv.conn();
    let tok = get(&mut con, &name).unwrap();
    let s0 = c.stats();
    assert_eq!(s0.renewed_locks, 1);

    let start = Instant::now();
    let hold = lease * 11 + Duration::from_millis(100);
    let mut checks = 0;
    while start.elapsed() < hold {
        assert!(l.is_held(), "lost after {:?}", start.elapsed());
        assert!(!l.is_lost());
        assert_eq!(get(&mut con, &name).as_deref(), Some(tok.as_str()));
        let p = pttl(&mut con, &name);
        assert!(p > 0 && p <= 400, "PTTL {p}");
        if checks % 10 == 0 {
            assert!(other.try_acquire(&name).unwrap_err().is_held());
        }
        checks += 1;
        thread::sleep(Duration::from_millis(50));
    }
    let s = c.stats();
    assert!(s.renewals >= 10, "only {} renewals in {hold:?}", s.renewals);
    assert_eq!(s.lost_locks, 0);
    l.release().unwrap();
    assert_eq!(get(&mut con, &name), None);
    // After the release, the renewal thread stops extending: no key comes back.
    thread::sleep(lease);
    assert_eq!(get(&mut con, &name), None);
    let renewals = c.stats().renewals;
    thread::sleep(lease);
    assert_eq!(
        c.stats().renewals,
        renewals,
        "renewal continued after release"
    );
    assert!(eventually(Duration::from_secs(5), || c
        .stats()
        .renewed_locks
        == 0));
}

#[test]
fn extend_on_auto_renewed_lock_changes_the_renewed_lease() {
    let srv = RedisServer::start();
    let name = unique_name("renew-ext");
    let c = Client::builder(&srv.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let l = c.try_acquire(&name).unwrap();
    l.extend(Duration::from_secs(30)).unwrap();
    let mut con = srv.conn();
    // Renewal continues with the new lease: the PTTL stays well above the old 300 ms.
    thread::sleep(Duration::from_millis(700));
    let p = pttl(&mut con, &name);
    assert!(p > 1000, "PTTL {p}: renewal went back to the old lease");
    assert!(l.is_held());
    l.release().unwrap();
}

#[test]
fn dropping_a_held_lock_releases_it() {
    let srv = RedisServer::start();
    let name = unique_name("drop");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    {
        let _l = c.try_acquire(&name).unwrap();
        assert!(get(&mut con, &name).is_some());
    }
    assert_eq!(get(&mut con, &name), None, "drop did not release");
    // Also for a fixed lease.
    let l = c
        .lock(name.as_bytes())
        .auto_renew(false)
        .lease(Duration::from_secs(30))
        .try_acquire()
        .unwrap();
    drop(l);
    assert_eq!(get(&mut con, &name), None);
    assert!(c.try_acquire(&name).is_ok());
}

#[test]
fn renewed_lock_limit_refuses_without_touching_redis() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .max_renewed_locks(2)
        .build()
        .unwrap();
    let n1 = unique_name("lim1");
    let n2 = unique_name("lim2");
    let n3 = unique_name("lim3");
    let l1 = c.try_acquire(&n1).unwrap();
    let l2 = c.try_acquire(&n2).unwrap();
    assert_eq!(c.stats().renewed_locks, 2);

    srv.reset_stats();
    let e = c.try_acquire(&n3).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitReached, "{e}");
    let e = c.acquire(&n3, Duration::from_millis(200)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitReached, "{e}");
    let mut con = srv.conn();
    let exists: i64 = redis::cmd("EXISTS").arg(&n3).query(&mut con).unwrap();
    assert_eq!(exists, 0, "a refused acquire created the key");
    assert_eq!(srv.command_calls("set"), 0);
    assert_eq!(srv.command_calls("evalsha"), 0);
    // Locks without auto-renewal are not counted.
    let fixed = c
        .lock(n3.as_bytes())
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    fixed.release().unwrap();

    l1.release().unwrap();
    // The slot comes back when the renewal thread notices the release (see
    // `renewed_lock_place_is_free_right_after_release_repeatedly` for acquiring at once).
    assert!(eventually(Duration::from_secs(5), || c
        .stats()
        .renewed_locks
        == 1));
    let l3 = c
        .try_acquire(&n3)
        .expect("a place among the renewed locks must be free after a release");
    assert!(l3.is_held());
    assert_eq!(
        c.try_acquire(&n1).unwrap_err().kind(),
        ErrorKind::LimitReached
    );
    l2.release().unwrap();
    l3.release().unwrap();
}

#[test]
fn with_lock_returns_the_value_and_frees_the_lock() {
    let srv = RedisServer::start();
    let name = unique_name("with");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let name2 = name.clone();
    let v = c
        .with_lock(&name, Duration::from_secs(1), |l| {
            assert!(l.is_held());
            assert_eq!(l.name(), name2.as_bytes());
            42
        })
        .unwrap();
    assert_eq!(v, 42);
    assert_eq!(get(&mut con, &name), None);
    // The lock-request form too.
    let s = c
        .lock(name.as_bytes())
        .auto_renew(false)
        .lease(Duration::from_secs(5))
        .run(Duration::from_secs(1), |_| "done".to_string())
        .unwrap();
    assert_eq!(s, "done");
    assert!(c.try_acquire(&name).is_ok());
}

#[test]
fn with_lock_on_a_held_lock_times_out_without_running() {
    let srv = RedisServer::start();
    let name = unique_name("with-held");
    let c = Client::open(&srv.url()).unwrap();
    let holder = c.try_acquire(&name).unwrap();
    let mut ran = false;
    let t = Instant::now();
    let e = c
        .with_lock(&name, Duration::from_millis(200), |_| ran = true)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert!(!ran, "the closure ran without the lock");
    assert!(holder.is_held());
    holder.release().unwrap();
}

#[test]
fn with_lock_reports_a_lock_lost_during_the_closure() {
    let srv = RedisServer::start();
    let name = unique_name("with-lost");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let e = c
        .lock(name.as_bytes())
        .auto_renew(false)
        .lease(Duration::from_secs(30))
        .run(Duration::from_secs(1), |_| {
            let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
            7
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotHeld, "{e}");
}
