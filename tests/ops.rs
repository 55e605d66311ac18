//! The operator's kit in `docs/ops/`, checked against the library itself:
//! - the alerting rules pass `promtool check rules`, and their unit tests (series in, alerts
//!   expected out) pass `promtool test rules`; every alert has a test;
//! - every metric name in the rules, their tests and the Grafana dashboard is a family of a live
//!   client's Prometheus text, every label they select or group by is one of its labels, and
//!   every family the library exports is on the dashboard: neither can drift from the code;
//!   `docs/metrics.md`'s table lists the same families;
//! - a real Prometheus, scraping a live client, accepts every expression of the dashboard.
//!
//! promtool and prometheus come from Debian's `prometheus` (scripts/setup.sh). Without them the
//! tests that need them say so and pass, except under CI (`CI` set), where they fail.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use support::{RedisServer, eventually, free_port, unique_name};

fn ops_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ops")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(ops_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Whether `tool` runs. A missing tool fails the test under CI, and skips it elsewhere.
fn have(tool: &str) -> bool {
    let found = Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{tool} is needed (Debian package prometheus, scripts/setup.sh)"
        );
        eprintln!("skipped: {tool} not found (Debian package prometheus, scripts/setup.sh)");
    }
    found
}

/// The families of a live client's Prometheus text, with the label names of their series
/// (`le` left out); `None` for a family without series here.
fn live_families() -> BTreeMap<String, Option<BTreeSet<String>>> {
    let srv = RedisServer::start();
    let name = unique_name("ops");
    let c = Client::builder(&srv.url())
        .metric_names([name.clone(), "jobs:*".to_owned()])
        .build()
        .unwrap();
    drop(c.try_acquire(&name).unwrap());
    let mut text = c.metrics().to_prometheus();
    // Redlock's per-master family has series once a Redlock store is opened (no connection
    // needed for that).
    let redlock = Client::builder("redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3")
        .connect_timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let _ = redlock.try_acquire(&name);
    text.push_str(&redlock.metrics().to_prometheus());
    families_of(&text)
}

fn families_of(text: &str) -> BTreeMap<String, Option<BTreeSet<String>>> {
    let mut families = BTreeMap::new();
    let mut histograms = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            families.entry(name.to_owned()).or_insert(None);
            if kind == "histogram" {
                histograms.insert(name.to_owned());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let series = line.rsplit_once(' ').unwrap().0;
            let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| metric.strip_suffix(s).filter(|f| histograms.contains(*f)))
                .unwrap_or(metric);
            let names = families
                .get_mut(family)
                .unwrap_or_else(|| panic!("a series before its family: {line}"))
                .get_or_insert_with(BTreeSet::new);
            for pair in label_pairs(labels.trim_end_matches('}')) {
                if pair != "le" {
                    names.insert(pair);
                }
            }
        }
    }
    families
}

/// The label names of a label list `a="x",b=~"y"` (values may hold commas and escaped quotes).
fn label_pairs(list: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = list.trim();
    while !rest.is_empty() {
        let q = rest
            .find('"')
            .unwrap_or_else(|| panic!("no value in {list}"));
        let name = rest[..q].trim_end_matches(['=', '~', '!']).trim();
        names.push(name.trim_start_matches(',').trim().to_owned());
        let mut end = q + 1;
        let bytes = rest.as_bytes();
        while bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        rest = rest[end + 1..].trim_start_matches([',', ' ']);
    }
    names
}

/// The metric names an expression uses: every `redislock_…` word; a histogram's series name
/// counts as its family.
fn metrics_in(expr: &str) -> Vec<String> {
    words(expr)
        .into_iter()
        .filter(|w| w.starts_with("redislock_"))
        .collect()
}

fn words(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in expr.chars().chain([' ']) {
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
    }
    out
}

/// The family of a series name of `families` (`x_bucket` is `x`'s).
fn family_of<'a>(
    metric: &str,
    families: &'a BTreeMap<String, Option<BTreeSet<String>>>,
) -> Option<(&'a String, &'a Option<BTreeSet<String>>)> {
    families.get_key_value(metric).or_else(|| {
        ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| families.get_key_value(metric.strip_suffix(s)?))
    })
}

