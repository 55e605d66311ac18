//! The Sentinel section's failover trials, `--failovers` times on a fresh group each: one
//! thread loops `try_acquire` + release on the Sentinel URL (a new name each cycle, so no lease
//! of the dead master's is waited out; 1 ms between cycles, 5 ms after an error), the master is
//! killed with SIGKILL, and a watcher polls the replicas' ROLE and the sentinels'
//! GET-MASTER-ADDR-BY-NAME every 5 ms. Promotion = kill → a replica answers ROLE master and a
//! sentinel names it (the first moment a Sentinel client can find it); recovery = kill → the
//! first acquire begun after the kill returned Ok.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::{RedisServer, SentinelGroup};

use crate::json::J;
use crate::report::{Load, Report, Targets, f1};
use crate::sentinel::start_group;
use crate::server::Server;
use crate::standalone::Opts;
use crate::topology::client;

/// How long a failover trial waits for the promotion and the first acquire after the kill.
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);
/// The failover loop's steady cycle before the kill.
const WARM: Duration = Duration::from_millis(500);
const POLL: Duration = Duration::from_millis(5);

/// `--failovers` trials, each on a fresh group.
pub fn failovers(o: &Opts, server: &Server, rep: &mut Report, targets: &mut Targets) {
    // The groups start and end inside the section: their CPU counts as the bench's.
    let load = Load::start(server);
    let mut trials = Vec::new();
    for t in 0..o.failovers {
        eprintln!("  sentinel failover {}/{} ...", t + 1, o.failovers);
        let Some(group) = start_group() else {
            break;
        };
        trials.push(failover(&group, t));
    }
    failover_report(&trials, rep, targets, load.end(server));
}

/// What one failover trial measured, in ms after the kill.
#[derive(Default)]
struct Trial {
    /// A replica answered ROLE master.
    role_ms: Option<f64>,
    /// The first sentinel named another master.
    switch_ms: Option<f64>,
    /// All three sentinels named it.
    all_switched_ms: Option<f64>,
    /// The first acquire begun after the kill returned Ok.
    first_acquire_ms: Option<f64>,
    /// Successful cycles before the kill, failed attempts after it, by error kind.
    ok_before: usize,
    failed: Vec<(String, usize)>,
    /// The longest failed attempt, ms.
    longest_failed_ms: f64,
    /// The new master (from the replicas' ROLE) and what the sentinels named.
    new_master: Option<u16>,
    named: Vec<u16>,
}

impl Trial {
    /// Kill → a replica is master and a sentinel names it: the earliest moment a Sentinel
    /// client can find the new master.
    fn promotion_ms(&self) -> Option<f64> {
        Some(self.role_ms?.max(self.switch_ms?))
    }
}

struct Attempt {
    start: Instant,
    end: Instant,
    /// The error's kind when it failed.
    err: Option<String>,
}

/// One failover trial on `group`; see the module's doc.
fn failover(group: &SentinelGroup, trial: usize) -> Trial {
    let client = client(&group.url(), 0, false);
    let old = group.master();
    let old_port = old.port();
    let stop = AtomicBool::new(false);
    let killed_at: OnceLock<Instant> = OnceLock::new();
    let first_ok: OnceLock<Instant> = OnceLock::new();
    let mut watch = Watcher::new(group, old_port);
    let attempts = thread::scope(|s| {
        let looper = thread::Builder::new()
            .name("bench-failover".into())
            .spawn_scoped(s, || {
                let mut v = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let name = format!("pb:failover:{trial}:{i}");
                    i += 1;
                    let start = Instant::now();
                    let r = client.lock(name.as_bytes()).try_acquire();
                    let end = Instant::now();
                    let err = match r {
                        Ok(lock) => {
                            // A release the kill interrupts does not matter: the name is not
                            // used again.
                            let _ = lock.release();
                            if killed_at.get().is_some_and(|k| start > *k) {
                                let _ = first_ok.set(end);
                            }
                            None
                        }
                        Err(e) => Some(format!("{:?}", e.kind())),
                    };
                    let failed = err.is_some();
                    v.push(Attempt { start, end, err });
                    thread::sleep(if failed {
                        POLL
                    } else {
                        Duration::from_millis(1)
                    });
                }
                v
            })
            .expect("spawn the failover loop");
        thread::sleep(WARM);
        let t0 = Instant::now();
        killed_at.set(t0).unwrap();
        old.kill();
        while t0.elapsed() < FAILOVER_LIMIT {
            watch.poll();
            if watch.done() && first_ok.get().is_some() {
                break;
            }
            thread::sleep(POLL);
        }
        stop.store(true, Ordering::Relaxed);
        looper.join().expect("the failover loop panicked")
    });
    let t0 = *killed_at.get().unwrap();
    let ms = |t: Instant| (t - t0).as_secs_f64() * 1e3;
    let seen = |sentinel: bool| {
        watch
            .probes
            .iter()
            .filter(move |p| p.sentinel == sentinel)
            .map(|p| p.seen)
    };
    let nodes: Vec<(u16, Instant)> = seen(false).flatten().collect();
    let sentinels: Vec<Option<(u16, Instant)>> = seen(true).collect();
    let first = |v: &[(u16, Instant)]| v.iter().min_by_key(|(_, t)| *t).copied();
    let named: Vec<(u16, Instant)> = sentinels.iter().flatten().copied().collect();
    let mut out = Trial {
        role_ms: first(&nodes).map(|(_, t)| ms(t)),
        new_master: first(&nodes).map(|(p, _)| p),
        switch_ms: first(&named).map(|(_, t)| ms(t)),
        all_switched_ms: sentinels
            .iter()
            .map(|s| s.map(|(_, t)| ms(t)))
            .collect::<Option<Vec<f64>>>()
            .and_then(|v| v.into_iter().reduce(f64::max)),
        first_acquire_ms: first_ok.get().map(|t| ms(*t)),
        named: named.iter().map(|(p, _)| *p).collect(),
        ..Trial::default()
    };
    out.named.dedup();
    out.ok_before = attempts
        .iter()
        .filter(|a| a.err.is_none() && a.end <= t0)
        .count();
    for a in attempts.iter().filter(|a| a.end > t0) {
        let Some(kind) = &a.err else { continue };
        out.longest_failed_ms = out
            .longest_failed_ms
            .max((a.end - a.start).as_secs_f64() * 1e3);
        match out.failed.iter_mut().find(|(k, _)| k == kind) {
            Some((_, n)) => *n += 1,
            None => out.failed.push((kind.clone(), 1)),
        }
    }
    out
}

