//! The oversell demos (`examples/oversell.rs`, `examples/c/oversell.c`,
//! `examples/php/oversell.php`) run unchanged with the `REDIS_URL` forms the library accepts,
//! as a new user would run them: with a `redis-sentinel://` URL of a Sentinel group started
//! here, with a `redis-cluster://` URL of a Redis Cluster started here, with a `redlock://` URL
//! of three masters started here, and with a URL that
//! carries an ACL user, a password and a database. Each demo must exit 0 after printing its
//! success line ("exactly 100 sold ... Correct"), keep its stock where the URL says, and leave
//! no key behind.
//!
//! How the demos are built:
//! - Rust: `cargo build --lib --example oversell` from here, in this test's profile, and the
//!   binary cargo reports. `cargo test --test NAME` and nextest build no examples, so a binary
//!   merely found under `target/<profile>/examples` may be missing, or left from older sources
//!   and pass or fail for the wrong reason; when it is up to date the build is only a check.
//! - C: compiled with `cc` as `scripts/ci/c-tests.sh` does (`-Wall -Wextra -Wpedantic -Werror`),
//!   against the `libredislock.so` of that same cargo build.
//! - PHP: `php -d ffi.enable=1 examples/php/oversell.php` with `REDISLOCK_LIB` pointing at that
//!   library.
//!
//! Needs cc, php (FFI, pcntl, phpredis) and redis-server; a missing one fails the test with
//! the hint to run `scripts/setup.sh`.
//!
//! The fenced-write demo (`examples/fenced_write.rs`) runs with a `redis-cluster://` URL: it
//! must exit 0 (its stale write refused) and leave no key behind.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use support::{
    Cluster, RedisServer, RedlockMasters, SentinelGroup, cargo_build_example, eventually,
    free_port, unique_name, wait_child,
};

