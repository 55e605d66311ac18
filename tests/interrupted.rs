//! A process stopped and continued (SIGSTOP/SIGCONT: job control, a debugger, `kill -STOP`)
//! while a call waits for Redis. On Linux a socket read with a receive timeout (the library sets
//! one on every connection) then fails with EINTR instead of being restarted. Such an
//! interruption says nothing about the connection or the lock, so it must neither end a wait nor
//! leave a lock behind that the caller was told it did not get.

mod support;

use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use support::{
    ChildProcess, RedisServer, child_role, eventually, exists, output_text, unique_name,
};

fn queued(con: &mut redis::Connection, name: &str) -> i64 {
    redis::cmd("LLEN")
        .arg(format!("{{{name}}}:q"))
        .query(con)
        .unwrap()
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// A waiter blocked in BLPOP whose process is stopped and continued keeps waiting, keeps its
/// place in the queue, and gets the lock when it is released.
#[test]
fn waiter_survives_sigstop_and_sigcont() {
    let srv = RedisServer::start();
    let name = unique_name("stopped-waiter");
    let holder = Client::open(&srv.url()).unwrap();
    let h = holder.try_acquire(&name).unwrap();
    let mut child = ChildProcess::start(
        "child_stopped_waiter",
        "stopped-waiter",
        &[
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
        ],
    );
    let mut con = srv.conn();
    assert!(eventually(Duration::from_secs(20), || queued(
        &mut con, &name
    ) == 1));
    // Let the child get into its BLPOP, then stop and continue it.
    thread::sleep(Duration::from_millis(300));
    child.stop();
    thread::sleep(Duration::from_millis(100));
    child.cont();
    thread::sleep(Duration::from_millis(300));
    let still_queued = queued(&mut con, &name);
    h.release().unwrap();
    let out = child.wait(Duration::from_secs(60));
    assert!(
        out.status.success(),
        "the waiter failed after SIGSTOP/SIGCONT\n{}",
        output_text(&out)
    );
    assert_eq!(
        still_queued,
        1,
        "the waiter left the queue after SIGCONT\n{}",
        output_text(&out)
    );
}

/// Child role of `waiter_survives_sigstop_and_sigcont`.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_stopped_waiter() {
    let Some(role) = child_role("stopped-waiter") else {
        return;
    };
    let c = Client::builder(&role.var("REDISLOCK_TEST_URL"))
        .recheck_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let t = Instant::now();
    let r = c.acquire(role.var("REDISLOCK_TEST_LOCK"), Duration::from_secs(30));
    println!(
        "acquire returned after {:?}: {:?}",
        t.elapsed(),
        r.as_ref().map(|l| l.is_held())
    );
    let l = r.unwrap();
    assert!(l.is_held());
    l.release().unwrap();
}

/// The process is stopped while its `try_acquire` waits for the reply to `SET NX`, and Redis
/// applies the SET meanwhile. If the call then reports an error, the key must not be left
/// holding the caller's token: nobody could release that lock before its lease ran out.
#[test]
fn interrupted_acquire_does_not_leave_an_orphaned_lock() {
    let srv = RedisServer::start();
    let name = unique_name("interrupted-acquire");
    let mut child = ChildProcess::start(
        "child_interrupted_acquire",
        "interrupted-acquire",
        &[
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
        ],
    );
    // The child sends its SET NX 1 s after it is ready (connected, nothing in flight): it finds
    // Redis paused and blocks.
    child.wait_ready(Duration::from_secs(20));
    thread::sleep(Duration::from_millis(200));
    srv.pause();
    eprintln!("parent: paused at {}", now_ms());
    thread::sleep(Duration::from_millis(1500));
    child.stop();
    eprintln!("parent: stopped at {}", now_ms());
    srv.resume();
    // Redis applies the SET now; the reply waits in the stopped child's socket.
    let mut con = srv.conn();
    if !eventually(Duration::from_secs(5), || exists(&mut con, &name)) {
        child.cont();
        let out = child.wait(Duration::from_secs(60));
        panic!("the child's SET was not applied\n{}", output_text(&out));
    }
    thread::sleep(Duration::from_millis(200));
    child.cont();
    let out = child.wait(Duration::from_secs(60));
    let text = output_text(&out);
    eprintln!("{text}");
    assert!(out.status.success(), "{text}");
    let failed = text.contains("try_acquire: Err");
    assert!(
        failed || text.contains("try_acquire: Ok"),
        "child did not report\n{text}"
    );
    if failed {
        let pttl: i64 = redis::cmd("PTTL").arg(&name).query(&mut con).unwrap();
        assert_eq!(
            pttl, -2,
            "try_acquire reported an error but its lock stays held (PTTL {pttl} ms)\n{text}"
        );
    } else {
        assert!(!exists(&mut con, &name), "{text}");
    }
}

/// Child role of `interrupted_acquire_does_not_leave_an_orphaned_lock`.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_interrupted_acquire() {
    let Some(role) = child_role("interrupted-acquire") else {
        return;
    };
    let name = role.var("REDISLOCK_TEST_LOCK");
    let c = Client::builder(&role.var("REDISLOCK_TEST_URL"))
        .read_timeout(Duration::from_secs(20))
        .auto_renew(false)
        .build()
        .unwrap();
    // Connect (and load nothing) before Redis is paused.
    let warm = format!("{name}-warm");
    c.try_acquire(&warm).unwrap().release().unwrap();
    role.ready("");
    println!("child: ready at {}", now_ms());
    thread::sleep(Duration::from_millis(1000));
    println!("child: SET at {}", now_ms());
    let t = Instant::now();
    let r = c.try_acquire(&name);
    println!("child: try_acquire took {:?}", t.elapsed());
    match r {
        Ok(l) => {
            println!("try_acquire: Ok");
            l.release().unwrap();
        }
        Err(e) => println!("try_acquire: Err({e})"),
    }
}