/// Checks one expression against the live families: each metric is one of them, each label it
/// selects on a metric is one of that family's, each label it groups or matches by is a label
/// of one of its metrics. Returns the families it uses.
fn check_expr(
    where_: &str,
    expr: &str,
    families: &BTreeMap<String, Option<BTreeSet<String>>>,
) -> BTreeSet<String> {
    let target_labels = ["job", "instance"];
    let metrics = metrics_in(expr);
    assert!(
        !metrics.is_empty(),
        "{where_}: no redislock metric in {expr}"
    );
    let mut used = BTreeSet::new();
    let mut all_labels: BTreeSet<String> = BTreeSet::new();
    for m in &metrics {
        let (family, labels) = family_of(m, families)
            .unwrap_or_else(|| panic!("{where_}: {m} is not a family the library exports: {expr}"));
        used.insert(family.clone());
        if let Some(labels) = labels {
            all_labels.extend(labels.iter().cloned());
        }
        // The selector right after this metric name, if any.
        for (i, _) in expr.match_indices(m.as_str()) {
            let after = &expr[i + m.len()..];
            let boundary = after
                .chars()
                .next()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            if !boundary || !after.starts_with('{') {
                continue;
            }
            let list = &after[1..after.find('}').unwrap()];
            for l in label_pairs(list) {
                let known = target_labels.contains(&l.as_str())
                    || labels.as_ref().is_none_or(|ls| ls.contains(&l));
                assert!(known, "{where_}: {m} has no label {l}: {expr}");
            }
        }
    }
    for clause in ["by", "on", "ignoring"] {
        let pattern = format!("{clause} (");
        for (i, _) in expr.match_indices(&pattern) {
            let list = &expr[i + pattern.len()..];
            let list = &list[..list.find(')').unwrap()];
            for l in list.split(',').map(str::trim) {
                let known = target_labels.contains(&l) || l == "le" || all_labels.contains(l);
                assert!(known, "{where_}: no metric of it has the label {l}: {expr}");
            }
        }
    }
    used
}

/// The `expr:` of every rule (each on one line) and the alert names.
fn rules() -> (Vec<String>, Vec<String>) {
    let text = read("redislock.rules.yml");
    let mut exprs = Vec::new();
    let mut alerts = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(e) = line.strip_prefix("expr:") {
            let e = e.trim();
            assert!(
                !e.starts_with(['|', '>']),
                "keep each expr on one line (this test reads them so): {e}"
            );
            exprs.push(e.to_owned());
        } else if let Some(a) = line.strip_prefix("- alert:") {
            alerts.push(a.trim().to_owned());
        }
    }
    assert_eq!(exprs.len(), alerts.len(), "an alert without expr");
    (exprs, alerts)
}

/// Every `expr` of the dashboard's panels, and the metric queries of its variables.
fn dashboard() -> (Vec<String>, Vec<String>) {
    let json: serde_json::Value =
        serde_json::from_str(&read("redislock-dashboard.json")).expect("the dashboard is JSON");
    fn walk(v: &serde_json::Value, exprs: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr", serde_json::Value::String(e)) => exprs.push(e.clone()),
                        _ => walk(v, exprs),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, exprs)),
            _ => {}
        }
    }
    let mut exprs = Vec::new();
    walk(&json["panels"], &mut exprs);
    let vars = json["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["query"]["query"].as_str().map(str::to_owned))
        .collect();
    (exprs, vars)
}

#[test]
fn rules_and_dashboard_name_only_what_the_library_exports() {
    let families = live_families();
    assert!(families.len() >= 20, "{families:?}");
    let (rule_exprs, alerts) = rules();
    for (e, a) in rule_exprs.iter().zip(&alerts) {
        check_expr(a, e, &families);
    }
    // The unit tests' input series are series of the library's families too.
    let tests = read("redislock.rules.test.yml");
    for line in tests.lines().map(str::trim) {
        if let Some(s) = line.strip_prefix("- series:") {
            let s = s.trim().trim_matches('\'');
            check_expr("rules test input", s, &families);
        }
    }
    // Every alert has a unit test.
    for a in &alerts {
        assert!(
            tests.contains(&format!("alertname: {a}\n")),
            "no unit test of {a} in redislock.rules.test.yml"
        );
    }

    let (exprs, vars) = dashboard();
    assert!(exprs.len() >= 20, "{}", exprs.len());
    let mut shown = BTreeSet::new();
    for e in &exprs {
        shown.extend(check_expr("dashboard", e, &families));
    }
    for v in &vars {
        check_expr("dashboard variable", v, &families);
    }
    // docs/metrics.md lists the same families as the library exports.
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/metrics.md"))
            .unwrap();
    let documented: BTreeSet<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `redislock_")?.split_once('`'))
        .map(|(rest, _)| format!("redislock_{rest}"))
        .collect();
    let exported: BTreeSet<String> = families.keys().cloned().collect();
    assert_eq!(
        documented, exported,
        "docs/metrics.md's table and the library differ"
    );
    // Every family the library exports is on the dashboard.
    let missing: Vec<&String> = families.keys().filter(|f| !shown.contains(*f)).collect();
    assert!(
        missing.is_empty(),
        "families not on the dashboard: {missing:?}"
    );
}

#[test]
fn the_checker_finds_what_does_not_exist() {
    let text = "# TYPE redislock_a_total counter\nredislock_a_total{kind=\"x\"} 1\n\
                # TYPE redislock_h_seconds histogram\nredislock_h_seconds_bucket{le=\"+Inf\"} 0\n";
    let families = families_of(text);
    assert_eq!(
        check_expr("t", "rate(redislock_h_seconds_bucket[1m])", &families).len(),
        1
    );
    let bad = [
        "rate(redislock_b_total[1m])",
        "rate(redislock_a_total{outcome=\"x\"}[1m])",
        "sum by (outcome) (rate(redislock_a_total[1m]))",
        "vector(1)",
    ];
    for e in bad {
        let r = std::panic::catch_unwind(|| check_expr("t", e, &families));
        assert!(r.is_err(), "accepted {e}");
    }
    check_expr(
        "t",
        "sum by (kind, job) (rate(redislock_a_total{kind=~\"a,b\"}[1m]))",
        &families,
    );
}

