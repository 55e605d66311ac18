//! The spans of the cargo feature `tracing` (`src/engine/trace.rs`), against a real server and
//! captured by a small `Subscriber` of this file: acquire (outcome, wait time), release, extend,
//! renewal and a lost lock, with `lock.kind`, `lock.name` only for tracked names, `error.type`
//! for a failure; no field holds a lock's owner token.
//!
//! One test function: the subscriber is the process's global one (renewal runs on threads of
//! its own), and the phases look at what was captured since they began.

mod support;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use redislock::{Client, ErrorKind};
use support::{RedisServer, eventually, unique_name};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// One span as the subscriber saw it: its name, level, parent and fields (values as text).
#[derive(Debug, Clone)]
struct Captured {
    id: u64,
    name: &'static str,
    level: tracing::Level,
    parent: Option<u64>,
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn get(&self, field: &str) -> Option<&str> {
        self.fields.get(field).map(String::as_str)
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, f: &Field, v: &str) {
        self.0.insert(f.name().to_owned(), v.to_owned());
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.0.insert(f.name().to_owned(), v.to_string());
    }
    fn record_debug(&mut self, f: &Field, v: &dyn std::fmt::Debug) {
        self.0.insert(f.name().to_owned(), format!("{v:?}"));
    }
}

/// Captures every span of the `redislock` target; events are counted apart.
#[derive(Default)]
struct Capture {
    next: AtomicU64,
    spans: Mutex<Vec<Captured>>,
    events: AtomicU64,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Subscriber for Capture {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target().starts_with("redislock")
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent = match attrs.parent() {
            Some(p) => Some(p.into_u64()),
            None if attrs.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        self.spans.lock().unwrap().push(Captured {
            id,
            name: attrs.metadata().name(),
            level: *attrs.metadata().level(),
            parent,
            fields,
        });
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        if let Some(s) = spans.iter_mut().find(|s| s.id == span.into_u64()) {
            values.record(&mut Fields(&mut s.fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }
    fn enter(&self, span: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }
    fn exit(&self, span: &Id) {
        ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            if let Some(i) = e.iter().rposition(|&s| s == span.into_u64()) {
                e.remove(i);
            }
        });
    }
}

static CAPTURE: std::sync::OnceLock<&'static Capture> = std::sync::OnceLock::new();

fn capture() -> &'static Capture {
    CAPTURE.get_or_init(|| {
        let c: &'static Capture = Box::leak(Box::default());
        tracing::subscriber::set_global_default(Forward(c)).expect("no other subscriber");
        c
    })
}

/// The global subscriber: forwards to the leaked [`Capture`] the test reads.
struct Forward(&'static Capture);

impl Subscriber for Forward {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        self.0.enabled(m)
    }
    fn new_span(&self, a: &Attributes<'_>) -> Id {
        self.0.new_span(a)
    }
    fn record(&self, s: &Id, v: &Record<'_>) {
        self.0.record(s, v)
    }
    fn record_follows_from(&self, s: &Id, f: &Id) {
        self.0.record_follows_from(s, f)
    }
    fn event(&self, e: &Event<'_>) {
        self.0.event(e)
    }
    fn enter(&self, s: &Id) {
        self.0.enter(s)
    }
    fn exit(&self, s: &Id) {
        self.0.exit(s)
    }
}

/// The spans captured from index `from` on.
fn since(from: usize) -> Vec<Captured> {
    capture().spans.lock().unwrap()[from..].to_vec()
}

fn mark() -> usize {
    capture().spans.lock().unwrap().len()
}

/// The one span named `name` among `spans` with field `lock.name` = `lock` (`None`: without it).
fn one<'a>(spans: &'a [Captured], name: &str, lock: Option<&str>) -> &'a Captured {
    let found: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == name && s.get("lock.name") == lock)
        .collect();
    assert_eq!(found.len(), 1, "{name} {lock:?}: {spans:#?}");
    found[0]
}

fn seconds(s: &Captured, field: &str) -> f64 {
    s.get(field)
        .unwrap_or_else(|| panic!("no {field}: {s:?}"))
        .parse()
        .unwrap()
}

