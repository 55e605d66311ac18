//! Semaphores against real servers, what is particular to them (what they share with every
//! kind, on every topology, is in `topologies.rs`): permits counted and given back, grants in
//! arrival order (a request for k is not overtaken by later, smaller ones), each grant on its
//! own lease, bad input and a name used as two kinds, `min_replicas` for every kind, and
//! nothing left in Redis afterwards.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redislock::{Client, ErrorKind};
use support::{
    RedisServer, eventually, handoff_only, leftover_keys, llen, unique_name, wait_for_len,
};

/// A bound for things that must happen on a loaded machine; never a speed claim.
const SURELY: Duration = Duration::from_secs(20);

/// The grants the semaphore key records (members other than its size).
fn grants(con: &mut redis::Connection, name: &str) -> usize {
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(name)
        .arg(0)
        .arg(-1)
        .query(con)
        .unwrap();
    members.iter().filter(|m| !m.starts_with('#')).count()
}

#[test]
fn permits_are_counted_and_given_back() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
    let name = unique_name("sem-basic");
    let mut con = srv.conn();
    let sem = c.semaphore(&name, 3);
    let a = sem.try_acquire(1).unwrap();
    let b = sem.try_acquire(2).unwrap();
    assert_eq!((a.count(), b.count()), (1, 2));
    assert!(a.is_held() && b.is_held());
    assert_eq!(sem.try_acquire(1).unwrap_err().kind(), ErrorKind::Held);
    b.release().unwrap();
    assert_eq!(sem.try_acquire(3).unwrap_err().kind(), ErrorKind::Held);
    let d = sem.try_acquire(2).unwrap();
    assert_eq!(grants(&mut con, &name), 2);
    // The semaphore's key is taken: a plain client or an exclusive lock cannot use the name.
    let plain: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg("plain-token")
        .arg("NX")
        .query(&mut con)
        .unwrap();
    assert_eq!(plain, None);
    a.release().unwrap();
    d.release().unwrap();
    assert_eq!(a_second_release_is_not_held(&c, &name), ErrorKind::NotHeld);
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

fn a_second_release_is_not_held(c: &Client, name: &str) -> ErrorKind {
    let p = c
        .semaphore(name, 3)
        .auto_renew(false)
        .lease(Duration::from_millis(50))
        .try_acquire(3)
        .unwrap();
    thread::sleep(Duration::from_millis(120));
    p.release().unwrap_err().kind()
}

/// Requests queue in arrival order: with 2 permits out of 2 held, a request for 2 comes first,
/// then two for 1. Freeing one permit grants nobody (the request for 2 does not fit, and the
/// later ones may not overtake it); freeing the second grants the request for 2 only.
#[test]
fn grants_follow_arrival_order_and_smaller_requests_do_not_overtake() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
    let name = unique_name("sem-fifo");
    let queue = format!("{{{name}}}:sem:q");
    let mut con = srv.conn();
    let sem = c.semaphore(&name, 2);
    let h1 = sem.try_acquire(1).unwrap();
    let h2 = sem.try_acquire(1).unwrap();

    let (got_tx, got_rx) = mpsc::channel::<String>();
    let mut go = Vec::new();
    let mut threads = Vec::new();
    for (i, k) in [2u32, 1, 1].into_iter().enumerate() {
        let (c, name, got_tx) = (c.clone(), name.clone(), got_tx.clone());
        let (go_tx, go_rx) = mpsc::channel::<()>();
        go.push(go_tx);
        threads.push(thread::spawn(move || {
            let p = c.semaphore(&name, 2).acquire(k, SURELY).unwrap();
            got_tx.send(format!("w{i}:{k}")).unwrap();
            go_rx.recv().unwrap();
            p.release().unwrap();
        }));
        wait_for_len(&mut con, &queue, i as i64 + 1, SURELY);
    }
    // A newcomer for 1 permit queues too, though nothing is free for anyone.
    assert_eq!(sem.try_acquire(1).unwrap_err().kind(), ErrorKind::Held);

    h1.release().unwrap();
    // One permit free, but the head wants 2: nobody is granted, nobody overtakes.
    assert_eq!(llen(&mut con, &queue), 3);
    assert_eq!(grants(&mut con, &name), 1);
    assert!(got_rx.try_recv().is_err());
    assert_eq!(sem.try_acquire(1).unwrap_err().kind(), ErrorKind::Held);

    h2.release().unwrap();
    assert_eq!(got_rx.recv_timeout(SURELY).unwrap(), "w0:2");
    assert_eq!(llen(&mut con, &queue), 2);
    assert!(got_rx.try_recv().is_err());
    go[0].send(()).unwrap();
    let mut next: Vec<String> = (0..2)
        .map(|_| got_rx.recv_timeout(SURELY).unwrap())
        .collect();
    next.sort();
    assert_eq!(next, ["w1:1", "w2:1"]);
    go[1].send(()).unwrap();
    go[2].send(()).unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

