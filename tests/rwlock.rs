//! Read/write locks against real servers, what is particular to them (what they share with
//! every kind, on every topology, is in `topologies.rs`): what the name's key holds, a waiting
//! writer not starved by new readers, a release waking exactly the waiters that can proceed
//! (with the fallback re-check set far out, so only a handoff can wake them), downgrade, each
//! reader on its own lease, an overwritten writer, fencing across readers, writers and the
//! exclusive lock, bad input, the README's ACL rule, and nothing left in Redis afterwards.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redislock::{Client, ErrorKind};
use support::{
    RedisServer, eventually, exists, get, handoff_only, leftover_keys, llen, unique_name,
    wait_for_len,
};

/// A bound for things that must happen (a handoff, a re-check) on a loaded machine; never a
/// speed claim.
const SURELY: Duration = Duration::from_secs(20);
const MARK: &str = "redislock readers";

/// What the name's key holds (readers and writers excluding each other, and a plain client,
/// are in `topologies.rs`): while readers hold the name, the readers' marker, which the last
/// reader removes; while a writer holds it, the writer's token, as for an exclusive lock.
#[test]
fn the_key_holds_the_readers_marker_or_the_writers_token() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
    let name = unique_name("rw-key");
    let mut con = srv.conn();
    let rw = c.rw_lock(&name);

    let r1 = rw.try_read().unwrap();
    let r2 = rw.try_read().unwrap();
    assert_eq!(r1.name(), name.as_bytes());
    assert_eq!(get(&mut con, &name).as_deref(), Some(MARK));
    r1.release().unwrap();
    assert_eq!(get(&mut con, &name).as_deref(), Some(MARK));
    r2.release().unwrap();
    assert!(!exists(&mut con, &name), "the last reader left the key");

    let w = rw.try_write().unwrap();
    let held = get(&mut con, &name).unwrap();
    assert_ne!(held, MARK);
    assert_eq!(held.len(), 32, "the key holds the writer's token");
    w.release().unwrap();
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_waiting_writer_is_not_starved_by_new_readers() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
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
    wait_for_len(&mut con, &queue, 1, SURELY);
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
    wait_for_len(&mut con, &queue, 2, SURELY);
    assert!(rx.try_recv().is_err(), "nobody may get in while r1 reads");
    r1.release().unwrap();
    writer.join().unwrap();
    reader.join().unwrap();
    let order: Vec<_> = rx.try_iter().collect();
    assert_eq!(order, ["writer in", "writer out", "late reader in"]);
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_release_wakes_exactly_the_waiters_that_can_proceed() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
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
        wait_for_len(&mut con, &queue, i as i64 + 1, SURELY);
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
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn downgrade_lets_readers_in_without_a_gap() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
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
    wait_for_len(&mut con, &queue, 1, SURELY);
    let w_waiter = spawn(true, got_tx.clone());
    wait_for_len(&mut con, &queue, 2, SURELY);

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
    assert_eq!(leftover_keys(&mut con, &[&fence_key]), Vec::<String>::new());
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
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

/// A writer whose key is overwritten behind its back is found lost, and neither renewal nor
/// its release touches the intruder's key (a reader whose entry is removed: `topologies.rs`).
#[test]
fn an_overwritten_writer_is_lost_and_the_intruder_left_alone() {
    let srv = RedisServer::start();
    let c = Client::builder(&srv.url())
        .lease(Duration::from_millis(300))
        .build()
        .unwrap();
    let name = unique_name("rw-lost");
    let mut con = srv.conn();
    let w = c.rw_lock(&name).try_write().unwrap();
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
    assert_eq!(leftover_keys(&mut con, &[]), Vec::<String>::new());
}

/// The ACL rule docs/operations.md gives for these kinds (the exclusive lock's commands plus
/// the kinds' own) is enough for every operation of all three kinds: no denial is logged.
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
