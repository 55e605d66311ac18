//! The Sentinel section: a Sentinel group from the test kit (one master, two replicas, three
//! sentinels; the master judged down after 1 s) beside the standalone run's single server, in
//! the same run.
//!
//! - u1 and c8 (the scenario code of the other sections, fixed lease 10 s) with redislock given
//!   the single server's `redis://` URL, the group master's own `redis://` URL (replication
//!   without the Sentinel topology: what the master's replicas cost) and the group's
//!   `redis-sentinel://` URL, without and with `min_replicas(1)`; u1 also interleaved cycle by
//!   cycle with the two-round-trip floor, for the ratios.
//! - Failover, `--failovers` times on a fresh group each: one thread loops `try_acquire` +
//!   release on the Sentinel URL (a new name each cycle, so no lease of the dead master's is
//!   waited out; 1 ms between cycles, 5 ms after an error), the master is killed with SIGKILL,
//!   and a watcher polls the replicas' ROLE and the sentinels' GET-MASTER-ADDR-BY-NAME every
//!   5 ms. Promotion = kill → a replica answers ROLE master and the sentinels name it (both);
//!   recovery = kill → the first acquire begun after the kill returned Ok.

use std::panic::catch_unwind;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use redislock_testkit::{RedisServer, SentinelGroup};

use crate::json::J;
use crate::lockers::{self, Floor, HandoffFloor, Redislock, per_cycle, timed};
use crate::metrics;
use crate::report::{
    CONTENDED_HEADERS, Load, RedisCpu, Report, Targets, contended_row, contended_summary, f1, f2,
};
use crate::scenario::{self, LEASE, Params, Sc};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys::{self, command_mix, server_calls};

/// How long a failover trial waits for the promotion and the first acquire after the kill.
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);
/// The failover loop's steady cycle before the kill.
const WARM: Duration = Duration::from_millis(500);
const POLL: Duration = Duration::from_millis(5);

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Floor,
    HandoffFloor,
    Redislock { min_replicas: u32 },
}

/// One configuration of the section's tables.
struct Conf {
    /// The table's label.
    name: &'static str,
    /// The record's `peer` and the keys' tag.
    peer: &'static str,
    kind: Kind,
    /// The URL the library (or the floor) is given.
    url: String,
    /// The data node whose command statistics the record counts (a `redis://` URL).
    admin: String,
}

impl Conf {
    fn variant(&self) -> String {
        match self.kind {
            Kind::Floor => "SET NX PX + EVALSHA compare-and-delete".into(),
            Kind::HandoffFloor => "queue + BLPOP, release hands over".into(),
            Kind::Redislock { min_replicas: 0 } => lockers::variant(false),
            Kind::Redislock { min_replicas } => {
                format!("{} min_replicas={min_replicas}", lockers::variant(false))
            }
        }
    }

    fn client(&self) -> Client {
        let Kind::Redislock { min_replicas } = self.kind else {
            unreachable!("a floor has no client")
        };
        client(&self.url, min_replicas)
    }

    /// Runs one scenario and returns its record (README format).
    fn run(&self, p: &Params) -> J {
        let floor_version = |what: &str| format!("redis-rs {} ({what})", sys::redis_rs_version());
        match self.kind {
            Kind::Floor => scenario::run(&self.admin, self.peer, p, |w| Floor::new(&self.url, w))
                .record(p, self.peer, &floor_version("floor"), &self.variant()),
            Kind::HandoffFloor => scenario::run(&self.admin, self.peer, p, |w| {
                HandoffFloor::new(&self.url, w)
            })
            .record(
                p,
                self.peer,
                &floor_version("handoff floor"),
                &self.variant(),
            ),
            Kind::Redislock { .. } => {
                let client = self.client();
                scenario::run(&self.admin, self.peer, p, |_| Redislock {
                    client: client.clone(),
                    auto_renew: false,
                })
                .record(p, self.peer, &sys::versions(), &self.variant())
            }
        }
    }
}

