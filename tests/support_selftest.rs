//! Self-test of the integration-test harness in `tests/support`.

mod support;

use std::time::{Duration, Instant};

use support::{
    CHILD_ROLE_ENV, ChildProcess, RedisServer, Shared, Topology, child_env, child_role,
    fork_and_check, fork_and_check_within, get, spawn_self, unique_name, wait_child, wait_child_ok,
};

redislock_testkit::shared_keeper!();

fn set(con: &mut redis::Connection, key: &str, val: &str) {
    let () = redis::cmd("SET").arg(key).arg(val).query(con).unwrap();
}

/// True if a process with this pid exists (zombies included).
fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence/permission; no memory safety
    // preconditions.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn two_servers_distinct_ports_set_get() {
    let a = RedisServer::start();
    let b = RedisServer::start();
    assert_ne!(a.port(), b.port());
    assert_ne!(a.port(), 6379);
    assert_ne!(b.port(), 6379);
    assert_eq!(a.url(), format!("redis://127.0.0.1:{}/", a.port()));
    assert!(a.is_running() && b.is_running());
    assert_ne!(a.pid(), b.pid());

    let key = unique_name("selftest-k");
    let mut ca = a.conn();
    let mut cb = b.conn();
    set(&mut ca, &key, "in-a");
    assert_eq!(get(&mut ca, &key).as_deref(), Some("in-a"));
    assert_eq!(get(&mut cb, &key), None, "servers must be independent");

    // Really our processes on our ports.
    let info: String = redis::cmd("INFO").arg("server").query(&mut ca).unwrap();
    assert!(info.contains(&format!("process_id:{}", a.pid())), "{info}");
    assert!(info.contains(&format!("tcp_port:{}", a.port())), "{info}");
}

#[test]
fn kill_then_restart_same_port_empty() {
    let s = RedisServer::start();
    let port = s.port();
    let old_pid = s.pid();
    let key = unique_name("selftest-k");
    set(&mut s.conn(), &key, "v");

    s.kill();
    assert!(!s.is_running());
    assert!(!pid_alive(old_pid), "killed server must be reaped");
    let err = s.try_conn().err().expect("connect must fail after kill");
    assert!(err.is_io_error() || err.is_connection_refusal(), "{err:?}");
    s.kill(); // idempotent

    s.restart();
    assert!(s.is_running());
    assert_eq!(s.port(), port);
    assert_ne!(s.pid(), old_pid);
    let mut con = s.conn();
    assert_eq!(get(&mut con, &key), None, "restarted server must be empty");
    set(&mut con, &key, "v2");

    // restart() of a running server also works (kills it first).
    s.restart();
    assert_eq!(get(&mut s.conn(), &key), None);
}

#[test]
fn pause_times_out_then_resume_answers() {
    let s = RedisServer::start();
    let key = unique_name("selftest-k");
    let mut con = s.conn();
    set(&mut con, &key, "v");
    con.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();

    s.pause();
    assert!(s.is_running(), "a paused server is still running");
    let t = Instant::now();
    let err = redis::cmd("GET")
        .arg(&key)
        .query::<Option<String>>(&mut con)
        .expect_err("paused server must not answer");
    let elapsed = t.elapsed();
    assert!(err.is_timeout(), "{err:?}");
    assert!(
        elapsed >= Duration::from_millis(250) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );

    s.resume();
    // The timed-out connection is out of sync; use a fresh one.
    assert_eq!(get(&mut s.conn(), &key).as_deref(), Some("v"));
}

#[test]
fn drop_while_paused_kills_process() {
    let s = RedisServer::start();
    let pid = s.pid();
    let dir = s.dir().to_path_buf();
    assert!(dir.is_dir());
    s.pause();
    drop(s);
    assert!(!pid_alive(pid), "dropped server must be killed and reaped");
    assert!(!dir.exists(), "temp dir must be removed");
}

