//! What the topology sections (Sentinel, Cluster, Redlock) share: a configuration of their
//! tables (a floor, or redislock, given a URL), the start of a test-kit topology that may fail,
//! the u1 interleaving with its table, and the c8 runs with theirs.

use std::panic::{UnwindSafe, catch_unwind};

use redislock::Client;

use crate::json::J;
use crate::lockers::{self, Floor, HandoffFloor, Redislock, RedlockFloor, per_cycle, timed};
use crate::metrics::{self, Contended};
use crate::report::{
    CONTENDED_HEADERS, Load, RedisCpu, Report, Targets, contended_row, contended_summary, f1, f2,
};
use crate::scenario::{self, LEASE, Params, Sc};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys;

#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    /// `SET NX PX` + compare-and-delete on one server.
    Floor,
    /// The same on every master at once, a majority wins (`lockers::RedlockFloor`).
    RedlockFloor,
    /// Queue + BLPOP, release hands over, on one server.
    HandoffFloor,
    Redislock {
        min_replicas: u32,
        auto_renew: bool,
    },
}

/// redislock with a fixed lease, without and with `min_replicas(1)`.
pub const NONE: Kind = Kind::Redislock {
    min_replicas: 0,
    auto_renew: false,
};
pub const ONE: Kind = Kind::Redislock {
    min_replicas: 1,
    auto_renew: false,
};

/// One configuration of a section's tables.
pub struct Conf {
    /// The table's label.
    pub name: &'static str,
    /// The record's `peer` and the keys' tag.
    pub peer: String,
    pub kind: Kind,
    /// The URL the library (or a one-server floor) is given.
    pub url: String,
    /// The data node (a `redis://` URL) that keeps the c8 counter and whose command statistics
    /// the record counts.
    pub admin: String,
    /// Further nodes whose statistics count (the other Redlock masters; the Redlock floor's
    /// masters are `admin` and these).
    pub others: Vec<String>,
}

/// A configuration whose statistics are those of `admin` alone.
pub fn conf(name: &'static str, peer: &str, kind: Kind, url: &str, admin: &str) -> Conf {
    Conf {
        name,
        peer: peer.to_owned(),
        kind,
        url: url.to_owned(),
        admin: admin.to_owned(),
        others: Vec::new(),
    }
}

impl Conf {
    pub fn variant(&self) -> String {
        match self.kind {
            Kind::Floor => "SET NX PX + EVALSHA compare-and-delete".into(),
            Kind::RedlockFloor => format!(
                "SET NX PX on {} masters at once, majority; EVALSHA compare-and-delete on all",
                1 + self.others.len()
            ),
            Kind::HandoffFloor => "queue + BLPOP, release hands over".into(),
            Kind::Redislock {
                min_replicas: 0,
                auto_renew,
            } => lockers::variant(auto_renew),
            Kind::Redislock {
                min_replicas,
                auto_renew,
            } => format!(
                "{} min_replicas={min_replicas}",
                lockers::variant(auto_renew)
            ),
        }
    }

    /// Every node the configuration's statistics count.
    fn masters(&self) -> Vec<String> {
        std::iter::once(self.admin.clone())
            .chain(self.others.iter().cloned())
            .collect()
    }

    fn redislock(&self) -> Redislock {
        let Kind::Redislock {
            min_replicas,
            auto_renew,
        } = self.kind
        else {
            unreachable!("a floor has no client")
        };
        Redislock {
            client: client(&self.url, min_replicas, auto_renew),
            auto_renew,
        }
    }

    /// Runs one scenario and returns its record (README format).
    pub fn run(&self, p: &Params) -> J {
        let floor_version = |what: &str| format!("redis-rs {} ({what})", sys::redis_rs_version());
        let (admin, others, peer) = (&self.admin, &self.others[..], &self.peer[..]);
        let outcome = match self.kind {
            Kind::Floor => scenario::run_on(admin, others, peer, p, |w| Floor::new(&self.url, w)),
            Kind::RedlockFloor => {
                let masters = self.masters();
                scenario::run_on(admin, others, peer, p, |w| RedlockFloor::new(&masters, w))
            }
            Kind::HandoffFloor => {
                scenario::run_on(admin, others, peer, p, |w| HandoffFloor::new(&self.url, w))
            }
            Kind::Redislock { .. } => {
                let locker = self.redislock();
                scenario::run_on(admin, others, peer, p, |_| Redislock {
                    client: locker.client.clone(),
                    auto_renew: locker.auto_renew,
                })
            }
        };
        let version = match self.kind {
            Kind::Floor => floor_version("floor"),
            Kind::RedlockFloor => floor_version("redlock floor"),
            Kind::HandoffFloor => floor_version("handoff floor"),
            Kind::Redislock { .. } => sys::versions(),
        };
        outcome.record(p, peer, &version, &self.variant())
    }