/// One node or sentinel the watcher asks, on a connection of its own.
struct Probe {
    port: u16,
    sentinel: bool,
    con: Option<redis::Connection>,
    /// The new master's port this probe first reported, and when.
    seen: Option<(u16, Instant)>,
}

/// Polls the surviving data nodes' ROLE and every sentinel's GET-MASTER-ADDR-BY-NAME until
/// each has reported the failover.
struct Watcher<'a> {
    group: &'a SentinelGroup,
    /// The name the sentinels monitor the master under (the URL's fragment).
    master_name: String,
    old_port: u16,
    probes: Vec<Probe>,
}

impl<'a> Watcher<'a> {
    fn new(group: &'a SentinelGroup, old_port: u16) -> Watcher<'a> {
        let probe = |n: &RedisServer, sentinel| Probe {
            port: n.port(),
            sentinel,
            con: None,
            seen: None,
        };
        let nodes = group
            .nodes()
            .iter()
            .filter(|n| n.port() != old_port)
            .map(|n| probe(n, false));
        let sentinels = group.sentinels().iter().map(|n| probe(n, true));
        let url = group.url();
        Watcher {
            group,
            master_name: url
                .rsplit_once('#')
                .map_or("mymaster", |(_, n)| n)
                .to_owned(),
            old_port,
            probes: nodes.chain(sentinels).collect(),
        }
    }

    /// Every sentinel names a new master, and a replica answers as one.
    fn done(&self) -> bool {
        self.probes
            .iter()
            .filter(|p| p.sentinel)
            .all(|p| p.seen.is_some())
            && self.probes.iter().any(|p| !p.sentinel && p.seen.is_some())
    }

    fn poll(&mut self) {
        let promoted = self.probes.iter().any(|p| !p.sentinel && p.seen.is_some());
        for i in 0..self.probes.len() {
            let (port, sentinel) = (self.probes[i].port, self.probes[i].sentinel);
            if self.probes[i].seen.is_some() || (!sentinel && promoted) {
                continue;
            }
            let old_port = self.old_port;
            let name = self.master_name.clone();
            let Some(con) = self.conn(i) else { continue };
            let answer = if sentinel {
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&name)
                    .query::<Option<(String, String)>>(con)
                    .map(|a| a.and_then(|(_, p)| p.parse::<u16>().ok()))
                    .map(|p| p.filter(|&p| p != old_port))
            } else {
                redis::cmd("ROLE")
                    .query::<Vec<redis::Value>>(con)
                    .map(|r| is_master(&r).then_some(port))
            };
            match answer {
                Ok(Some(p)) => self.probes[i].seen = Some((p, Instant::now())),
                Ok(None) => {}
                Err(_) => self.probes[i].con = None,
            }
        }
    }

