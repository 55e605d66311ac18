//! What a client leaves running: threads end with the last handle of a private client, stay
//! bounded for persistent clients made again and again (the PHP-FPM pattern), and a lock
//! outlives its client. Also owner tokens: detach, restore, acquire with a given owner; and a
//! release that gets no answer.
//!
//! The thread checks count the threads of this process named `redislock-*`, so they run as one
//! test function, one phase after the other: no other test of this binary runs beside them.

mod support;

use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{RedisServer, eventually, exists, get, unique_name};

const LEASE: Duration = Duration::from_millis(300);

/// Threads of this process that the library started: `redislock-timer`, `redislock-renew`
/// and `redislock-renew-io`.
fn library_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| {
            ["redislock-timer", "redislock-renew"]
                .iter()
                .any(|p| name.starts_with(p))
        })
        .count()
}

/// Whether the library's threads are gone from `/proc` within a second. A joined thread has
/// finished, but the kernel takes it out of `/proc/self/task` a moment after `join` returns (the
/// join is woken as the thread releases its memory, before it is reaped): under load an
/// immediate count was seen to find one.
fn library_threads_gone() -> bool {
    eventually(Duration::from_secs(1), || library_threads() == 0)
}

/// Connections the server has open, less the one asking.
fn server_connections(srv: &RedisServer) -> usize {
    let mut con = srv.conn();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    list.lines().count() - 1
}

#[test]
fn threads_end_with_the_last_handle_and_stay_bounded() {
    let srv = RedisServer::start();
    assert_eq!(library_threads(), 0);

    // 1. A private client whose lock needed a renewal thread: once the lock is released and the
    //    client dropped, every thread it started has ended (and was joined) at once.
    let name = unique_name("life-private");
    let client = Client::builder(&srv.url()).lease(LEASE).build().unwrap();
    let lock = client.try_acquire(&name).unwrap();
    thread::sleep(LEASE + LEASE / 3);
    assert!(lock.is_held(), "renewal kept the lock past its lease");
    let busy = library_threads();
    assert!(busy >= 2, "timer and renewal thread expected, saw {busy}");
    lock.release().unwrap();
    assert!(
        library_threads() > 0,
        "parked threads wait for the next lock"
    );
    drop(client);
    assert!(library_threads_gone(), "threads left after the last handle");
    assert_eq!(server_connections(&srv), 0, "connections left open");

    // 2. A lock outlives its client: it keeps renewing; its drop ends everything.
    let client = Client::builder(&srv.url()).lease(LEASE).build().unwrap();
    let lock = client.try_acquire(&name).unwrap();
    drop(client);
    thread::sleep(LEASE * 2);
    assert!(lock.is_held(), "a lock must outlive its client");
    let mut con = srv.conn();
    assert!(exists(&mut con, &name));
    drop(lock);
    assert!(!exists(&mut con, &name), "dropping the lock releases it");
    assert!(library_threads_gone(), "threads left after the lock's drop");
    // Closed, so that the counts of connections below are the library's alone.
    drop(con);

    // 3. Private clients made and dropped one after the other leave nothing behind.
    let mut most = 0;
    for _ in 0..200 {
        let client = Client::builder(&srv.url()).lease(LEASE).build().unwrap();
        client.try_acquire(&name).unwrap().release().unwrap();
        most = most.max(library_threads());
    }
    println!("200 private clients: at most {most} library threads at a time");
    assert!(
        most <= 1,
        "short locks need at most the timer thread, saw {most}"
    );
    assert!(library_threads_gone());

    // 4. Persistent clients made again and again (a client per request) share one backend: one
    //    connection, threads bounded by what is held, whatever the number of clients.
    let persistent = || {
        Client::builder(&srv.url())
            .lease(LEASE)
            .persistent(true)
            .build()
            .unwrap()
    };
    let started = Instant::now();
    let mut most = 0;
    for i in 0..500 {
        let client = persistent();
        let lock = client.try_acquire(&name).unwrap();
        if i % 100 == 0 {
            // Now and then a request holds its lock long enough to need a renewal thread.
            thread::sleep(LEASE / 2);
        }
        lock.release().unwrap();
        drop(client);
        most = most.max(library_threads());
    }
    println!(
        "500 persistent clients in {:?}: at most {most} library threads, {} connection(s)",
        started.elapsed(),
        server_connections(&srv)
    );
    assert!(
        most <= 3,
        "timer + renewal I/O + one renewal thread, saw {most}"
    );
    // One connection, or two when a renewal overlapped an acquire.
    let shared = server_connections(&srv);
    assert!(
        shared <= 2,
        "persistent clients share their connections: {shared}"
    );
    // Different lock defaults and key prefix, same connection settings: the same backend.
    let other = Client::builder(&srv.url())
        .key_prefix("other:")
        .fencing(true)
        .persistent(true)
        .build()
        .unwrap();
    other.try_acquire(&name).unwrap().release().unwrap();
    assert_eq!(server_connections(&srv), shared);
    // Different connection settings: a backend of its own.
    let other = Client::builder(&srv.url())
        .pool_size(3)
        .persistent(true)
        .build()
        .unwrap();
    other.try_acquire(&name).unwrap().release().unwrap();
    assert_eq!(server_connections(&srv), shared + 1);
}

