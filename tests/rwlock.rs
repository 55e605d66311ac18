//! Read/write locks against real servers: readers share, writers exclude (also a plain
//! `SET NX PX` client), a waiting writer is not starved, a release wakes exactly the waiters
//! that can proceed (with the fallback re-check set far out, so only a handoff can wake them),
//! downgrade, renewal, lost locks, a killed reader process, fork, fencing, bad input, and
//! nothing left in Redis afterwards.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{
    CHILD_ROLE_ENV, RedisServer, child_env, eventually, exists, get, spawn_self, unique_name,
    wait_child, wait_child_ok,
};

/// A bound for things that must happen (a handoff, a re-check) on a loaded machine; never a
/// speed claim.
const SURELY: Duration = Duration::from_secs(20);
const MARK: &str = "redislock readers";

/// A client whose waiters re-check only after a minute: within a test, a waiter can only be
/// woken by a release's handoff.
fn handoff_only(srv: &RedisServer) -> Client {
    Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(60))
        .lease(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Every key in the server but `except`.
fn leftover(con: &mut redis::Connection, except: &[&str]) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.into_iter()
        .filter(|k| !except.contains(&k.as_str()))
        .collect()
}

fn llen(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("LLEN").arg(key).query(con).unwrap()
}

/// Waits until the queue `key` holds `n` entries (a waiter has queued).
fn wait_queued(con: &mut redis::Connection, key: &str, n: i64) {
    assert!(
        eventually(SURELY, || llen(con, key) == n),
        "queue {key} never reached {n} entries (has {})",
        llen(con, key)
    );
}

