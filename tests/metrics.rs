//! The metrics of a client's backend (`Client::metrics`): a scripted workload — immediate
//! acquires, a refusal, a timeout, a cancel, a handoff chain, a lock lost by deleting its key —
//! and the snapshot's counts asserted exactly; histogram buckets that add up to their counts;
//! the Prometheus text checked by `promtool check metrics`.

mod support;

use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use redislock::metrics::{BUCKETS, Snapshot, Value};
use redislock::{Cancel, Client, ErrorKind};
use support::{RedisServer, eventually, unique_name};

const LONG: Duration = Duration::from_secs(30);
const SETTLE: Duration = Duration::from_secs(10);

fn count(s: &Snapshot, name: &str, labels: &[(&str, &str)]) -> i64 {
    s.get(name, labels)
        .unwrap_or_else(|| panic!("no series {name} {labels:?}"))
}

fn acquisitions(s: &Snapshot, outcome: &str) -> i64 {
    count(
        s,
        "redislock_acquisitions_total",
        &[("kind", "exclusive"), ("outcome", outcome)],
    )
}

fn waiters(c: &Client) -> i64 {
    count(&c.metrics(), "redislock_waiters", &[("kind", "exclusive")])
}

/// Every histogram's buckets are cumulative, end at its count, and its sum is not negative.
fn assert_histograms_consistent(s: &Snapshot) {
    let mut seen = 0;
    for f in &s.families {
        for sample in &f.samples {
            if let Value::Histogram(h) = &sample.value {
                seen += 1;
                assert_eq!(h.cumulative.len(), BUCKETS.len() + 1, "{}", f.name);
                assert!(
                    h.cumulative.windows(2).all(|w| w[0] <= w[1]),
                    "{} {:?}: buckets not cumulative: {:?}",
                    f.name,
                    sample.labels,
                    h.cumulative
                );
                assert_eq!(h.cumulative.last(), Some(&h.count), "{}", f.name);
                assert!(h.sum >= 0.0);
            }
        }
    }
    assert!(seen >= 10, "only {seen} histograms");
}