/// Each grant has a lease of its own: of two permits taken together, the one without renewal
/// runs out (and is free again) while the renewed one holds.
#[test]
fn each_grant_is_on_its_own_lease() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let name = unique_name("sem-renew");
    let mut con = srv.conn();
    let sem = c.semaphore(&name, 2);
    let renewed = sem.try_acquire(1).unwrap();
    let fixed = sem.clone().auto_renew(false).try_acquire(1).unwrap();
    thread::sleep(Duration::from_millis(900));
    assert!(!fixed.is_held());
    assert!(renewed.is_held(), "renewal did not keep the permit");
    assert_eq!(fixed.release().unwrap_err().kind(), ErrorKind::NotHeld);
    // The expired permit is free again; the renewed one is not.
    let other = sem.try_acquire(1).unwrap();
    assert_eq!(sem.try_acquire(1).unwrap_err().kind(), ErrorKind::Held);
    other.release().unwrap();
    renewed.release().unwrap();
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn bad_input_and_a_name_used_as_two_kinds_are_clear_errors() {
    let srv = RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let name = unique_name("sem-bad");
    let kind = |r: Result<redislock::Permits, redislock::Error>| r.unwrap_err().kind();
    assert_eq!(
        kind(c.semaphore(&name, 0).try_acquire(1)),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(
            c.semaphore(&name, redislock::MAX_PERMITS + 1)
                .try_acquire(1)
        ),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(c.semaphore(&name, 3).try_acquire(0)),
        ErrorKind::InvalidArgument
    );
    let e = c.semaphore(&name, 3).acquire(4, SURELY).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("1 to 3"), "{e}");
    assert_eq!(
        kind(c.semaphore("", 3).try_acquire(1)),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(c.semaphore(&name, 3).lease(Duration::ZERO).try_acquire(1)),
        ErrorKind::InvalidArgument
    );

    // The first user fixes the number of permits; another number is refused, with or without
    // waiting, while the semaphore is in use.
    let held = c.semaphore(&name, 3).try_acquire(1).unwrap();
    let e = c.semaphore(&name, 4).try_acquire(1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("has 3 permits, not 4"), "{e}");
    let e = c.semaphore(&name, 2).acquire(1, SURELY).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // A semaphore's name cannot be locked meanwhile, nor a lock's name used as a semaphore:
    // with or without waiting, with or without fencing, refused as another kind of lock.
    for fencing in [false, true] {
        let e = c.lock(&name).fencing(fencing).try_acquire().unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::InvalidArgument,
            "fencing {fencing}: {e}"
        );
        assert!(e.to_string().contains("another kind of lock"), "{e}");
    }
    let e = c.try_acquire(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = c.acquire(&name, Duration::from_millis(300)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("another kind of lock"), "{e}");
    held.release().unwrap();
    // Once nothing is held, the next user may pick another number.
    c.semaphore(&name, 4)
        .try_acquire(4)
        .unwrap()
        .release()
        .unwrap();
    let lock = c.try_acquire(&name).unwrap();
    let e = c.semaphore(&name, 3).try_acquire(1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("another kind"), "{e}");
    let e = c.semaphore(&name, 3).acquire(1, SURELY).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    lock.release().unwrap();
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

/// With `min_replicas`, a grant of each kind counts only once a replica has it: without a
/// replica every kind is refused and leaves nothing; with one, grants (also those handed over
/// to a waiter) go through.
#[test]
fn min_replicas_covers_every_kind() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .min_replicas(1)
        .replica_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut con = srv.conn();
    let e = c.rw_lock("rw").try_read().unwrap_err();
    assert!(e.is_connection(), "{e}");
    assert!(e.to_string().contains("0 of the 1 replicas"), "{e}");
    assert!(c.rw_lock("rw").try_write().unwrap_err().is_connection());
    assert!(
        c.semaphore("sem", 2)
            .try_acquire(1)
            .unwrap_err()
            .is_connection()
    );
    assert!(
        c.lock_all(&["a", "b"])
            .try_acquire()
            .unwrap_err()
            .is_connection()
    );
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());

    let port = srv.port().to_string();
    let _replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    assert!(eventually(SURELY, || c
        .rw_lock("rw")
        .try_read()
        .map(|r| r.release())
        .is_ok()));
    let w = c.rw_lock("rw").try_write().unwrap();
    let waiting_reader = {
        let c = c.clone();
        thread::spawn(move || c.rw_lock("rw").read(SURELY).map(|r| r.release()))
    };
    let permit = c.semaphore("sem", 1).try_acquire(1).unwrap();
    let waiting_permit = {
        let c = c.clone();
        thread::spawn(move || {
            c.semaphore("sem", 1)
                .acquire(1, SURELY)
                .map(|p| p.release())
        })
    };
    let a = c.try_acquire("a").unwrap();
    let waiting_set = {
        let c = c.clone();
        thread::spawn(move || c.lock_all(&["a", "b"]).acquire(SURELY).map(|s| s.release()))
    };
    thread::sleep(Duration::from_millis(200));
    w.downgrade().unwrap().release().unwrap();
    permit.release().unwrap();
    a.release().unwrap();
    waiting_reader.join().unwrap().unwrap().unwrap();
    waiting_permit.join().unwrap().unwrap().unwrap();
    waiting_set.join().unwrap().unwrap().unwrap();
    let fences: Vec<String> = ["a", "b"]
        .iter()
        .map(|n| format!("{{{n}}}:fence"))
        .collect();
    let except: Vec<&str> = fences.iter().map(String::as_str).collect();
    assert_eq!(leftover_keys(&mut con, &except), Vec::<String>::new());
}
