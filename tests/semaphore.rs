//! Semaphores against real servers: never more permits out than the semaphore has (16 threads
//! in each of 2 processes), grants in arrival order (a request for k is not overtaken by later,
//! smaller ones), a killed holder's permits come back with its lease, renewal, lost permits,
//! fork, bad input, and nothing left in Redis afterwards.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use redislock::{Client, ErrorKind};
use support::{
    CHILD_ROLE_ENV, RedisServer, child_env, eventually, exists, spawn_self, unique_name,
    wait_child, wait_child_ok,
};

/// A bound for things that must happen on a loaded machine; never a speed claim.
const SURELY: Duration = Duration::from_secs(20);

/// A client whose waiters re-check only after a minute: within a test, a waiter can only be
/// woken by a release's handoff.
fn handoff_only(srv: &RedisServer) -> Client {
    Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(60))
        .lease(Duration::from_secs(60))
        .build()
        .unwrap()
}

fn leftover(con: &mut redis::Connection, except: &[&str]) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.into_iter()
        .filter(|k| !except.contains(&k.as_str()))
        .collect()
}

fn llen(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("LLEN").arg(key).query(con).unwrap()
}

fn wait_queued(con: &mut redis::Connection, key: &str, n: i64) {
    assert!(
        eventually(SURELY, || llen(con, key) == n),
        "queue {key} never reached {n} entries (has {})",
        llen(con, key)
    );
}

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
    let c = handoff_only(&srv);
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
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
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
    let c = handoff_only(&srv);
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
        wait_queued(&mut con, &queue, i as i64 + 1);
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
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

const PERMITS: u32 = 3;
const THREADS: u64 = 16;
const ROUNDS: u64 = 12;