#[test]
fn scripted_workload_is_counted_exactly() {
    let srv = RedisServer::start();
    let name = unique_name("metrics-main");
    let lost_name = unique_name("metrics-lost");
    let prefix = format!("{}*", &lost_name[..lost_name.len() - 4]);
    let c = Client::builder(&srv.url())
        .metric_names([name.clone(), prefix.clone()])
        .build()
        .unwrap();
    let before = c.metrics();
    assert_eq!(acquisitions(&before, "immediate"), 0);

    // An immediate acquire, then a refusal and a timeout while it is held.
    let a = c.try_acquire(&name).unwrap();
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
    let e = c.acquire(&name, Duration::from_millis(200)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");

    // A waiter cancelled while it waits.
    let cancel = Cancel::new();
    thread::scope(|s| {
        let waiter = s.spawn(|| c.lock(&name).cancel_on(&cancel).acquire(LONG));
        assert!(eventually(SETTLE, || waiters(&c) == 1), "no waiter seen");
        cancel.cancel();
        let e = waiter.join().unwrap().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    });
    assert_eq!(waiters(&c), 0);

    // A handoff chain: A's release hands the lock to B, B's to C.
    thread::scope(|s| {
        let b = s.spawn(|| {
            let l = c.acquire(&name, LONG).unwrap();
            // Handed over by A's release: C is the one waiter left.
            assert!(eventually(SETTLE, || waiters(&c) == 1), "C not waiting");
            l.release().unwrap();
        });
        assert!(eventually(SETTLE, || waiters(&c) == 1), "B not waiting");
        let c2 = s.spawn(|| c.acquire(&name, LONG).unwrap().release().unwrap());
        assert!(eventually(SETTLE, || waiters(&c) == 2), "C not waiting");
        a.release().unwrap();
        b.join().unwrap();
        c2.join().unwrap();
    });

    // A lock lost by deleting its key: renewal finds it gone.
    let lost = c
        .lock(&lost_name)
        .lease(Duration::from_millis(300))
        .try_acquire()
        .unwrap();
    let mut con = srv.conn();
    let () = redis::cmd("DEL").arg(&lost_name).query(&mut con).unwrap();
    assert!(eventually(SETTLE, || lost.is_lost()), "loss not found");
    assert_eq!(lost.release().unwrap_err().kind(), ErrorKind::NotHeld);

    let s = c.metrics();
    assert_eq!(acquisitions(&s, "immediate"), 2);
    assert_eq!(acquisitions(&s, "busy"), 1);
    assert_eq!(acquisitions(&s, "timed_out"), 1);
    assert_eq!(acquisitions(&s, "cancelled"), 1);
    assert_eq!(acquisitions(&s, "waited"), 2);
    assert_eq!(acquisitions(&s, "failed"), 0);
    assert_eq!(
        s.sum("redislock_acquisitions_total", &[("kind", "read")]),
        0,
        "another kind counted"
    );
    assert_eq!(s.sum("redislock_acquire_errors_total", &[]), 0);
    // Every acquire that entered the wait loop: the timeout, the cancel, B and C.
    assert_eq!(
        count(&s, "redislock_wait_seconds", &[("kind", "exclusive")]),
        4
    );
    assert_eq!(
        count(
            &s,
            "redislock_handoffs_received_total",
            &[("kind", "exclusive")]
        ),
        2
    );
    // A, B and C released, the lost lock ended.
    assert_eq!(
        count(&s, "redislock_hold_seconds", &[("kind", "exclusive")]),
        4
    );
    assert_eq!(
        count(
            &s,
            "redislock_locks_lost_total",
            &[("kind", "exclusive"), ("reason", "taken_over")]
        ),
        1
    );
    assert_eq!(s.sum("redislock_locks_lost_total", &[]), 1);
    assert_eq!(c.stats().lost_locks, 1);
    assert_eq!(s.sum("redislock_locks_held", &[]), 0);
    assert_eq!(s.sum("redislock_waiters", &[]), 0);
    assert!(count(&s, "redislock_connections_opened_total", &[]) >= 1);
    assert!(count(&s, "redislock_connections_open", &[]) >= 1);
    assert_eq!(count(&s, "redislock_renewal_failures_total", &[]), 0);

    // The tracked name and prefix.
    let by_name = |n: &str, o: &str| {
        count(
            &s,
            "redislock_name_acquisitions_total",
            &[("name", n), ("outcome", o)],
        )
    };
    assert_eq!(by_name(&name, "immediate"), 1);
    assert_eq!(by_name(&name, "busy"), 1);
    assert_eq!(by_name(&name, "timed_out"), 1);
    assert_eq!(by_name(&name, "cancelled"), 1);
    assert_eq!(by_name(&name, "waited"), 2);
    assert_eq!(by_name(&prefix, "immediate"), 1);
    assert_eq!(
        count(&s, "redislock_name_locks_lost_total", &[("name", &prefix)]),
        1
    );
    assert_eq!(
        count(&s, "redislock_name_hold_seconds", &[("name", &name)]),
        3
    );
    assert_histograms_consistent(&s);

    // A held lock is counted while held.
    let held = c.try_acquire(&name).unwrap();
    assert_eq!(
        c.metrics()
            .get("redislock_locks_held", &[("kind", "exclusive")]),
        Some(1)
    );
    drop(held);
    assert_eq!(c.metrics().sum("redislock_locks_held", &[]), 0);
    promtool_check(&c.metrics().to_prometheus());
}

#[test]
fn kinds_are_counted_apart_and_failures_by_error_kind() {
    let srv = RedisServer::start();
    let name = unique_name("metrics-kinds");
    let c = Client::builder(&srv.url()).build().unwrap();
    let r = c.rw_lock(&name).try_read().unwrap();
    let e = c.rw_lock(&name).try_write().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Held);
    drop(r);
    let set = [unique_name("metrics-set-a"), unique_name("metrics-set-b")];
    drop(c.lock_all(&set).try_acquire().unwrap());
    let p = c.semaphore(&name, 3).try_acquire(2).unwrap();
    // Another kind of lock on a name held as a semaphore: an error, not a refusal.
    let e = c.try_acquire(&name).unwrap_err();
    drop(p);
    let s = c.metrics();
    let n = |kind: &str, outcome: &str| {
        count(
            &s,
            "redislock_acquisitions_total",
            &[("kind", kind), ("outcome", outcome)],
        )
    };
    assert_eq!(n("read", "immediate"), 1);
    assert_eq!(n("write", "busy"), 1);
    assert_eq!(n("semaphore", "immediate"), 1);
    assert_eq!(n("set", "immediate"), 1);
    assert_eq!(count(&s, "redislock_hold_seconds", &[("kind", "set")]), 1);
    assert_eq!(count(&s, "redislock_hold_seconds", &[("kind", "read")]), 1);
    assert_eq!(
        count(&s, "redislock_hold_seconds", &[("kind", "semaphore")]),
        1
    );
    let label = redislock::metrics::error_label(e.kind());
    if e.kind() == ErrorKind::Held {
        assert_eq!(n("exclusive", "busy"), 1);
    } else {
        assert_eq!(n("exclusive", "failed"), 1);
        assert_eq!(
            count(
                &s,
                "redislock_acquire_errors_total",
                &[("kind", "exclusive"), ("error", label)]
            ),
            1,
            "{e}"
        );
    }

    // An unreachable server: a failed acquire counted by its error kind, a failed connect.
    let gone = Client::builder("redis://127.0.0.1:1/0")
        .connect_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let e = gone.try_acquire(&name).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    let s = gone.metrics();
    assert_eq!(
        count(
            &s,
            "redislock_acquire_errors_total",
            &[("kind", "exclusive"), ("error", "connection")]
        ),
        1
    );
    assert_eq!(
        count(
            &s,
            "redislock_acquisitions_total",
            &[("kind", "exclusive"), ("outcome", "failed")]
        ),
        1
    );
    assert!(count(&s, "redislock_connect_failures_total", &[]) >= 1);
    assert_eq!(count(&s, "redislock_connections_open", &[]), 0);
}