    /// One acquire + release of this configuration on `key`, timed (for [`interleaved`]).
    fn timed<'a>(&'a self, key: &'a str) -> lockers::TimedCycle<'a> {
        match self.kind {
            Kind::Floor => timed(key, Floor::new(&self.url, 0)),
            Kind::RedlockFloor => timed(key, RedlockFloor::new(&self.masters(), 0)),
            Kind::HandoffFloor => timed(key, HandoffFloor::new(&self.url, 0)),
            Kind::Redislock { .. } => timed(key, self.redislock()),
        }
    }
}

/// A client with the scenarios' fixed lease (10 s) and `min_replicas` (its timeout: the
/// library's default, 500 ms).
pub fn client(url: &str, min_replicas: u32, auto_renew: bool) -> Client {
    Client::builder(url)
        .lease(LEASE)
        .auto_renew(auto_renew)
        .min_replicas(min_replicas)
        .build()
        .expect("client")
}

/// Whether a part of a section runs: `--only cluster` runs all of the Cluster section,
/// `--only cluster-u1` one part; `--skip` takes the same names.
pub fn wants(o: &Opts, section: &str, part: &str) -> bool {
    let named = |list: &[String]| list.iter().any(|s| s == section || s == part);
    (o.only.is_empty() || named(&o.only)) && !named(&o.skip)
}

/// The single server and the processes of a topology, for the sections' Redis CPU.
pub struct Procs<'a> {
    pub server: &'a Server,
    pub pids: Vec<u32>,
}

impl RedisCpu for Procs<'_> {
    fn redis_cpu_secs(&self) -> Option<f64> {
        let others: f64 = self
            .pids
            .iter()
            .filter_map(|p| sys::cpu_secs(&p.to_string()))
            .sum();
        Some(self.server.cpu_secs().unwrap_or(0.0) + others)
    }
}

/// The c8 scenario of every configuration, one after the other; the table under `title`, one
/// summary line each under `section`; returns the measures, in `confs`' order.
#[allow(clippy::too_many_arguments)]
pub fn c8(
    o: &Opts,
    rep: &mut Report,
    section: &str,
    title: &str,
    load: &Load,
    procs: &Procs,
    confs: &[Conf],
    rtt_us: f64,
) -> Vec<Contended> {
    let p = Params {
        sc: Sc::C8,
        n: 0,
        target: o.target,
        cap: o.cap,
    };
    let mut rows = Vec::new();
    let mut ms = Vec::new();
    for cf in confs {
        eprintln!("  {section} {} ...", cf.name);
        let rec = cf.run(&p);
        rep.raw(&rec);
        let m = metrics::contended(&rec);
        let mut row = contended_row("rust", &cf.variant(), &m, rtt_us);
        row[0] = cf.name.into();
        rows.push(row);
        rep.summary(
            section,
            contended_summary("rust", cf.name, &cf.variant(), &m, rtt_us),
        );
        ms.push(m);
    }
    rep.section(title, load.end(procs), &CONTENDED_HEADERS, &rows);
    ms
}

/// The single server's round trip in µs, the handoff columns' unit: `rtt_us` when a section
/// measured it already, else half the p50 of a short run of the floor on `single`.
pub fn rtt(o: &Opts, single: &str, rep: &mut Report, rtt_us: f64) -> f64 {
    if !rtt_us.is_nan() {
        return rtt_us;
    }
    let floor = conf("", "rtt-floor", Kind::Floor, single, single);
    let p = Params {
        sc: Sc::U1,
        n: 2000,
        target: 0,
        cap: o.cap,
    };
    let rec = floor.run(&p);
    rep.raw(&rec);
    metrics::cycle(&rec).p50_us / 2.0
}

