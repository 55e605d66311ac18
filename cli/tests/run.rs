//! `redislock` as a process, against real `redis-server` processes from the test kit: the lock
//! held while a command runs, exit statuses, signals, a lost lock, `kill -9`, bad URLs and
//! servers, and the same `run` on every topology.

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::{RedisServer, Shared, Topology, eventually, free_port, unique_name};

mod common;

use common::{Dir, SURELY, exit_and_stderr, redislock, until_term, wait_timeout};

redislock_testkit::shared_keeper!();

fn output(c: &mut Command) -> Output {
    c.output().expect("redislock runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or_else(|| panic!("killed: {o:?}"))
}

fn exists(server: &RedisServer, key: &str) -> bool {
    redislock_testkit::exists(&mut server.conn(), key)
}

/// Waits until `file` exists (the command has started), with the child still running.
/// Holds `name` as Redisson's lock writes it (its client id and thread, reentered `count` times),
/// for 30 s.
fn hold_as_redisson(con: &mut redis::Connection, name: &str, count: u32) {
    let () = redis::cmd("HSET")
        .arg(name)
        .arg("3f1c0e9a-6b1f-4d55-9a51-2b7b1f0c9d10:1")
        .arg(count)
        .query(con)
        .unwrap();
    let () = redis::cmd("PEXPIRE")
        .arg(name)
        .arg(30_000)
        .query(con)
        .unwrap();
}

fn wait_for_file(file: &Path, child: &mut Child) {
    let ok = eventually(SURELY, || {
        assert!(child.try_wait().unwrap().is_none(), "redislock ended early");
        file.exists()
    });
    assert!(ok, "{} never appeared", file.display());
}

fn kill(pid: u32, signo: i32) {
    // SAFETY: kill has no memory effects.
    unsafe {
        libc::kill(pid as libc::pid_t, signo);
    }
}

/// Whether process `pid` is gone (or a zombie: dead, not reaped by its new parent yet).
fn process_gone(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

// ---------------------------------------------------------------------------------------------

/// 20 `run`s at once, each a read-modify-write of a counter file with a sleep in between: the
/// counter ends exact.
#[test]
fn twenty_concurrent_runs_keep_a_counter_exact() {
    let server = RedisServer::start();
    let dir = Dir::new();
    let counter = dir.path("counter");
    fs::write(&counter, "0\n").unwrap();
    let script = format!(
        "n=$(cat '{0}'); sleep 0.01; echo $((n + 1)) > '{0}'",
        counter.display()
    );
    let children: Vec<Child> = (0..20)
        .map(|_| {
            redislock(&server.url())
                .args(["run", "counter", "--", "sh", "-c", &script])
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(wait_timeout(&mut c, SURELY * 3).success());
    }
    assert_eq!(fs::read_to_string(&counter).unwrap().trim(), "20");
    assert!(!exists(&server, "counter"), "released at the end");
}

/// With `--no-wait`, those that find the lock held exit 75 at once, without running their
/// command.
#[test]
fn no_wait_exits_75_at_once_when_held() {
    let server = RedisServer::start();
    let dir = Dir::new();
    // One holder that keeps the lock for long.
    let mut holder = redislock(&server.url())
        .args(["run", "busy", "--", "sh", "-c"])
        .arg(format!("touch '{}'; sleep 60", dir.path("held").display()))
        .spawn()
        .unwrap();
    wait_for_file(&dir.path("held"), &mut holder);
    let started = Instant::now();
    let children: Vec<(Child, PathBuf)> = (0..20)
        .map(|i| {
            let ran = dir.path(&format!("ran-{i}"));
            let c = redislock(&server.url())
                .args(["run", "--no-wait", "busy", "--", "touch"])
                .arg(&ran)
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (c, ran)
        })
        .collect();
    for (c, ran) in children {
        let o = c.wait_with_output().unwrap();
        assert_eq!(code(&o), 75, "{}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
        assert!(!ran.exists(), "the command ran without the lock");
    }
    // Far less than the holder's 60 s: they did not wait.
    assert!(started.elapsed() < SURELY, "{:?}", started.elapsed());
    kill(holder.id(), libc::SIGTERM);
    let s = wait_timeout(&mut holder, SURELY);
    assert_eq!(s.code(), Some(128 + libc::SIGTERM));
    assert!(!exists(&server, "busy"));

    // 20 at once with nobody holding it: one (at least) runs, the others exit 75 while it runs.
    let children: Vec<Child> = (0..20)
        .map(|_| {
            redislock(&server.url())
                .args(["run", "--no-wait", "race", "--", "sleep", "3"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let codes: Vec<i32> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap().status.code().unwrap())
        .collect();
    let ran = codes.iter().filter(|c| **c == 0).count();
    assert!(ran >= 1, "{codes:?}");
    assert_eq!(
        codes.iter().filter(|c| **c == 75).count(),
        20 - ran,
        "{codes:?}"
    );
}

/// The key deleted, or taken over, under a running command: the command gets SIGTERM within a
/// third of the lease plus a margin, and `redislock` exits 76.
#[test]
fn a_lost_lock_terminates_the_command_and_exits_76() {
    let server = RedisServer::start();
    let lease = Duration::from_secs(3);
    for takeover in [false, true] {
        let dir = Dir::new();
        let (started, termed) = (dir.path("started"), dir.path("termed"));
        let script = until_term(&started, &termed);
        let mut child = redislock(&server.url())
            .args(["run", "--lease", "3s", "lost", "--", "sh", "-c", &script])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_file(&started, &mut child);
        let mut con = server.conn();
        let t0 = Instant::now();
        if takeover {
            redis::cmd("SET")
                .arg("lost")
                .arg("someone-else")
                .arg("PX")
                .arg(60_000)
                .exec(&mut con)
                .unwrap();
        } else {
            redis::cmd("DEL").arg("lost").exec(&mut con).unwrap();
        }
        let ok = eventually(SURELY, || termed.exists());
        let took = t0.elapsed();
        assert!(ok, "the command never got SIGTERM");
        // Renewal runs every lease/3; the margin is for a loaded machine, and stays well below
        // the time the command would otherwise run (forever).
        assert!(took < lease / 3 + Duration::from_secs(5), "{took:?}");
        let (status, err) = exit_and_stderr(&mut child);
        assert_eq!(status.code(), Some(76), "{err}");
        // Lock names are quoted as the library's messages quote them: "name".
        assert!(err.contains(r#"lock "lost" was lost"#), "{err}");
        assert!(!err.contains("'lost'"), "{err}");
        if takeover {
            // The other owner's key is left alone.
            assert_eq!(
                redislock_testkit::get(&mut con, "lost").as_deref(),
                Some("someone-else")
            );
            redis::cmd("DEL").arg("lost").exec(&mut con).unwrap();
        }
    }
}

/// `--at-least`: a command that ends at once leaves the lock held until then (a second run
/// with `--no-wait` exits 75), and the name is free after it; the cron recipe of docs/cli.md.
#[test]
fn at_least_keeps_the_lock_after_a_quick_command() {
    let server = RedisServer::start();
    let name = unique_name("at-least");
    let started = Instant::now();
    let o = output(redislock(&server.url()).args(["run", "--at-least", "2s", &name, "--", "true"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let p = redislock_testkit::pttl(&mut server.conn(), &name);
    assert!(p > 0 && p <= 2000, "PTTL {p}");
    let o = output(redislock(&server.url()).args(["run", "--no-wait", &name, "--", "true"]));
    assert_eq!(code(&o), 75, "{}", stderr(&o));
    assert!(eventually(SURELY, || !exists(&server, &name)));
    assert!(started.elapsed() >= Duration::from_secs(2));
    let o = output(redislock(&server.url()).args(["run", "--no-wait", &name, "--", "true"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // Bad input: another kind of lock (64), a minimum past the maximum (78); nothing held.
    let o = output(redislock(&server.url()).args([
        "run",
        "--read",
        "--at-least",
        "1s",
        &name,
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exclusive locks only"),
        "{}",
        stderr(&o)
    );
    let o = output(redislock(&server.url()).args([
        "run",
        "--at-least",
        "2s",
        "--at-most",
        "1s",
        &name,
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 78, "{}", stderr(&o));
    assert!(stderr(&o).contains("at_least"), "{}", stderr(&o));
    assert!(!exists(&server, &name));
}

/// `--at-most`: renewal stops then, the command gets SIGTERM and redislock exits 76.
#[test]
fn at_most_terminates_the_command_and_exits_76() {
    let server = RedisServer::start();
    let name = unique_name("at-most");
    let dir = Dir::new();
    let (started, termed) = (dir.path("started"), dir.path("termed"));
    let script = until_term(&started, &termed);
    let mut child = redislock(&server.url())
        .args([
            "run",
            "--lease",
            "600ms",
            "--at-most",
            "2s",
            &name,
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&started, &mut child);
    let t0 = Instant::now();
    // Renewed past its first lease, then stopped at the 2 s.
    thread::sleep(Duration::from_millis(1000));
    assert!(!termed.exists(), "stopped before --at-most");
    assert!(exists(&server, &name));
    assert!(
        eventually(SURELY, || termed.exists()),
        "the command never got SIGTERM"
    );
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    let (status, err) = exit_and_stderr(&mut child);
    assert_eq!(status.code(), Some(76), "{err}");
    assert!(err.contains("--at-most"), "{err}");
    // The key expires on its own at the 2 s (the loss is reported a drift margin before).
    assert!(eventually(Duration::from_secs(1), || !exists(
        &server, &name
    )));
}

/// `--on-lost kill` kills the command at once; `--on-lost ignore` lets it finish; both exit 76.
#[test]
fn on_lost_kill_and_ignore() {
    let server = RedisServer::start();
    for (action, want_killed) in [("kill", true), ("ignore", false)] {
        let dir = Dir::new();
        let (started, finished) = (dir.path("started"), dir.path("finished"));
        // The command ends on its own once `go` exists; SIGTERM is ignored.
        let script = format!(
            "trap '' TERM; touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done; touch '{}'",
            started.display(),
            dir.path("go").display(),
            finished.display()
        );
        let mut child = redislock(&server.url())
            .args([
                "run",
                "--lease",
                "3s",
                "--on-lost",
                action,
                "onlost",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_file(&started, &mut child);
        redis::cmd("DEL")
            .arg("onlost")
            .exec(&mut server.conn())
            .unwrap();
        if want_killed {
            let status = wait_timeout(&mut child, SURELY);
            assert_eq!(status.code(), Some(76), "{action}");
            assert!(!finished.exists(), "{action}: the command ran on");
        } else {
            // It keeps running past the loss (renewal sees it within 1 s), then ends.
            thread::sleep(Duration::from_secs(3));
            assert!(
                child.try_wait().unwrap().is_none(),
                "{action}: the command was stopped"
            );
            fs::write(dir.path("go"), "").unwrap();
            let status = wait_timeout(&mut child, SURELY);
            assert_eq!(status.code(), Some(76), "{action}");
            assert!(finished.exists());
        }
    }
}

/// `kill -9` of `redislock`: its command dies too (the parent-death signal), and the lock,
/// no longer renewed, frees itself within its lease.
#[test]
fn kill_9_of_redislock_ends_the_command_and_the_lock_expires() {
    let server = RedisServer::start();
    let dir = Dir::new();
    let pidfile = dir.path("pid");
    let mut child = redislock(&server.url())
        .args(["run", "--lease", "2s", "k9", "--", "sh", "-c"])
        .arg(format!(
            "echo $$ > '{}.tmp'; mv '{0}.tmp' '{0}'; exec sleep 60",
            pidfile.display()
        ))
        .spawn()
        .unwrap();
    wait_for_file(&pidfile, &mut child);
    let command_pid: u32 = fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!process_gone(command_pid));
    assert!(exists(&server, "k9"));
    kill(child.id(), libc::SIGKILL);
    let killed_at = Instant::now();
    child.wait().unwrap();
    assert!(
        eventually(SURELY, || process_gone(command_pid)),
        "the command runs on"
    );
    // Within its lease (2 s) of the kill: a margin for a loaded machine, far below the 60 s
    // the command would have held it.
    assert!(redislock_testkit::pttl(&mut server.conn(), "k9") <= 2000);
    assert!(
        eventually(Duration::from_secs(2) + Duration::from_secs(5), || !exists(
            &server, "k9"
        )),
        "the lock stayed after its lease"
    );
    // It went with its lease (2 s), not before: nobody released it.
    assert!(
        killed_at.elapsed() > Duration::from_millis(500),
        "{:?}",
        killed_at.elapsed()
    );
}

/// SIGTERM to `redislock`: forwarded; a command that ignores it gets SIGKILL after
/// `--kill-after`; the lock is released as soon as the command has ended.
#[test]
fn sigterm_is_forwarded_then_sigkill_after_kill_after_and_the_lock_released() {
    let server = RedisServer::start();
    for ignores in [false, true] {
        let dir = Dir::new();
        let (started, termed) = (dir.path("started"), dir.path("termed"));
        let on_term = if ignores {
            "touch \"$T\""
        } else {
            "touch \"$T\"; exit 0"
        };
        let script = format!(
            "trap '{on_term}' TERM; touch '{}'; while :; do sleep 0.05; done",
            started.display()
        );
        let mut child = redislock(&server.url())
            .env("T", &termed)
            .args([
                "run",
                "--lease",
                "60s",
                "--kill-after",
                "1s",
                "term",
                "--",
                "sh",
                "-c",
                &script,
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_file(&started, &mut child);
        let t0 = Instant::now();
        kill(child.id(), libc::SIGTERM);
        let status = wait_timeout(&mut child, SURELY);
        assert!(termed.exists(), "SIGTERM was not forwarded");
        if ignores {
            assert_eq!(status.code(), Some(128 + libc::SIGKILL));
            assert!(
                t0.elapsed() >= Duration::from_secs(1),
                "SIGKILL before --kill-after"
            );
        } else {
            assert_eq!(status.code(), Some(0), "the command's own status");
        }
        // Released, not left to its 60 s lease.
        assert!(!exists(&server, "term"));
    }
}

/// SIGINT while waiting cancels the wait: exit 130, the command never runs, no waiter left.
#[test]
fn sigint_while_waiting_exits_130() {
    let server = RedisServer::start();
    let dir = Dir::new();
    let client = redislock::Client::open(&server.url()).unwrap();
    let held = client.acquire("waited", Duration::from_secs(5)).unwrap();
    let ran = dir.path("ran");
    let mut child = redislock(&server.url())
        .args(["run", "waited", "--", "touch"])
        .arg(&ran)
        .spawn()
        .unwrap();
    let mut con = server.conn();
    assert!(eventually(SURELY, || redislock_testkit::llen(
        &mut con,
        "{waited}:q"
    ) == 1));
    kill(child.id(), libc::SIGINT);
    assert_eq!(wait_timeout(&mut child, SURELY).code(), Some(130));
    assert!(!ran.exists());
    held.release().unwrap();
    assert!(!exists(&server, "waited"));
}

/// The command's own status, 128+N for a signal, 126 and 127; its environment.
#[test]
fn exit_statuses_and_environment() {
    let server = RedisServer::start();
    let run = |args: &[&str]| output(redislock(&server.url()).arg("run").args(args));
    let o = run(&[
        "--fencing",
        "env",
        "--",
        "sh",
        "-c",
        "echo $REDISLOCK_NAME $REDISLOCK_FENCING_TOKEN; exit 3",
    ]);
    assert_eq!(code(&o), 3);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "env 1\n");
    let o = run(&[
        "env",
        "--",
        "sh",
        "-c",
        "echo ${REDISLOCK_FENCING_TOKEN:-none}",
    ]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "none\n");
    assert_eq!(code(&run(&["sig", "--", "sh", "-c", "kill -9 $$"])), 137);
    let o = run(&["x", "--", "/nonexistent/command"]);
    assert_eq!(code(&o), 127);
    assert_eq!(stderr(&o).lines().count(), 1);
    assert_eq!(code(&run(&["x", "--", "/dev/null"])), 126);
    // Usage errors: 64, one line.
    for args in [
        &["x"][..],
        &["--bogus", "x", "--", "true"],
        &["--read", "--write", "x", "--", "true"],
        &["--wait", "3 weeks", "x", "--", "true"],
        &["--permits", "4/3", "x", "--", "true"],
    ] {
        let o = run(args);
        assert_eq!(code(&o), 64, "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{args:?}: {}", stderr(&o));
    }
    assert!(!exists(&server, "x") && !exists(&server, "env"));
}

/// Read/write lock and semaphore: readers share, permits count.
#[test]
fn read_write_and_permits() {
    let server = RedisServer::start();
    let dir = Dir::new();
    let mut readers = Vec::new();
    for i in 0..2 {
        let f = dir.path(&format!("r{i}"));
        let mut c = redislock(&server.url())
            .args(["run", "--read", "doc", "--", "sh", "-c"])
            .arg(format!("touch '{}'; sleep 60", f.display()))
            .spawn()
            .unwrap();
        wait_for_file(&f, &mut c);
        readers.push(c);
    }
    let o =
        output(redislock(&server.url()).args(["run", "--write", "--no-wait", "doc", "--", "true"]));
    assert_eq!(code(&o), 75, "{}", stderr(&o));
    let o = output(redislock(&server.url()).args(["status", "doc"]));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("holders: 2"),
        "{o:?}"
    );
    for mut r in readers {
        kill(r.id(), libc::SIGTERM);
        wait_timeout(&mut r, SURELY);
    }
    let o =
        output(redislock(&server.url()).args(["run", "--write", "--no-wait", "doc", "--", "true"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));

    let f = dir.path("p");
    let mut two = redislock(&server.url())
        .args(["run", "--permits", "2/3", "pdf", "--", "sh", "-c"])
        .arg(format!("touch '{}'; sleep 60", f.display()))
        .spawn()
        .unwrap();
    wait_for_file(&f, &mut two);
    let one = |take: &str| {
        code(&output(redislock(&server.url()).args([
            "run",
            "--no-wait",
            "--permits",
            take,
            "pdf",
            "--",
            "true",
        ])))
    };
    assert_eq!(one("1/3"), 0);
    assert_eq!(one("2/3"), 75);
    kill(two.id(), libc::SIGTERM);
    wait_timeout(&mut two, SURELY);
}

/// `--redisson`: the lock is Redisson's hash (a holder field with its hold count), which a plain
/// lock and another process's Redisson lock are refused by, and which a Redisson holder written
/// as Redisson writes it keeps out.
#[test]
fn redisson_locks_are_redissons_hash() {
    let server = RedisServer::start();
    let dir = Dir::new();
    let f = dir.path("r");
    let mut held = redislock(&server.url())
        .args(["run", "--redisson", "orders", "--", "sh", "-c"])
        .arg(format!("touch '{}'; sleep 60", f.display()))
        .spawn()
        .unwrap();
    wait_for_file(&f, &mut held);
    let mut con = server.conn();
    let kind: String = redis::cmd("TYPE").arg("orders").query(&mut con).unwrap();
    assert_eq!(kind, "hash");
    let holds: Vec<i64> = redis::cmd("HVALS").arg("orders").query(&mut con).unwrap();
    assert_eq!(holds, vec![1]);
    // Another Redisson lock finds it held; a plain lock finds it in use as another kind.
    for (kind, status) in [(&["--redisson"][..], 75), (&[], 78)] {
        let o = output(
            redislock(&server.url())
                .args(["run", "--no-wait"])
                .args(kind)
                .args(["orders", "--", "true"]),
        );
        assert_eq!(code(&o), status, "{kind:?}: {}", stderr(&o));
    }
    let o = output(redislock(&server.url()).args([
        "run",
        "--redisson",
        "--fencing",
        "x",
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    kill(held.id(), libc::SIGTERM);
    wait_timeout(&mut held, SURELY);
    assert!(!exists(&server, "orders"));

    // A holder as Redisson writes it (its client id and thread): refused until it is gone.
    hold_as_redisson(&mut con, "orders", 1);
    let o = output(redislock(&server.url()).args([
        "run",
        "--redisson",
        "--no-wait",
        "orders",
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 75, "{}", stderr(&o));
    let _: i64 = redis::cmd("DEL").arg("orders").query(&mut con).unwrap();
    let o = output(redislock(&server.url()).args([
        "run",
        "--redisson",
        "--no-wait",
        "orders",
        "--",
        "true",
    ]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// A plain `run --no-wait` on a name held as another kind (Redisson's hash as Redisson writes
/// it, a semaphore) is refused as a waiting `run` is: exit 78, "in use as another kind of
/// lock", the command not run; not 75 as if another plain lock held it.
#[test]
fn a_plain_no_wait_run_on_another_kinds_name_exits_78() {
    let server = RedisServer::start();
    let dir = Dir::new();
    let ran = dir.path("ran");
    let plain = |name: &str, wait: &[&str]| {
        let o = output(
            redislock(&server.url())
                .arg("run")
                .args(wait)
                .args([name, "--", "touch"])
                .arg(&ran),
        );
        assert_eq!(code(&o), 78, "{name} {wait:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("in use as another kind of lock"),
            "{}",
            stderr(&o)
        );
        assert!(!ran.exists());
    };
    let mut con = server.conn();
    hold_as_redisson(&mut con, "orders", 1);
    plain("orders", &["--no-wait"]);
    plain("orders", &["--wait", "1s"]);
    let held = dir.path("held");
    let mut sem = redislock(&server.url())
        .args(["run", "--permits", "1/3", "pdf", "--", "sh", "-c"])
        .arg(format!("touch '{}'; sleep 60", held.display()))
        .spawn()
        .unwrap();
    wait_for_file(&held, &mut sem);
    plain("pdf", &["--no-wait"]);
    plain("pdf", &["--wait", "1s"]);
    kill(sem.id(), libc::SIGTERM);
    wait_timeout(&mut sem, SURELY);
}

/// `status` of a name Redisson's lock holds says so, with its holders: the hash's fields.
#[test]
fn status_of_redissons_lock() {
    let server = RedisServer::start();
    let mut con = server.conn();
    hold_as_redisson(&mut con, "orders", 2);
    let o = output(redislock(&server.url()).args(["status", "orders"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        shown.contains("held: yes (redisson)\nholders: 1\nremaining lease: "),
        "{shown}"
    );
    let o = output(redislock(&server.url()).args(["status", "--json", "orders"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let json = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        json.contains("\"held\":true,\"held_as\":\"redisson\",\"holders\":1,"),
        "{json}"
    );
}

/// `acquire` prints a token, `extend` and `release` take it from the environment or standard
/// input (never argv), `status` never shows it.
#[test]
fn acquire_extend_release_status() {
    let server = RedisServer::start();
    let o = output(redislock(&server.url()).args(["acquire", "--lease", "20s", "job"]));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let token = String::from_utf8(o.stdout).unwrap().trim().to_owned();
    assert!(token.len() >= 16, "{token}");
    let mut con = server.conn();
    assert!(redislock_testkit::pttl(&mut con, "job") > 10_000);

    let o = output(redislock(&server.url()).args(["status", "job"]));
    assert_eq!(code(&o), 0);
    let shown = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        shown.contains("held: yes") && !shown.contains(&token),
        "{shown}"
    );
    let o = output(redislock(&server.url()).args(["status", "--json", "job"]));
    let json = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        json.contains("\"held\":true") && !json.contains(&token),
        "{json}"
    );

    // No token: usage error.
    let o = output(redislock(&server.url()).args(["extend", "job", "50s"]));
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    let o = output(
        redislock(&server.url())
            .env("REDISLOCK_OWNER_TOKEN", &token)
            .args(["extend", "job", "50s"]),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(redislock_testkit::pttl(&mut con, "job") > 40_000);
    // A wrong token: 76, the lock untouched.
    let o = output(
        redislock(&server.url())
            .env("REDISLOCK_OWNER_TOKEN", "0123456789abcdef0123")
            .args(["release", "job"]),
    );
    assert_eq!(code(&o), 76, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(r#"lock "job" is not held with this owner token"#),
        "{}",
        stderr(&o)
    );
    assert!(exists(&server, "job"));
    // From standard input.
    let mut c = redislock(&server.url())
        .args(["release", "job"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(c.stdin.take().unwrap(), "{token}").unwrap();
    assert!(c.wait().unwrap().success());
    assert!(!exists(&server, "job"));
    let o = output(redislock(&server.url()).args(["status", "job"]));
    assert_eq!(code(&o), 1);
    assert!(String::from_utf8_lossy(&o.stdout).contains("held: no"));
}

/// Bad URL, unreachable server, a server that is not Redis, a wrong password: one line on
/// stderr and the documented status, within the timeout + 1 s. A server that accepts the
/// connection and never answers takes up to twice the timeout: the attempt timed out after it
/// went out, so it may have been applied, and the library gives it back (a second call that
/// times out too).
#[test]
fn connection_failures_are_one_line_with_their_status() {
    let timeout = Duration::from_secs(1);
    let within = timeout + Duration::from_secs(1);
    let check_within = |url: &str, password: Option<&str>, status: i32, bound: Duration| {
        let mut c = redislock(url);
        c.args(["--timeout", "1s", "run", "--no-wait", "x", "--", "true"]);
        if let Some(p) = password {
            c.env("REDISLOCK_PASSWORD", p);
        }
        let t0 = Instant::now();
        let o = output(&mut c);
        let took = t0.elapsed();
        assert_eq!(code(&o), status, "{url}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1, "{url}: {}", stderr(&o));
        assert!(stderr(&o).starts_with("redislock: "), "{}", stderr(&o));
        // The process's own start-up is included: the second is its margin.
        assert!(took < bound, "{url}: {took:?}");
        stderr(&o)
    };
    let check = |url: &str, password: Option<&str>, status: i32| {
        check_within(url, password, status, within)
    };
    check("http://example.com/", None, 78);
    check("redis://127.0.0.1:notaport/", None, 78);
    check(&format!("redis://127.0.0.1:{}/", free_port()), None, 69);

    // Not Redis: accepts and answers nonsense, or nothing.
    for reply in [&b"HTTP/1.1 400 Bad Request\r\n\r\n"[..], b""] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let mut held = Vec::new();
            listener.set_nonblocking(true).unwrap();
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if let Ok((mut s, _)) = listener.accept() {
                    let _ = s.write_all(reply);
                    held.push(s);
                }
                thread::sleep(Duration::from_millis(5));
            }
        });
        let bound = if reply.is_empty() {
            timeout + within
        } else {
            within
        };
        check_within(&format!("redis://127.0.0.1:{port}/"), None, 69, bound);
        drop(server);
    }

    let server = RedisServer::start_with(&["--requirepass", "s3cret:/@"]);
    let e = check(&server.url(), Some("wrong"), 78);
    assert!(!e.contains("wrong"), "the password is shown: {e}");
    check(&server.url_with_password("wrong"), None, 78);
    // The right password from the environment overrides the URL's wrong one.
    let o = output(
        redislock(&server.url_with_password("wrong"))
            .env("REDISLOCK_PASSWORD", "s3cret:/@")
            .args(["run", "x", "--", "true"]),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// The same `run` against a Sentinel, a Cluster and a Redlock URL; the command sees the lock
/// held (`status` from inside it).
#[test]
fn run_on_sentinel_cluster_and_redlock() {
    for t in [Topology::Sentinel, Topology::Cluster, Topology::Redlock] {
        let shared = Shared::get(t);
        let name = unique_name("cli-topology");
        let fencing = if t == Topology::Redlock {
            "--lease=5s"
        } else {
            "--fencing"
        };
        let o = output(
            redislock(shared.url())
                .args(["run", fencing, &name, "--", "sh", "-c"])
                .arg(format!(
                    "{} status \"$REDISLOCK_NAME\" && exit 7",
                    env!("CARGO_BIN_EXE_redislock")
                )),
        );
        assert_eq!(code(&o), 7, "{t:?}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("held: yes (exclusive)"), "{t:?}: {out}");
        let o = output(redislock(shared.url()).args(["status", &name]));
        assert_eq!(
            code(&o),
            1,
            "{t:?}: released: {}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
}

/// `--help` has examples and the exit statuses; `--version`; the man page and completions come
/// from the same definitions.
#[test]
fn help_version_man_and_completions() {
    let o = output(redislock("redis://127.0.0.1:1/").arg("--help"));
    let help = String::from_utf8_lossy(&o.stdout);
    assert_eq!(code(&o), 0);
    for part in [
        "Examples:",
        "Exit statuses:",
        "75",
        "76",
        "REDISLOCK_PASSWORD",
        "run",
        "Durations: 500ms, 30s, 2m, 1h, 1d",
    ] {
        assert!(help.contains(part), "--help lacks {part}: {help}");
    }
    let o = output(redislock("").arg("--version"));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        format!("redislock {}", env!("CARGO_PKG_VERSION"))
    );
    let o = output(redislock("").arg("man"));
    let man = String::from_utf8_lossy(&o.stdout);
    assert!(man.starts_with(".ie") || man.contains(".TH"), "{man}");
    assert!(
        man.contains("Exit statuses") && man.contains("run"),
        "{man}"
    );
    let o = output(redislock("").args(["man", "run"]));
    let man = String::from_utf8_lossy(&o.stdout);
    assert!(
        man.contains(r"redislock\-run") && man.contains(r"kill\-after"),
        "{man}"
    );
    for shell in ["bash", "zsh", "fish"] {
        let o = output(redislock("").args(["completions", shell]));
        assert_eq!(code(&o), 0);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("kill-after"),
            "{shell}"
        );
    }
}