#[test]
fn persistent_clients_share_their_backend_numbers() {
    let srv = RedisServer::start();
    let name = unique_name("metrics-shared");
    let make = || {
        Client::builder(&srv.url())
            .persistent(true)
            .pool_size(3)
            .build()
            .unwrap()
    };
    let (one, two) = (make(), make());
    drop(one.try_acquire(&name).unwrap());
    drop(two.try_acquire(&name).unwrap());
    for c in [&one, &two] {
        assert_eq!(acquisitions(&c.metrics(), "immediate"), 2);
    }
}

/// `promtool check metrics` accepts the text (its lint included).
fn promtool_check(text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus, scripts/setup.sh) is needed");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics failed:\n{}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn promtool_finds_a_broken_text() {
    // The check itself can fail: a counter without its _total suffix and a bad line.
    let bad = "# TYPE redislock_x counter\nredislock_x{a=\"1\" 1\n";
    let result = std::panic::catch_unwind(|| promtool_check(bad));
    assert!(result.is_err(), "promtool accepted a broken text");
}

/// An HTTP GET of `path` on `addr` (HTTP/1.0, the answer read to its end): status line and body.
fn http_get(addr: &str, path: &str) -> std::io::Result<(String, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.lines().next().unwrap_or("").to_owned();
    Ok((status, body.to_owned()))
}

