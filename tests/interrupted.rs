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
    CHILD_ROLE_ENV, RedisServer, child_env, eventually, exists, spawn_self, unique_name, wait_child,
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

/// The state letter of a process from `/proc/<pid>/stat` (`T` when stopped).
fn proc_state(pid: libc::pid_t) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

/// Stops the child and waits until it really is stopped.
fn stop(pid: libc::pid_t) {
    // SAFETY: kill(2) on our own child, not reaped yet (wait_child reaps it later).
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    assert!(
        eventually(Duration::from_secs(5), || proc_state(pid) == Some('T')),
        "child {pid} did not stop: state {:?}",
        proc_state(pid)
    );
}

fn cont(pid: libc::pid_t) {
    // SAFETY: as in `stop`.
    unsafe { libc::kill(pid, libc::SIGCONT) };
}

fn output(out: &std::process::Output) -> String {
    format!(
        "--- stdout ---\n{}--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn child_conn(url: &str) -> redis::Connection {
    redis::Client::open(url)
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(5))
        .unwrap()
}

/// A waiter blocked in BLPOP whose process is stopped and continued keeps waiting, keeps its
/// place in the queue, and gets the lock when it is released.
#[test]
fn waiter_survives_sigstop_and_sigcont() {
    let srv = RedisServer::start();
    let name = unique_name("stopped-waiter");
    let holder = Client::open(&srv.url()).unwrap();
    let h = holder.try_acquire(&name).unwrap();
    let child = spawn_self(
        "child_stopped_waiter",
        &[
            (CHILD_ROLE_ENV, "stopped-waiter".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
        ],
    );
    let pid = child.id() as libc::pid_t;
    let mut con = srv.conn();
    assert!(eventually(Duration::from_secs(20), || queued(
        &mut con, &name
    ) == 1));
    // Let the child get into its BLPOP, then stop and continue it.
    thread::sleep(Duration::from_millis(300));
    stop(pid);
    thread::sleep(Duration::from_millis(100));
    cont(pid);
    thread::sleep(Duration::from_millis(300));
    let still_queued = queued(&mut con, &name);
    h.release().unwrap();
    let out = wait_child(child, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "the waiter failed after SIGSTOP/SIGCONT\n{}",
        output(&out)
    );
    assert_eq!(
        still_queued,
        1,
        "the waiter left the queue after SIGCONT\n{}",
        output(&out)
    );
}

/// Child role of `waiter_survives_sigstop_and_sigcont`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_stopped_waiter() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("stopped-waiter") {
        return;
    }
    let url = child_env("REDISLOCK_TEST_URL").unwrap();
    let name = child_env("REDISLOCK_TEST_LOCK").unwrap();
    let c = Client::builder(&url)
        .recheck_interval(Duration::from_secs(10))
        .build()
        .unwrap();
    let t = Instant::now();
    let r = c.acquire(&name, Duration::from_secs(30));
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
    let ready = unique_name("ready");
    let child = spawn_self(
        "child_interrupted_acquire",
        &[
            (CHILD_ROLE_ENV, "interrupted-acquire".to_string()),
            ("REDISLOCK_TEST_URL", srv.url()),
            ("REDISLOCK_TEST_LOCK", name.clone()),
            ("REDISLOCK_TEST_READY", ready.clone()),
        ],
    );
    let pid = child.id() as libc::pid_t;
    let mut con = srv.conn();
    assert!(eventually(Duration::from_secs(20), || exists(
        &mut con, &ready
    )));
    // The child sends its SET NX 1 s after `ready`: it finds Redis paused and blocks. (Pause
    // only once the reply to the child's SET of `ready` has surely gone out.)
    thread::sleep(Duration::from_millis(200));
    srv.pause();
    eprintln!("parent: paused at {}", now_ms());
    thread::sleep(Duration::from_millis(1500));
    stop(pid);
    eprintln!("parent: stopped at {}", now_ms());
    srv.resume();
    // Redis applies the SET now; the reply waits in the stopped child's socket.
    let mut con = srv.conn();
    if !eventually(Duration::from_secs(5), || exists(&mut con, &name)) {
        cont(pid);
        let out = wait_child(child, Duration::from_secs(60));
        panic!("the child's SET was not applied\n{}", output(&out));
    }
    thread::sleep(Duration::from_millis(200));
    cont(pid);
    let out = wait_child(child, Duration::from_secs(60));
    let text = output(&out);
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
#[ignore = "child role, run via spawn_self"]
fn child_interrupted_acquire() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("interrupted-acquire") {
        return;
    }
    let url = child_env("REDISLOCK_TEST_URL").unwrap();
    let name = child_env("REDISLOCK_TEST_LOCK").unwrap();
    let c = Client::builder(&url)
        .read_timeout(Duration::from_secs(20))
        .auto_renew(false)
        .build()
        .unwrap();
    // Connect (and load nothing) before Redis is paused.
    let warm = format!("{name}-warm");
    c.try_acquire(&warm).unwrap().release().unwrap();
    let mut con = child_conn(&url);
    let () = redis::cmd("SET")
        .arg(child_env("REDISLOCK_TEST_READY").unwrap())
        .arg(1)
        .query(&mut con)
        .unwrap();
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
