//! Sets of exclusive locks against real servers, what is particular to them (what they share
//! with every kind, on every topology, is in `topologies.rs`): all or none in one round trip,
//! never holding some names while waiting for others, no deadlock between sets that overlap in
//! any order, one release for the set, fencing per name, bad input, and nothing left in Redis
//! afterwards.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redislock::{Client, ErrorKind};
use support::{
    RedisServer, eventually, exists, get, handoff_only, leftover_keys, llen, unique_name,
};

const SURELY: Duration = Duration::from_secs(20);

#[test]
fn all_or_none_in_one_round_trip() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
    let (a, b, x) = (unique_name("a"), unique_name("b"), unique_name("x"));
    let mut con = srv.conn();
    let names = [a.as_str(), b.as_str(), x.as_str()];

    let held_b = c.try_acquire(&b).unwrap();
    let e = c.lock_all(&names).try_acquire().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Held, "{e}");
    // None taken: the free names stay free.
    assert!(!exists(&mut con, &a) && !exists(&mut con, &x));
    held_b.release().unwrap();

    srv.reset_stats();
    let set = c.lock_all(&names).try_acquire().unwrap();
    assert_eq!(
        srv.command_calls("evalsha"),
        1,
        "the set was not taken by one script"
    );
    assert!(set.is_held());
    assert_eq!(
        set.names().collect::<Vec<_>>(),
        [a.as_bytes(), b.as_bytes(), x.as_bytes()]
    );
    // Every name is an ordinary exclusive lock, held with the set's one token.
    let tokens: Vec<_> = names.iter().map(|n| get(&mut con, n).unwrap()).collect();
    assert!(tokens.iter().all(|t| *t == tokens[0] && t.len() == 32));
    for n in names {
        assert_eq!(c.try_acquire(n).unwrap_err().kind(), ErrorKind::Held);
    }
    let plain: Option<String> = redis::cmd("SET")
        .arg(&x)
        .arg("plain")
        .arg("NX")
        .query(&mut con)
        .unwrap();
    assert_eq!(plain, None);
    set.release().unwrap();
    for n in names {
        assert!(!exists(&mut con, n));
    }
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_waiting_set_holds_none_of_its_names_and_is_woken_by_a_release() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
    let (a, b) = (unique_name("a"), unique_name("b"));
    let mut con = srv.conn();
    let held_b = c.try_acquire(&b).unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = {
        let (c, a, b) = (c.clone(), a.clone(), b.clone());
        thread::spawn(move || {
            let set = c.lock_all(&[&a, &b]).acquire(SURELY).unwrap();
            tx.send(()).unwrap();
            set.release().unwrap();
        })
    };
    let queue_b = format!("{{{b}}}:q");
    assert!(eventually(SURELY, || llen(&mut con, &queue_b) == 1));
    // While it waits for b, the set holds nothing: a is free for anyone.
    assert!(!exists(&mut con, &a));
    let la = c.try_acquire(&a).unwrap();
    held_b.release().unwrap();
    // Handed b while a is held: it passes b on at once and waits for a.
    let queue_a = format!("{{{a}}}:q");
    assert!(eventually(SURELY, || llen(&mut con, &queue_a) == 1));
    assert!(!exists(&mut con, &b), "the waiting set kept b");
    assert!(rx.try_recv().is_err());
    la.release().unwrap();
    rx.recv_timeout(SURELY)
        .expect("the set was not woken by the release");
    waiter.join().unwrap();
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