    fn conn(&mut self, i: usize) -> Option<&mut redis::Connection> {
        if self.probes[i].con.is_none() {
            let port = self.probes[i].port;
            let node = self
                .group
                .nodes()
                .iter()
                .chain(self.group.sentinels())
                .find(|n| n.port() == port)?;
            let con = node.try_conn().ok()?;
            con.set_read_timeout(Some(Duration::from_millis(200)))
                .ok()?;
            self.probes[i].con = Some(con);
        }
        self.probes[i].con.as_mut()
    }
}

fn is_master(role: &[redis::Value]) -> bool {
    match role.first() {
        Some(redis::Value::BulkString(b)) => b == b"master",
        Some(redis::Value::SimpleString(s)) => s == "master",
        _ => false,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let k = v.len() / 2;
    if v.len() % 2 == 1 {
        v[k]
    } else {
        (v[k - 1] + v[k]) / 2.0
    }
}

fn failover_report(
    trials: &[Trial],
    rep: &mut Report,
    targets: &mut Targets,
    load: (f64, f64, f64),
) {
    let opt = |x: Option<f64>| x.map_or("none".into(), |v| format!("{v:.0}"));
    let mut rows = Vec::new();
    for (i, t) in trials.iter().enumerate() {
        let gap = t.first_acquire_ms.zip(t.promotion_ms()).map(|(b, a)| b - a);
        rows.push(vec![
            (i + 1).to_string(),
            opt(t.role_ms),
            opt(t.switch_ms),
            opt(t.all_switched_ms),
            opt(t.promotion_ms()),
            opt(t.first_acquire_ms),
            opt(gap),
            t.ok_before.to_string(),
            t.failed
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            format!("{:.1}", t.longest_failed_ms),
            match (t.new_master, t.named.as_slice()) {
                (Some(a), [b]) if a == *b => format!("{a}"),
                (a, b) => format!("ROLE {a:?} / sentinels {b:?}"),
            },
        ]);
        let mut s = J::obj();
        s.set("trial", i + 1)
            .set("replica_role_master_ms", t.role_ms)
            .set("first_sentinel_names_new_master_ms", t.switch_ms)
            .set("all_sentinels_name_new_master_ms", t.all_switched_ms)
            .set("promotion_ms", t.promotion_ms())
            .set("first_acquire_ms", t.first_acquire_ms)
            .set("acquire_after_promotion_ms", gap)
            .set("ok_cycles_before_kill", t.ok_before)
            .set(
                "failed_attempts",
                t.failed.iter().map(|(_, n)| n).sum::<usize>(),
            )
            .set("longest_failed_attempt_ms", t.longest_failed_ms);
        rep.summary("sentinel_failover", s);
    }
    let all =
        |f: &dyn Fn(&Trial) -> Option<f64>| -> Vec<f64> { trials.iter().filter_map(f).collect() };
    let a = median(all(&|t| t.promotion_ms()));
    let b = median(all(&|t| t.first_acquire_ms));
    let gap = median(all(&|t| Some(t.first_acquire_ms? - t.promotion_ms()?)));
    let complete = trials
        .iter()
        .all(|t| t.first_acquire_ms.is_some() && t.promotion_ms().is_some());
    rows.push(vec![
        "median".into(),
        f1(median(all(&|t| t.role_ms))),
        f1(median(all(&|t| t.switch_ms))),
        f1(median(all(&|t| t.all_switched_ms))),
        f1(a),
        f1(b),
        f1(gap),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]);
    let mut s = J::obj();
    s.set("trials", trials.len())
        .set("median_promotion_ms", a)
        .set("median_first_acquire_ms", b)
        .set("median_acquire_after_promotion_ms", gap)
        .set("all_complete", complete);
    rep.summary("sentinel_failover_median", s);
    targets.add(
        "sentinel failover: first acquire after the master's kill",
        "≤ promotion + 1 s (medians)",
        format!(
            "{b:.0} vs {a:.0} ms promotion (+{gap:.0} ms, median of the differences), {} trials{}",
            trials.len(),
            if complete { "" } else { ", some incomplete" }
        ),
        Some(complete && !trials.is_empty() && b <= a + 1000.0),
    );
    rep.section(
        &format!(
            "Sentinel failover: SIGKILL of the master while a client loops try_acquire + release on the redis-sentinel:// URL ({} trials, a fresh group each; ms after the kill; the groups' processes count as the bench's CPU)",
            trials.len()
        ),
        load,
        &[
            "trial",
            "replica ROLE master",
            "a sentinel names it",
            "all sentinels name it",
            "promotion (ROLE and a sentinel)",
            "first acquire Ok",
            "acquire − promotion",
            "Ok cycles before the kill",
            "failed attempts after the kill",
            "longest failed attempt ms",
            "new master port",
        ],
        &rows,
    );
}