#[test]
fn readers_share_and_writers_exclude_everyone() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv);
    let name = unique_name("rw-basic");
    let mut con = srv.conn();
    let rw = c.rw_lock(&name);

    let r1 = rw.try_read().unwrap();
    let r2 = rw.try_read().unwrap();
    assert!(r1.is_held() && r2.is_held());
    assert_eq!(r1.name(), name.as_bytes());
    // While readers hold the name, its key holds the readers' marker: a plain client, an
    // exclusive lock and a writer are all kept out.
    assert_eq!(get(&mut con, &name).as_deref(), Some(MARK));
    let plain: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg("plain-token")
        .arg("NX")
        .arg("PX")
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(
        plain, None,
        "a plain SET NX got in while readers held the name"
    );
    assert_eq!(rw.try_write().unwrap_err().kind(), ErrorKind::Held);
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
    r1.release().unwrap();
    assert_eq!(rw.try_write().unwrap_err().kind(), ErrorKind::Held);
    r2.release().unwrap();
    assert!(!exists(&mut con, &name), "the last reader left the key");

    // A writer is the plain key holding its token.
    let w = rw.try_write().unwrap();
    let held = get(&mut con, &name).unwrap();
    assert_ne!(held, MARK);
    assert_eq!(held.len(), 32, "the key holds the writer's token");
    assert_eq!(rw.try_read().unwrap_err().kind(), ErrorKind::Held);
    assert_eq!(rw.try_write().unwrap_err().kind(), ErrorKind::Held);
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
    let plain: Option<String> = redis::cmd("SET")
        .arg(&name)
        .arg("plain-token")
        .arg("NX")
        .query(&mut con)
        .unwrap();
    assert_eq!(plain, None);
    w.release().unwrap();

    // A plain client's lock keeps readers and writers out, and they get in once it is gone.
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("plain-token")
        .arg("PX")
        .arg(10_000)
        .query(&mut con)
        .unwrap();
    assert_eq!(rw.try_read().unwrap_err().kind(), ErrorKind::Held);
    assert_eq!(rw.try_write().unwrap_err().kind(), ErrorKind::Held);
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    rw.try_read().unwrap().release().unwrap();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_waiting_writer_is_not_starved_by_new_readers() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv);
    let name = unique_name("rw-starve");
    let queue = format!("{{{name}}}:rw:q");
    let mut con = srv.conn();
    let rw = c.rw_lock(&name);
    let (tx, rx) = mpsc::channel::<&'static str>();

    let r1 = rw.try_read().unwrap();
    let writer = {
        let (c, name, tx) = (c.clone(), name.clone(), tx.clone());
        thread::spawn(move || {
            let w = c.rw_lock(&name).write(SURELY).unwrap();
            tx.send("writer in").unwrap();
            thread::sleep(Duration::from_millis(50));
            tx.send("writer out").unwrap();
            w.release().unwrap();
        })
    };
    wait_queued(&mut con, &queue, 1);
    // Readers are in, but a writer waits: a new reader must queue behind it.
    assert_eq!(rw.try_read().unwrap_err().kind(), ErrorKind::Held);
    let reader = {
        let (c, name, tx) = (c.clone(), name.clone(), tx.clone());
        thread::spawn(move || {
            let r = c.rw_lock(&name).read(SURELY).unwrap();
            tx.send("late reader in").unwrap();
            r.release().unwrap();
        })
    };
    wait_queued(&mut con, &queue, 2);
    assert!(rx.try_recv().is_err(), "nobody may get in while r1 reads");
    r1.release().unwrap();
    writer.join().unwrap();
    reader.join().unwrap();
    let order: Vec<_> = rx.try_iter().collect();
    assert_eq!(order, ["writer in", "writer out", "late reader in"]);
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_release_wakes_exactly_the_waiters_that_can_proceed() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv);
    let name = unique_name("rw-wake");
    let queue = format!("{{{name}}}:rw:q");
    let mut con = srv.conn();
    let rw = c.rw_lock(&name);
    let w0 = rw.try_write().unwrap();

    // Queue: reader, reader, reader, writer, reader.
    let (got_tx, got_rx) = mpsc::channel::<String>();
    let mut go = Vec::new();
    let mut threads = Vec::new();
    for (i, write) in [false, false, false, true, false].into_iter().enumerate() {
        let (c, name, got_tx) = (c.clone(), name.clone(), got_tx.clone());
        let (go_tx, go_rx) = mpsc::channel::<()>();
        go.push(go_tx);
        threads.push(thread::spawn(move || {
            let rw = c.rw_lock(&name);
            if write {
                let w = rw.write(SURELY).unwrap();
                got_tx.send(format!("w{i}")).unwrap();
                go_rx.recv().unwrap();
                w.release().unwrap();
            } else {
                let r = rw.read(SURELY).unwrap();
                got_tx.send(format!("r{i}")).unwrap();
                go_rx.recv().unwrap();
                r.release().unwrap();
            }
        }));
        wait_queued(&mut con, &queue, i as i64 + 1);
    }
    w0.release().unwrap();
    // The three readers at the head are granted together (all hold at once), and only they.
    let mut first: Vec<String> = (0..3)
        .map(|_| {
            got_rx
                .recv_timeout(SURELY)
                .expect("a head reader was not woken")
        })
        .collect();
    first.sort();
    assert_eq!(first, ["r0", "r1", "r2"]);
    assert_eq!(
        llen(&mut con, &queue),
        2,
        "the writer and the last reader wait"
    );
    assert!(got_rx.try_recv().is_err());
    for g in &go[..2] {
        g.send(()).unwrap();
    }
    // Two readers left: the writer still waits for the third.
    threads.remove(0).join().unwrap();
    threads.remove(0).join().unwrap();
    assert!(
        got_rx.try_recv().is_err(),
        "the writer got in beside a reader"
    );
    go[2].send(()).unwrap();
    assert_eq!(got_rx.recv_timeout(SURELY).unwrap(), "w3");
    assert!(got_rx.try_recv().is_err());
    go[3].send(()).unwrap();
    assert_eq!(got_rx.recv_timeout(SURELY).unwrap(), "r4");
    go[4].send(()).unwrap();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn downgrade_lets_readers_in_without_a_gap() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv);
    let name = unique_name("rw-down");
    let queue = format!("{{{name}}}:rw:q");
    let mut con = srv.conn();
    let rw = c.rw_lock(&name).fencing(true);
    let w = rw.try_write().unwrap();
    let fence = w.fencing_token().unwrap();

    let (got_tx, got_rx) = mpsc::channel::<&'static str>();
    let spawn = |write: bool, got_tx: mpsc::Sender<&'static str>| {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || {
            let rw = c.rw_lock(&name);
            if write {
                let w = rw.write(SURELY).unwrap();
                got_tx.send("writer").unwrap();
                w.release().unwrap();
            } else {
                let r = rw.read(SURELY).unwrap();
                got_tx.send("reader").unwrap();
                r.release().unwrap();
            }
        })
    };
    let r_waiter = spawn(false, got_tx.clone());
    wait_queued(&mut con, &queue, 1);
    let w_waiter = spawn(true, got_tx.clone());
    wait_queued(&mut con, &queue, 2);

    let r = w.downgrade().unwrap();
    // No moment without a holder: the key went straight from the token to the marker.
    assert_eq!(get(&mut con, &name).as_deref(), Some(MARK));
    assert!(r.is_held());
    assert_eq!(r.fencing_token(), Some(fence));
    assert_eq!(got_rx.recv_timeout(SURELY).unwrap(), "reader");
    r_waiter.join().unwrap();
    // The waiting writer still waits for our read lock.
    assert_eq!(llen(&mut con, &queue), 1);
    assert!(got_rx.try_recv().is_err());
    r.release().unwrap();
    assert_eq!(got_rx.recv_timeout(SURELY).unwrap(), "writer");
    w_waiter.join().unwrap();
    // The fence key of the name is all that is left.
    let fence_key = format!("{{{name}}}:fence");
    assert_eq!(leftover(&mut con, &[&fence_key]), Vec::<String>::new());
}