/// The value of the sample line `series` (name and labels exactly as in the text).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn prometheus_scrapes_the_example_and_answers_a_query() {
    let srv = RedisServer::start();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = support::cargo_build_example(root, "metrics", Duration::from_secs(15 * 60));
    let listen = format!("127.0.0.1:{}", support::free_port());
    let mut cmd = Command::new(&example);
    cmd.args(["--listen", &listen])
        .env("REDIS_URL", srv.url())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let mut app = support::spawn_anchored(cmd).expect("cannot start the metrics example");
    let dir = std::env::temp_dir().join(format!("redislock-prom-{}", unique_name("t")));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: redislock\n    static_configs:\n      - targets: ['{listen}']\n"
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", support::free_port());
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!(
        "--config.file={}",
        dir.join("prometheus.yml").display()
    ))
    .arg(format!(
        "--storage.tsdb.path={}",
        dir.join("data").display()
    ))
    .arg(format!("--web.listen-address={web}"))
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let mut prom = support::spawn_anchored(cmd)
        .expect("prometheus (Debian package prometheus, scripts/setup.sh) is needed");

    // The example's own endpoint first: Prometheus text, and 404 elsewhere.
    assert!(
        eventually(Duration::from_secs(30), || http_get(&listen, "/metrics")
            .is_ok_and(|(status, _)| status.contains(" 200 "))),
        "the example does not serve /metrics"
    );
    let (status, _) = http_get(&listen, "/other").unwrap();
    assert!(status.contains(" 404 "), "{status}");

    // Prometheus scrapes it; its HTTP API answers for a counter the workload moves.
    let series = r#"redislock_name_acquisitions_total{name="orders",outcome="waited"}"#;
    let query = "/api/v1/query?query=redislock_name_acquisitions_total%7Bjob%3D%22redislock%22%2Cname%3D%22orders%22%2Coutcome%3D%22waited%22%7D";
    let mut seen = None;
    let found = eventually(Duration::from_secs(90), || {
        let Ok((_, body)) = http_get(&web, query) else {
            return false;
        };
        // {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},"value":[1700000000.1,"42"]}]}}
        let value = body
            .split("\"value\":[")
            .nth(1)
            .and_then(|v| v.split('"').nth(1))
            .and_then(|v| v.parse::<f64>().ok());
        seen = Some(body);
        value.is_some_and(|v| v > 0.0)
    });
    let body = seen.unwrap_or_default();
    assert!(found, "Prometheus never reported {series} > 0: {body}");
    assert!(body.contains("\"status\":\"success\""), "{body}");
    let queried: f64 = body
        .split("\"value\":[")
        .nth(1)
        .and_then(|v| v.split('"').nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap();
    // A counter only grows: the endpoint shows at least what Prometheus scraped before.
    let (_, now) = http_get(&listen, "/metrics").unwrap();
    let current = sample(&now, series).expect("the series is in the text");
    assert!(
        queried <= current,
        "Prometheus has {queried}, the endpoint {current}"
    );
    eprintln!("Prometheus query {series}: {queried} (endpoint now {current})");
    // And the target is up.
    let (_, up) = http_get(&web, "/api/v1/query?query=up%7Bjob%3D%22redislock%22%7D").unwrap();
    assert!(up.contains("\"1\"]"), "{up}");

    let _ = prom.kill();
    let _ = prom.wait();
    let _ = app.kill();
    let _ = app.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Started in the background by a shell script (`example &`), which starts it with SIGINT
/// ignored, the metrics example still stops on SIGINT, as its "stopped with Ctrl-C" promises.
#[test]
fn the_example_started_in_the_background_stops_on_sigint() {
    use std::io::{BufRead, BufReader};
    let srv = RedisServer::start();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let example = support::cargo_build_example(root, "metrics", Duration::from_secs(15 * 60));
    let listen = format!("127.0.0.1:{}", support::free_port());
    let mut cmd = Command::new("sh");
    // A non-interactive shell ignores SIGINT in its background jobs; `wait` ends with the job's
    // status (130: killed by SIGINT).
    cmd.args([
        "-c",
        r#""$0" --listen "$1" >/dev/null 2>&1 & echo $!; wait $!"#,
    ])
    .arg(&example)
    .arg(&listen)
    .env("REDIS_URL", srv.url())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut sh = support::spawn_anchored(cmd).expect("cannot start sh");
    let mut line = String::new();
    BufReader::new(sh.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid: i32 = line.trim().parse().expect("sh printed no pid");
    let serving = eventually(LONG, || {
        http_get(&listen, "/metrics").is_ok_and(|(status, _)| status.contains(" 200 "))
    });
    // The shell started it with SIGINT ignored; the running example must not ignore it.
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let ignored = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .map(|hex| u64::from_str_radix(hex.trim(), 16).unwrap());
    // SAFETY: kill(2) on the example's pid, a child of the shell this test started (which
    // reaps it as soon as it ends: its `wait`).
    unsafe { libc::kill(pid, libc::SIGINT) };
    let stopped = eventually(
        Duration::from_secs(10),
        || unsafe { libc::kill(pid, 0) } != 0,
    );
    // SAFETY: as above. Never left running, whatever the outcome.
    let left = unsafe { libc::kill(pid, libc::SIGKILL) } == 0;
    let out = support::wait_child(sh, Duration::from_secs(10));
    assert!(serving, "the example did not serve /metrics");
    assert_eq!(
        ignored.map(|m| m & (1 << (libc::SIGINT - 1))),
        Some(0),
        "{status}"
    );
    assert!(stopped && !left, "the example ran on after SIGINT");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