#[test]
fn a_refused_connection_fails_at_once() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = Client::open(&format!("redis://127.0.0.1:{port}/")).unwrap();
    for _ in 0..3 {
        let t = Instant::now();
        let e = client.try_acquire("refused").unwrap_err();
        let took = t.elapsed();
        println!("refused after {took:?}: {e}");
        assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
        assert!(!e.is_timeout(), "a refusal is no timeout: {e}");
        // The checkout timeout is 3 s; a refusal must not wait for it.
        assert!(took < Duration::from_secs(1), "took {took:?}");
    }
}

#[test]
fn a_detached_lock_outlives_its_handle_and_is_restored_by_its_owner_token() {
    let srv = RedisServer::start();
    let mut con = srv.conn();
    let name = unique_name("life-detach");
    let client = Client::builder(&srv.url()).lease(LEASE).build().unwrap();

    let lock = client
        .lock(&name)
        .lease(Duration::from_secs(5))
        .try_acquire()
        .unwrap();
    let token = lock.owner_token().to_owned();
    assert_eq!(get(&mut con, &name).as_deref(), Some(token.as_str()));
    assert_eq!(lock.detach().unwrap(), token);
    // Dropped without release: the key keeps the token.
    assert_eq!(get(&mut con, &name).as_deref(), Some(token.as_str()));
    assert!(client.try_acquire(&name).unwrap_err().is_held());

    // Another client (a queued job, say) restores it by token and releases it.
    let job = Client::open(&srv.url()).unwrap();
    let restored = job
        .lock(&name)
        .lease(Duration::from_secs(2))
        .auto_renew(false)
        .restore(&token)
        .unwrap();
    assert!(restored.is_held());
    assert!(restored.fencing_token().is_none());
    let pttl: i64 = redis::cmd("PTTL").arg(&name).query(&mut con).unwrap();
    assert!(pttl > 0 && pttl <= 2000, "restore resets the lease: {pttl}");
    restored.release().unwrap();
    assert!(!exists(&mut con, &name));
    // The token is no good once released; a wrong token never was.
    let e = job.lock(&name).restore(&token).unwrap_err();
    assert!(e.is_not_held(), "{e}");
    assert!(!e.to_string().contains(&token), "token in a message: {e}");

    // A detached, auto-renewed lock is no longer renewed: it expires with its lease.
    let lock = client.try_acquire(&name).unwrap();
    let token = lock.detach().unwrap();
    assert!(eventually(Duration::from_secs(3), || !exists(
        &mut con, &name
    )));
    assert!(job.lock(&name).restore(&token).unwrap_err().is_not_held());
}

#[test]
fn an_owner_token_can_be_given() {
    let srv = RedisServer::start();
    let mut con = srv.conn();
    let name = unique_name("life-owner");
    let client = Client::open(&srv.url()).unwrap();
    let owner = "job-7f3a9c2e41d8b6a0";
    let lock = client.lock(&name).owner_token(owner).try_acquire().unwrap();
    assert_eq!(get(&mut con, &name).as_deref(), Some(owner));
    assert_eq!(lock.owner_token(), owner);
    // The same owner cannot take it twice through another handle; the holder releases it.
    assert!(
        client
            .lock(&name)
            .owner_token("someone-else-0123456789")
            .try_acquire()
            .unwrap_err()
            .is_held()
    );
    assert!(client.is_owned_by(&name, owner).unwrap());
    assert!(
        !client
            .is_owned_by(&name, "someone-else-0123456789")
            .unwrap()
    );
    lock.release().unwrap();
    assert!(!client.is_owned_by(&name, owner).unwrap());
    // force_release frees a lock whoever holds it; the holder learns it on release.
    let held = client.try_acquire(&name).unwrap();
    assert!(client.force_release(&name).unwrap());
    assert!(!exists(&mut con, &name));
    assert!(!client.force_release(&name).unwrap());
    assert!(held.release().unwrap_err().is_not_held());
    for bad in [
        "short",
        "has a space in it 0123",
        "é-not-ascii-0123456789",
        "",
    ] {
        let e = client
            .lock(&name)
            .owner_token(bad)
            .try_acquire()
            .unwrap_err();
        assert!(e.is_invalid_argument(), "{bad:?}: {e}");
    }
    let long = "x".repeat(redislock::MAX_OWNER_LEN + 1);
    assert!(
        client
            .lock(&name)
            .owner_token(&long)
            .try_acquire()
            .unwrap_err()
            .is_invalid_argument()
    );
    assert!(!exists(&mut con, &name), "nothing left behind");
}

#[test]
fn a_release_without_answer_goes_on_until_the_server_answers() {
    let srv = RedisServer::start();
    let name = unique_name("life-release");
    let client = Client::builder(&srv.url())
        .lease(Duration::from_secs(20))
        .read_timeout(Duration::from_millis(300))
        .release_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let lock = client.try_acquire(&name).unwrap();
    srv.pause();
    let t = Instant::now();
    let e = lock.release().unwrap_err();
    let took = t.elapsed();
    assert!(e.is_connection(), "{e}");
    assert!(took < Duration::from_secs(2), "the release took {took:?}");
    srv.resume();
    // The release goes on on a thread of the library: once the server answers again, the key
    // is gone, long before its 20 s lease.
    let mut con = srv.conn();
    assert!(
        eventually(Duration::from_secs(3), || !exists(&mut con, &name)),
        "the key outlived the server's pause"
    );
}