/// Many threads in two processes read or write (one in ten writes); a checker in Redis counts
/// readers and writers inside: no writer beside anyone, and no write lost.
#[test]
fn readers_and_writers_never_overlap_across_threads_and_processes() {
    let srv = RedisServer::start();
    let name = unique_name("rw-mx");
    let ready = unique_name("rw-mx-ready");
    let child = spawn_self(
        "child_rw_hammer",
        &[
            (CHILD_ROLE_ENV, "rw-hammer".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
            ("REDISLOCK_TEST_READY", ready.clone()),
        ],
    );
    let mut con = srv.conn();
    assert!(eventually(SURELY, || exists(&mut con, &ready)));
    let (bad, writes) = rw_hammer(&srv.url(), &name);
    let out = wait_child_ok(child, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert_eq!(bad, 0, "the parent saw a writer beside another holder");
    let child_writes: u64 = stdout
        .split("WRITES ")
        .nth(1)
        .map(|rest| {
            rest.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|n| n.parse().ok())
        .expect("the child reports its writes");
    assert!(writes > 0 && child_writes > 0);
    let counter: Option<u64> = redis::cmd("GET")
        .arg(format!("{name}:counter"))
        .query(&mut con)
        .unwrap();
    assert_eq!(counter, Some(writes + child_writes), "a write was lost");
    assert_eq!(
        leftover(
            &mut con,
            &[
                &ready,
                &format!("{name}:counter"),
                &format!("{name}:readers"),
                &format!("{name}:writers"),
            ]
        ),
        Vec::<String>::new()
    );
}

const HAMMER_THREADS: u64 = 8;
const HAMMER_ROUNDS: u64 = 25;

/// Returns (overlaps seen, writes done).
fn rw_hammer(url: &str, name: &str) -> (u64, u64) {
    let client = Client::builder(url).build().unwrap();
    let bad = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..HAMMER_THREADS)
        .map(|t| {
            let (client, url, name) = (client.clone(), url.to_owned(), name.to_owned());
            let (bad, writes) = (bad.clone(), writes.clone());
            thread::spawn(move || {
                let mut con = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection_with_timeout(Duration::from_secs(5))
                    .unwrap();
                let (readers, writers, counter) = (
                    format!("{name}:readers"),
                    format!("{name}:writers"),
                    format!("{name}:counter"),
                );
                let incr = |con: &mut redis::Connection, k: &str, by: i64| -> i64 {
                    redis::cmd("INCRBY").arg(k).arg(by).query(con).unwrap()
                };
                let rw = client.rw_lock(&name);
                for i in 0..HAMMER_ROUNDS {
                    if (t * HAMMER_ROUNDS + i) % 10 == 3 {
                        let w = rw.write(Duration::from_secs(120)).unwrap();
                        let now_writers = incr(&mut con, &writers, 1);
                        let now_readers: Option<i64> =
                            redis::cmd("GET").arg(&readers).query(&mut con).unwrap();
                        if now_writers != 1 || now_readers.unwrap_or(0) != 0 {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                        let v: Option<i64> =
                            redis::cmd("GET").arg(&counter).query(&mut con).unwrap();
                        thread::sleep(Duration::from_millis(1));
                        let () = redis::cmd("SET")
                            .arg(&counter)
                            .arg(v.unwrap_or(0) + 1)
                            .query(&mut con)
                            .unwrap();
                        incr(&mut con, &writers, -1);
                        writes.fetch_add(1, Ordering::Relaxed);
                        w.release().unwrap();
                    } else {
                        let r = rw.read(Duration::from_secs(120)).unwrap();
                        incr(&mut con, &readers, 1);
                        let now_writers: Option<i64> =
                            redis::cmd("GET").arg(&writers).query(&mut con).unwrap();
                        if now_writers.unwrap_or(0) != 0 {
                            bad.fetch_add(1, Ordering::Relaxed);
                        }
                        thread::sleep(Duration::from_millis(1));
                        incr(&mut con, &readers, -1);
                        r.release().unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a hammering thread panicked");
    }
    (bad.load(Ordering::Relaxed), writes.load(Ordering::Relaxed))
}

/// Child role of `readers_and_writers_never_overlap_across_threads_and_processes`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_rw_hammer() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("rw-hammer") {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let url = var("REDISLOCK_TEST_URL");
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    let () = redis::cmd("SET")
        .arg(var("REDISLOCK_TEST_READY"))
        .arg(1)
        .query(&mut con)
        .unwrap();
    let (bad, writes) = rw_hammer(&url, &var("REDISLOCK_TEST_LOCK"));
    println!("WRITES {writes}");
    assert_eq!(bad, 0, "the child saw a writer beside another holder");
}

#[test]
fn renewal_keeps_each_reader_on_its_own_lease() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let name = unique_name("rw-renew");
    let mut con = srv.conn();
    let renewed = c.rw_lock(&name).try_read().unwrap();
    let fixed = c.rw_lock(&name).auto_renew(false).try_read().unwrap();
    assert!(renewed.auto_renews() && !fixed.auto_renews());
    // Three leases later the fixed reader has run out on its own; the renewed one holds.
    thread::sleep(Duration::from_millis(900));
    assert!(!fixed.is_held());
    assert!(renewed.is_held(), "renewal did not keep the reader");
    let readers: i64 = redis::cmd("ZCARD")
        .arg(format!("{{{name}}}:rw:r"))
        .query(&mut con)
        .unwrap();
    assert!(readers >= 1);
    assert_eq!(
        fixed.release().unwrap_err().kind(),
        ErrorKind::NotHeld,
        "an expired reader's release must say so"
    );
    assert_eq!(
        c.rw_lock(&name).try_write().unwrap_err().kind(),
        ErrorKind::Held
    );
    renewed.release().unwrap();
    c.rw_lock(&name).try_write().unwrap().release().unwrap();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_reader_removed_behind_its_back_is_reported_lost() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let name = unique_name("rw-lost");
    let mut con = srv.conn();
    let r = c.rw_lock(&name).try_read().unwrap();
    let (tx, rx) = mpsc::channel();
    r.on_lost(move |e| {
        let _ = tx.send(e.kind());
    });
    let _: i64 = redis::cmd("DEL")
        .arg(format!("{{{name}}}:rw:r"))
        .query(&mut con)
        .unwrap();
    assert!(eventually(SURELY, || r.is_lost()), "loss not reported");
    assert_eq!(rx.recv_timeout(SURELY).unwrap(), ErrorKind::NotHeld);
    assert!(!r.is_held());
    assert_eq!(r.release().unwrap_err().kind(), ErrorKind::NotHeld);

    // The readers' marker runs out with the lost reader's lease. A writer whose key is then
    // overwritten is lost too, and the intruder's key is left alone.
    let w = c.rw_lock(&name).write(SURELY).unwrap();
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("intruder")
        .query(&mut con)
        .unwrap();
    assert!(eventually(SURELY, || w.is_lost()));
    assert_eq!(w.release().unwrap_err().kind(), ErrorKind::NotHeld);
    assert_eq!(get(&mut con, &name).as_deref(), Some("intruder"));
}

#[test]
fn a_killed_reader_process_frees_the_name_when_its_lease_runs_out() {
    let srv = RedisServer::start();
    let name = unique_name("rw-kill");
    let ready = unique_name("rw-kill-ready");
    let mut child = spawn_self(
        "child_reader_holds_forever",
        &[
            (CHILD_ROLE_ENV, "rw-holder".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
            ("REDISLOCK_TEST_READY", ready.clone()),
        ],
    );
    let mut con = srv.conn();
    assert!(eventually(SURELY, || exists(&mut con, &ready)));
    let c = Client::open(&srv.url()).unwrap();
    let rw = c.rw_lock(&name);
    assert_eq!(rw.try_write().unwrap_err().kind(), ErrorKind::Held);
    // Past several leases of 1 s, renewal keeps the live reader's hold.
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(rw.try_write().unwrap_err().kind(), ErrorKind::Held);
    child.kill().unwrap();
    let _ = wait_child(child, SURELY);
    let started = Instant::now();
    let w = rw.write(SURELY).unwrap();
    eprintln!("writer in {:?} after the kill", started.elapsed());
    w.release().unwrap();
    assert_eq!(leftover(&mut con, &[&ready]), Vec::<String>::new());
}

/// Child role of `a_killed_reader_process_frees_the_name_when_its_lease_runs_out`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_reader_holds_forever() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("rw-holder") {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let c = Client::builder(&var("REDISLOCK_TEST_URL"))
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let _r = c.rw_lock(&var("REDISLOCK_TEST_LOCK")).try_read().unwrap();
    let mut con = redis::Client::open(var("REDISLOCK_TEST_URL").as_str())
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap();
    let () = redis::cmd("SET")
        .arg(var("REDISLOCK_TEST_READY"))
        .arg(1)
        .query(&mut con)
        .unwrap();
    thread::sleep(Duration::from_secs(600));
}

#[test]
fn fencing_orders_writers_and_readers() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url()).fencing(true).build().unwrap();
    let name = unique_name("rw-fence");
    let rw = c.rw_lock(&name);
    let w1 = rw.try_write().unwrap();
    let f1 = w1.fencing_token().unwrap();
    w1.release().unwrap();
    let r1 = rw.try_read().unwrap();
    let r2 = rw.try_read().unwrap();
    let (g1, g2) = (r1.fencing_token().unwrap(), r2.fencing_token().unwrap());
    assert!(g1 > f1 && g2 > f1);
    r1.release().unwrap();
    r2.release().unwrap();
    // The exclusive lock of the same name shares the counter.
    let x = c.try_acquire(&name).unwrap();
    let fx = x.fencing_token().unwrap();
    assert!(fx > g1 && fx > g2);
    x.release().unwrap();
    let w2 = rw.try_write().unwrap();
    assert!(w2.fencing_token().unwrap() > fx);
    w2.release().unwrap();
    let without = c.rw_lock(&name).fencing(false).try_read().unwrap();
    assert_eq!(without.fencing_token(), None);
}

#[test]
fn a_cancelled_or_timed_out_waiter_leaves_nothing_behind() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv);
    let name = unique_name("rw-cancel");
    let mut con = srv.conn();
    let w = c.rw_lock(&name).try_write().unwrap();
    let e = c
        .rw_lock(&name)
        .read(Duration::from_millis(200))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    let cancel = redislock::Cancel::new();
    let waiter = {
        let (c, name, cancel) = (c.clone(), name.clone(), cancel.clone());
        thread::spawn(move || c.rw_lock(&name).cancel_on(&cancel).write(SURELY).map(drop))
    };
    wait_queued(&mut con, &format!("{{{name}}}:rw:q"), 1);
    cancel.cancel();
    let e = waiter.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    w.release().unwrap();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn bad_input_and_a_name_used_as_two_kinds_are_clear_errors() {
    let srv = RedisServer::start();
    let c = Client::open(&srv.url()).unwrap();
    let mut con = srv.conn();
    let kind = |r: Result<redislock::ReadLock, redislock::Error>| r.unwrap_err().kind();
    assert_eq!(kind(c.rw_lock("").try_read()), ErrorKind::InvalidArgument);
    assert_eq!(
        kind(c.rw_lock("x").lease(Duration::ZERO).try_read()),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(
            c.rw_lock("x")
                .auto_renew(true)
                .lease(Duration::from_millis(10))
                .read(Duration::from_secs(1))
        ),
        ErrorKind::InvalidArgument
    );
    // A name held as a semaphore cannot be read- or write-locked at the same time.
    let name = unique_name("rw-two-kinds");
    let permit = c.semaphore(&name, 2).try_acquire(1).unwrap();
    let e = c.rw_lock(&name).try_read().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.to_string().contains("another kind"), "{e}");
    let e = c
        .rw_lock(&name)
        .write(Duration::from_millis(300))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    permit.release().unwrap();
    // And the other way round.
    let r = c.rw_lock(&name).try_read().unwrap();
    let e = c.semaphore(&name, 2).try_acquire(1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    r.release().unwrap();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_lock_inherited_across_fork_is_not_the_childs() {
    let srv = RedisServer::start();
    let child = spawn_self(
        "child_rw_fork",
        &[
            (CHILD_ROLE_ENV, "rw-fork".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", unique_name("rw-fork")),
        ],
    );
    let out = wait_child_ok(child, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FORK CHECKED"), "{stdout}");
    let mut con = srv.conn();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

/// Child role of `a_lock_inherited_across_fork_is_not_the_childs`: holds a read lock, forks;
/// the grandchild finds the lock not its own; the lock is still held (and renewed) here after.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_rw_fork() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("rw-fork") {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let c = Client::builder(&var("REDISLOCK_TEST_URL"))
        .lease(Duration::from_millis(500))
        .build()
        .unwrap();
    let name = var("REDISLOCK_TEST_LOCK");
    let r = c.rw_lock(&name).try_read().unwrap();
    let w = c.rw_lock(format!("{name}-w").as_str()).try_write().unwrap();
    // SAFETY: the grandchild only checks the handles and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = !r.is_held()
            && !w.is_held()
            && r.extend(Duration::from_secs(1)).unwrap_err().kind() == ErrorKind::Forked
            && w.extend(Duration::from_secs(1)).unwrap_err().kind() == ErrorKind::Forked
            && c.rw_lock(&name).try_read().is_ok_and(|mine| {
                // The client works in the child: a read lock of its own, released at once.
                mine.release().is_ok()
            })
            && c.rw_lock(&name).try_write().unwrap_err().kind() == ErrorKind::Held;
        let forked_release = r.release().unwrap_err().kind() == ErrorKind::Forked;
        let forked_downgrade = w.downgrade().unwrap_err().kind() == ErrorKind::Forked;
        // SAFETY: ends the forked process without running the parent's destructors.
        unsafe {
            libc::_exit(if ok && forked_release && forked_downgrade {
                0
            } else {
                1
            })
        };
    }
    let mut status = 0;
    // SAFETY: waits for the process forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child found something wrong ({status})"
    );
    // Still ours, past its lease: the child did not release it, renewal goes on here.
    thread::sleep(Duration::from_millis(800));
    assert!(r.is_held() && w.is_held());
    r.release().unwrap();
    w.release().unwrap();
    println!("FORK CHECKED");
}

/// The ACL rule the README gives for these kinds (the exclusive lock's commands plus the
/// kinds' own) is enough for every operation of all three kinds: no denial is logged.
#[test]
fn the_kinds_work_for_a_least_privilege_acl_user() {
    let srv = RedisServer::start();
    let mut admin = srv.conn();
    let mut rule = redis::cmd("ACL");
    rule.arg("SETUSER")
        .arg("locker")
        .arg("reset")
        .arg("on")
        .arg(">locker-pw")
        .arg("~app:*")
        .arg("~{app:*")
        .arg("resetchannels")
        .arg("-@all");
    for c in [
        "set",
        "evalsha",
        "script|load",
        "blpop",
        "get",
        "pexpire",
        "pttl",
        "incr",
        "del",
        "rpush",
        "lpop",
        "lrem",
        // The kinds' own:
        "time",
        "type",
        "exists",
        "lindex",
        "llen",
        "pexpireat",
        "zadd",
        "zrem",
        "zscore",
        "zrange",
        "zrangebyscore",
        "zremrangebyscore",
    ] {
        rule.arg(format!("+{c}"));
    }
    let () = rule.query(&mut admin).unwrap();
    let url = format!("redis://locker:locker-pw@127.0.0.1:{}/", srv.port());
    let c = Client::builder(&url)
        .key_prefix("app:")
        .lease(Duration::from_millis(300))
        .fencing(true)
        .build()
        .unwrap();
    let wait = SURELY;

    // Read/write: shared reads, a writer handed the lock by a release, a downgrade, renewal.
    let rw = c.rw_lock("doc");
    let r = rw.read(wait).unwrap();
    let writer = {
        let c = c.clone();
        thread::spawn(move || c.rw_lock("doc").write(SURELY).unwrap().downgrade().unwrap())
    };
    thread::sleep(Duration::from_millis(400));
    r.release().unwrap();
    let r2 = writer.join().unwrap();
    assert!(r2.is_held());
    r2.release().unwrap();
    // Semaphore: a request waiting for a permit handed over by a release, renewal.
    let sem = c.semaphore("pool", 1);
    let p = sem.acquire(1, wait).unwrap();
    let waiter = {
        let c = c.clone();
        thread::spawn(move || c.semaphore("pool", 1).acquire(1, SURELY).unwrap().release())
    };
    thread::sleep(Duration::from_millis(400));
    assert!(p.is_held());
    p.release().unwrap();
    waiter.join().unwrap().unwrap();
    assert_eq!(
        sem.acquire(1, Duration::from_millis(100))
            .unwrap()
            .release()
            .map(|_| "released"),
        Ok("released")
    );
    // A set, waiting for a name a release hands over; renewal of the set.
    let a = c.try_acquire("a").unwrap();
    let set = {
        let c = c.clone();
        thread::spawn(move || {
            let s = c.lock_all(&["a", "b"]).acquire(SURELY).unwrap();
            thread::sleep(Duration::from_millis(400));
            s.release()
        })
    };
    thread::sleep(Duration::from_millis(100));
    a.release().unwrap();
    set.join().unwrap().unwrap();

    let entries: Vec<redis::Value> = redis::cmd("ACL").arg("LOG").query(&mut admin).unwrap();
    assert!(entries.is_empty(), "ACL denials logged: {entries:?}");
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut admin).unwrap();
    assert!(
        keys.iter().all(|k| k.ends_with(":fence")),
        "left behind: {keys:?}"
    );
}
