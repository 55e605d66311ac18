//! Bad input and configuration, unreachable servers, key prefixes, unusual names, and error
//! messages that never reveal a lock token.

mod support;

use std::net::{Ipv4Addr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, Error, ErrorKind, MAX_LEASE, MAX_NAME_LEN, MAX_WAIT, MIN_RENEWED_LEASE};
use support::{RedisServer, unique_name};

fn get(con: &mut redis::Connection, key: &[u8]) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

fn exists(con: &mut redis::Connection, key: &[u8]) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(r: Result<T, Error>) -> Error {
    let e = r.expect_err("expected InvalidArgument");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.is_invalid_argument());
    e
}

/// A loopback port nobody listens on (bound, then closed again).
fn dead_port() -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    assert_ne!(port, 6379);
    port
}

#[test]
fn invalid_names_are_rejected_without_touching_redis() {
    let srv = RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    // Make sure the client has connected and loaded nothing yet that would count below.
    let warm = unique_name("warm");
    c.try_acquire(&warm).unwrap().release().unwrap();
    srv.reset_stats();

    assert_invalid(c.try_acquire(""));
    assert_invalid(c.acquire(b"", Duration::from_millis(100)));
    assert_invalid(c.with_lock("", Duration::from_millis(100), |_| ()));
    assert_invalid(c.lock(b"").try_acquire());
    let long = vec![b'n'; MAX_NAME_LEN + 1];
    let e = assert_invalid(c.try_acquire(&long));
    assert!(
        e.to_string().len() < 400,
        "message repeats the whole name: {e}"
    );
    assert_invalid(c.acquire(&long, Duration::from_millis(100)));
    assert_eq!(srv.command_calls("set"), 0);
    assert_eq!(srv.command_calls("evalsha"), 0);

    // The longest valid name works, and its key is exactly the name.
    let mut longest = unique_name("longest").into_bytes();
    longest.resize(MAX_NAME_LEN, b'z');
    let l = c.try_acquire(&longest).unwrap();
    let mut con = srv.conn();
    assert!(exists(&mut con, &longest));
    assert_eq!(l.name(), longest.as_slice());
    l.release().unwrap();
    assert!(!exists(&mut con, &longest));
}

#[test]
fn invalid_leases_and_waits_are_rejected() {
    let srv = RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    let name = unique_name("lease-arg");
    let n = name.as_bytes();
    let mut con = srv.conn();

    assert_invalid(c.lock(n).lease(Duration::ZERO).try_acquire());
    assert_invalid(
        c.lock(n)
            .lease(Duration::ZERO)
            .auto_renew(false)
            .try_acquire(),
    );
    assert_invalid(
        c.lock(n)
            .lease(Duration::from_micros(500))
            .auto_renew(false)
            .try_acquire(),
    );
    let too_long = MAX_LEASE + Duration::from_millis(1);
    assert_invalid(c.lock(n).lease(too_long).auto_renew(false).try_acquire());
    assert_invalid(c.lock(n).lease(too_long).try_acquire());
    assert_invalid(c.lock(n).lease(Duration::MAX).try_acquire());
    let short = MIN_RENEWED_LEASE - Duration::from_millis(1);
    assert_invalid(c.lock(n).lease(short).auto_renew(true).try_acquire());
    assert_invalid(
        c.lock(n)
            .lease(short)
            .run(Duration::from_millis(10), |_| ()),
    );
    let too_long_wait = MAX_WAIT + Duration::from_millis(1);
    assert_invalid(c.acquire(&name, too_long_wait));
    assert_invalid(c.acquire(&name, Duration::MAX));
    assert_invalid(c.with_lock(&name, Duration::MAX, |_| ()));
    assert!(!exists(&mut con, n), "an invalid request created the key");

    // The boundaries themselves are accepted.
    let l = c
        .lock(n)
        .lease(short)
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    l.release().unwrap();
    let l = c.lock(n).lease(MIN_RENEWED_LEASE).try_acquire().unwrap();
    assert!(l.is_held());
    l.release().unwrap();
    let l = c
        .lock(n)
        .lease(MAX_LEASE)
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    let p: i64 = redis::cmd("PTTL").arg(n).query(&mut con).unwrap();
    assert!(p > 29 * 24 * 3600 * 1000, "PTTL {p}");

    // Extend with bad leases: refused, and the lock is untouched.
    assert_invalid(l.extend(Duration::ZERO));
    assert_invalid(l.extend(too_long));
    let p2: i64 = redis::cmd("PTTL").arg(n).query(&mut con).unwrap();
    assert!(p2 > 29 * 24 * 3600 * 1000, "PTTL {p2}");
    assert!(l.is_held());
    l.release().unwrap();

    let r = c.lock(n).try_acquire().unwrap();
    assert_invalid(r.extend(Duration::ZERO));
    assert_invalid(r.extend(short));
    assert!(r.is_held());
    r.release().unwrap();

    // The builder checks its default lease the same way.
    assert_invalid(Client::builder(&srv.url()).lease(Duration::ZERO).build());
    assert_invalid(Client::builder(&srv.url()).lease(short).build());
    assert_invalid(
        Client::builder(&srv.url())
            .lease(too_long)
            .auto_renew(false)
            .build(),
    );
    assert!(
        Client::builder(&srv.url())
            .lease(short)
            .auto_renew(false)
            .build()
            .is_ok()
    );
}