/// Threads take overlapping sets in opposite orders (and single names) with a checker per
/// name: nobody overlaps, and nothing deadlocks.
#[test]
fn overlapping_sets_in_any_order_never_deadlock_or_overlap() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url()).build().unwrap();
    let names: Vec<String> = (0..3).map(|i| unique_name(&format!("n{i}"))).collect();
    let bad = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (c, names, bad, url) = (c.clone(), names.clone(), bad.clone(), srv.url());
            thread::spawn(move || {
                let mut con = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection_with_timeout(Duration::from_secs(5))
                    .unwrap();
                let mine: Vec<&str> = match t % 4 {
                    0 => vec![&names[0], &names[1]],
                    1 => vec![&names[1], &names[0]],
                    2 => vec![&names[2], &names[1], &names[0]],
                    _ => vec![&names[1]],
                };
                for _ in 0..15 {
                    let set = c.lock_all(&mine).acquire(Duration::from_secs(120)).unwrap();
                    for n in &mine {
                        let inside: i64 = redis::cmd("INCR")
                            .arg(format!("in:{n}"))
                            .query(&mut con)
                            .unwrap();
                        if inside != 1 {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    thread::sleep(Duration::from_millis(1));
                    for n in &mine {
                        let _: i64 = redis::cmd("DECR")
                            .arg(format!("in:{n}"))
                            .query(&mut con)
                            .unwrap();
                    }
                    set.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a thread panicked (or its wait timed out)");
    }
    assert_eq!(bad.load(Ordering::Relaxed), 0, "two holders of one name");
    let mut con = srv.conn();
    let counters: Vec<String> = names.iter().map(|n| format!("in:{n}")).collect();
    let except: Vec<&str> = counters.iter().map(String::as_str).collect();
    assert_eq!(leftover_keys(&mut con, &except), Vec::<String>::new());
}

#[test]
fn fencing_tokens_come_from_each_names_counter() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let (a, b) = (unique_name("fa"), unique_name("fb"));
    let first = c.try_acquire(&a).unwrap();
    let fa = first.fencing_token().unwrap();
    first.release().unwrap();
    let set = c.lock_all(&[&a, &b]).try_acquire().unwrap();
    let tokens = set.fencing_tokens().unwrap().to_vec();
    assert_eq!(tokens.len(), 2);
    assert!(tokens[0] > fa);
    assert_eq!(set.fencing_token(&a), Some(tokens[0]));
    assert_eq!(set.fencing_token(&b), Some(tokens[1]));
    assert_eq!(set.fencing_token("not in the set"), None);
    set.release().unwrap();
    let after = c.try_acquire(&b).unwrap();
    assert!(after.fencing_token().unwrap() > tokens[1]);
}

/// One release for the set reports a name lost meanwhile (here before renewal could notice),
/// and still frees the others. (Renewal finding a name lost: `topologies.rs`.)
#[test]
fn a_release_reports_a_lost_name_and_frees_the_others() {
    let srv = RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    let (a, b) = (unique_name("ra"), unique_name("rb"));
    let mut con = srv.conn();
    let fixed = c
        .lock_all(&[&a, &b])
        .auto_renew(false)
        .lease(Duration::from_secs(60))
        .acquire(SURELY)
        .unwrap();
    let _: i64 = redis::cmd("DEL").arg(&a).query(&mut con).unwrap();
    assert_eq!(fixed.release().unwrap_err().kind(), ErrorKind::NotHeld);
    assert!(!exists(&mut con, &b));
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn bad_sets_are_invalid_and_leave_nothing() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .key_prefix("p:")
        .build()
        .unwrap();
    let mut con = srv.conn();
    let kind = |r: Result<redislock::MultiLock, redislock::Error>| r.unwrap_err().kind();
    let none: [&str; 0] = [];
    assert_eq!(
        kind(c.lock_all(&none).try_acquire()),
        ErrorKind::InvalidArgument
    );
    let e = c.lock_all(&["a", "b", "a"]).acquire(SURELY).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("twice"), "{e}");
    assert_eq!(
        kind(c.lock_all(&["a", ""]).try_acquire()),
        ErrorKind::InvalidArgument
    );
    let many: Vec<String> = (0..=redislock::MAX_SET_NAMES)
        .map(|i| format!("n{i}"))
        .collect();
    assert_eq!(
        kind(c.lock_all(&many).try_acquire()),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(c.lock_all(&["a"]).lease(Duration::ZERO).try_acquire()),
        ErrorKind::InvalidArgument
    );
    // A name in use as a semaphore cannot be in a set: refused, nothing taken.
    let name = unique_name("sem");
    let permit = c.semaphore(&name, 1).try_acquire(1).unwrap();
    let e = c
        .lock_all(&["free", name.as_str()])
        .try_acquire()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("another kind"), "{e}");
    assert!(!exists(&mut con, "p:free"));
    permit.release().unwrap();
    // A one-name set is a plain exclusive lock.
    let one = c.lock_all(&["solo"]).try_acquire().unwrap();
    assert_eq!(c.try_acquire("solo").unwrap_err().kind(), ErrorKind::Held);
    one.release().unwrap();
    let e = c
        .lock_all(&["x", "y"])
        .cancel_on(&{
            let cancel = redislock::Cancel::new();
            cancel.cancel();
            cancel
        })
        .acquire(SURELY)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}
