//! The C ABI tested from C: runs the C tests of `ffi-tests/c` against a real `redis-server`
//! (started here by the test kit, whose URL goes to the script in `REDISLOCK_TEST_URL`, so the
//! script starts none of its own) through `scripts/ci/c-tests.sh`: plain, under AddressSanitizer +
//! UndefinedBehaviorSanitizer, and under valgrind. The script also checks that
//! `include/redislock.h` compiles as C99 and C++ and that `examples/c/oversell.c` builds, all with
//! `-Wall -Wextra -Wpedantic -Werror`.
//!
//! It uses the `libredislock.so` that this `cargo test` built (the cdylib is built with the
//! library, next to this test binary), so it runs no cargo of its own. It needs a C and a C++ compiler and valgrind;
//! without them it fails and names `scripts/setup.sh`, which installs them.
//!
//! The fenced write to a SQL row (`ffi-tests/c/sql/fenced_sql.c`, linked with libpq) is a
//! program of its own, built here and run by `ffi-tests/c/run.sh` in the same three modes
//! against a Redis and a PostgreSQL started here (`REDISLOCK_TEST_PG_URL`); it needs libpq's
//! headers and `pg_config` too (Debian: libpq-dev).

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::{Postgres, RedisServer, compile_c, lib_dir, wait_child};

/// The three runs together; valgrind makes up most of it.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// One run of the fenced SQL program (about a second; a few under valgrind).
const SQL_RUN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Fails, naming scripts/setup.sh, when a tool the C tests need is missing.
fn require_tools() {
    let missing: Vec<&str> = ["cc", "c++", "valgrind", "readelf"]
        .into_iter()
        .filter(|tool| {
            !Command::new(tool)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the C tests need {}, which {} not installed: run scripts/setup.sh (Debian: apt-get \
         install gcc g++ valgrind binutils)",
        missing.join(", "),
        if missing.len() == 1 { "is" } else { "are" }
    );
}

#[test]
fn c_tests_pass_plain_under_sanitizers_and_under_valgrind() {
    require_tools();
    let server = RedisServer::start();
    let lib = lib_dir();
    // Private to this process: concurrent test runs must not share the compiled programs.
    let build = lib
        .parent()
        .unwrap_or(&lib)
        .join(format!("ffi-tests-c-{}", std::process::id()));
    let child = Command::new("bash")
        .arg(repo_root().join("scripts/ci/c-tests.sh"))
        .current_dir(repo_root())
        .env("REDISLOCK_TEST_URL", server.url())
        .env("REDISLOCK_LIB_DIR", &lib)
        .env("REDISLOCK_C_BUILD_DIR", &build)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run bash scripts/ci/c-tests.sh");
    let out = wait_child(child, SCRIPT_TIMEOUT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
    assert!(
        out.status.success(),
        "scripts/ci/c-tests.sh failed ({})\n{report}",
        out.status
    );

    // Every run ran every test, and valgrind found nothing in any process (parent or forked
    // child).
    let finals: Vec<&str> = stdout.lines().filter(|l| l.ends_with(" failed")).collect();
    assert_eq!(
        finals.len(),
        3,
        "expected plain, ASan and valgrind runs\n{report}"
    );
    assert!(
        finals.iter().all(|l| l.ends_with(" passed, 0 failed")),
        "{report}"
    );
    let summaries: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ERROR SUMMARY:"))
        .collect();
    assert!(
        !summaries.is_empty(),
        "valgrind printed no summary\n{report}"
    );
    assert!(
        summaries
            .iter()
            .all(|l| l.contains("ERROR SUMMARY: 0 errors")),
        "{report}"
    );
    assert!(
        stderr.contains("definitely lost: 0 bytes") || !stderr.contains("definitely lost:"),
        "{report}"
    );
    println!("{}", finals.join("\n"));
    println!("{}", summaries.join("\n"));
    let _ = std::fs::remove_dir_all(&build);
}

/// The output of `program args...`, or a failure naming scripts/setup.sh when it cannot run.
fn output_of(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {program} ({e}): run scripts/setup.sh (Debian: libpq-dev)")
        });
    assert!(
        out.status.success(),
        "{program} {args:?} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `ffi-tests/c/sql/fenced_sql.c`: a paused holder's UPDATE and INSERT ... ON CONFLICT with
/// libpq affect no row, the later holder's write stays; plain, under ASan + UBSan and under
/// valgrind (no error, no leak).
#[test]
fn c_fenced_sql_passes_plain_under_sanitizers_and_under_valgrind() {
    require_tools();
    let pg_includes = output_of("pg_config", &["--includedir"]);
    let started = std::thread::spawn(Postgres::start);
    let server = RedisServer::start();
    let pg = started.join().expect("PostgreSQL did not start");
    let lib = lib_dir();
    let build = lib
        .parent()
        .unwrap_or(&lib)
        .join(format!("ffi-tests-c-sql-{}", std::process::id()));
    std::fs::create_dir_all(&build).unwrap();
    let pg_include = format!("-I{pg_includes}");
    let compile = |out: &Path, sanitize: &[&str]| {
        let flags: Vec<&str> = sanitize
            .iter()
            .copied()
            .chain([pg_include.as_str()])
            .collect();
        compile_c("ffi-tests/c/sql/fenced_sql.c", out, &flags, &["-lpq"]);
    };
    let (plain, asan) = (build.join("fenced-sql"), build.join("fenced-sql-asan"));
    compile(&plain, &[]);
    compile(
        &asan,
        &[
            "-fsanitize=address,undefined",
            "-fno-omit-frame-pointer",
            "-fno-sanitize-recover=all",
        ],
    );
    for (mode, binary) in [("plain", &plain), ("asan", &asan), ("valgrind", &plain)] {
        let child = Command::new("bash")
            .arg(repo_root().join("ffi-tests/c/run.sh"))
            .arg(mode)
            .arg(binary)
            .arg(&lib)
            .current_dir(repo_root())
            .env("REDISLOCK_TEST_URL", server.url())
            .env("REDISLOCK_TEST_PG_URL", pg.url())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot run bash ffi-tests/c/run.sh");
        let out = wait_child(child, SQL_RUN_TIMEOUT);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let report = format!("--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}");
        assert!(
            out.status.success() && stdout.contains(" checks, 0 failed"),
            "fenced_sql.c failed in the {mode} run ({})\n{report}",
            out.status
        );
        if mode == "valgrind" {
            assert!(
                stderr.contains("ERROR SUMMARY: 0 errors")
                    && stderr.contains("definitely lost: 0 bytes"),
                "{report}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&build);
}
