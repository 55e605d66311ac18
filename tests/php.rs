//! Drives the PHP package's PHPUnit suite (`bindings/php/tests`) from `cargo test`, through
//! `scripts/ci/php-tests.sh`, with `REDISLOCK_LIB` naming the cdylib of this cargo build: it
//! builds the test kit's program and points `REDISLOCK_TESTKIT` at it, and runs `phpunit -c
//! bindings/php/phpunit.xml`. The PHP tests start their own redis-server processes on free
//! loopback ports through that program (`redislock-testkit single`); FencedSqlTest uses the
//! PostgreSQL started here, whose URL it gets in `REDISLOCK_TEST_PG_URL`.
//!
//! Needs php (FFI, pcntl, posix, phpredis), Symfony Lock 5.4, phpunit 9 and redis-server;
//! `scripts/setup.sh` installs them on Debian. Missing tools fail this test with that hint.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

fn on_path(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn php_package_phpunit_suite() {
    let missing: Vec<&str> = ["php", "phpunit", "redis-server"]
        .into_iter()
        .filter(|tool| !on_path(tool))
        .collect();
    assert!(
        missing.is_empty(),
        "the PHP tests need {}: run scripts/setup.sh to install them",
        missing.join(", ")
    );

    // The PostgreSQL of FencedSqlTest (fenced writes to a SQL row with PDO).
    let pg = support::Postgres::start();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("bash")
        .arg(root.join("scripts/ci/php-tests.sh"))
        .current_dir(root)
        // The library of this cargo build: the script builds none of its own then.
        .env("REDISLOCK_LIB", support::lib_dir().join("libredislock.so"))
        .env("REDISLOCK_TEST_PG_URL", pg.url())
        .stdin(Stdio::null())
        .output()
        .expect("cannot run scripts/ci/php-tests.sh");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown by `cargo test -- --nocapture`, and on failure.
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success(),
        "scripts/ci/php-tests.sh failed ({}); if a tool or PHP extension is missing, run \
         scripts/setup.sh\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        output.status
    );
    // "OK (n tests, ...)", or "OK, but incomplete, skipped, or risky tests!"; never
    // "No tests executed!".
    assert!(
        stdout.contains("\nOK"),
        "PHPUnit did not report success:\n{stdout}"
    );
}
