//! Interoperability with a plain client using the classic pattern on the same key:
//! `SET key token NX PX ms` to take it and a compare-and-delete script to release it.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{RedisServer, get, unique_name};

const CAD: &str =
    "if redis.call('get',KEYS[1])==ARGV[1] then return redis.call('del',KEYS[1]) end return 0";

fn plain_set_nx(con: &mut redis::Connection, key: &str, tok: &str, ms: u64) -> bool {
    let r: Option<String> = redis::cmd("SET")
        .arg(key)
        .arg(tok)
        .arg("NX")
        .arg("PX")
        .arg(ms)
        .query(con)
        .unwrap();
    r.is_some()
}

fn plain_release(con: &mut redis::Connection, key: &str, tok: &str) -> i64 {
    redis::cmd("EVAL")
        .arg(CAD)
        .arg(1)
        .arg(key)
        .arg(tok)
        .query(con)
        .unwrap()
}

#[test]
fn plain_holder_excludes_the_library_and_its_release_lets_it_in() {
    let srv = RedisServer::start();
    let name = unique_name("interop-plain");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    assert!(plain_set_nx(&mut con, &name, "plain-token", 5000));

    let e = c.try_acquire(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Held, "{e}");
    assert!(e.is_held());
    let e = c.acquire(&name, Duration::from_millis(200)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    // The library's failed attempts left the plain holder's key alone.
    assert_eq!(get(&mut con, &name).as_deref(), Some("plain-token"));

    // A wrong token does not release it; the right one does.
    assert_eq!(plain_release(&mut con, &name, "not-the-token"), 0);
    assert_eq!(plain_release(&mut con, &name, "plain-token"), 1);
    let l = c.try_acquire(&name).unwrap();
    assert!(l.is_held());
    l.release().unwrap();
}

#[test]
fn library_holder_excludes_the_plain_client_and_its_release_lets_it_in() {
    let srv = RedisServer::start();
    let name = unique_name("interop-lib");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let l = c.try_acquire(&name).unwrap();

    let tok = get(&mut con, &name).expect("the lock key holds the token");
    assert_eq!(tok.len(), 32, "token {tok:?}");
    assert!(
        tok.bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "token {tok:?} is not lowercase hex"
    );
    let p: i64 = redis::cmd("PTTL").arg(&name).query(&mut con).unwrap();
    assert!(p > 0, "the library's key has no expiry: {p}");

    assert!(!plain_set_nx(&mut con, &name, "plain-token", 5000));
    // The plain client's compare-and-delete with its own token does nothing.
    assert_eq!(plain_release(&mut con, &name, "plain-token"), 0);
    assert_eq!(get(&mut con, &name).as_deref(), Some(tok.as_str()));

    l.release().unwrap();
    assert!(plain_set_nx(&mut con, &name, "plain-token", 5000));
    assert_eq!(plain_release(&mut con, &name, "plain-token"), 1);
}

#[test]
fn the_library_token_works_with_the_plain_compare_and_delete() {
    // The key holds the bare token: a plain client knowing it can release the lock.
    let srv = RedisServer::start();
    let name = unique_name("interop-cad");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let l = c
        .lock(name.as_bytes())
        .auto_renew(false)
        .lease(Duration::from_secs(30))
        .try_acquire()
        .unwrap();
    let tok = get(&mut con, &name).unwrap();
    assert_eq!(plain_release(&mut con, &name, &tok), 1);
    assert!(l.release().unwrap_err().is_not_held());
}

#[test]
fn tokens_are_distinct_per_grant() {
    let srv = RedisServer::start();
    let name = unique_name("interop-distinct");
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let mut toks = std::collections::HashSet::new();
    for _ in 0..20 {
        let l = c.try_acquire(&name).unwrap();
        assert!(toks.insert(get(&mut con, &name).unwrap()));
        l.release().unwrap();
    }
}

#[test]
fn plain_holder_expiry_lets_a_library_waiter_in() {
    let srv = RedisServer::start();
    let name = unique_name("interop-expiry");
    let c = Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut con = srv.conn();
    assert!(plain_set_nx(&mut con, &name, "plain-token", 800));
    let t = Instant::now();
    let l = c.acquire(&name, Duration::from_secs(10)).unwrap();
    let took = t.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(l.is_held());
    assert_ne!(get(&mut con, &name).as_deref(), Some("plain-token"));
    l.release().unwrap();
}

#[test]
fn plain_client_spinning_while_library_threads_contend() {
    // A plain client and library threads increment a counter under the same key.
    let srv = RedisServer::start();
    let name = unique_name("interop-mix");
    let counter = unique_name("interop-counter");
    let c = Client::open(&srv.url()).unwrap();
    thread::scope(|s| {
        for _ in 0..3 {
            let (c, name, counter, srv) = (&c, &name, &counter, &srv);
            s.spawn(move || {
                let mut con = srv.conn();
                for _ in 0..20 {
                    c.with_lock(name, Duration::from_secs(60), |_| {
                        let v: i64 = redis::cmd("GET")
                            .arg(counter)
                            .query::<Option<i64>>(&mut con)
                            .unwrap()
                            .unwrap_or(0);
                        let () = redis::cmd("SET")
                            .arg(counter)
                            .arg(v + 1)
                            .query(&mut con)
                            .unwrap();
                    })
                    .unwrap();
                }
            });
        }
        let (name, counter, srv) = (&name, &counter, &srv);
        s.spawn(move || {
            let mut con = srv.conn();
            let mut done = 0;
            let deadline = Instant::now() + Duration::from_secs(60);
            while done < 20 {
                assert!(Instant::now() < deadline, "plain client starved");
                let tok = format!("plain-{done}");
                if plain_set_nx(&mut con, name, &tok, 10_000) {
                    let v: i64 = redis::cmd("GET")
                        .arg(counter)
                        .query::<Option<i64>>(&mut con)
                        .unwrap()
                        .unwrap_or(0);
                    let () = redis::cmd("SET")
                        .arg(counter)
                        .arg(v + 1)
                        .query(&mut con)
                        .unwrap();
                    assert_eq!(plain_release(&mut con, name, &tok), 1);
                    done += 1;
                }
                thread::sleep(Duration::from_millis(2));
            }
        });
    });
    let mut con = srv.conn();
    let v: Option<i64> = redis::cmd("GET").arg(&counter).query(&mut con).unwrap();
    assert_eq!(v, Some(80));
}
