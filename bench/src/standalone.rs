//! The standalone run: every scenario against one server, the floor measured in the same run
//! (interleaved with the library, round by round, so that drifting machine load hits both
//! alike), then a readable report (markdown tables) and one JSON summary line per row.

use std::fs::File;
use std::path::PathBuf;
use std::time::Duration;

use crate::json::J;
use crate::kinds;
use crate::lockers::{self, Floor, HandoffFloor, Redislock};
use crate::metrics;
use crate::php::Php;
use crate::php_rows::php_sections;
use crate::report::{
    CONTENDED_HEADERS, Load, Report, Targets, contended_row, contended_summary, contended_targets,
    contended_title, f1, f2, table,
};
use crate::scale::{self, ScaleArgs};
use crate::scenario::{self, Params, Sc};
use crate::sentinel;
use crate::server::Server;
use crate::sys::{self, command_mix, server_calls};
use crate::{cluster, redlock, redlock_stops};

pub struct Opts {
    pub port: Option<u16>,
    pub n: usize,
    pub target: i64,
    pub htarget: i64,
    pub cap: Duration,
    pub rounds: usize,
    pub scale_secs: f64,
    pub scale_locks: Vec<usize>,
    pub scale_lease: Duration,
    pub scale_pool_size: Option<u32>,
    /// Failover trials of the Sentinel section (0: none).
    pub failovers: usize,
    /// The Redlock stops section's time from a master's SIGCONT to the next master's SIGSTOP.
    pub stops_gap: Duration,
    /// The Redlock section's independent masters (`--masters N`: an odd number, at least 3).
    pub masters: usize,
    pub only: Vec<String>,
    pub skip: Vec<String>,
    pub raw: Option<PathBuf>,
    /// None = auto (run the PHP rows when everything they need is there).
    pub php: Option<bool>,
    pub peers_dir: PathBuf,
    pub php_lib: Option<PathBuf>,
}

impl Opts {
    pub fn wants(&self, section: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|s| s == section))
            && !self.skip.iter().any(|s| s == section)
    }
    /// A PHP scenario runs when its scenario is wanted, or when `--only` names no scenario
    /// (`--only php` runs every PHP scenario).
    pub fn wants_php(&self, scenario: &str) -> bool {
        let names_scenario = self
            .only
            .iter()
            .any(|s| ["u1", "u8", "c8", "h2", "req"].contains(&s.as_str()));
        (self.wants(scenario) || (!self.only.is_empty() && !names_scenario))
            && !self.skip.iter().any(|s| s == scenario)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Impl {
    Floor,
    HandoffFloor,
    Redislock(bool),
}

impl Impl {
    fn name(self) -> &'static str {
        match self {
            Impl::Floor => "floor (redis-rs, no lib)",
            Impl::HandoffFloor => "handoff floor (redis-rs, no lib)",
            Impl::Redislock(_) => "redislock",
        }
    }
    fn variant(self) -> String {
        match self {
            Impl::Floor => "SET NX PX + EVALSHA compare-and-delete".into(),
            Impl::HandoffFloor => "queue + BLPOP, release hands over".into(),
            Impl::Redislock(b) => lockers::variant(b),
        }
    }
}

/// Runs one contract scenario in this process and returns its README record.
fn run_rust(url: &str, which: Impl, p: &Params) -> J {
    match which {
        Impl::Floor => {
            let out = scenario::run(url, "floor", p, |w| Floor::new(url, w));
            let version = format!("redis-rs {} (floor)", sys::redis_rs_version());
            out.record(p, "floor", &version, &which.variant())
        }
        Impl::HandoffFloor => {
            let out = scenario::run(url, "handoff-floor", p, |w| HandoffFloor::new(url, w));
            let version = format!("redis-rs {} (handoff floor)", sys::redis_rs_version());
            out.record(p, "handoff-floor", &version, &which.variant())
        }
        Impl::Redislock(renew) => {
            let client = lockers::redislock_client(url, renew);
            let tag = if renew {
                "redislock-on"
            } else {
                "redislock-off"
            };
            let out = scenario::run(url, tag, p, |_| Redislock {
                client: client.clone(),
                auto_renew: renew,
            });
            out.record(p, "redislock", &sys::versions(), &which.variant())
        }
    }
}

