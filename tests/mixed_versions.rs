//! Mixed versions on one name: a client of this version and one of an earlier version (git
//! 33424fb, before Redlock's waiters queued on every master and releases handed the lock over)
//! exclude each other and wake each other, so a rolling deploy that runs both for a while is
//! safe.
//!
//! The test builds the old version from this repository's history (`git archive`, into
//! `target/mixed-versions/`, kept between runs) as a small program that holds or waits for a
//! lock, and races it against this version on a kit-started server. The first run builds the old
//! library (a minute or two); later runs reuse it.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redislock::Client;
use support::{RedisServer, RedlockMasters};

/// The earlier version.
const OLD: &str = "33424fb";

/// The old version's program: `hold URL NAME MS` takes the lock, says `held`, holds it for MS
/// and releases it, saying `released`; `wait URL NAME MS` waits up to MS for it (re-checking
/// only every 30 s, so that only a release's wake-up can serve it in time) and says `granted
/// <ms waited>`, then releases it.
const OLD_MAIN: &str = r#"
use std::time::{Duration, Instant};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let (mode, url, name, ms) = (&a[1], &a[2], &a[3], a[4].parse::<u64>().unwrap());
    let client = redislock::Client::builder(url)
        .recheck_interval(Duration::from_secs(30))
        .build()
        .unwrap();
    if mode == "hold" {
        let lock = client.lock(name.as_str()).try_acquire().unwrap();
        println!("held");
        std::thread::sleep(Duration::from_millis(ms));
        lock.release().unwrap();
        println!("released");
    } else {
        let started = Instant::now();
        let lock = client.lock(name.as_str()).acquire(Duration::from_millis(ms)).unwrap();
        println!("granted {}", started.elapsed().as_millis());
        lock.release().unwrap();
    }
}
"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run a command");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The old version's program, built once (kept under target/).
fn old_program() -> PathBuf {
    let work = repo().join("target/mixed-versions");
    let src = work.join(format!("redislock-{OLD}"));
    if !src.join("Cargo.toml").exists() {
        std::fs::create_dir_all(&src).unwrap();
        let archive = work.join(format!("{OLD}.tar"));
        run(Command::new("git")
            .arg("-C")
            .arg(repo())
            .args(["archive", "--format=tar", "-o"])
            .arg(&archive)
            .arg(OLD));
        run(Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&src));
    }
    let app = work.join("old-client");
    std::fs::create_dir_all(app.join("src")).unwrap();
    std::fs::write(
        app.join("Cargo.toml"),
        format!(
            "[package]\nname = \"old-client\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n\
             [dependencies]\nredislock = {{ path = \"{}\", default-features = false }}\n\n\
             [workspace]\n",
            src.display()
        ),
    )
    .unwrap();
    std::fs::write(app.join("src/main.rs"), OLD_MAIN).unwrap();
    let target = work.join("target");
    run(Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--manifest-path"])
        .arg(app.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS"));
    target.join("debug/old-client")
}

/// Starts the old program and reads its lines as they come.
struct Old {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Old {
    fn start(program: &Path, args: &[&str]) -> Old {
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the old client");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Old { child, lines }
    }

    fn expect(&self, prefix: &str, within: Duration) -> String {
        let line = self
            .lines
            .recv_timeout(within)
            .unwrap_or_else(|_| panic!("the old client did not say {prefix:?} within {within:?}"));
        assert!(
            line.starts_with(prefix),
            "old client said {line:?}, not {prefix:?}"
        );
        line
    }
}

impl Drop for Old {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn this_version_and_an_earlier_one_exclude_and_wake_each_other() {
    let old = old_program();
    let server = RedisServer::start();
    exclude_and_wake(&old, &server.url());
    // On Redlock's masters too: the old version's waiters block on the name's home master, and
    // this version's releases wake them there when no waiter of this version is queued.
    let masters = RedlockMasters::start(3);
    exclude_and_wake(&old, &masters.url());
}

/// Both directions on `url`: each version waits for the other's holder and is woken by its
/// release (the re-checks are 30 s apart).
fn exclude_and_wake(old: &Path, url: &str) {
    let url = url.to_owned();
    let new = Client::builder(&url)
        .recheck_interval(Duration::from_secs(30))
        .build()
        .unwrap();

    // The old version holds: this version is refused, then woken by the old version's release.
    let holder = Old::start(old, &["hold", &url, "mixed:a", "400"]);
    holder.expect("held", Duration::from_secs(10));
    let refused = new.try_acquire("mixed:a").unwrap_err();
    assert!(refused.is_held(), "{refused}");
    let started = Instant::now();
    let lock = new.acquire("mixed:a", Duration::from_secs(10)).unwrap();
    let waited = started.elapsed();
    holder.expect("released", Duration::from_secs(5));
    assert!(
        waited < Duration::from_secs(5),
        "this version waited {waited:?}: not woken by the old version's release"
    );
    lock.release().unwrap();

    // This version holds: the old version waits, and is woken by this version's release.
    let lock = new.try_acquire("mixed:b").unwrap();
    let waiter = Old::start(old, &["wait", &url, "mixed:b", "20000"]);
    // Let the old waiter queue up, then check it has not got the lock.
    std::thread::sleep(Duration::from_millis(500));
    assert!(waiter.lines.try_recv().is_err(), "granted while held");
    lock.release().unwrap();
    let released = Instant::now();
    let granted = waiter.expect("granted", Duration::from_secs(10));
    assert!(
        released.elapsed() < Duration::from_secs(5),
        "the old version was served {:?} after the release ({granted}): not woken by it",
        released.elapsed()
    );
}
