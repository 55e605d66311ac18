//! The PHP package in its real deployment: Debian's PHP-FPM (`ffi.enable=preload`, the package's
//! preload script) behind nginx, started on loopback ports by `scripts/fpm/fpm.sh test`, with the
//! test app of `tests/fpm/app` under load from `wrk`. This test runs the script and asserts on
//! what it printed:
//!
//! - under `REDISLOCK_FPM_REQUESTS` requests (default 20,000) at concurrency 32 to a pool of 8
//!   workers, the package's `Client` endpoint, and under 3,000 requests each of the other lock
//!   variants (Symfony Lock on the package's `RedislockStore`, and for comparison Symfony's own
//!   `RedisStore` and phpredis `SET NX PX`), sells exactly the initial stock, never reads it
//!   below zero, answers no request with an error, and leaves no key in Redis but the shop's
//!   data;
//! - without a lock the same endpoint oversells (the race is real, so the checks above can fail);
//! - the library's threads per worker stay within `REDISLOCK_FPM_THREAD_BOUND` (default 3: renewal
//!   timer, renewal I/O, one renewal thread, for a worker that holds one lock at a time) during
//!   and after the load, sampled every 25 ms, also when every request holds an auto-renewed lock
//!   past its lease (which renewal keeps), and no worker dies;
//! - a request that ends while holding the stock's lock (fatal error, `max_execution_time`,
//!   uncaught exception, `exit()`, end of script; through `Client` and through the Symfony store)
//!   leaves no key behind by the time its response arrives, and the next purchase gets the lock;
//!   a detached lock (the control) is left behind and makes the next purchase time out;
//! - so does a request that dies inside the callback of a Laravel lock
//!   (`Cache::lock($name, 60)->get($callback)`, `->block(5, $callback)`, and `Cache::lock($name)`
//!   without seconds) by a fatal error, memory exhausted, `max_execution_time` or `exit()`: the
//!   next purchase gets the lock within its 2 s wait, where the lease is 60 s (30 s renewed);
//!   a Laravel lock taken without a callback (the control) is left behind, as Laravel's are.
//!
//! - the metrics recipe: each worker saves its metrics at the end of every request of the Client
//!   endpoint, and `metrics.php` adds them up; the sum counts every acquire of the run and passes
//!   `promtool check metrics`.
//!
//! `php_fpm_preload_without_the_library_says_what_to_do` runs `scripts/fpm/fpm.sh preload`: php-fpm
//! whose preload script cannot find the library (`REDISLOCK_LIB` only in the pool's `env[]`, or
//! naming no file) must exit with an error in its log that names what was tried and says to set
//! `REDISLOCK_LIB` in the master's environment; the same with `REDISLOCK_LIB` in the master's
//! environment (the control) starts.
//!
//! Needs php8.2-fpm, nginx, wrk, curl, redis-server, php with FFI and phpredis, Symfony Lock and
//! Laravel 8's cache components; `scripts/setup.sh` installs them on Debian. Missing tools fail
//! this test with that hint.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// On PATH, or in /usr/sbin (php-fpm8.2 and nginx, which a plain user's PATH may lack).
fn on_path(tool: &str) -> bool {
    Path::new("/usr/sbin").join(tool).is_file()
        || Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number")),
        Err(_) => default,
    }
}

/// One `kind key=value key=value ...` line of the script's output.
struct Line {
    kind: String,
    fields: HashMap<String, String>,
}

impl Line {
    fn parse(text: &str) -> Option<Line> {
        let mut words = text.split_whitespace();
        let kind = words.next()?.to_owned();
        let fields = words
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Some(Line { kind, fields })
    }

    fn text(&self, key: &str) -> &str {
        self.fields
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {key}= in {} line {:?}", self.kind, self.fields))
    }

    fn num(&self, key: &str) -> i64 {
        let v = self.text(key);
        v.parse()
            .unwrap_or_else(|_| panic!("{key}={v} is not an integer ({:?})", self.fields))
    }
}

