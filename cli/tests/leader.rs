//! `redislock elect` and `redislock leader` as processes, against real `redis-server` processes
//! from the test kit: the command run while leader with its epoch, who leads as lines and
//! JSON, a killed leader replaced within its lease + 1 s with a larger epoch, a lost leadership
//! (SIGTERM, exit 76), `leader --watch` woken by a change, bad input.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::{RedisServer, eventually, unique_name};

mod common;

use common::{Dir, SURELY, exit_and_stderr, redislock, wait_timeout};

/// A child process killed and reaped when dropped, also when a test fails half way.
struct Proc(Child);

impl std::ops::Deref for Proc {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Proc {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An `elect` whose command writes its epoch to `epoch_file`, then runs until killed (or
/// writes `termed` and exits on SIGTERM).
fn elect(url: &str, name: &str, id: &str, lease: &str, dir: &Dir, tag: &str) -> Proc {
    let script = format!(
        "trap 'touch \"{termed}\"; exit 0' TERM; echo $REDISLOCK_EPOCH > \"{epoch}.tmp\"; \
         mv \"{epoch}.tmp\" \"{epoch}\"; while :; do sleep 0.05; done",
        termed = dir.path(&format!("{tag}.termed")).display(),
        epoch = dir.path(&format!("{tag}.epoch")).display(),
    );
    Proc(
        redislock(url)
            .args(["elect", name, "--id", id, "--lease", lease])
            .args(["--", "sh", "-c", &script])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn epoch_of(path: &Path) -> Option<u64> {
    fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn leader(url: &str, args: &[&str]) -> (i32, String) {
    let o = redislock(url).arg("leader").args(args).output().unwrap();
    (
        o.status.code().unwrap(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn elect_runs_the_command_as_leader_and_leader_shows_it() {
    let server = RedisServer::start();
    let url = server.url();
    let name = unique_name("cli-elect");
    let dir = Dir::new();
    assert_eq!(
        leader(&url, &[&name]),
        (1, format!("election: {name}\nleader: none\n"))
    );
    let (code, json) = leader(&url, &["--json", &name]);
    assert_eq!(code, 1);
    assert!(json.contains("\"leader\":null"), "{json}");

    let mut first = elect(&url, &name, "host-a", "30s", &dir, "a");
    let epoch_file = dir.path("a.epoch");
    assert!(eventually(SURELY, || epoch_of(&epoch_file).is_some()));
    let epoch = epoch_of(&epoch_file).unwrap();
    assert!(epoch >= 1);
    let (code, text) = leader(&url, &[&name]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("leader: host-a\n"), "{text}");
    assert!(text.contains(&format!("epoch: {epoch}\n")), "{text}");
    let (code, json) = leader(&url, &["--json", &name]);
    assert_eq!(code, 0);
    assert!(
        json.starts_with(&format!(
            "{{\"election\":\"{name}\",\"leader\":\"host-a\",\"epoch\":{epoch},\"remaining_ms\":"
        )),
        "{json}"
    );
    // Another campaigner that does not wait: exit 75.
    let o = redislock(&url)
        .args(["elect", &name, "--id", "host-b", "--no-wait", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(75));

    // SIGTERM to redislock: forwarded, the command ends, redislock resigns.
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGTERM) };
    wait_timeout(&mut first, SURELY);
    assert!(dir.path("a.termed").exists());
    assert_eq!(leader(&url, &[&name]).0, 1, "resigned");
}

#[test]
fn a_killed_leader_is_replaced_within_its_lease_with_a_larger_epoch() {
    let server = RedisServer::start();
    let url = server.url();
    let name = unique_name("cli-killed");
    let dir = Dir::new();
    let mut old = elect(&url, &name, "host-a", "1s", &dir, "a");
    assert!(eventually(SURELY, || epoch_of(&dir.path("a.epoch")).is_some()));
    let old_epoch = epoch_of(&dir.path("a.epoch")).unwrap();
    let mut next = elect(&url, &name, "host-b", "1s", &dir, "b");
    // Well past a lease, the living leader still leads.
    thread::sleep(Duration::from_secs(2));
    assert!(epoch_of(&dir.path("b.epoch")).is_none());
    old.kill().unwrap(); // SIGKILL: its command dies with it (parent-death signal)
    let killed = Instant::now();
    let _ = old.wait();
    assert!(eventually(SURELY, || epoch_of(&dir.path("b.epoch")).is_some()));
    let took = killed.elapsed();
    assert!(
        took < Duration::from_secs(2),
        "elected {took:?} after the kill"
    );
    assert!(epoch_of(&dir.path("b.epoch")).unwrap() > old_epoch);
    let (_, text) = leader(&url, &[&name]);
    assert!(text.contains("leader: host-b\n"), "{text}");
    next.kill().unwrap();
    let _ = next.wait();
}

#[test]
fn a_lost_leadership_terminates_the_command_and_exits_76() {
    let server = RedisServer::start();
    let url = server.url();
    let name = unique_name("cli-lost");
    let dir = Dir::new();
    let mut child = elect(&url, &name, "host-a", "3s", &dir, "a");
    assert!(eventually(SURELY, || epoch_of(&dir.path("a.epoch")).is_some()));
    redis::cmd("DEL")
        .arg(&name)
        .exec(&mut server.conn())
        .unwrap();
    assert!(
        eventually(SURELY, || dir.path("a.termed").exists()),
        "the command never got SIGTERM"
    );
    let (status, err) = exit_and_stderr(&mut child);
    assert_eq!(status.code(), Some(76), "{err}");
    assert!(err.contains("leadership"), "{err}");
}

#[test]
fn leader_watch_prints_each_change_when_it_happens() {
    let server = RedisServer::start();
    let url = server.url();
    let name = unique_name("cli-watch");
    let dir = Dir::new();
    let mut watch = Proc(
        redislock(&url)
            .args(["leader", "--watch", "--json", &name])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send((line, Instant::now())).is_err() {
                break;
            }
        }
    });
    let (first, _) = rx.recv_timeout(SURELY).unwrap();
    assert!(first.contains("\"leader\":null"), "{first}");
    // A leader with a long lease: only the election's message can wake the watch in time.
    let mut a = elect(&url, &name, "host-a", "60s", &dir, "a");
    assert!(eventually(SURELY, || epoch_of(&dir.path("a.epoch")).is_some()));
    let elected = Instant::now();
    let (line, at) = rx.recv_timeout(SURELY).unwrap();
    assert!(line.contains("\"leader\":\"host-a\""), "{line}");
    assert!(at.saturating_duration_since(elected) < Duration::from_secs(3));
    // The resign (SIGTERM to the leader) is seen too.
    // SAFETY: kill has no memory effects.
    unsafe { libc::kill(a.id() as libc::pid_t, libc::SIGTERM) };
    let resigned = Instant::now();
    wait_timeout(&mut a, SURELY);
    let (line, at) = rx.recv_timeout(SURELY).unwrap();
    assert!(line.contains("\"leader\":null"), "{line}");
    assert!(at - resigned < Duration::from_secs(3));
    watch.kill().unwrap();
    let _ = watch.wait();
    drop(rx);
    reader.join().unwrap();
}

#[test]
fn bad_input_is_refused_clearly() {
    let server = RedisServer::start();
    let url = server.url();
    let name = unique_name("cli-bad");
    let long = "x".repeat(300);
    for (args, status, said) in [
        (vec!["--id", ""], 78, "identity is empty"),
        (vec!["--id", &long], 78, "more than 256"),
        (vec!["--id", "a", "--lease", "0s"], 78, "lease"),
        (vec!["--id", "a", "--lease", "100d"], 78, "lease"),
        (vec![], 64, "--id"),
    ] {
        let o = redislock(&url)
            .arg("elect")
            .arg(&name)
            .args(&args)
            .args(["--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(status), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
    assert_eq!(leader(&url, &[&name]).0, 1, "nothing held");
}