#[test]
fn command_calls_counts_gets() {
    let s = RedisServer::start();
    let key = unique_name("selftest-k");
    let mut con = s.conn();
    let _ = get(&mut con, &key);
    s.reset_stats();
    assert_eq!(s.command_calls("get"), 0);
    for _ in 0..3 {
        let _ = get(&mut con, &key);
    }
    set(&mut con, &key, "v");
    assert_eq!(s.command_calls("get"), 3);
    assert_eq!(s.command_calls("GET"), 3);
    assert_eq!(s.command_calls("set"), 1);
    assert_eq!(s.command_calls("blpop"), 0);
    s.reset_stats();
    assert_eq!(s.command_calls("get"), 0);
}

#[test]
fn requirepass_server() {
    let s = RedisServer::start_with(&["--requirepass", "s3cr:t@x"]);
    let key = unique_name("selftest-k");

    let mut anon = s.conn();
    let err = redis::cmd("GET")
        .arg(&key)
        .query::<Option<String>>(&mut anon)
        .expect_err("must require auth");
    assert_eq!(err.code(), Some("NOAUTH"), "{err:?}");

    let mut con = s.conn_url(&s.url_with_password("s3cr:t@x"));
    set(&mut con, &key, "v");
    assert_eq!(get(&mut con, &key).as_deref(), Some("v"));
    // Stats work with a password too.
    assert_eq!(s.command_calls("set"), 1);

    s.restart();
    let mut con = s.conn_url(&s.url_with_password("s3cr:t@x"));
    assert_eq!(get(&mut con, &key), None);
}

#[test]
fn unique_names_differ() {
    let a = unique_name("lock");
    let b = unique_name("lock");
    assert_ne!(a, b);
    assert!(a.starts_with("lock-"));
    assert!(a.contains(&std::process::id().to_string()));
}

#[test]
fn spawn_self_child_writes_key() {
    let s = RedisServer::start();
    let key = unique_name("selftest-child");
    let child = spawn_self(
        "child_role_writer",
        &[
            (CHILD_ROLE_ENV, "writer".to_string()),
            ("REDISLOCK_TEST_URL", s.url()),
            ("REDISLOCK_TEST_KEY", key.clone()),
        ],
    );
    let child_pid = child.id();
    let out = wait_child_ok(child, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 passed"), "{stdout}");

    let val = get(&mut s.conn(), &key).expect("child did not write the key");
    assert_eq!(val, format!("from-child-{child_pid}"));
    assert_ne!(child_pid, std::process::id());
}

#[test]
#[should_panic(expected = "matched no test")]
fn spawn_self_wrong_name_is_detected() {
    let child = spawn_self("no_such_test_name", &[]);
    let _ = wait_child(child, Duration::from_secs(30));
}

/// Child role of `spawn_self_child_writes_key`; does nothing in normal runs.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_role_writer() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("writer") {
        return;
    }
    let url = child_env("REDISLOCK_TEST_URL").expect("REDISLOCK_TEST_URL");
    let key = child_env("REDISLOCK_TEST_KEY").expect("REDISLOCK_TEST_KEY");
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .unwrap();
    set(
        &mut con,
        &key,
        &format!("from-child-{}", std::process::id()),
    );
    println!("child wrote {key}");
}

#[test]
fn restart_waits_while_port_is_busy() {
    let s = RedisServer::start();
    let port = s.port();
    s.kill();
    // Someone else holds the port for a while; restart() must keep retrying.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            drop(squatter);
        });
        let t = Instant::now();
        s.restart();
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
    });
    assert_eq!(s.port(), port);
    assert!(s.log_tail().contains("Address already in use"));
    let () = redis::cmd("PING").query(&mut s.conn()).unwrap();
}

#[test]
fn missing_binary_panics_with_install_hint() {
    let child = spawn_self(
        "child_role_missing_binary",
        &[
            (CHILD_ROLE_ENV, "missing-binary".to_string()),
            (
                "REDISLOCK_TEST_REDIS_SERVER",
                "/nonexistent/redis-server".to_string(),
            ),
        ],
    );
    let out = wait_child(child, Duration::from_secs(30));
    assert!(!out.status.success());
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("apt-get install redis-server"), "{text}");
    assert!(text.contains("REDISLOCK_TEST_REDIS_SERVER"), "{text}");
}

/// Child role of `missing_binary_panics_with_install_hint`.
#[test]
#[ignore = "child role, run via spawn_self"]
fn child_role_missing_binary() {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some("missing-binary") {
        return;
    }
    let _ = RedisServer::start();
}