/// A client with the scenarios' fixed lease, and `min_replicas` (its timeout: the library's
/// default, 500 ms).
fn client(url: &str, min_replicas: u32) -> Client {
    Client::builder(url)
        .lease(LEASE)
        .auto_renew(false)
        .min_replicas(min_replicas)
        .build()
        .expect("client")
}

/// The single server and every process of a group, for the sections' Redis CPU.
struct Redises<'a> {
    server: &'a Server,
    group: &'a SentinelGroup,
}

impl RedisCpu for Redises<'_> {
    fn redis_cpu_secs(&self) -> Option<f64> {
        let group: f64 = self
            .group
            .nodes()
            .iter()
            .chain(self.group.sentinels())
            .filter_map(|n| sys::cpu_secs(&n.pid().to_string()))
            .sum();
        Some(self.server.cpu_secs().unwrap_or(0.0) + group)
    }
}

/// Starts a group; None (with the reason printed) when it does not form.
fn start_group() -> Option<SentinelGroup> {
    match catch_unwind(SentinelGroup::start) {
        Ok(g) => Some(g),
        Err(e) => {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            println!("\n### Sentinel\n\nskipped: the Sentinel group did not start: {why}");
            None
        }
    }
}

/// Whether a part of the section runs: `--only sentinel` runs all three, `--only sentinel-u1`
/// (`sentinel-c8`, `sentinel-failover`) one; `--skip` takes the same names.
pub fn wants(o: &Opts, part: &str) -> bool {
    let named = |list: &[String]| list.iter().any(|s| s == "sentinel" || s == part);
    (o.only.is_empty() || named(&o.only)) && !named(&o.skip)
}

/// The URLs the configurations are given.
struct Urls {
    /// The standalone run's single server.
    single: String,
    /// The group's master, as a plain `redis://` URL.
    master: String,
    /// The group's `redis-sentinel://` URL.
    sentinel: String,
}

fn conf(name: &'static str, peer: &'static str, kind: Kind, url: &str, admin: &str) -> Conf {
    Conf {
        name,
        peer,
        kind,
        url: url.to_owned(),
        admin: admin.to_owned(),
    }
}

const NONE: Kind = Kind::Redislock { min_replicas: 0 };
const ONE: Kind = Kind::Redislock { min_replicas: 1 };

