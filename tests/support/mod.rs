//! Integration-test support: the project's test kit (`testkit/`), which starts real
//! `redis-server` processes (single servers, Sentinel groups, Clusters) on free loopback
//! ports, plus its helpers for multi-process tests; and the few helpers that need the library
//! itself. Use from a test file with `mod support;`.
#![allow(unused_imports, dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub use redislock_testkit::*;

/// The directory of this test binary, `<target>/<profile>/deps`, where cargo builds the cdylib
/// `libredislock.so` together with the library this binary links: the C, PHP and PHP-FPM tests
/// load that one, so they build nothing of their own. (`<target>/<profile>/libredislock.so` is
/// only refreshed by `cargo build`, so it may be stale here.)
pub fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe() failed");
    let dir = exe
        .parent()
        .expect("the test binary has no directory")
        .to_path_buf();
    assert!(
        dir.join("libredislock.so").is_file(),
        "{} has no libredislock.so; cargo normally builds the cdylib there with the library \
         (crate-type includes \"cdylib\")",
        dir.display()
    );
    dir
}

/// Compiles the C program `source` (a path from the repository's root) into `out` against
/// `include/` and the library of [`lib_dir`], as the C tests build theirs (C99, every warning an
/// error; `flags` before the source, `libs` with the library's), and panics with the
/// compiler's words if it fails.
pub fn compile_c(source: &str, out: &Path, flags: &[&str], libs: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = Command::new(&cc)
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Wpedantic",
            "-Werror",
            "-O1",
            "-g",
        ])
        .args(flags)
        .arg(format!("-I{}", root.join("include").display()))
        .arg(root.join(source))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lredislock")
        .args(libs)
        .args(["-lpthread", "-lm", "-o"])
        .arg(out)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc} (scripts/setup.sh installs it): {e}"));
    assert!(
        built.status.success(),
        "{source} does not compile ({}):\n{}",
        built.status,
        String::from_utf8_lossy(&built.stderr)
    );
}

/// A client of `url` whose waiters re-check only after a minute, and whose grants last as
/// long: within a test, a waiter can only be woken by a release's handoff.
pub fn handoff_only(url: &str) -> redislock::Client {
    redislock::Client::builder(url)
        .recheck_interval(Duration::from_secs(60))
        .lease(Duration::from_secs(60))
        .build()
        .unwrap()
}