/// The targets of a topology's c8 row `m`: correct and fair (the bounds of the single server's
/// c8), and its throughput and handoff beside `single` (redislock on the single server).
pub fn c8_targets(targets: &mut Targets, who: &str, m: &Contended, single: &Contended) {
    targets.add(
        &format!("{who}: correct and fair"),
        "final = increments, 0 overlaps, max/min ≤ 1.5, longest wait ≤ 20 ms",
        format!(
            "{} / {}, {} overlaps, {:.2}, {:.1} ms",
            m.final_counter,
            m.incs,
            m.overlaps,
            m.fairness(),
            m.wait_max_us / 1e3
        ),
        Some(m.lost == 0 && m.overlaps == 0 && m.fairness() <= 1.5 && m.wait_max_us <= 20_000.0),
    );
    targets.add(
        &format!("{who}: throughput"),
        "(information: beside the single server)",
        format!(
            "{:.0} vs {:.0} incr/s = {:.2}×; handoff p50 {:.1} vs {:.1} µs",
            m.rate,
            single.rate,
            m.rate / single.rate,
            m.handoff_us(50.0),
            single.handoff_us(50.0)
        ),
        None,
    );
}

/// Starts a test-kit topology; None (with the reason printed under `title`) when it does not
/// form.
pub fn start<T>(title: &str, f: impl FnOnce() -> T + UnwindSafe) -> Option<T> {
    match catch_unwind(f) {
        Ok(t) => Some(t),
        Err(e) => {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            println!("\n### {title}\n\nskipped: it did not start: {why}");
            None
        }
    }
}

/// u1 of every configuration interleaved cycle by cycle on one thread, the order rotating every
/// cycle (the ratios of the targets: each meets the same machine load): `n` timed cycles each
/// after 200 warm-up cycles, sorted, in ns. The key of each is `pb:u:rust:mixed:<peer>`.
pub fn interleaved(confs: &[Conf], n: usize) -> Vec<Vec<u64>> {
    let keys: Vec<String> = confs
        .iter()
        .map(|c| format!("pb:u:rust:mixed:{}", c.peer))
        .collect();
    let cycles = confs.iter().zip(&keys).map(|(c, k)| c.timed(k)).collect();
    let mut out = per_cycle(cycles, n);
    for v in &mut out {
        v.sort_unstable();
    }
    out
}

/// The table (and summary lines under `section`) of an [`interleaved`] run: each row's p50 beside
/// that of `floor_of(row)` (the floor on its node) and of row `single` (redislock on the single
/// server). `load`: what [`crate::report::Load::end`] measured over the run.
#[allow(clippy::too_many_arguments)]
pub fn interleaved_table(
    rep: &mut Report,
    section: &str,
    title: &str,
    load: (f64, f64, f64),
    confs: &[Conf],
    mixed: &[Vec<u64>],
    floor_of: impl Fn(usize) -> usize,
    single: usize,
) {
    let p50 = |i: usize| sys::pct_sorted(&mixed[i], 50.0) / 1e3;
    let p99 = |i: usize| sys::pct_sorted(&mixed[i], 99.0) / 1e3;
    let mut rows = Vec::new();
    for (i, cf) in confs.iter().enumerate() {
        let f = floor_of(i);
        let mean = sys::mean(&mixed[i]) / 1e3;
        rows.push(vec![
            cf.name.into(),
            cf.variant(),
            mixed[i].len().to_string(),
            f1(mean),
            f1(p50(i)),
            f1(p99(i)),
            f2(p50(i) / p50(f)),
            f2(p50(i) / p50(single)),
            f2(p99(i) / p99(single)),
        ]);
        let mut s = J::obj();
        s.set("impl", cf.name)
            .set("variant", cf.variant())
            .set("cycles", mixed[i].len())
            .set("mean_us", mean)
            .set("p50_us", p50(i))
            .set("p99_us", p99(i))
            .set("ratio_p50_to_floor_same_node", p50(i) / p50(f))
            .set("ratio_p50_to_single", p50(i) / p50(single))
            .set("ratio_p99_to_single", p99(i) / p99(single));
        rep.summary(section, s);
    }
    rep.section(
        title,
        load,
        &[
            "impl",
            "variant",
            "cycles",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "p50 ratio to the floor on its node(s)",
            "p50 ratio to redislock, single server",
            "p99 ratio to redislock, single server",
        ],
        &rows,
    );
}
