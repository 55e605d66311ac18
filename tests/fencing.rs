//! Fencing tokens of the exclusive lock beyond what every kind shares (`topologies.rs`: tokens
//! grow across grants, a takeover and a handoff): a waiter granted at the holder's expiry,
//! grants without fencing, tokens per name, concurrent grants.

mod support;

use std::sync::Mutex;
use std::thread;
use std::time::Duration;

use redislock::Client;
use support::{RedisServer, unique_name};

fn fence_counter(con: &mut redis::Connection, name: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(format!("{{{name}}}:fence"))
        .query(con)
        .unwrap()
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