#[test]
fn php_fpm_under_nginx() {
    let fpm = on_path("php-fpm8.2") || on_path("php-fpm");
    let mut missing: Vec<&str> = ["nginx", "wrk", "curl", "php", "redis-server", "redis-cli"]
        .into_iter()
        .filter(|tool| !on_path(tool))
        .collect();
    if !fpm {
        missing.push("php-fpm8.2");
    }
    assert!(
        missing.is_empty(),
        "the PHP-FPM test needs {}: run scripts/setup.sh to install them",
        missing.join(", ")
    );

    let requests = env_number("REDISLOCK_FPM_REQUESTS", 20_000);
    let bound = env_number("REDISLOCK_FPM_THREAD_BOUND", 3) as i64;
    let workers = 8;
    let workers_arg = workers.to_string();
    let requests_arg = requests.to_string();
    let stdout = fpm_script(&[
        "test",
        "--concurrency",
        "32",
        "--workers",
        &workers_arg,
        "--requests",
        &requests_arg,
    ]);
    let lines: Vec<Line> = stdout.lines().filter_map(Line::parse).collect();

    // The set-up: FPM workers with FFI restricted to preloaded code, the package preloaded.
    let info = stdout
        .lines()
        .find(|l| l.starts_with("info "))
        .expect("no info line");
    for needle in [
        r#""sapi":"fpm-fcgi""#,
        r#""ffi_enable":"preload""#,
        r#""preloaded":true"#,
        r#""library":true"#,
    ] {
        assert!(info.contains(needle), "{needle} not in {info}");
    }

    let runs: HashMap<&str, &Line> = lines
        .iter()
        .filter(|l| l.kind == "run")
        .map(|l| (l.text("variant"), l))
        .collect();

    // The metrics recipe: every worker's numbers, saved at each request's end and added up by
    // metrics.php, count every acquire of the client run (wrk's count, plus at most one request
    // per connection still on its way when wrk stopped), and pass promtool.
    let m = lines
        .iter()
        .find(|l| l.kind == "metrics")
        .unwrap_or_else(|| panic!("no metrics line:\n{stdout}"));
    let client = runs.get("client").expect("a client run");
    let what = format!("{:?}", m.fields);
    assert_eq!(m.text("promtool"), "ok", "{what}");
    assert!(
        m.num("files") >= 1 && m.num("files") <= client.num("pids_seen"),
        "one file per worker, {what}"
    );
    assert!(
        m.num("acquisitions") >= client.num("requests")
            && m.num("acquisitions") <= client.num("requests") + 32,
        "acquisitions against {} requests, {what}",
        client.num("requests")
    );
    assert!(m.num("waited") > 0, "no acquire waited, {what}");
    assert!(m.num("handoffs") > 0, "no handoff, {what}");
    assert_eq!(m.num("held"), 0, "locks still held after the run, {what}");
    for variant in ["client", "symfony-redislock", "symfony-redis", "phpredis"] {
        let r = runs
            .get(variant)
            .unwrap_or_else(|| panic!("no run of {variant}:\n{stdout}"));
        let what = format!("{variant}: {:?}", r.fields);
        // The Client endpoint gets the full load; the others --peer-requests (3,000).
        if variant == "client" {
            assert_eq!(r.num("asked"), requests as i64, "{what}");
        }
        assert!(
            r.num("requests") >= r.num("asked"),
            "too few requests, {what}"
        );
        assert_eq!(r.num("non2xx"), 0, "answers other than 2xx, {what}");
        assert_eq!(r.num("errors"), 0, "transport errors, {what}");
        // Exactly the stock sold: none oversold, none lost.
        assert_eq!(r.num("sold"), r.num("initial_stock"), "sold, {what}");
        assert_eq!(r.num("stock"), 0, "stock left, {what}");
        assert_eq!(r.num("negative"), 0, "stock read below zero, {what}");
        // Requests that found the stock empty: the race at zero was run.
        assert!(r.num("answered_soldout") > 0, "no sold-out answers, {what}");
        assert!(r.num("answered_sold") <= r.num("sold"), "{what}");
        // No lock, queue or companion key left: only the shop's data.
        assert_eq!(r.num("keys_left"), 0, "keys left in Redis, {what}");
        assert!(
            r.num("threads_max") <= bound,
            "library threads per worker above {bound} during the run, {what}"
        );
        assert!(
            r.num("threads_after") <= bound,
            "library threads per worker above {bound} after the run, {what}"
        );
        assert_eq!(r.num("workers"), workers, "{what}");
        assert_eq!(r.num("pids_seen"), workers, "a worker died, {what}");
    }

    // Locks held past their lease (hold.php: 600 ms lease, held 700 ms, one lock per worker):
    // renewal threads run in every worker, and still stay within the bound.
    let hold = runs.get("hold").expect("no run of hold");
    let what = format!("hold: {:?}", hold.fields);
    assert!(hold.num("requests") >= hold.num("asked"), "{what}");
    assert_eq!(hold.num("non2xx"), 0, "a lock was lost, {what}");
    assert_eq!(hold.num("errors"), 0, "{what}");
    assert_eq!(
        hold.num("answered_other"),
        hold.num("requests"),
        "not every answer was \"renewed\", {what}"
    );
    assert_eq!(hold.num("keys_left"), 0, "{what}");
    assert!(
        hold.num("threads_max") >= 2,
        "no renewal thread seen: the bound was not put to the test, {what}"
    );
    assert!(hold.num("threads_max") <= bound, "{what}");
    assert!(hold.num("threads_after") <= bound, "{what}");
    assert_eq!(hold.num("pids_seen"), workers, "a worker died, {what}");

    // Without a lock the same read-modify-write oversells: the checks above can fail.
    let nolock = runs.get("nolock").expect("no run of nolock");
    assert!(
        nolock.num("sold") > nolock.num("initial_stock"),
        "the no-lock endpoint did not oversell, so the test would not see an oversell: {:?}",
        nolock.fields
    );

    // Requests that end while holding the lock.
    let dies: Vec<&Line> = lines.iter().filter(|l| l.kind == "die").collect();
    assert_eq!(dies.len(), 11 + 3 * 4 + 1, "die lines:\n{stdout}");
    for via in [
        "laravel-get",
        "laravel-block",
        "laravel-forever",
        "laravel-plain",
    ] {
        assert!(
            dies.iter().any(|d| d.text("via") == via),
            "no die line via={via}:\n{stdout}"
        );
    }
    for d in &dies {
        let (via, how) = (d.text("via"), d.text("how"));
        let what = format!("die.php?how={how}&via={via}: {:?}", d.fields);
        if how == "detach" || via == "laravel-plain" {
            // The controls: a detached lock, and a Laravel lock taken without a callback, stay,
            // and the next purchase cannot get it.
            let expected = if how == "detach" { 200 } else { 500 };
            assert_eq!(d.num("status"), expected, "{what}");
            assert!(d.num("keys_left") >= 1, "the lock is gone, {what}");
            assert_eq!(d.num("next_status"), 503, "{what}");
            continue;
        }
        let expected = match how {
            "fatal" | "memory" | "timeout" | "exception" => 500,
            "exit" | "end" => 200,
            other => panic!("unexpected how={other}"),
        };
        assert_eq!(d.num("status"), expected, "{what}");
        assert_eq!(d.num("keys_left"), 0, "lock left behind, {what}");
        assert_eq!(d.num("next_status"), 200, "next purchase, {what}");
        assert_eq!(d.text("next"), "sold", "next purchase, {what}");
        // It waited for no lease: its wait for the lock is bounded by 2 s (wait_ms), the lease
        // of the lock left behind would have been 30 or 60 s.
        assert!(d.num("next_ms") < 2_500, "next purchase, {what}");
    }

    // The whole session, die requests included.
    let session = lines
        .iter()
        .find(|l| l.kind == "threads")
        .expect("no threads line");
    assert!(
        session.num("max") <= bound,
        "library threads per worker above {bound}: {:?}",
        session.fields
    );
    assert!(session.num("after") <= bound, "{:?}", session.fields);
    assert_eq!(
        session.num("pids_seen"),
        workers,
        "a worker died: {:?}",
        session.fields
    );
}