#[test]
fn promtool_checks_and_tests_the_rules() {
    if !have("promtool") {
        return;
    }
    for args in [
        ["check", "rules", "redislock.rules.yml"],
        ["test", "rules", "redislock.rules.test.yml"],
    ] {
        let out = Command::new("promtool")
            .args(args)
            .current_dir(ops_dir())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn promtool_test_fails_on_a_wrong_expectation() {
    if !have("promtool") {
        return;
    }
    // The same tests, with the lost-lock alert expected from a healthy series: must fail.
    let dir = std::env::temp_dir().join(unique_name("redislock-rules"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        ops_dir().join("redislock.rules.yml"),
        dir.join("redislock.rules.yml"),
    )
    .unwrap();
    let tests = read("redislock.rules.test.yml").replacen(
        "        values: '0 0 0 1 1 1 1 1 1 1 1 1 1'",
        "        values: '0x12'",
        1,
    );
    std::fs::write(dir.join("t.yml"), tests).unwrap();
    let out = Command::new("promtool")
        .args(["test", "rules", "t.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "promtool passed a wrong expectation");
}

/// Serves `text()` as `/metrics` on `addr` until `stop` (bounded: ten minutes at most).
fn serve(addr: String, stop: Arc<AtomicBool>, text: impl Fn() -> String + Send + 'static) {
    let listener = TcpListener::bind(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(600);
        while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
            match listener.accept() {
                Ok((mut s, _)) => {
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    let body = text();
                    let _ = write!(
                        s,
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                         Content-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                }
                Err(_) => thread::sleep(Duration::from_millis(20)),
            }
        }
    });
}

fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    Ok(answer
        .split_once("\r\n\r\n")
        .map_or(answer.clone(), |(_, b)| b.to_owned()))
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn prometheus_accepts_every_dashboard_expression() {
    if !have("prometheus") {
        return;
    }
    let srv = RedisServer::start();
    let name = unique_name("ops-prom");
    let c = Client::builder(&srv.url())
        .metric_names([name.clone()])
        .build()
        .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let stop = Arc::new(AtomicBool::new(false));
    let client = c.clone();
    let n = name.clone();
    serve(listen.clone(), stop.clone(), move || {
        // Some work between scrapes, so that the rates have something to show.
        drop(client.try_acquire(&n));
        client.metrics().to_prometheus()
    });
    let dir = std::env::temp_dir().join(unique_name("redislock-ops-prom"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\n\
             scrape_configs:\n  - job_name: redislock\n    static_configs:\n      \
             - targets: ['{listen}']\n",
            ops_dir().join("redislock.rules.yml").display()
        ),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", free_port());
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
    let mut prom = support::spawn_anchored(cmd).expect("cannot start prometheus");

    // Three scrapes in: a rate over them has a value.
    let scraped = "/api/v1/query?query=count_over_time(up%7Bjob%3D%22redislock%22%7D%5B1m%5D)";
    let ready = eventually(Duration::from_secs(60), || {
        http_get(&web, scraped).is_ok_and(|b| {
            b.split("\"value\":[")
                .nth(1)
                .and_then(|v| v.split('"').nth(1))
                .and_then(|v| v.parse::<f64>().ok())
                .is_some_and(|n| n >= 3.0)
        })
    });
    assert!(ready, "Prometheus did not scrape the client");

    let (exprs, _) = dashboard();
    let mut without_data = Vec::new();
    for e in &exprs {
        let q = e
            .replace("$__rate_interval", "1m")
            .replace("$__range", "1h")
            .replace("$job", ".*")
            .replace("$instance", ".*")
            .replace("$kind", ".*")
            .replace("$name", ".*");
        let body = http_get(&web, &format!("/api/v1/query?query={}", url_encode(&q))).unwrap();
        assert!(body.contains("\"status\":\"success\""), "{e}\n{body}");
        if !body.contains("\"value\":[") {
            without_data.push(e);
        }
    }
    // Every series is there from the start, at 0, except Redlock's per master (no Redlock here).
    assert!(
        without_data
            .iter()
            .all(|e| e.contains("redislock_redlock_master_failures_total")),
        "no data for {without_data:#?}"
    );
    // The rules loaded too.
    let rules = http_get(&web, "/api/v1/rules").unwrap();
    assert!(rules.contains("RedislockLockLost"), "{rules}");
    assert!(!rules.contains("\"health\":\"err\""), "{rules}");

    stop.store(true, Ordering::Relaxed);
    let _ = prom.kill();
    let _ = prom.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
