//! What errors say: a server that does not speak Redis is a connection problem named as such,
//! and every message about an out-of-range value states the range that is really accepted.

mod support;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ClientBuilder, Error, ErrorKind, MAX_LEASE, MAX_WAIT, MIN_RENEWED_LEASE};

/// A loopback TCP server that is not Redis: for every connection, `greet` is sent at once (a
/// server that speaks first, like SSH) and `answer` after the first bytes arrive (a server that
/// answers a request, like HTTP). Runs until the test process ends.
fn foreign_server(greet: &'static [u8], answer: &'static [u8]) -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    assert_ne!(port, 6379);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            thread::spawn(move || {
                let _ = s.write_all(greet);
                let mut buf = [0u8; 4096];
                let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                if matches!(s.read(&mut buf), Ok(n) if n > 0) {
                    let _ = s.write_all(answer);
                }
                // Keep the connection open a while, as a real server would.
                let _ = s.read(&mut buf);
            });
        }
    });
    port
}

const HTTP_400: &[u8] =
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nBad Request";

fn client_for(port: u16) -> Client {
    Client::builder(&format!("redis://127.0.0.1:{port}/"))
        .connect_timeout(Duration::from_millis(500))
        .read_timeout(Duration::from_millis(1000))
        .checkout_timeout(Duration::from_millis(1500))
        .build()
        .unwrap()
}

#[track_caller]
fn assert_not_redis(e: &Error, port: u16) {
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.is_connection() && !e.is_timeout(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains(&format!("127.0.0.1:{port}/0"))
            && text.contains("did not answer in the Redis protocol")
            && text.contains("is it a Redis server?"),
        "{text}"
    );
    // No parser dump, no "bug, please report it".
    for dump in ["Parse error", "Unexpected", "internal", "report"] {
        assert!(!text.contains(dump), "{text}");
    }
}

#[test]
fn an_http_server_is_a_connection_error_not_a_bug() {
    let port = foreign_server(b"", HTTP_400);
    let c = client_for(port);
    let t = Instant::now();
    assert_not_redis(&c.try_acquire("x").unwrap_err(), port);
    println!("an HTTP server is reported after {:?}", t.elapsed());
    assert_not_redis(
        &c.acquire("x", Duration::from_millis(500)).unwrap_err(),
        port,
    );
    let e = c
        .lock(b"x")
        .fencing(true)
        .auto_renew(false)
        .try_acquire()
        .unwrap_err();
    assert_not_redis(&e, port);
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_server_that_speaks_first_is_a_connection_error_not_a_bug() {
    // SSH and SMTP servers greet first; a TLS-only Redis port answers a plain request with
    // bytes that are no RESP either.
    let port = foreign_server(
        b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n",
        b"Protocol mismatch.\n",
    );
    let c = client_for(port);
    assert_not_redis(&c.try_acquire("x").unwrap_err(), port);
    let port = foreign_server(b"", b"\x15\x03\x03\x00\x02\x02\x32");
    let e = client_for(port).try_acquire("x").unwrap_err();
    assert_not_redis(&e, port);
    assert!(e.to_string().contains("rediss://"), "{e}");
}

#[test]
fn a_server_that_hangs_up_is_still_a_plain_connection_error() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in listener.incoming() {
            drop(s);
        }
    });
    let e = client_for(port).try_acquire("x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(e.to_string().contains(&port.to_string()), "{e}");
}

// ---- range messages -------------------------------------------------------------------------

/// A client of a port nobody listens on: argument checks come before any connection.
fn offline() -> Client {
    Client::open("redis://127.0.0.1:1/").unwrap()
}

#[track_caller]
fn refused_with<T: std::fmt::Debug>(r: Result<T, Error>, range: &str) -> String {
    let e = r.expect_err("accepted an out-of-range value");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let text = e.to_string();
    assert!(text.contains(range), "{text:?} does not state {range:?}");
    text
}

const LEASE_RANGE: &str =
    "lease must be between 1 ms and 30 days (at least 100 ms if auto-renewed)";
const RENEWED_RANGE: &str = "an auto-renewed lease must be between 100 ms and 30 days";