#[test]
fn invalid_urls_are_rejected() {
    for url in [
        "",
        "http://x",
        "redis://host:notaport",
        "redis://127.0.0.1:notaport/",
        "127.0.0.1:6390",
        "redis//127.0.0.1",
    ] {
        let e = assert_invalid(Client::open(url));
        assert!(!e.message().is_empty());
        assert_invalid(Client::builder(url).build());
    }
    // A password in a bad URL is never echoed.
    let e = assert_invalid(Client::open("redis://u:hunter2secret@127.0.0.1:notaport/"));
    assert!(!e.to_string().contains("hunter2secret"), "{e}");
}

#[test]
fn invalid_builder_values_are_rejected() {
    let url = "redis://127.0.0.1:1/";
    let b = || Client::builder(url);
    assert_invalid(b().pool_size(0).build());
    assert_invalid(b().max_waiters(0).build());
    assert_invalid(b().recheck_jitter(2.0).build());
    assert_invalid(b().recheck_jitter(-0.1).build());
    assert_invalid(b().recheck_jitter(f64::NAN).build());
    assert_invalid(b().recheck_interval(Duration::ZERO).build());
    assert_invalid(b().connect_timeout(Duration::ZERO).build());
    assert_invalid(b().read_timeout(Duration::ZERO).build());
    assert_invalid(b().write_timeout(Duration::ZERO).build());
    assert_invalid(b().checkout_timeout(Duration::ZERO).build());
    assert_invalid(b().max_renewed_locks(2_000_000).build());
    assert_invalid(b().key_prefix(vec![b'p'; MAX_NAME_LEN + 1]).build());
    // Valid edge values, and building never connects.
    assert!(b().recheck_jitter(0.0).build().is_ok());
    assert!(b().recheck_jitter(1.0).build().is_ok());
    assert!(b().pool_size(1).max_waiters(1).build().is_ok());
    assert!(b().max_renewed_locks(0).build().is_ok());
}

#[test]
fn max_renewed_locks_zero_refuses_every_renewed_lock() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .max_renewed_locks(0)
        .build()
        .unwrap();
    let name = unique_name("zero-renewed");
    let e = c.try_acquire(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitReached, "{e}");
    let l = c
        .lock(name.as_bytes())
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    l.release().unwrap();
}