/// Returns how often more than `PERMITS` permits were seen held at once.
fn sem_hammer(url: &str, name: &str) -> u64 {
    let client = Client::builder(url).build().unwrap();
    let over = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (client, url, name, over) = (
                client.clone(),
                url.to_owned(),
                name.to_owned(),
                over.clone(),
            );
            thread::spawn(move || {
                let mut con = redis::Client::open(url.as_str())
                    .unwrap()
                    .get_connection_with_timeout(Duration::from_secs(5))
                    .unwrap();
                let inside = format!("{name}:inside");
                let sem = client.semaphore(&name, PERMITS);
                for i in 0..ROUNDS {
                    let k = 1 + ((t + i) % 2) as u32;
                    let p = sem.acquire(k, Duration::from_secs(120)).unwrap();
                    let now: i64 = redis::cmd("INCRBY")
                        .arg(&inside)
                        .arg(k)
                        .query(&mut con)
                        .unwrap();
                    if now > i64::from(PERMITS) {
                        over.fetch_add(1, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(1));
                    let _: i64 = redis::cmd("DECRBY")
                        .arg(&inside)
                        .arg(k)
                        .query(&mut con)
                        .unwrap();
                    p.release().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a hammering thread panicked");
    }
    over.load(Ordering::Relaxed)
}

#[test]
fn never_more_permits_out_than_the_semaphore_has() {
    let srv = RedisServer::start();
    let name = unique_name("sem-mx");
    let ready = unique_name("sem-mx-ready");
    let child = spawn_self(
        "child_sem_hammer",
        &[
            (CHILD_ROLE_ENV, "sem-hammer".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
            ("REDISLOCK_TEST_READY", ready.clone()),
        ],
    );
    let mut con = srv.conn();
    assert!(eventually(SURELY, || exists(&mut con, &ready)));
    let over = sem_hammer(&srv.url(), &name);
    let out = wait_child_ok(child, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert_eq!(over, 0, "more than {PERMITS} permits were held at once");
    let inside: Option<i64> = redis::cmd("GET")
        .arg(format!("{name}:inside"))
        .query(&mut con)
        .unwrap();
    assert_eq!(inside, Some(0));
    assert_eq!(
        leftover(&mut con, &[&ready, &format!("{name}:inside")]),
        Vec::<String>::new()
    );
}

/// Child role of `never_more_permits_out_than_the_semaphore_has`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_sem_hammer() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("sem-hammer") {
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
    let over = sem_hammer(&url, &var("REDISLOCK_TEST_LOCK"));
    assert_eq!(
        over, 0,
        "the child saw more than {PERMITS} permits held at once"
    );
}

#[test]
fn a_killed_holders_permits_come_back_when_its_lease_runs_out() {
    let srv = RedisServer::start();
    let name = unique_name("sem-kill");
    let ready = unique_name("sem-kill-ready");
    let mut child = spawn_self(
        "child_permit_holder",
        &[
            (CHILD_ROLE_ENV, "sem-holder".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
            ("REDISLOCK_TEST_READY", ready.clone()),
        ],
    );
    let mut con = srv.conn();
    assert!(eventually(SURELY, || exists(&mut con, &ready)));
    let c = handoff_only(&srv);
    let sem = c.semaphore(&name, 2);
    let mine = sem.try_acquire(1).unwrap();
    assert_eq!(sem.try_acquire(1).unwrap_err().kind(), ErrorKind::Held);
    // Renewal keeps the live holder's permit past several leases of 1 s.
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(sem.try_acquire(1).unwrap_err().kind(), ErrorKind::Held);
    child.kill().unwrap();
    let _ = wait_child(child, SURELY);
    // The killed holder's permit comes back with its lease; a waiter notices at its re-check,
    // which is never later than the lease of the grants it waits behind.
    let p = sem
        .acquire(1, SURELY)
        .expect("the killed holder's permit never came back");
    p.release().unwrap();
    mine.release().unwrap();
    assert_eq!(leftover(&mut con, &[&ready]), Vec::<String>::new());
}

/// Child role of `a_killed_holders_permits_come_back_when_its_lease_runs_out`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_permit_holder() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("sem-holder") {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let c = Client::builder(&var("REDISLOCK_TEST_URL"))
        .lease(Duration::from_secs(1))
        .build()
        .unwrap();
    let _p = c
        .semaphore(&var("REDISLOCK_TEST_LOCK"), 2)
        .try_acquire(1)
        .unwrap();
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
fn renewal_keeps_a_permit_and_a_removed_permit_is_reported_lost() {
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

    let (tx, rx) = mpsc::channel();
    renewed.on_lost(move |e| {
        let _ = tx.send(e.kind());
    });
    let _: i64 = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    assert!(eventually(SURELY, || renewed.is_lost()));
    assert_eq!(rx.recv_timeout(SURELY).unwrap(), ErrorKind::NotHeld);
    assert_eq!(renewed.release().unwrap_err().kind(), ErrorKind::NotHeld);
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
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
    // A semaphore's name cannot be locked meanwhile, nor a lock's name used as a semaphore.
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
    let e = c.acquire(&name, Duration::from_millis(300)).unwrap_err();
    assert!(
        e.kind() == ErrorKind::Redis && e.redis_code() == Some("WRONGTYPE"),
        "{e}"
    );
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
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn a_cancelled_or_timed_out_request_leaves_nothing_behind() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv);
    let name = unique_name("sem-cancel");
    let mut con = srv.conn();
    let sem = c.semaphore(&name, 2);
    let all = sem.try_acquire(2).unwrap();
    let e = sem.acquire(1, Duration::from_millis(200)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    let cancel = redislock::Cancel::new();
    let waiter = {
        let (c, name, cancel) = (c.clone(), name.clone(), cancel.clone());
        thread::spawn(move || {
            c.semaphore(&name, 2)
                .cancel_on(&cancel)
                .acquire(2, SURELY)
                .map(drop)
        })
    };
    wait_queued(&mut con, &format!("{{{name}}}:sem:q"), 1);
    cancel.cancel();
    let e = waiter.join().unwrap().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    all.release().unwrap();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

#[test]
fn permits_inherited_across_fork_are_not_the_childs() {
    let srv = RedisServer::start();
    let child = spawn_self(
        "child_sem_fork",
        &[
            (CHILD_ROLE_ENV, "sem-fork".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", unique_name("sem-fork")),
        ],
    );
    let out = wait_child_ok(child, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FORK CHECKED"), "{stdout}");
    let mut con = srv.conn();
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());
}

/// Child role of `permits_inherited_across_fork_are_not_the_childs`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_sem_fork() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("sem-fork") {
        return;
    }
    let var = |n: &str| child_env(n).unwrap_or_else(|| panic!("{n} not set"));
    let c = Client::builder(&var("REDISLOCK_TEST_URL"))
        .lease(Duration::from_millis(500))
        .build()
        .unwrap();
    let name = var("REDISLOCK_TEST_LOCK");
    let p = c.semaphore(&name, 2).try_acquire(1).unwrap();
    // SAFETY: the grandchild only checks the handle and ends with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = !p.is_held()
            && p.extend(Duration::from_secs(1)).unwrap_err().kind() == ErrorKind::Forked
            // The client works in the child: it takes the other permit, and gives it back.
            && c.semaphore(&name, 2)
                .try_acquire(1)
                .is_ok_and(|mine| mine.release().is_ok())
            && c.semaphore(&name, 2).try_acquire(2).unwrap_err().kind() == ErrorKind::Held;
        let forked_release = p.release().unwrap_err().kind() == ErrorKind::Forked;
        // SAFETY: ends the forked process without running the parent's destructors.
        unsafe { libc::_exit(if ok && forked_release { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the process forked above.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the forked child found something wrong ({status})"
    );
    thread::sleep(Duration::from_millis(800));
    assert!(p.is_held());
    p.release().unwrap();
    println!("FORK CHECKED");
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
    assert_eq!(leftover(&mut con, &[]), Vec::<String>::new());

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
    assert_eq!(leftover(&mut con, &except), Vec::<String>::new());
}