#[test]
fn child_process_handshake_stop_and_report() {
    let mut child = ChildProcess::start(
        "child_role_handshake",
        "handshake",
        &[("REDISLOCK_TEST_WORD", "hello".to_string())],
    );
    assert_eq!(child.wait_ready(Duration::from_secs(30)), "hello");
    child.stop();
    child.cont();
    assert_eq!(
        child.reported("word"),
        None,
        "reported before it was told to go"
    );
    child.go();
    child.wait_ok(Duration::from_secs(30));
    assert_eq!(child.reported("word").as_deref(), Some("hello, went"));
}

#[test]
fn child_process_kill9_ends_a_holder_at_once() {
    let mut child = ChildProcess::start("child_role_handshake", "holder", &[]);
    child.wait_ready(Duration::from_secs(30));
    let pid = child.pid();
    assert!(pid_alive(pid));
    let killed = child.kill9();
    assert!(!pid_alive(pid), "a killed child must be reaped");
    assert!(killed.elapsed() < Duration::from_secs(5));
}

#[test]
#[should_panic(expected = "exited before it was ready")]
fn child_process_that_exits_unready_is_reported() {
    let mut child = ChildProcess::start("child_role_handshake", "quitter", &[]);
    child.wait_ready(Duration::from_secs(30));
}

/// Child roles of the `child_process_*` tests.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_role_handshake() {
    if let Some(role) = child_role("handshake") {
        let word = role.var("REDISLOCK_TEST_WORD");
        role.ready(&word);
        role.wait_go(Duration::from_secs(30));
        role.report("word", &format!("{word}, went"));
    } else if let Some(role) = child_role("holder") {
        role.ready("");
        role.hold();
    }
}

#[test]
fn fork_and_check_runs_the_check_on_the_childs_copy() {
    let parent = std::process::id();
    let (v, held) = fork_and_check(vec![1, 2, 3], |mut v| {
        v.push(4);
        std::process::id() != parent && v == [1, 2, 3, 4]
    });
    assert!(held, "the check did not hold in the child");
    assert_eq!(v, [1, 2, 3], "the parent's copy changed");
    let ((), held) = fork_and_check((), |()| false);
    assert!(!held);
    let ((), held) = fork_and_check((), |()| panic!("a check that panics fails"));
    assert!(!held);
}

/// A forked child that hangs is a failure with its threads' stacks within the bound, not a
/// test that waits for it forever; and it is killed.
#[test]
fn fork_and_check_reports_a_hung_child_and_kills_it() {
    let started = Instant::now();
    let hung = std::panic::catch_unwind(|| {
        fork_and_check_within(Duration::from_secs(2), (), |()| {
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    });
    let message = match hung {
        Ok(_) => panic!("a hung forked child was reported as ended"),
        Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(
        message.contains("still ran after 2s (killed)"),
        "unexpected report: {message}"
    );
    assert!(
        message.lines().count() > 1,
        "no thread in the report: {message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the report took {:?}",
        started.elapsed()
    );
    let pid: i32 = message
        .split_whitespace()
        .nth(3)
        .and_then(|p| p.parse().ok())
        .expect("the report names the child");
    // SAFETY: kill(2) with signal 0 only asks whether the process exists.
    let alive = unsafe { libc::kill(pid, 0) } == 0;
    assert!(!alive, "the hung child {pid} was left running");
}

#[test]
fn a_shared_setup_is_one_per_topology_and_answers() {
    let a = Shared::get(Topology::Single);
    assert!(std::ptr::eq(a, Shared::get(Topology::Single)));
    assert!(a.url().starts_with("redis://127.0.0.1:"), "{}", a.url());
    assert!(!a.url().contains(":6379/"));
    let key = unique_name("selftest-shared");
    set(&mut a.conn_for(&key), &key, "v");
    assert_eq!(get(&mut a.conns_for(&key)[0], &key).as_deref(), Some("v"));
    let m = Shared::get(Topology::Redlock);
    assert_eq!(m.nodes().len(), 3);
    assert_eq!(m.conns_for(&key).len(), 3);
    assert!(m.url().starts_with("redlock://"));
}