/// A demo takes about a second; this only stops a hung one.
const DEMO_TIMEOUT: Duration = Duration::from_secs(60);
/// A cold build of the library and the example; a no-op build takes a second or two.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);
const SUCCESS: &str = "With redislock: exactly 100 sold, stock 0. Correct.";

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn succeeds(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails, naming scripts/setup.sh, when a tool a demo needs is missing.
fn require_tools() {
    let mut missing: Vec<&str> = [("cc", "--version"), ("redis-server", "--version")]
        .into_iter()
        .filter(|(tool, arg)| !succeeds(tool, &[arg]))
        .map(|(tool, _)| tool)
        .collect();
    if !succeeds("php", &["--version"]) {
        missing.push("php");
    } else {
        for ext in ["ffi", "pcntl", "redis"] {
            let check = format!("exit(extension_loaded('{ext}') ? 0 : 1);");
            if !succeeds("php", &["-r", &check]) {
                missing.push(match ext {
                    "ffi" => "the PHP extension ffi",
                    "pcntl" => "the PHP extension pcntl",
                    _ => "the PHP extension redis (phpredis)",
                });
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the demo tests need {}: run scripts/setup.sh to install them (Debian: apt-get install \
         gcc redis-server php8.2-cli php-redis)",
        missing.join(", ")
    );
}

/// The three demos, built for one test in a directory of its own (removed on drop).
struct Demos {
    rust: PathBuf,
    c: PathBuf,
    lib: PathBuf,
    dir: PathBuf,
}

impl Demos {
    fn build() -> Demos {
        let rust = cargo_build_example(repo_root(), "oversell", BUILD_TIMEOUT);
        // <target>/<profile>/examples/oversell → <target>/<profile>/libredislock.so
        let lib = rust
            .parent()
            .and_then(Path::parent)
            .map(|profile| profile.join("libredislock.so"))
            .filter(|lib| lib.is_file())
            .unwrap_or_else(|| panic!("no libredislock.so built next to {}", rust.display()));
        let dir = std::env::temp_dir().join(unique_name("redislock-demos"));
        std::fs::create_dir_all(&dir).expect("cannot create a temporary directory");
        let demos = Demos {
            c: dir.join("oversell"),
            rust,
            lib,
            dir,
        };
        let lib_dir = demos.lib.parent().expect("library path has a directory");
        let out = Command::new("cc")
            .args([
                "-std=c99",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Wpedantic",
                "-Werror",
            ])
            .arg("-Iinclude")
            .arg("examples/c/oversell.c")
            .arg(format!("-L{}", lib_dir.display()))
            .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
            .args(["-lredislock", "-lpthread", "-lm", "-o"])
            .arg(&demos.c)
            .current_dir(repo_root())
            .output()
            .expect("cannot run cc");
        assert!(
            out.status.success(),
            "cc examples/c/oversell.c failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        demos
    }

    /// The three demos with `REDIS_URL=url` (Rust, C, PHP): each one's exit status and standard
    /// error.
    fn run_failing(&self, url: &str) -> Vec<(&'static str, Option<i32>, String)> {
        let mut php = Command::new("php");
        php.args(["-d", "ffi.enable=1", "examples/php/oversell.php"])
            .env("REDISLOCK_LIB", &self.lib);
        let runs = [
            ("Rust", Command::new(&self.rust)),
            ("C", Command::new(&self.c)),
            ("PHP", php),
        ];
        runs.into_iter()
            .map(|(name, mut cmd)| {
                let child = cmd
                    .current_dir(repo_root())
                    .env("REDIS_URL", url)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| panic!("cannot start the {name} demo: {e}"));
                let out = wait_child(child, DEMO_TIMEOUT);
                let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
                (name, out.status.code(), stderr)
            })
            .collect()
    }

    /// Runs the three demos one after the other with `REDIS_URL=url`; each must succeed.
    /// Returns their outputs (Rust, C, PHP).
    fn run_all(&self, url: &str) -> Vec<(&'static str, String)> {
        let mut php = Command::new("php");
        php.args(["-d", "ffi.enable=1", "examples/php/oversell.php"])
            .env("REDISLOCK_LIB", &self.lib);
        let runs = [
            ("Rust", Command::new(&self.rust)),
            ("C", Command::new(&self.c)),
            ("PHP", php),
        ];
        let mut failures = Vec::new();
        let mut outputs = Vec::new();
        for (name, mut cmd) in runs {
            let child = cmd
                .current_dir(repo_root())
                .env("REDIS_URL", url)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start the {name} demo: {e}"));
            let out = wait_child(child, DEMO_TIMEOUT);
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            let stderr = String::from_utf8_lossy(&out.stderr);
            // Shown by `cargo test -- --nocapture`, and on failure.
            println!("--- {name} demo ({}) ---\n{stdout}{stderr}", out.status);
            if !out.status.success() || !stdout.contains(SUCCESS) {
                failures.push(format!(
                    "the {name} demo did not succeed ({})\n--- stdout ---\n{stdout}\
                     --- stderr ---\n{stderr}",
                    out.status
                ));
            }
            outputs.push((name, stdout));
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
        outputs
    }
}

impl Drop for Demos {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Keys in the current database of `con`.
fn dbsize(con: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

#[test]
fn demos_run_with_a_sentinel_url() {
    require_tools();
    // The group forms while the demos build.
    let group = thread::spawn(SentinelGroup::start);
    let demos = Demos::build();
    let group = group.join().expect("the Sentinel group did not start");
    let url = group.url();
    assert!(url.starts_with("redis-sentinel://"), "{url}");
    let master = group.master();

    let outputs = demos.run_all(&url);

    // Each demo kept its stock on the master that the sentinels name, and says so.
    let master_addr = master.addr();
    for (name, stdout) in &outputs {
        assert!(
            stdout.contains(&master_addr),
            "the {name} demo does not name the master {master_addr}:\n{stdout}"
        );
    }
    // And deleted everything it (and the library, for its locks) created there.
    assert_eq!(dbsize(&mut master.conn()), 0, "keys left on the master");
}

#[test]
fn demos_run_with_a_cluster_url() {
    require_tools();
    // The cluster forms while the demos build.
    let cluster = thread::spawn(Cluster::start);
    let demos = Demos::build();
    let cluster = cluster.join().expect("the cluster did not start");
    let url = cluster.url();
    assert!(url.starts_with("redis-cluster://"), "{url}");

    let outputs = demos.run_all(&url);

    // Each demo kept its stock on the master that serves its keys' slot, and says so.
    for (name, stdout) in &outputs {
        let prefix = stdout
            .split("(keys ")
            .nth(1)
            .and_then(|rest| rest.split('*').next())
            .unwrap_or_else(|| panic!("the {name} demo does not show its keys:\n{stdout}"));
        let master = cluster.master_of(&format!("{prefix}stock")).addr();
        assert!(
            stdout.contains(&master),
            "the {name} demo does not name the master {master} of its keys:\n{stdout}"
        );
    }
    // And deleted everything it (and the library, for its locks) created.
    for master in cluster.masters() {
        assert_eq!(
            dbsize(&mut master.conn()),
            0,
            "keys left on {}",
            master.addr()
        );
    }
}

#[test]
fn demos_run_with_a_redlock_url() {
    require_tools();
    let masters = RedlockMasters::start(3);
    let url = masters.url();
    assert!(url.starts_with("redlock://"), "{url}");
    let demos = Demos::build();

    let outputs = demos.run_all(&url);

    // Each demo kept its stock on the first master, and says so.
    let first = masters.masters()[0].addr();
    for (name, stdout) in &outputs {
        assert!(
            stdout.contains(&first),
            "the {name} demo does not name the first master {first}:\n{stdout}"
        );
    }
    // The locks were released on every master; what waiters marked them with expires.
    let empty = eventually(Duration::from_secs(10), || {
        masters.masters().iter().all(|m| dbsize(&mut m.conn()) == 0)
    });
    assert!(empty, "keys left on the masters");
}

#[test]
fn demos_use_the_urls_user_password_and_database() {
    require_tools();
    const ADMIN_PASSWORD: &str = "admin-secret";
    let server = RedisServer::start_with(&["--requirepass", ADMIN_PASSWORD]);
    let admin_url = server.url_with_password(ADMIN_PASSWORD);
    let mut admin = server.conn_url(&admin_url);
    // A password that needs percent-encoding in the URL.
    redis::cmd("ACL")
        .arg(&["SETUSER", "shop", "on", ">s3cr%t@x", "~*", "&*", "+@all"])
        .exec(&mut admin)
        .unwrap();
    let url = format!("redis://shop:s3cr%25t%40x@127.0.0.1:{}/3", server.port());
    let demos = Demos::build();

    // MONITOR shows the database of every command: `<time> [<db> <client>] "GET" "key"`.
    let marker = unique_name("monitor-end");
    let mut monitor = server.conn_url(&admin_url);
    redis::cmd("MONITOR").exec(&mut monitor).unwrap();
    // Quiet while a demo starts; the marker below ends the watch.
    monitor.set_read_timeout(Some(DEMO_TIMEOUT)).unwrap();
    let watcher = {
        let marker = marker.clone();
        thread::spawn(move || {
            let mut lines = Vec::new();
            while let Ok(redis::Value::SimpleString(line)) = monitor.recv_response() {
                if line.contains(&marker) {
                    return (lines, true);
                }
                lines.push(line);
            }
            (lines, false)
        })
    };

    demos.run_all(&url);

    redis::cmd("ECHO").arg(&marker).exec(&mut admin).unwrap();
    let (lines, complete) = watcher.join().unwrap();
    assert!(complete, "MONITOR stopped before the end of the demos");
    let demo_commands: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("\"redislock-demo:") || l.contains("\"{redislock-demo:"))
        .collect();
    // The stock of each demo (GET) and its lock (SET NX) went to database 3.
    for command in ["\"GET\"", "\"SET\""] {
        assert!(
            demo_commands.iter().any(|l| l.contains(command)),
            "no {command} on a demo key seen"
        );
    }
    let elsewhere: Vec<&&String> = demo_commands
        .iter()
        .filter(|l| !l.contains(" [3 "))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "demo commands outside database 3: {:?}",
        &elsewhere[..elsewhere.len().min(5)]
    );
    for db in [0, 3] {
        redis::cmd("SELECT").arg(db).exec(&mut admin).unwrap();
        assert_eq!(dbsize(&mut admin), 0, "keys left in database {db}");
    }
}

/// With `REDIS_URL` naming a server that does not answer, each demo exits 2 and says that the
/// URL's server is unreachable and what to check, not to install Redis.
#[test]
fn demos_say_an_unreachable_redis_url_is_unreachable() {
    require_tools();
    let demos = Demos::build();
    let url = format!("redis://127.0.0.1:{}/0", free_port());
    for (name, status, stderr) in demos.run_failing(&url) {
        assert_eq!(status, Some(2), "the {name} demo: {stderr}");
        assert!(stderr.contains("unreachable"), "the {name} demo: {stderr}");
        assert!(
            stderr.contains("host and port"),
            "the {name} demo: {stderr}"
        );
        assert!(
            !stderr.contains("nstall"),
            "the {name} demo suggests installing Redis: {stderr}"
        );
    }
}

/// The fenced-write demo (`examples/fenced_write.rs`) with a `redis-cluster://` URL: A's stale
/// write is refused, B's stays, and no key is left behind.
#[test]
fn fenced_write_demo_runs_with_a_cluster_url() {
    let cluster = thread::spawn(Cluster::start);
    let demo = cargo_build_example(repo_root(), "fenced_write", BUILD_TIMEOUT);
    let cluster = cluster.join().expect("the cluster did not start");
    let child = Command::new(&demo)
        .current_dir(repo_root())
        .env("REDIS_URL", cluster.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the fenced_write demo");
    let out = wait_child(child, DEMO_TIMEOUT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("A's stale write was refused"),
        "the fenced_write demo did not succeed ({})\n--- stdout ---\n{stdout}--- stderr ---\n\
         {stderr}",
        out.status
    );
    for master in cluster.masters() {
        let left = dbsize(&mut master.conn());
        assert_eq!(left, 0, "keys left on {}", master.addr());
    }
}