#[test]
fn spans_of_acquire_release_extend_renewal_and_lost_locks() {
    let cap = capture();
    let srv = RedisServer::start();
    let name = unique_name("trace-main");
    let other = unique_name("trace-untracked");
    let lost_name = unique_name("trace-lost");
    let prefix = format!("{}*", &lost_name[..lost_name.len() - 4]);
    let rw = unique_name("trace-rw");
    let c = Client::builder(&srv.url())
        .metric_names([name.clone(), prefix.clone(), rw.clone()])
        .build()
        .unwrap();
    let mut tokens = Vec::new();

    // An immediate acquire, a refusal, a timeout, a waiter handed the lock by a release.
    let from = mark();
    let a = c.try_acquire(&name).unwrap();
    tokens.push(a.owner_token().to_owned());
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
    // The wait shows in the caller's trace: the acquire's span is a child of the current one.
    let request = tracing::info_span!(target: "redislock_app", "app.request");
    let e = request
        .in_scope(|| c.acquire(&name, Duration::from_millis(200)))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout);
    let spans: Vec<Captured> = since(from)
        .into_iter()
        .filter(|s| s.name != "app.request")
        .collect();
    let acquires: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == "redislock.acquire")
        .collect();
    assert_eq!(acquires.len(), 3, "{spans:#?}");
    for s in &acquires {
        assert_eq!(s.level, tracing::Level::INFO);
        assert_eq!(s.get("lock.kind"), Some("exclusive"));
        assert_eq!(s.get("lock.name"), Some(name.as_str()));
        assert_eq!(s.get("error.type"), None);
        assert_eq!(s.get("otel.status_code"), None);
    }
    assert_eq!(acquires[0].get("outcome"), Some("immediate"));
    assert_eq!(
        acquires[0].get("lock.wait_seconds"),
        None,
        "it never waited"
    );
    assert_eq!(acquires[1].get("outcome"), Some("busy"));
    assert_eq!(acquires[2].get("outcome"), Some("timed_out"));
    assert_eq!(acquires[2].parent, request.id().map(|id| id.into_u64()));
    assert_eq!(acquires[0].parent, None);
    let waited = seconds(acquires[2], "lock.wait_seconds");
    assert!((0.15..10.0).contains(&waited), "{waited}");

    let from = mark();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let l = c.acquire(&name, Duration::from_secs(30)).unwrap();
            let token = l.owner_token().to_owned();
            l.release().unwrap();
            token
        });
        assert!(
            eventually(Duration::from_secs(10), || c
                .metrics()
                .sum("redislock_waiters", &[])
                == 1),
            "no waiter"
        );
        thread::sleep(Duration::from_millis(50));
        a.release().unwrap();
        tokens.push(waiter.join().unwrap());
    });
    let spans = since(from);
    let handed = spans
        .iter()
        .find(|s| s.name == "redislock.acquire")
        .unwrap();
    assert_eq!(handed.get("outcome"), Some("waited"), "{handed:?}");
    assert!(seconds(handed, "lock.wait_seconds") >= 0.04, "{handed:?}");
    let releases: Vec<&Captured> = spans
        .iter()
        .filter(|s| s.name == "redislock.release")
        .collect();
    assert_eq!(releases.len(), 2, "{spans:#?}");
    for r in releases {
        assert_eq!(r.get("outcome"), Some("released"));
        assert_eq!(r.get("lock.name"), Some(name.as_str()));
        assert_eq!(r.get("lock.kind"), Some("exclusive"));
    }

    // An extend; a name that is not tracked has no lock.name; a read lock says its kind.
    let from = mark();
    let l = c.try_acquire(&other).unwrap();
    tokens.push(l.owner_token().to_owned());
    l.extend(Duration::from_secs(20)).unwrap();
    drop(l);
    drop(c.rw_lock(&rw).try_read().unwrap());
    let spans = since(from);
    assert_eq!(
        one(&spans, "redislock.acquire", None).get("outcome"),
        Some("immediate")
    );
    let ext = one(&spans, "redislock.extend", None);
    assert_eq!(ext.get("outcome"), Some("extended"));
    assert_eq!(seconds(ext, "lock.lease_seconds"), 20.0);
    assert_eq!(
        one(&spans, "redislock.release", None).get("outcome"),
        Some("released")
    );
    let read = one(&spans, "redislock.acquire", Some(&rw));
    assert_eq!(read.get("lock.kind"), Some("read"));

    // An auto-renewed lock: renewed, then its key deleted, found lost by renewal.
    let from = mark();
    let lost = c
        .lock(&lost_name)
        .lease(Duration::from_millis(300))
        .try_acquire()
        .unwrap();
    tokens.push(lost.owner_token().to_owned());
    let renewed =
        |s: &Captured| s.name == "redislock.renew" && s.get("outcome") == Some("extended");
    assert!(
        eventually(Duration::from_secs(10), || since(from).iter().any(renewed)),
        "no renewal span: {:#?}",
        since(from)
    );
    let mut con = srv.conn();
    let () = redis::cmd("DEL").arg(&lost_name).query(&mut con).unwrap();
    assert!(
        eventually(Duration::from_secs(10), || lost.is_lost()),
        "loss not found"
    );
    assert_eq!(lost.release().unwrap_err().kind(), ErrorKind::NotHeld);
    let spans = since(from);
    let renewal = spans.iter().find(|s| renewed(s)).unwrap();
    assert_eq!(renewal.level, tracing::Level::DEBUG);
    assert_eq!(renewal.parent, None, "renewal runs on a thread of its own");
    assert_eq!(renewal.get("lock.name"), Some(prefix.as_str()));
    assert_eq!(renewal.get("lock.kind"), Some("exclusive"));
    let gone = spans
        .iter()
        .find(|s| s.name == "redislock.renew" && s.get("outcome") == Some("not_held"))
        .unwrap_or_else(|| panic!("no renewal that found the key gone: {spans:#?}"));
    assert_eq!(gone.get("otel.status_code"), Some("ERROR"));
    let lost_span = one(&spans, "redislock.lost", Some(&prefix));
    assert_eq!(lost_span.level, tracing::Level::WARN);
    assert_eq!(lost_span.get("lock.lost_reason"), Some("taken_over"));
    assert_eq!(lost_span.get("otel.status_code"), Some("ERROR"));
    assert!(seconds(lost_span, "lock.hold_seconds") > 0.0);

    // An extend that finds the key gone: the extend says not_held, a lost span says why.
    let from = mark();
    let l = c
        .lock(&name)
        .lease(Duration::from_secs(20))
        .auto_renew(false)
        .try_acquire()
        .unwrap();
    tokens.push(l.owner_token().to_owned());
    let () = redis::cmd("DEL").arg(&name).query(&mut con).unwrap();
    assert_eq!(
        l.extend(Duration::from_secs(20)).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    let spans = since(from);
    let ext = one(&spans, "redislock.extend", Some(&name));
    assert_eq!(ext.get("outcome"), Some("not_held"));
    let lost_span = one(&spans, "redislock.lost", Some(&name));
    assert_eq!(lost_span.get("lock.lost_reason"), Some("found_by_extend"));
    drop(l);

    // A failed acquire: the error's kind, and the span marked as an error.
    let from = mark();
    let gone = Client::builder("redis://127.0.0.1:1/0")
        .connect_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    assert_eq!(
        gone.try_acquire(&name).unwrap_err().kind(),
        ErrorKind::Connection
    );
    let spans = since(from);
    let failed = one(&spans, "redislock.acquire", None);
    assert_eq!(failed.get("outcome"), Some("failed"));
    assert_eq!(failed.get("error.type"), Some("connection"));
    assert_eq!(failed.get("otel.status_code"), Some("ERROR"));

    // No field of any span holds a token; every span is one of ours, on the target "redislock".
    let all = since(0);
    assert!(all.len() >= 15, "{}", all.len());
    for s in &all {
        assert!(
            [
                "app.request",
                "redislock.acquire",
                "redislock.release",
                "redislock.extend",
                "redislock.renew",
                "redislock.lost"
            ]
            .contains(&s.name),
            "{s:?}"
        );
        for (field, value) in &s.fields {
            for t in &tokens {
                assert!(
                    !value.contains(t.as_str()),
                    "{} {field} holds a token",
                    s.name
                );
            }
        }
    }
    assert_eq!(tokens.len(), 5);
    assert!(tokens.iter().all(|t| t.len() >= 16));
    assert_eq!(
        cap.events.load(Ordering::Relaxed),
        0,
        "the spans are all there is"
    );
}
