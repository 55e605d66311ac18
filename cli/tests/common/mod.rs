//! What the process tests of `redislock` share: the tool with a URL and nothing else of the
//! caller's variables, a directory of a test's own, a bounded wait for a child.
#![allow(dead_code)]

use std::fs;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::unique_name;

/// A bound for what must happen on a loaded machine; never a speed claim.
pub const SURELY: Duration = Duration::from_secs(20);

/// `redislock` with `url` in `REDIS_URL` and nothing else of the caller's redislock variables.
pub fn redislock(url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redislock"));
    c.env("REDIS_URL", url)
        .env_remove("REDISLOCK_PASSWORD")
        .env_remove("REDISLOCK_OWNER_TOKEN")
        .stdin(Stdio::null());
    c
}

/// A directory of the test's own, removed at the end.
pub struct Dir(PathBuf);

impl Dir {
    pub fn new() -> Dir {
        let d = std::env::temp_dir().join(unique_name("redislock-cli"));
        fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    pub fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Waits until `child` exits; fails the test after `limit`.
pub fn wait_timeout(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            start.elapsed() < limit,
            "redislock still runs after {limit:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// A shell command, for `sh -c`, that touches `started` at once, then runs until SIGTERM, which
/// it answers by touching `termed` and exiting 0.
pub fn until_term(started: &std::path::Path, termed: &std::path::Path) -> String {
    format!(
        "trap 'touch \"{}\"; exit 0' TERM; touch '{}'; while :; do sleep 0.05; done",
        termed.display(),
        started.display()
    )
}

/// Waits (up to [`SURELY`]) until `child`, started with its stderr piped, exits: its status and
/// what it wrote to stderr.
pub fn exit_and_stderr(child: &mut Child) -> (ExitStatus, String) {
    let status = wait_timeout(child, SURELY);
    let mut err = String::new();
    if let Some(mut stderr) = child.stderr.take() {
        stderr.read_to_string(&mut err).unwrap();
    }
    (status, err)
}
