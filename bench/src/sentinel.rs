//! The Sentinel section: a Sentinel group from the test kit (one master, two replicas, three
//! sentinels; the master judged down after 1 s) beside the standalone run's single server, in
//! the same run.
//!
//! - u1 and c8 (the scenario code of the other sections, fixed lease 10 s) with redislock given
//!   the single server's `redis://` URL, the group master's own `redis://` URL (replication
//!   without the Sentinel topology: what the master's replicas cost) and the group's
//!   `redis-sentinel://` URL, without and with `min_replicas(1)`; u1 also interleaved cycle by
//!   cycle with the two-round-trip floor, for the ratios.
//! - Failover trials (`failover.rs`).

use redislock_testkit::{RedisServer, SentinelGroup};

use crate::failover;
use crate::json::J;
use crate::metrics;
use crate::report::{Load, Report, Targets, f1, f2};
use crate::scenario::{Params, Sc};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys::{self, command_mix, server_calls};
use crate::topology::{self, Conf, Kind, NONE, ONE, Procs, conf};

/// Starts a group; None (with the reason printed) when it does not form.
pub fn start_group() -> Option<SentinelGroup> {
    topology::start("Sentinel", SentinelGroup::start)
}

/// Whether a part of the section runs: `--only sentinel` runs all three, `--only sentinel-u1`
/// (`sentinel-c8`, `sentinel-failover`) one; `--skip` takes the same names.
pub fn wants(o: &Opts, part: &str) -> bool {
    topology::wants(o, "sentinel", part)
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
            let redises = Procs {
                server,
                pids: group
                    .nodes()
                    .iter()
                    .chain(group.sentinels())
                    .map(RedisServer::pid)
                    .collect(),
            };
            let mut rtt_us = rtt_us;
            if wants(o, "sentinel-u1") {
                u1(o, &urls, &redises, rep, targets, &mut rtt_us);
            }
            if wants(o, "sentinel-c8") {
                let rtt_us = topology::rtt(o, &urls.single, rep, rtt_us);
                c8(o, &urls, &redises, rep, targets, rtt_us);
            }
        }
    }
    if wants(o, "sentinel-failover") && o.failovers > 0 {
        failover::failovers(o, server, rep, targets);
    }
}

/// u1 on the single server, the group master and the Sentinel URL, in rounds and interleaved
/// cycle by cycle; sets `rtt_us` from the floor when no section did.
fn u1(
    o: &Opts,
    urls: &Urls,
    redises: &Procs,
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
    // The same six interleaved cycle by cycle on one thread: the ratios of the targets.
    eprintln!(
        "  sentinel u1 per-cycle interleaved: {} cycles each ...",
        o.n
    );
    let mixed = topology::interleaved(&confs, o.n);
    topology::interleaved_table(
        rep,
        "sentinel_u1_per_cycle",
        "Sentinel u1 per-cycle interleaved: the six alternating cycle by cycle on one thread (the targets' ratios)",
        (f64::NAN, f64::NAN, f64::NAN),
        &confs,
        &mixed,
        |i| floor_of(&confs[i]),
        SINGLE,
    );
    let p50 = |i: usize| sys::pct_sorted(&mixed[i], 50.0) / 1e3;
    let p99 = |i: usize| sys::pct_sorted(&mixed[i], 99.0) / 1e3;
    if rtt_us.is_nan() {
        *rtt_us = p50(FLOOR) / 2.0;
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
}

/// c8 beside the handoff floor and redislock on the single server.
fn c8(
    o: &Opts,
    urls: &Urls,
    redises: &Procs,
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
    let ms = topology::c8(
        o,
        rep,
        "sentinel_c8",
        &format!(
            "Sentinel c8: eight workers, one key, GET/SET counter to {} (fixed lease; the counter lives on the lock's server)",
            o.target
        ),
        &load,
        redises,
        &confs,
        rtt_us,
    );
    // Indices into `confs`: the single server, the Sentinel URL without and with
    // min_replicas(1).
    const SINGLE: usize = 1;
    for (i, who) in [(3, "Sentinel"), (4, "Sentinel + min_replicas(1)")] {
        topology::c8_targets(targets, &format!("sentinel c8 {who}"), &ms[i], &ms[SINGLE]);
    }
}