/// Runs `scripts/fpm/fpm.sh` with `args` and returns its standard output, failing with both outputs
/// if it failed or did not finish.
fn fpm_script(args: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new("bash")
        .arg(root.join("scripts/fpm/fpm.sh"))
        .args(args)
        .current_dir(root)
        // The library of this cargo build: the script builds none of its own then.
        .env("REDISLOCK_LIB", support::lib_dir().join("libredislock.so"))
        .stdin(Stdio::null())
        .output()
        .expect("cannot run scripts/fpm/fpm.sh");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Shown by `cargo test -- --nocapture`, and on failure.
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        output.status.success() && stdout.lines().any(|l| l == "fpm: done"),
        "scripts/fpm/fpm.sh {} failed ({}); if a tool is missing, run scripts/setup.sh\n\
         --- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        args.join(" "),
        output.status
    );
    stdout
}

#[test]
fn php_fpm_preload_without_the_library_says_what_to_do() {
    assert!(
        on_path("php-fpm8.2") || on_path("php-fpm"),
        "the PHP-FPM test needs php-fpm8.2: run scripts/setup.sh to install it"
    );
    let stdout = fpm_script(&["preload"]);
    let cases: HashMap<String, Line> = stdout
        .lines()
        .filter_map(Line::parse)
        .filter(|l| l.kind == "preload")
        .map(|l| (l.text("case").to_owned(), l))
        .collect();
    // The log of a case, as one text.
    let log = |case: &str| -> String {
        let prefix = format!("preload-log case={case} ");
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(prefix.as_str()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let case = |name: &str| -> &Line {
        cases
            .get(name)
            .unwrap_or_else(|| panic!("no preload case={name}:\n{stdout}"))
    };

    // The control: REDISLOCK_LIB in the master's environment, and php-fpm starts.
    let control = case("master-env");
    assert_eq!(
        control.num("started"),
        1,
        "{:?}\n{}",
        control.fields,
        log("master-env")
    );

    // What a failed preload must say, whatever the case: what to do about the master.
    let advice = [
        "cannot load libredislock in the opcache.preload script",
        "PHP-FPM master",
        "before any pool exists",
        "env[REDISLOCK_LIB]",
        "in the master's environment",
        "Environment=REDISLOCK_LIB=",
        "/etc/default/php8.2-fpm",
        "scripts/install/install.sh",
        "ffi.preload",
    ];
    let failed = |name: &str, tried: &[&str]| {
        let line = case(name);
        let text = log(name);
        assert_eq!(line.num("started"), 0, "case {name} started: {text}");
        assert_ne!(line.text("status"), "0", "case {name}: {text}");
        for needle in advice.iter().chain(tried) {
            assert!(
                text.contains(needle),
                "case {name}: {needle:?} is not in php-fpm's log:\n{text}"
            );
        }
    };

    // REDISLOCK_LIB only in the pool's env[], no library installed: the issue's set-up.
    if cases
        .get("pool-env")
        .is_some_and(|l| l.fields.contains_key("skipped"))
    {
        eprintln!("case pool-env skipped: a libredislock.so is installed system-wide");
    } else {
        failed(
            "pool-env",
            &[
                "REDISLOCK_LIB is not set in this process",
                "libredislock.so (FFI_LIB of ",
                "is not found by the dynamic loader",
            ],
        );
    }
    // REDISLOCK_LIB in the master's environment, naming no file.
    failed(
        "missing-file",
        &["/no-such-dir/libredislock.so (this process's environment) does not exist"],
    );

    // As root: a root master needs opcache.preload_user, where PHP refuses FFI::load().
    if let Some(line) = cases.get("preload-user") {
        let text = log("preload-user");
        assert_eq!(line.num("started"), 0, "{text}");
        for needle in [
            "opcache.preload_user",
            "Bind the library with ffi.preload=",
            "FFI_LIB",
        ] {
            assert!(text.contains(needle), "{needle:?} is not in:\n{text}");
        }
    }
}
