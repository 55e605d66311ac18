//! `redislock` misconfigured as a new user would: TLS to a plain server or to a port that never
//! answers fails within twice `--timeout` (exit 69, the message naming TLS); a wrong password
//! exits 78 with the server's words; `elect` while another candidate leads says so; and SIGTERM
//! or SIGINT end a `redislock` stuck connecting within a second (exit 128 + N).

use std::process::{Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::{Shared, Topology, silent_port, unique_name};

mod common;

use common::{SURELY, redislock, wait_timeout};

redislock_testkit::shared_keeper!();

/// `--timeout` of the runs that must fail within twice it.
const TIMEOUT: Duration = Duration::from_millis(500);

fn plain_port() -> u16 {
    Shared::get(Topology::Single).nodes()[0]
}

/// `redislock --url URL --timeout 500ms ARGS...`, its output and how long it took.
fn run(url: &str, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = redislock(url)
        .args(["--url", url, "--timeout", "500ms"])
        .args(args)
        .output()
        .expect("redislock runs");
    (out, started.elapsed())
}

#[track_caller]
fn fails_with(url: &str, args: &[&str], status: i32, words: &[&str]) -> String {
    let (out, took) = run(url, args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    println!(
        "{url}: exit {:?} after {} ms: {err}",
        out.status.code(),
        took.as_millis()
    );
    assert_eq!(out.status.code(), Some(status), "{err}");
    for w in words {
        assert!(err.contains(w), "no {w:?} in: {err}");
    }
    assert!(took < 2 * TIMEOUT, "{took:?}: {err}");
    err
}

#[test]
fn tls_to_a_plain_server_or_a_silent_port_exits_69_within_twice_the_timeout() {
    let (_l, silent) = silent_port();
    let run_true = ["run", "--no-wait", "mc", "--", "true"];
    for port in [plain_port(), silent] {
        let url = format!("rediss://127.0.0.1:{port}/");
        fails_with(&url, &run_true, 69, &["TLS", "redis://"]);
    }
}

#[test]
fn a_wrong_password_exits_78_with_the_servers_words() {
    let user = unique_name("cli-user");
    let mut admin = Shared::get(Topology::Single).conn_for("x");
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg(&["on", ">right", "~*", "&*", "+@all"][..])
        .query::<()>(&mut admin)
        .unwrap();
    let url = format!("redis://{user}:wrong@127.0.0.1:{}/", plain_port());
    let err = fails_with(
        &url,
        &["run", "--no-wait", "mc", "--", "true"],
        78,
        &[
            "WRONGPASS invalid username-password pair",
            "check the user and password",
        ],
    );
    assert!(!err.contains("wrong"), "{err}");
}

#[test]
fn a_user_without_a_command_exits_78_naming_it() {
    let user = unique_name("cli-noset");
    let mut admin = Shared::get(Topology::Single).conn_for("x");
    redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&user)
        .arg(&["on", ">pw", "~*", "&*", "+@all", "-set"][..])
        .query::<()>(&mut admin)
        .unwrap();
    let url = format!("redis://{user}:pw@127.0.0.1:{}/", plain_port());
    fails_with(
        &url,
        &["run", "--no-wait", "mc", "--", "true"],
        78,
        &["NOPERM", "'set'", "lacks a command"],
    );
}

#[test]
fn elect_while_another_candidate_leads_says_so() {
    let url = format!("redis://127.0.0.1:{}/", plain_port());
    let name = unique_name("cli-elect");
    let mut leader = redislock(&url)
        .args(["elect", &name, "--id", "a", "--", "sleep", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let err = loop {
        let (out, _) = run(
            &url,
            &["elect", &name, "--id", "b", "--no-wait", "--", "true"],
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.code() == Some(75) || started.elapsed() > SURELY {
            break err;
        }
        thread::sleep(Duration::from_millis(50)); // until "a" leads
    };
    println!("{err}");
    assert!(
        err.contains(&format!("election {name:?} has another leader")),
        "{err}"
    );
    let (out, _) = run(
        &url,
        &["elect", &name, "--id", "b", "--wait", "200ms", "--", "true"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(75), "{err}");
    assert!(err.contains("another candidate leads"), "{err}");
    let _ = leader.kill();
    let _ = leader.wait();
}

/// A `redislock run` with a long `--timeout` stuck connecting (a TLS handshake, or a plain
/// server's first reply) ends within a second of SIGTERM or SIGINT, exit 128 + N.
#[test]
fn a_signal_ends_redislock_while_it_connects() {
    let (_l, port) = silent_port();
    for (scheme, signo) in [
        ("rediss", libc::SIGTERM),
        ("redis", libc::SIGTERM),
        ("rediss", libc::SIGINT),
    ] {
        let url = format!("{scheme}://127.0.0.1:{port}/");
        let mut child = redislock(&url)
            .args([
                "--url",
                &url,
                "--timeout",
                "30s",
                "run",
                "--no-wait",
                "mc",
                "--",
                "true",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        thread::sleep(Duration::from_millis(300)); // connecting by now
        let sent = Instant::now();
        // SAFETY: kill has no memory effects.
        unsafe {
            libc::kill(child.id() as libc::pid_t, signo);
        }
        let status = wait_timeout(&mut child, SURELY);
        let took = sent.elapsed();
        println!(
            "{url}: signal {signo}: {status} after {} ms",
            took.as_millis()
        );
        assert_eq!(status.code(), Some(128 + signo), "{url}");
        assert!(took < Duration::from_secs(1), "{url}: {took:?}");
    }
}