#[test]
fn down_server_gives_connection_errors_not_hangs() {
    let port = dead_port();
    let url = format!("redis://127.0.0.1:{port}/");
    // Building is lazy: it succeeds while the server is down.
    let c = Client::builder(&url)
        .connect_timeout(Duration::from_millis(300))
        .checkout_timeout(Duration::from_millis(800))
        .read_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let limit = Duration::from_secs(10);

    let t = Instant::now();
    let e = c.try_acquire("x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.is_connection());
    assert!(t.elapsed() < limit, "try_acquire took {:?}", t.elapsed());

    let t = Instant::now();
    let e = c.acquire("x", Duration::from_secs(2)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(t.elapsed() < limit, "acquire took {:?}", t.elapsed());

    let t = Instant::now();
    let mut ran = false;
    let e = c
        .with_lock("x", Duration::from_secs(1), |_| ran = true)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(!ran);
    assert!(t.elapsed() < limit);

    let e = c
        .lock(b"x")
        .fencing(true)
        .auto_renew(false)
        .try_acquire()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    // The message names the server.
    assert!(e.to_string().contains(&port.to_string()), "{e}");
}

#[test]
fn paused_server_gives_a_timeout_error_not_a_hang() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .read_timeout(Duration::from_millis(300))
        .write_timeout(Duration::from_millis(300))
        .connect_timeout(Duration::from_millis(300))
        .checkout_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let name = unique_name("paused");
    c.try_acquire(unique_name("warm"))
        .unwrap()
        .release()
        .unwrap();
    srv.pause();
    let t = Instant::now();
    let r = c.try_acquire(&name);
    let took = t.elapsed();
    srv.resume();
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.is_timeout(), "{e}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn extend_and_release_on_a_killed_server_are_connection_errors() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .connect_timeout(Duration::from_millis(300))
        .checkout_timeout(Duration::from_millis(800))
        .release_timeout(Duration::from_millis(500))
        .auto_renew(false)
        .build()
        .unwrap();
    let l = c.try_acquire(unique_name("killed")).unwrap();
    srv.kill();
    let t = Instant::now();
    let e = l.extend(Duration::from_secs(10)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    let e = l.release().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn key_prefix_is_put_in_front_of_the_name() {
    let srv = RedisServer::start();
    let base = unique_name("x");
    let prefixed = Client::builder(&srv.url())
        .key_prefix("app:")
        .build()
        .unwrap();
    let plain = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();

    let l = prefixed.try_acquire(&base).unwrap();
    let key = format!("app:{base}");
    let tok = get(&mut con, key.as_bytes()).expect("lock not at app:<name>");
    assert_eq!(tok.len(), 32);
    assert!(!exists(&mut con, base.as_bytes()));
    assert_eq!(
        l.name(),
        base.as_bytes(),
        "name() must not include the prefix"
    );
    // The unprefixed name is a different lock; the prefixed key is the same lock.
    let other = plain.try_acquire(&base).unwrap();
    assert_eq!(plain.try_acquire(&key).unwrap_err().kind(), ErrorKind::Held);

    // Waiting uses companion keys derived from the prefixed key.
    let mut queued = false;
    thread::scope(|s| {
        let w = s.spawn(|| {
            prefixed
                .acquire(&base, Duration::from_secs(20))
                .unwrap()
                .release()
                .unwrap();
        });
        let q = format!("{{{key}}}:q");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if redis::cmd("LLEN").arg(&q).query::<i64>(&mut con).unwrap() == 1 {
                queued = true;
                break;
            }
            thread::sleep(Duration::from_millis(5));
        }
        l.release().unwrap();
        w.join().unwrap();
    });
    assert!(queued, "the waiter was not queued at {{app:<name>}}:q");
    assert!(!exists(&mut con, key.as_bytes()));
    other.release().unwrap();
}

#[test]
fn arbitrary_byte_and_hash_tagged_names_work() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let mut con = srv.conn();
    let uniq = unique_name("n");
    let names: Vec<Vec<u8>> = vec![
        [b"\x00\xff{}".as_slice(), uniq.as_bytes()].concat(),
        b"\x00\xff{}".to_vec(),
        format!("{{user:{uniq}}}:lock").into_bytes(),
        format!("{{}}{uniq}").into_bytes(),
        format!("}}{{{uniq}").into_bytes(),
        "ünïcødé-🔒".as_bytes().to_vec(),
        vec![b'\n', b' ', b'\r', b'\t'],
    ];
    for name in &names {
        let l = c.lock(name).try_acquire().unwrap();
        assert_eq!(l.name(), name.as_slice());
        let tok = get(&mut con, name).expect("key is not exactly the name");
        assert_eq!(tok.len(), 32);
        assert!(l.fencing_token().unwrap() >= 1);
        assert_eq!(
            c.lock(name).try_acquire().unwrap_err().kind(),
            ErrorKind::Held
        );
        l.extend(Duration::from_secs(20)).unwrap();
        l.release().unwrap();
        assert!(!exists(&mut con, name));
        // A second grant of the same name gets a larger fencing token.
        let a = c.lock(name).try_acquire().unwrap();
        let b_tok = a.fencing_token().unwrap();
        a.release().unwrap();
        let b = c.lock(name).try_acquire().unwrap();
        assert!(b.fencing_token().unwrap() > b_tok);
        b.release().unwrap();
    }
    // Error messages show binary names without panicking.
    let l = c.lock(&names[0]).try_acquire().unwrap();
    let e = c.lock(&names[0]).try_acquire().unwrap_err();
    assert!(e.to_string().contains("held"), "{e}");
    l.release().unwrap();
}

#[test]
fn hash_tagged_companion_keys_share_the_tag() {
    let srv = RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let tag = unique_name("tag");
    let name = format!("{{{tag}}}:lock");
    let h = c.try_acquire(&name).unwrap();
    thread::scope(|s| {
        let w = s.spawn(|| c.acquire(&name, Duration::from_secs(20)).unwrap().release());
        // The queue keeps the name's own hash tag: `{tag}:lock:q`.
        let q = format!("{name}:q");
        let deadline = Instant::now() + Duration::from_secs(10);
        while redis::cmd("LLEN").arg(&q).query::<i64>(&mut con).unwrap() != 1 {
            assert!(Instant::now() < deadline, "no waiter queued at {q}");
            thread::sleep(Duration::from_millis(5));
        }
        h.release().unwrap();
        w.join().unwrap().unwrap();
    });
}

/// Every error provoked around a held lock: none may contain either lock token.
#[test]
fn error_messages_never_contain_the_token() {
    let srv = RedisServer::start();
    let name = unique_name("secret");
    let c = Client::builder(&srv.url())
        .lease(Duration::from_millis(300))
        .max_renewed_locks(1)
        .build()
        .unwrap();
    let other = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let mut errors: Vec<Error> = Vec::new();
    let mut tokens: Vec<String> = Vec::new();

    let l = c.try_acquire(&name).unwrap();
    let tok = String::from_utf8(get(&mut con, name.as_bytes()).unwrap()).unwrap();
    tokens.push(tok.clone());
    let debug = format!("{l:?}");
    assert!(
        !debug.contains(&tok),
        "Lock's Debug shows the token: {debug}"
    );

    errors.push(other.try_acquire(&name).unwrap_err()); // Held
    errors.push(
        other
            .acquire(&name, Duration::from_millis(100))
            .unwrap_err(),
    ); // WaitTimeout
    errors.push(c.try_acquire(unique_name("second")).unwrap_err()); // LimitReached
    errors.push(l.extend(Duration::ZERO).unwrap_err()); // InvalidArgument
    // Taken over behind the holder's back.
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("intruder")
        .query(&mut con)
        .unwrap();
    errors.push(l.extend(Duration::from_secs(1)).unwrap_err()); // NotHeld
    errors.push(l.release().unwrap_err()); // NotHeld

    // A stale fixed-lease holder whose release runs the script against a new holder.
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    let stale = other
        .lock(name.as_bytes())
        .lease(Duration::from_millis(100))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    tokens.push(String::from_utf8(get(&mut con, name.as_bytes()).unwrap()).unwrap());
    thread::sleep(Duration::from_millis(300));
    let fresh = other
        .lock(name.as_bytes())
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    tokens.push(String::from_utf8(get(&mut con, name.as_bytes()).unwrap()).unwrap());
    errors.push(stale.extend(Duration::from_secs(1)).unwrap_err());
    errors.push(stale.release().unwrap_err());
    errors.push(other.try_acquire(&name).unwrap_err());
    errors.push(
        other
            .lock(name.as_bytes())
            .run(Duration::from_millis(50), |_| ())
            .unwrap_err(),
    );
    // A lock lost inside with_lock.
    drop(fresh);
    let name2 = unique_name("secret2");
    let mut seen_tok = String::new();
    errors.push(
        other
            .lock(name2.as_bytes())
            .auto_renew(false)
            .run(Duration::from_millis(50), |_| {
                seen_tok = String::from_utf8(get(&mut con, name2.as_bytes()).unwrap()).unwrap();
                let () = redis::cmd("SET")
                    .arg(&name2)
                    .arg("intruder")
                    .query(&mut con)
                    .unwrap();
            })
            .unwrap_err(),
    );
    tokens.push(seen_tok);

    let kinds: Vec<ErrorKind> = errors.iter().map(|e| e.kind()).collect();
    for k in [
        ErrorKind::Held,
        ErrorKind::WaitTimeout,
        ErrorKind::NotHeld,
        ErrorKind::InvalidArgument,
        ErrorKind::LimitReached,
    ] {
        assert!(kinds.contains(&k), "no {k:?} error provoked: {kinds:?}");
    }
    for e in &errors {
        let shown = format!("{e} / {e:?} / {}", e.message());
        for t in &tokens {
            assert_eq!(t.len(), 32);
            assert!(!shown.contains(t.as_str()), "token in error: {shown}");
        }
        assert!(shown.contains(&name) || shown.contains(&name2) || !e.is_not_held());
    }
}