/// The whole section. `rtt_us` is the single server's (NaN when no section measured it yet).
pub fn sections(o: &Opts, server: &Server, rep: &mut Report, targets: &mut Targets, rtt_us: f64) {
    if wants(o, "sentinel-u1") || wants(o, "sentinel-c8") {
        eprintln!("  sentinel: starting a group (1 master, 2 replicas, 3 sentinels) ...");
        if let Some(group) = start_group() {
            let urls = Urls {
                single: server.url(),
                master: group.master().url(),
                sentinel: group.url(),
            };
            let addrs = |v: &[RedisServer]| {
                v.iter()
                    .map(RedisServer::addr)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            println!(
                "\n## Sentinel\n\ngroup: master {}, replicas {}, sentinels {} (down-after 1 s, \
                 failover timeout 3 s); single server 127.0.0.1:{}\n",
                group.master().addr(),
                addrs(&group.nodes()[1..]),
                addrs(group.sentinels()),
                server.port,
            );
            let redises = Redises {
                server,
                group: &group,
            };
            let mut rtt_us = rtt_us;
            if wants(o, "sentinel-u1") {
                u1(o, &urls, &redises, rep, targets, &mut rtt_us);
            }
            if wants(o, "sentinel-c8") {
                if rtt_us.is_nan() {
                    // No section measured the RTT the handoffs are counted in: a short floor.
                    let floor = conf(
                        "",
                        "sentinel-floor",
                        Kind::Floor,
                        &urls.single,
                        &urls.single,
                    );
                    let p = Params {
                        sc: Sc::U1,
                        n: 2000,
                        target: 0,
                        cap: o.cap,
                    };
                    let rec = floor.run(&p);
                    rep.raw(&rec);
                    rtt_us = metrics::cycle(&rec).p50_us / 2.0;
                }
                c8(o, &urls, &redises, rep, targets, rtt_us);
            }
        }
    }
    if wants(o, "sentinel-failover") && o.failovers > 0 {
        failovers(o, server, rep, targets);
    }
}

/// u1 on the single server, the group master and the Sentinel URL, in rounds and interleaved
/// cycle by cycle; sets `rtt_us` from the floor when no section did.
fn u1(
    o: &Opts,
    urls: &Urls,
    redises: &Redises,
    rep: &mut Report,
    targets: &mut Targets,
    rtt_us: &mut f64,
) {
    let (single, master, sentinel_url) = (&urls.single, &urls.master, &urls.sentinel);
    let load = Load::start(redises);
    // Indices into `confs`.
    const FLOOR: usize = 0;
    const FLOOR_MASTER: usize = 1;
    const SINGLE: usize = 2;
    const MASTER: usize = 3;
    const SENTINEL: usize = 4;
    const SENTINEL_MIN1: usize = 5;
    let confs = [
        conf(
            "floor, single server",
            "sentinel-floor",
            Kind::Floor,
            single,
            single,
        ),
        conf(
            "floor, group master",
            "sentinel-floor-master",
            Kind::Floor,
            master,
            master,
        ),
        conf(
            "redislock, single server",
            "redislock-single",
            NONE,
            single,
            single,
        ),
        conf(
            "redislock, group master as redis://",
            "redislock-master",
            NONE,
            master,
            master,
        ),
        conf(
            "redislock, redis-sentinel://",
            "redislock-sentinel",
            NONE,
            sentinel_url,
            master,
        ),
        conf(
            "redislock, redis-sentinel:// + min_replicas(1)",
            "redislock-sentinel-min1",
            ONE,
            sentinel_url,
            master,
        ),
    ];
    // The floor on the same data node as a configuration.
    let floor_of = |c: &Conf| {
        if c.admin == *single {
            FLOOR
        } else {
            FLOOR_MASTER
        }
    };
    let p = Params {
        sc: Sc::U1,
        n: (o.n / o.rounds).max(1),
        target: 0,
        cap: o.cap,
    };
    let mut per: Vec<Vec<J>> = vec![Vec::new(); confs.len()];
    for round in 0..o.rounds {
        for k in 0..confs.len() {
            let i = (k + round) % confs.len();
            eprintln!(
                "  sentinel u1 round {}/{}: {}",
                round + 1,
                o.rounds,
                confs[i].name
            );
            let rec = confs[i].run(&p);
            rep.raw(&rec);
            per[i].push(rec);
        }
    }
    let merged: Vec<J> = per.iter().map(|r| metrics::merge(r)).collect();
    let c: Vec<metrics::Cycle> = merged.iter().map(metrics::cycle).collect();
    let mut rows = Vec::new();
    for (i, cf) in confs.iter().enumerate() {
        let cs = merged[i].get("commandstats").unwrap();
        let calls = server_calls(cs) as f64 / c[i].cycles.max(1) as f64;
        let (to_floor, to_single) = (
            c[i].p50_us / c[floor_of(cf)].p50_us,
            c[i].p50_us / c[SINGLE].p50_us,
        );
        rows.push(vec![
            cf.name.into(),
            cf.variant(),
            c[i].cycles.to_string(),
            f1(c[i].mean_us),
            f1(c[i].p50_us),
            f1(c[i].p99_us),
            f1(c[i].max_us),
            f2(to_floor),
            f2(to_single),
            format!("{calls:.2}: {}", command_mix(cs, c[i].cycles as u64)),
        ]);
        let mut s = J::obj();
        s.set("impl", cf.name)
            .set("variant", cf.variant())
            .set("cycles", c[i].cycles)
            .set("mean_us", c[i].mean_us)
            .set("p50_us", c[i].p50_us)
            .set("p99_us", c[i].p99_us)
            .set("max_us", c[i].max_us)
            .set("ratio_p50_to_floor_same_node", to_floor)
            .set("ratio_p50_to_single", to_single)
            .set("server_calls_per_cycle", calls);
        rep.summary("sentinel_u1", s);
    }

    // The same six interleaved cycle by cycle on one thread: the ratios of the targets.
    eprintln!(
        "  sentinel u1 per-cycle interleaved: {} cycles each ...",
        o.n
    );
    let keys: Vec<String> = confs
        .iter()
        .map(|c| format!("pb:u:rust:mixed:{}", c.peer))
        .collect();
    let cycles: Vec<lockers::TimedCycle> = confs
        .iter()
        .zip(&keys)
        .map(|(c, key)| match c.kind {
            Kind::Floor => timed(key, Floor::new(&c.url, 0)),
            Kind::HandoffFloor => timed(key, HandoffFloor::new(&c.url, 0)),
            Kind::Redislock { .. } => timed(
                key,
                Redislock {
                    client: c.client(),
                    auto_renew: false,
                },
            ),
        })
        .collect();
    let mut mixed = per_cycle(cycles, o.n);
    for v in &mut mixed {
        v.sort_unstable();
    }
    let p50 = |i: usize| sys::pct_sorted(&mixed[i], 50.0) / 1e3;
    let p99 = |i: usize| sys::pct_sorted(&mixed[i], 99.0) / 1e3;
    if rtt_us.is_nan() {
        *rtt_us = p50(FLOOR) / 2.0;
    }
    let mut mixed_rows = Vec::new();
    for (i, cf) in confs.iter().enumerate() {
        let f = floor_of(cf);
        mixed_rows.push(vec![
            cf.name.into(),
            mixed[i].len().to_string(),
            f1(sys::mean(&mixed[i]) / 1e3),
            f1(p50(i)),
            f1(p99(i)),
            f2(p50(i) / p50(f)),
            f2(p50(i) / p50(SINGLE)),
            f2(p99(i) / p99(SINGLE)),
        ]);
        let mut s = J::obj();
        s.set("impl", cf.name)
            .set("variant", cf.variant())
            .set("cycles", mixed[i].len())
            .set("mean_us", sys::mean(&mixed[i]) / 1e3)
            .set("p50_us", p50(i))
            .set("p99_us", p99(i))
            .set("ratio_p50_to_floor_same_node", p50(i) / p50(f))
            .set("ratio_p50_to_single", p50(i) / p50(SINGLE))
            .set("ratio_p99_to_single", p99(i) / p99(SINGLE));
        rep.summary("sentinel_u1_per_cycle", s);
    }
    let r = p50(SENTINEL_MIN1) / p50(SENTINEL);
    targets.add(
        "sentinel u1 min_replicas(1)",
        "≤ 1.60× u1 through Sentinel without it",
        format!(
            "{r:.2}× p50 per-cycle interleaved ({:.1} vs {:.1} µs; p99 {:.2}×); {:.2}× the floor on the group master, {:.2}× the single server's",
            p50(SENTINEL_MIN1),
            p50(SENTINEL),
            p99(SENTINEL_MIN1) / p99(SENTINEL),
            p50(SENTINEL_MIN1) / p50(FLOOR_MASTER),
            p50(SENTINEL_MIN1) / p50(FLOOR)
        ),
        Some(r <= 1.60),
    );
    targets.add(
        "sentinel u1 through redis-sentinel://",
        "(information: beside the single server)",
        format!(
            "{:.2}× p50 redislock on the single server ({:.1} vs {:.1} µs); {:.2}× the group master as redis://; {:.2}× the floor on the group master",
            p50(SENTINEL) / p50(SINGLE),
            p50(SENTINEL),
            p50(SINGLE),
            p50(SENTINEL) / p50(MASTER),
            p50(SENTINEL) / p50(FLOOR_MASTER)
        ),
        None,
    );
    rep.section(
        "Sentinel u1: one worker, acquire + release, fixed lease (separate rounds, order rotating)",
        load.end(redises),
        &[
            "impl",
            "variant",
            "cycles",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "max µs",
            "p50 ratio to the floor on its node",
            "p50 ratio to single server",
            "server calls / cycle (on its data node)",
        ],
        &rows,
    );
    rep.section(
        "Sentinel u1 per-cycle interleaved: the six alternating cycle by cycle on one thread (the targets' ratios)",
        (f64::NAN, f64::NAN, f64::NAN),
        &[
            "impl",
            "cycles",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "p50 ratio to the floor on its node",
            "p50 ratio to single server",
            "p99 ratio to single server",
        ],
        &mixed_rows,
    );
}

/// c8 beside the handoff floor and redislock on the single server.
fn c8(
    o: &Opts,
    urls: &Urls,
    redises: &Redises,
    rep: &mut Report,
    targets: &mut Targets,
    rtt_us: f64,
) {
    let (single, master, sentinel_url) = (&urls.single, &urls.master, &urls.sentinel);
    let load = Load::start(redises);
    let confs = [
        conf(
            "handoff floor, single server",
            "sentinel-handoff-floor",
            Kind::HandoffFloor,
            single,
            single,
        ),
        conf(
            "redislock, single server",
            "redislock-single",
            NONE,
            single,
            single,
        ),
        conf(
            "redislock, group master as redis://",
            "redislock-master",
            NONE,
            master,
            master,
        ),
        conf(
            "redislock, redis-sentinel://",
            "redislock-sentinel",
            NONE,
            sentinel_url,
            master,
        ),
        conf(
            "redislock, redis-sentinel:// + min_replicas(1)",
            "redislock-sentinel-min1",
            ONE,
            sentinel_url,
            master,
        ),
    ];
    let p = Params {
        sc: Sc::C8,
        n: 0,
        target: o.target,
        cap: o.cap,
    };
    let mut rows = Vec::new();
    let mut ms = Vec::new();
    for cf in &confs {
        eprintln!("  sentinel c8 {} ...", cf.name);
        let rec = cf.run(&p);
        rep.raw(&rec);
        let m = metrics::contended(&rec);
        let mut row = contended_row("rust", &cf.variant(), &m, rtt_us);
        row[0] = cf.name.into();
        rows.push(row);
        rep.summary(
            "sentinel_c8",
            contended_summary("rust", cf.name, &cf.variant(), &m, rtt_us),
        );
        ms.push(m);
    }
    // Indices into `confs`: the single server, the Sentinel URL without and with
    // min_replicas(1).
    const SINGLE: usize = 1;
    for (i, who) in [(3, "Sentinel"), (4, "Sentinel + min_replicas(1)")] {
        let m = &ms[i];
        targets.add(
            &format!("sentinel c8 {who}: correct and fair"),
            "final = increments, 0 overlaps, max/min ≤ 1.5, longest wait ≤ 20 ms",
            format!(
                "{} / {}, {} overlaps, {:.2}, {:.1} ms",
                m.final_counter,
                m.incs,
                m.overlaps,
                m.fairness(),
                m.wait_max_us / 1e3
            ),
            Some(
                m.lost == 0 && m.overlaps == 0 && m.fairness() <= 1.5 && m.wait_max_us <= 20_000.0,
            ),
        );
        targets.add(
            &format!("sentinel c8 {who}: throughput"),
            "(information: beside the single server)",
            format!(
                "{:.0} vs {:.0} incr/s = {:.2}×; handoff p50 {:.1} vs {:.1} µs",
                m.rate,
                ms[SINGLE].rate,
                m.rate / ms[SINGLE].rate,
                m.handoff_us(50.0),
                ms[SINGLE].handoff_us(50.0)
            ),
            None,
        );
    }
    rep.section(
        &format!(
            "Sentinel c8: eight workers, one key, GET/SET counter to {} (fixed lease; the counter lives on the lock's server)",
            o.target
        ),
        load.end(redises),
        &CONTENDED_HEADERS,
        &rows,
    );
}

/// `--failovers` trials, each on a fresh group.
fn failovers(o: &Opts, server: &Server, rep: &mut Report, targets: &mut Targets) {
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
    let client = client(&group.url(), 0);
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