#[test]
fn lease_messages_state_the_accepted_range() {
    let c = offline();
    let over = MAX_LEASE + Duration::from_millis(1);
    let short = MIN_RENEWED_LEASE - Duration::from_millis(1);
    for renew in [false, true] {
        let req = |d| c.lock(b"n").lease(d).auto_renew(renew).try_acquire();
        let text = refused_with(req(Duration::ZERO), LEASE_RANGE);
        assert!(text.ends_with("got 0 ms"), "{text}");
        refused_with(req(Duration::from_micros(500)), LEASE_RANGE);
        let text = refused_with(req(over), LEASE_RANGE);
        assert!(text.ends_with("got 2592000001 ms"), "{text}");
        refused_with(req(Duration::MAX), LEASE_RANGE);
    }
    let text = refused_with(
        c.lock(b"n").lease(short).auto_renew(true).try_acquire(),
        RENEWED_RANGE,
    );
    assert!(text.ends_with("got 99 ms"), "{text}");
    // The same from the builder's default lease.
    let b = || Client::builder("redis://127.0.0.1:1/");
    refused_with(b().lease(Duration::ZERO).build(), LEASE_RANGE);
    refused_with(b().lease(over).auto_renew(false).build(), LEASE_RANGE);
    refused_with(b().lease(short).build(), RENEWED_RANGE);
}

#[test]
fn extend_messages_state_the_accepted_range() {
    // Needs a held lock: a real server.
    let srv = support::RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    let fixed = c
        .lock(b"extend-range")
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    refused_with(fixed.extend(Duration::ZERO), LEASE_RANGE);
    refused_with(
        fixed.extend(MAX_LEASE + Duration::from_millis(1)),
        LEASE_RANGE,
    );
    fixed.extend(Duration::from_millis(50)).unwrap();
    fixed.release().unwrap();
    let renewed = c.try_acquire("extend-range-renewed").unwrap();
    refused_with(renewed.extend(Duration::from_millis(50)), RENEWED_RANGE);
    refused_with(renewed.extend(Duration::ZERO), LEASE_RANGE);
    renewed.release().unwrap();
}

#[test]
fn wait_messages_state_the_accepted_range() {
    let c = offline();
    let range = "wait bound must be between 0 ms and 30 days";
    let text = refused_with(c.acquire("n", MAX_WAIT + Duration::from_millis(1)), range);
    assert!(text.ends_with("got 2592000001 ms"), "{text}");
    refused_with(c.acquire("n", Duration::MAX), range);
    refused_with(c.with_lock("n", Duration::MAX, |_| ()), range);
}

#[test]
fn builder_messages_state_the_accepted_range() {
    let b = || Client::builder("redis://127.0.0.1:1/");
    let check = |builder: ClientBuilder, range: &str, got: &str| {
        let text = refused_with(builder.build(), range);
        assert!(text.ends_with(&format!("got {got}")), "{text}");
    };
    for (n, got) in [(0, "0"), (10_001, "10001"), (u32::MAX, "4294967295")] {
        check(
            b().pool_size(n),
            "pool_size must be between 1 and 10000",
            got,
        );
        check(
            b().max_waiters(n),
            "max_waiters must be between 1 and 10000",
            got,
        );
    }
    type Setter = fn(ClientBuilder, Duration) -> ClientBuilder;
    let durations: [(&str, Setter); 5] = [
        ("connect_timeout", ClientBuilder::connect_timeout),
        ("read_timeout", ClientBuilder::read_timeout),
        ("write_timeout", ClientBuilder::write_timeout),
        ("checkout_timeout", ClientBuilder::checkout_timeout),
        ("recheck_interval", ClientBuilder::recheck_interval),
    ];
    for (what, set) in durations {
        let range = format!("{what} must be between 1 ms and 30 days");
        check(set(b(), Duration::ZERO), &range, "0 ms");
        check(set(b(), Duration::from_micros(999)), &range, "0.999 ms");
        check(
            set(b(), MAX_LEASE + Duration::from_millis(1)),
            &range,
            "2592000001 ms",
        );
        // The bounds themselves are accepted.
        assert!(set(b(), Duration::from_millis(1)).build().is_ok(), "{what}");
        assert!(set(b(), MAX_LEASE).build().is_ok(), "{what}");
    }
    let jitter = "recheck_jitter must be between 0 and 1";
    check(b().recheck_jitter(-0.1), jitter, "-0.1");
    check(b().recheck_jitter(1.5), jitter, "1.5");
    check(b().recheck_jitter(f64::NAN), jitter, "NaN");
    check(
        b().max_renewed_locks(1_000_001),
        "max_renewed_locks must be between 0 and 1000000",
        "1000001",
    );
    check(
        b().key_prefix(vec![b'p'; 4097]),
        "key_prefix must be at most 4096 bytes long",
        "4097 bytes",
    );
    // The bounds themselves are accepted.
    assert!(b().pool_size(1).max_waiters(1).build().is_ok());
    assert!(b().pool_size(10_000).max_waiters(10_000).build().is_ok());
    assert!(b().max_renewed_locks(0).build().is_ok());
    assert!(b().max_renewed_locks(1_000_000).build().is_ok());
    assert!(b().key_prefix(vec![b'p'; 4096]).build().is_ok());
}
