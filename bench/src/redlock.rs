//! The Redlock section: independent masters from the test kit (three, or `--masters N`) beside
//! the standalone run's single server, in the same run.
//!
//! u1 interleaved cycle by cycle: the floor on the single server and redislock there, the
//! Redlock floor (`SET NX PX` on every master at once, a majority wins: the least a quorum
//! lock can do) and redislock through `redlock://` with a fixed lease and with auto-renewal;
//! c8 beside the handoff floor, redislock on the single server and the Redlock floor (which
//! polls every 1 ms, as the Redlock peers do), redislock with a fixed lease and with
//! auto-renewal. The c8 counter lives on the first master.

use redislock_testkit::{RedisServer, RedlockMasters};

use crate::report::{Load, Report, Targets};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys;
use crate::topology::{self, Conf, Kind, NONE, Procs, conf};

/// A configuration over every master: the counter and statistics on the first, statistics of
/// the others summed in.
fn over_masters(name: &'static str, peer: &str, kind: Kind, url: &str, masters: &[String]) -> Conf {
    let mut c = conf(name, peer, kind, url, &masters[0]);
    c.others = masters[1..].to_vec();
    c
}

/// A table label made at run time (the program runs once; its labels live as long).
fn label(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// The whole section. `rtt_us` is the single server's round trip (for the handoff columns).
pub fn section(o: &Opts, server: &Server, rep: &mut Report, targets: &mut Targets, rtt_us: f64) {
    let (u1, c8) = (
        topology::wants(o, "redlock", "redlock-u1"),
        topology::wants(o, "redlock", "redlock-c8"),
    );
    if !u1 && !c8 {
        return;
    }
    let n = o.masters;
    eprintln!("  redlock: starting {n} masters ...");
    let Some(group) = topology::start("Redlock", || RedlockMasters::start(n)) else {
        return;
    };
    let single = server.url();
    let url = group.url();
    let masters: Vec<String> = group.masters().iter().map(RedisServer::url).collect();
    let addrs: Vec<String> = group.masters().iter().map(RedisServer::addr).collect();
    println!(
        "\n## Redlock\n\nmasters {} (independent, no persistence); single server 127.0.0.1:{}\n",
        addrs.join(", "),
        server.port,
    );
    let procs = Procs {
        server,
        pids: group.masters().iter().map(RedisServer::pid).collect(),
    };
    let renewed = Kind::Redislock {
        min_replicas: 0,
        auto_renew: true,
    };
    if u1 {
        // Indices into `confs`.
        const FLOOR: usize = 0;
        const SINGLE: usize = 1;
        const QUORUM_FLOOR: usize = 2;
        const REDLOCK: usize = 3;
        const REDLOCK_RENEWED: usize = 4;
        let confs = [
            conf(
                "floor, single server",
                "redlock-floor-single",
                Kind::Floor,
                &single,
                &single,
            ),
            conf(
                "redislock, single server",
                "redislock-single",
                NONE,
                &single,
                &single,
            ),
            over_masters(
                label(format!("Redlock floor, {n} masters")),
                "redlock-floor",
                Kind::RedlockFloor,
                "",
                &masters,
            ),
            over_masters(
                "redislock, redlock://",
                "redislock-redlock",
                NONE,
                &url,
                &masters,
            ),
            over_masters(
                "redislock, redlock://, auto-renewal",
                "redislock-redlock-renewed",
                renewed,
                &url,
                &masters,
            ),
        ];
        eprintln!(
            "  redlock u1 per-cycle interleaved: {} cycles each ...",
            o.n
        );
        let load = Load::start(&procs);
        let mixed = topology::interleaved(&confs, o.n);
        topology::interleaved_table(
            rep,
            "redlock_u1_per_cycle",
            "Redlock u1 per-cycle interleaved: the five alternating cycle by cycle on one thread (the targets' ratios)",
            load.end(&procs),
            &confs,
            &mixed,
            |i| if i <= SINGLE { FLOOR } else { QUORUM_FLOOR },
            SINGLE,
        );
        let p50 = |i: usize| sys::pct_sorted(&mixed[i], 50.0) / 1e3;
        let p99 = |i: usize| sys::pct_sorted(&mixed[i], 99.0) / 1e3;
        let r = p50(REDLOCK) / p50(QUORUM_FLOOR);
        targets.add(
            &format!("redlock u1, {n} masters"),
            "≤ 1.15× the Redlock floor (SET NX PX on all masters at once)",
            format!(
                "{r:.2}× p50 per-cycle interleaved ({:.1} vs {:.1} µs; p99 {:.2}×); with auto-renewal {:.2}×",
                p50(REDLOCK),
                p50(QUORUM_FLOOR),
                p99(REDLOCK) / p99(QUORUM_FLOOR),
                p50(REDLOCK_RENEWED) / p50(QUORUM_FLOOR)
            ),
            Some(r <= 1.15),
        );
        targets.add(
            "redlock u1 beside one server",
            "(information)",
            format!(
                "{:.2}× p50 redislock on the single server ({:.1} vs {:.1} µs); the Redlock floor {:.2}× the one-server floor",
                p50(REDLOCK) / p50(SINGLE),
                p50(REDLOCK),
                p50(SINGLE),
                p50(QUORUM_FLOOR) / p50(FLOOR)
            ),
            None,
        );
    }
    if c8 {
        let confs: [Conf; 5] = [
            conf(
                "handoff floor, single server",
                "redlock-handoff-floor",
                Kind::HandoffFloor,
                &single,
                &single,
            ),
            conf(
                "redislock, single server",
                "redislock-single",
                NONE,
                &single,
                &single,
            ),
            over_masters(
                label(format!("Redlock floor, {n} masters (polls every 1 ms)")),
                "redlock-floor",
                Kind::RedlockFloor,
                "",
                &masters,
            ),
            over_masters(
                "redislock, redlock://",
                "redislock-redlock",
                NONE,
                &url,
                &masters,
            ),
            over_masters(
                "redislock, redlock://, auto-renewal",
                "redislock-redlock-renewed",
                renewed,
                &url,
                &masters,
            ),
        ];
        let rtt_us = topology::rtt(o, &single, rep, rtt_us);
        let load = Load::start(&procs);
        let ms = topology::c8(
            o,
            rep,
            "redlock_c8",
            &format!(
                "Redlock c8, {n} masters: eight workers, one key, GET/SET counter to {} (fixed lease, and auto-renewal in the last row; the counter on the first master)",
                o.target
            ),
            &load,
            &procs,
            &confs,
            rtt_us,
        );
        topology::c8_targets(targets, &format!("redlock c8, {n} masters"), &ms[3], &ms[1]);
        let (m, floor, renewed) = (&ms[3], &ms[2], &ms[4]);
        targets.add(
            &format!("redlock c8 beside the Redlock floor, {n} masters"),
            "(information: a quorum lock that polls)",
            format!(
                "{:.0} vs {:.0} incr/s = {:.2}× (auto-renewal {:.2}×); handoff p50 {:.1} vs {:.1} µs; same-worker re-acquire {:.0}% vs {:.0}%; per-worker max/min {:.2} vs {:.2}; longest wait {:.1} vs {:.1} ms",
                m.rate,
                floor.rate,
                m.rate / floor.rate,
                renewed.rate / floor.rate,
                m.handoff_us(50.0),
                floor.handoff_us(50.0),
                m.same_worker * 100.0,
                floor.same_worker * 100.0,
                m.fairness(),
                floor.fairness(),
                m.wait_max_us / 1e3,
                floor.wait_max_us / 1e3
            ),
            None,
        );
    }
}