pub fn run(o: &Opts) {
    let server = match o.port {
        Some(p) => Server::external(p),
        None => Server::start(),
    };
    let url = server.url();
    let mut rep = Report {
        summaries: Vec::new(),
        raw: o.raw.as_ref().map(|p| {
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            File::create(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        }),
    };
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let head = format!(
        "## redislock benchmark ({})\n\nredis-server {} on 127.0.0.1:{} ({}), pid {}; {} CPUs; load average at start {}\n\
         lease 10 s everywhere; u1/u8: {} cycles per configuration in {} interleaved rounds; c8 target {}; h2 {} handoffs; cap {} s\n",
        sys::versions(),
        server.version,
        server.port,
        if o.port.is_some() {
            "existing"
        } else {
            "started by the bench"
        },
        server.pid.map_or("not visible".into(), |p| p.to_string()),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        loadavg
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        o.n,
        o.rounds,
        o.target,
        o.htarget,
        o.cap.as_secs_f64(),
    );
    print!("{head}");
    let mut targets = Targets(Vec::new());
    let mut rtt_us = f64::NAN;

    // ---------------------------------------------------------------- u1
    if o.wants("u1") {
        let load = Load::start(&server);
        let impls = [Impl::Floor, Impl::Redislock(false), Impl::Redislock(true)];
        let p = Params {
            sc: Sc::U1,
            n: (o.n / o.rounds).max(1),
            target: 0,
            cap: o.cap,
        };
        let merged = interleaved(&url, &impls, &p, o.rounds, &mut rep);
        let c: Vec<metrics::Cycle> = merged.iter().map(metrics::cycle).collect();
        rtt_us = c[0].p50_us / 2.0;
        let mut rows = Vec::new();
        for (i, which) in impls.iter().enumerate() {
            let (r50, rmean) = (c[i].p50_us / c[0].p50_us, c[i].mean_us / c[0].mean_us);
            let calls = server_calls(merged[i].get("commandstats").unwrap()) as f64
                / c[i].cycles.max(1) as f64;
            rows.push(vec![
                which.name().into(),
                which.variant(),
                c[i].cycles.to_string(),
                f1(c[i].mean_us),
                f1(c[i].p50_us),
                f1(c[i].p99_us),
                f1(c[i].max_us),
                f2(r50),
                f2(rmean),
                format!(
                    "{calls:.2}: {}",
                    command_mix(merged[i].get("commandstats").unwrap(), c[i].cycles as u64)
                ),
            ]);
            let mut s = J::obj();
            s.set("impl", which.name())
                .set("variant", which.variant())
                .set("cycles", c[i].cycles)
                .set("mean_us", c[i].mean_us)
                .set("p50_us", c[i].p50_us)
                .set("p99_us", c[i].p99_us)
                .set("max_us", c[i].max_us)
                .set("wall_us_per_cycle", c[i].wall_us)
                .set("ratio_p50", r50)
                .set("ratio_mean", rmean)
                .set("server_calls_per_cycle", calls);
            rep.summary("u1", s);
        }
        // The same three, interleaved cycle by cycle on one thread: the ratios the targets use.
        eprintln!("  u1 per-cycle interleaved: {} cycles each ...", o.n);
        let mixed = lockers::u1_per_cycle(&url, o.n);
        let sorted: Vec<Vec<u64>> = mixed
            .iter()
            .map(|v| {
                let mut v = v.clone();
                v.sort_unstable();
                v
            })
            .collect();
        let p50 = |i: usize| sys::pct_sorted(&sorted[i], 50.0) / 1e3;
        let avg = |i: usize| sys::mean(&sorted[i]) / 1e3;
        let mut mixed_rows = Vec::new();
        for (i, which) in impls.iter().enumerate() {
            let (r50, rmean) = (p50(i) / p50(0), avg(i) / avg(0));
            mixed_rows.push(vec![
                which.name().into(),
                which.variant(),
                sorted[i].len().to_string(),
                f1(avg(i)),
                f1(p50(i)),
                f1(sys::pct_sorted(&sorted[i], 99.0) / 1e3),
                f1(sorted[i].last().map_or(f64::NAN, |&x| x as f64 / 1e3)),
                f2(r50),
                f2(rmean),
            ]);
            let mut s = J::obj();
            s.set("impl", which.name())
                .set("variant", which.variant())
                .set("cycles", sorted[i].len())
                .set("mean_us", avg(i))
                .set("p50_us", p50(i))
                .set("p99_us", sys::pct_sorted(&sorted[i], 99.0) / 1e3)
                .set("ratio_p50", r50)
                .set("ratio_mean", rmean);
            rep.summary("u1_per_cycle", s);
        }
        for (i, what, limit) in [
            (1, "u1 redislock, fixed lease", 1.05),
            (2, "u1 redislock, auto-renewal", 1.20),
        ] {
            let r = p50(i) / p50(0);
            targets.add(
                what,
                &format!("≤ {limit:.2}× floor"),
                format!(
                    "{r:.2}× p50 per-cycle interleaved (means {:.2}×); separate rounds {:.2}× (means {:.2}×)",
                    avg(i) / avg(0),
                    c[i].p50_us / c[0].p50_us,
                    c[i].mean_us / c[0].mean_us
                ),
                Some(r <= limit),
            );
        }
        rep.section(
            &format!("u1: one worker, acquire + release (RTT = floor p50 / 2 = {rtt_us:.1} µs)"),
            load.end(&server),
            &[
                "impl",
                "variant",
                "cycles",
                "mean µs",
                "p50 µs",
                "p99 µs",
                "max µs",
                "ratio p50",
                "ratio mean",
                "server calls / cycle",
            ],
            &rows,
        );
        rep.section(
            "u1 per-cycle interleaved: floor, fixed lease, auto-renewal alternating cycle by cycle on one thread (the targets' ratios)",
            (f64::NAN, f64::NAN, f64::NAN),
            &[
                "impl",
                "variant",
                "cycles",
                "mean µs",
                "p50 µs",
                "p99 µs",
                "max µs",
                "ratio p50",
                "ratio mean",
            ],
            &mixed_rows,
        );
    }

    // ---------------------------------------------------------------- u8
    if o.wants("u8") {
        let load = Load::start(&server);
        let impls = [Impl::Floor, Impl::Redislock(false), Impl::Redislock(true)];
        let p = Params {
            sc: Sc::U8,
            n: (o.n / o.rounds).max(8),
            target: 0,
            cap: o.cap,
        };
        let merged = interleaved(&url, &impls, &p, o.rounds, &mut rep);
        let rates: Vec<f64> = merged.iter().map(metrics::rate).collect();
        let mut rows = Vec::new();
        for (i, which) in impls.iter().enumerate() {
            rows.push(vec![
                which.name().into(),
                which.variant(),
                merged[i].int("cycles").to_string(),
                format!("{:.0}", rates[i]),
                f1(1e6 / rates[i]),
                f2(rates[i] / rates[0]),
            ]);
            let mut s = J::obj();
            s.set("impl", which.name())
                .set("variant", which.variant())
                .set("cycles", merged[i].int("cycles"))
                .set("cycles_per_s", rates[i])
                .set("ratio_to_floor", rates[i] / rates[0]);
            rep.summary("u8", s);
        }
        targets.add(
            "u8 redislock, fixed lease",
            "≥ 0.95× 8-conn floor throughput",
            format!("{:.2}×", rates[1] / rates[0]),
            Some(rates[1] / rates[0] >= 0.95),
        );
        targets.add(
            "u8 redislock, auto-renewal",
            "(same, informative)",
            format!("{:.2}×", rates[2] / rates[0]),
            Some(rates[2] / rates[0] >= 0.95),
        );
        rep.section(
            "u8: eight workers, own keys (throughput of all eight)",
            load.end(&server),
            &[
                "impl",
                "variant",
                "cycles",
                "cycles/s",
                "µs/cycle (aggregate)",
                "ratio to floor",
            ],
            &rows,
        );
    }

    if rtt_us.is_nan() && (o.wants("c8") || o.wants("h2")) {
        // u1 was skipped: a short floor run for the RTT that the handoffs are counted in.
        let p = Params {
            sc: Sc::U1,
            n: 2000,
            target: 0,
            cap: o.cap,
        };
        let rec = run_rust(&url, Impl::Floor, &p);
        rep.raw(&rec);
        rtt_us = metrics::cycle(&rec).p50_us / 2.0;
        println!("\nRTT = floor p50 / 2 = {rtt_us:.1} µs (2000 floor cycles; u1 was skipped)");
    }

    // ---------------------------------------------------------------- c8 / h2
    let mut c8_rate_off = f64::NAN;
    for sc in [Sc::C8, Sc::H2] {
        if !o.wants(sc.name()) {
            continue;
        }
        let load = Load::start(&server);
        let p = Params {
            sc,
            n: 0,
            target: if sc == Sc::C8 { o.target } else { o.htarget },
            cap: o.cap,
        };
        let mut rows = Vec::new();
        let mut floor = None;
        for which in [
            Impl::HandoffFloor,
            Impl::Redislock(false),
            Impl::Redislock(true),
        ] {
            eprintln!("  {} {} {} ...", sc.name(), which.name(), which.variant());
            let rec = run_rust(&url, which, &p);
            rep.raw(&rec);
            let m = metrics::contended(&rec);
            let mut row = contended_row("rust", &which.variant(), &m, rtt_us);
            row[0] = which.name().into();
            rows.push(row);
            rep.summary(
                sc.name(),
                contended_summary("rust", which.name(), &which.variant(), &m, rtt_us),
            );
            let Impl::Redislock(renew) = which else {
                floor = Some(m);
                continue;
            };
            if sc == Sc::C8 && !renew {
                c8_rate_off = m.rate;
            }
            contended_targets(
                &mut targets,
                sc,
                &format!(
                    "redislock {}",
                    if renew { "auto-renewal" } else { "fixed lease" }
                ),
                &m,
                floor.as_ref(),
                rtt_us,
            );
        }
        rep.section(
            &contended_title(sc, p.target),
            load.end(&server),
            &CONTENDED_HEADERS,
            &rows,
        );
    }

    // ---------------------------------------------------------------- Sentinel
    sentinel::sections(o, &server, &mut rep, &mut targets, rtt_us);

    // ---------------------------------------------------------------- Cluster and Redlock
    cluster::section(o, &server, &mut rep, &mut targets, rtt_us);
    redlock::section(o, &server, &mut rep, &mut targets, rtt_us);
    redlock_stops::section(o, &server, &mut rep, &mut targets);

    // ---------------------------------------------------------------- renewal scale
    if o.wants("scale") {
        let load = Load::start(&server);
        let mut rows = Vec::new();
        for &n in &o.scale_locks {
            eprintln!("  renewal scale: {n} locks for {} s ...", o.scale_secs);
            let a = ScaleArgs {
                locks: n,
                secs: o.scale_secs,
                lease: o.scale_lease,
                pool_size: o.scale_pool_size,
            };
            match scale::run(server.port, &|| server.cpu_secs(), &a) {
                Ok(j) => {
                    let lost = j
                        .int("not_held_at_end")
                        .max(j.int("is_lost_at_end"))
                        .max(j.int("stats_lost_locks"));
                    let hwm_mib = j.int("hwm_kib") as f64 / 1024.0;
                    let hold = j.get("hold_s").and_then(J::as_f64).unwrap_or(f64::NAN);
                    rows.push(vec![
                        format!("{n} ({} held)", j.int("held")),
                        format!("{:.1}", hold),
                        format!(
                            "{} / {} / {}",
                            j.int("not_held_at_end"),
                            j.int("is_lost_at_end"),
                            j.int("stats_lost_locks")
                        ),
                        j.int("stats_late_renewals").to_string(),
                        j.int("stats_renewals").to_string(),
                        format!("{} → {}", j.int("threads_before"), j.int("threads_max")),
                        format!(
                            "{:.1} / {:.1} / {:.1}",
                            j.int("rss_before_kib") as f64 / 1024.0,
                            j.int("rss_held_kib") as f64 / 1024.0,
                            hwm_mib
                        ),
                        format!(
                            "{:.2} / {:.2}",
                            j.get("cpu_acquire_s")
                                .and_then(J::as_f64)
                                .unwrap_or(f64::NAN),
                            j.get("cpu_hold_s").and_then(J::as_f64).unwrap_or(f64::NAN) / hold
                        ),
                        j.get("redis_cpu_s")
                            .and_then(J::as_f64)
                            .map_or("n/a".into(), |r| {
                                format!(
                                    "{:.2}",
                                    r / j.get("child_wall_s").and_then(J::as_f64).unwrap_or(1.0)
                                )
                            }),
                        format!(
                            "{:.2} / {:.2}",
                            j.get("acquire_s").and_then(J::as_f64).unwrap_or(f64::NAN),
                            j.get("release_s").and_then(J::as_f64).unwrap_or(f64::NAN)
                        ),
                        j.text("extra_result").to_owned(),
                    ]);
                    let refused = j.get("extra_refused").and_then(J::as_bool).unwrap_or(false);
                    let early = j.get("refused_early").and_then(J::as_bool).unwrap_or(false);
                    let held = j.int("held");
                    if early {
                        targets.add(
                            &format!("renewal scale {n} locks"),
                            "0 lost, or a clear refusal before an OS limit",
                            format!(
                                "{held} held, {lost} lost; lock {} refused: {}",
                                held + 1,
                                j.text("early_refusal")
                            ),
                            Some(lost == 0),
                        );
                    } else {
                        let mib = if n <= 1000 { 64.0 } else { 32.0 };
                        targets.add(
                            &format!("renewal scale {n} locks"),
                            &format!("0 lost, VmHWM ≤ {mib:.0} MiB"),
                            format!(
                                "{lost} lost, {} late, VmHWM {hwm_mib:.1} MiB",
                                j.int("stats_late_renewals")
                            ),
                            Some(lost == 0 && hwm_mib <= mib),
                        );
                        targets.add(
                            &format!("refusal of lock {} with max_renewed_locks = {n}", n + 1),
                            "LimitReached",
                            j.text("extra_result").chars().take(60).collect(),
                            Some(refused),
                        );
                    }
                    rep.summary("renewal_scale", j);
                }
                Err(e) => {
                    rows.push(vec![n.to_string(), format!("FAILED: {e}")]);
                    rows.last_mut().unwrap().resize(11, String::new());
                }
            }
        }
        rep.section(
            &format!(
                "Renewal at scale: auto-renewed locks held {} s, lease {} ms (renewed every lease/3), one client, pool_size {}",
                o.scale_secs,
                o.scale_lease.as_millis(),
                o.scale_pool_size.map_or("16 (default)".into(), |s| s.to_string())
            ),
            load.end(&server),
            &["locks", "held s", "lost: !is_held / is_lost / stats", "late renewals", "renewals", "threads", "RSS MiB before / held / VmHWM", "bench CPU s acquire / cores held", "redis cores", "acquire / release all s", "lock N+1 (max_renewed_locks = N)"],
            &rows,
        );
    }

    // ---------------------------------------------------------------- other kinds
    if o.wants("kinds") {
        kinds::section(&server, &url, &mut rep);
    }

    // ---------------------------------------------------------------- PHP
    let php_wanted = o.php != Some(false) && o.wants("php");
    if php_wanted {
        match Php::find(&o.peers_dir, o.php_lib.clone()) {
            Err(why) => {
                if o.php == Some(true) {
                    panic!("PHP rows asked for, but {why}");
                }
                println!("\n### PHP through FFI\n\nskipped: {why}");
            }
            Ok(php) => php_sections(
                &php,
                &server,
                o,
                &mut rep,
                &mut targets,
                rtt_us,
                c8_rate_off,
            ),
        }
    }

    // ---------------------------------------------------------------- report
    let mut s = String::from(
        "\n### Targets (ratios within this run; benchmarks measure, they do not assert)\n\n",
    );
    s.push_str(&table(
        &["what", "target", "measured", "verdict"],
        &targets.0,
    ));
    s.push_str(
        "\nc8 against python-redis-lock (≥ 2×) needs the peers run (scripts/bench/bench.sh --peers).\n",
    );
    println!("{s}");
    println!("### JSON summary lines\n");
    for j in &rep.summaries {
        println!("{}", j.line());
    }
    if let Some(p) = &o.raw {
        println!("\nraw records (README format): {}", p.display());
    }
}

/// Runs every configuration `rounds` times, rotating the order each round; returns one merged
/// record per configuration.
fn interleaved(url: &str, impls: &[Impl], p: &Params, rounds: usize, rep: &mut Report) -> Vec<J> {
    let mut per: Vec<Vec<J>> = vec![Vec::new(); impls.len()];
    for round in 0..rounds {
        for k in 0..impls.len() {
            let i = (k + round) % impls.len();
            eprintln!(
                "  {} round {}/{rounds}: {} {}",
                p.sc.name(),
                round + 1,
                impls[i].name(),
                impls[i].variant()
            );
            let rec = run_rust(url, impls[i], p);
            rep.raw(&rec);
            per[i].push(rec);
        }
    }
    per.iter().map(|r| metrics::merge(r)).collect()
}
