//! The PHP rows of the standalone report: u1 (phpredis floor, redislock, Symfony Lock in rounds
//! of separate processes, then redislock interleaved with the floor in one process), c8, h2, and
//! "req": a client made in every simulated PHP-FPM request (`bench/php/request_loop.php`).

use std::path::Path;
use std::process::Command;

use crate::json::{self, J};
use crate::metrics;
use crate::php::Php;
use crate::report::{
    CONTENDED_HEADERS, Load, Report, Targets, contended_row, contended_summary, contended_targets,
    contended_title, f1, f2,
};
use crate::scenario::{Params, Sc};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys::{command_mix, server_calls};

/// The PHP rows: u1 (phpredis floor, redislock, Symfony Lock interleaved), c8, h2 and req.
pub fn php_sections(
    php: &Php,
    server: &Server,
    o: &Opts,
    rep: &mut Report,
    targets: &mut Targets,
    rtt_us: f64,
    c8_rust: f64,
) {
    let port = server.port;
    // u1: phpredis floor, redislock, Symfony Lock, interleaved.
    if o.wants_php("u1") {
        let load = Load::start(server);
        let names = ["floor", "redislock", "symfony"];
        let p = Params {
            sc: Sc::U1,
            n: (o.n / o.rounds).max(1),
            target: 0,
            cap: o.cap,
        };
        let mut per: Vec<Vec<J>> = vec![Vec::new(); 3];
        let mut failed = Vec::new();
        for round in 0..o.rounds {
            for k in 0..3 {
                let i = (k + round) % 3;
                eprintln!("  php u1 round {}/{}: {}", round + 1, o.rounds, names[i]);
                let r = if i == 1 {
                    php.redislock(port, &p, false)
                } else {
                    php.peer(names[i], port, &p)
                };
                match r {
                    Ok(rec) => {
                        rep.raw(&rec);
                        per[i].push(rec);
                    }
                    Err(e) => failed.push(format!("{}: {e}", names[i])),
                }
            }
        }
        let mut rows = Vec::new();
        let mut sep_ratio = (f64::NAN, f64::NAN);
        let merged: Vec<Option<J>> = per
            .iter()
            .map(|v| (!v.is_empty()).then(|| metrics::merge(v)))
            .collect();
        let floor = merged[0].as_ref().map(metrics::cycle);
        for (i, m) in merged.iter().enumerate() {
            let Some(m) = m else { continue };
            let c = metrics::cycle(m);
            let (r50, rmean) = floor.map_or((f64::NAN, f64::NAN), |f| {
                (c.p50_us / f.p50_us, c.mean_us / f.mean_us)
            });
            let calls =
                server_calls(m.get("commandstats").unwrap()) as f64 / c.cycles.max(1) as f64;
            rows.push(vec![
                names[i].into(),
                m.text("version").into(),
                m.text("variant").into(),
                c.cycles.to_string(),
                f1(c.mean_us),
                f1(c.p50_us),
                f1(c.p99_us),
                f2(r50),
                f2(rmean),
                format!(
                    "{calls:.2}: {}",
                    command_mix(m.get("commandstats").unwrap(), c.cycles as u64)
                ),
            ]);
            let mut s = J::obj();
            s.set("lang", "php")
                .set("impl", names[i])
                .set("variant", m.text("variant"))
                .set("cycles", c.cycles)
                .set("mean_us", c.mean_us)
                .set("p50_us", c.p50_us)
                .set("p99_us", c.p99_us)
                .set("ratio_p50", r50)
                .set("ratio_mean", rmean);
            rep.summary("php_u1", s);
            if i == 1 {
                sep_ratio = (r50, rmean);
            }
        }
        // The targets' ratio: one process alternating phpredis floor and redislock cycles.
        eprintln!(
            "  php u1 interleaved with the phpredis floor: {} cycles ...",
            o.n
        );
        let mixed = php.redislock_interleaved(
            port,
            &Params {
                n: o.n,
                ..p.clone()
            },
        );
        match &mixed {
            Ok(rec) => {
                rep.raw(rec);
                let (mut lib, mut fl) = (rec.ints("cycle_ns"), rec.ints("floor_cycle_ns"));
                lib.sort_unstable();
                fl.sort_unstable();
                let med = |v: &[i64]| v.get(v.len() / 2).map_or(f64::NAN, |&x| x as f64 / 1e3);
                let avg = |v: &[i64]| v.iter().sum::<i64>() as f64 / v.len().max(1) as f64 / 1e3;
                let (r50, rmean) = (med(&lib) / med(&fl), avg(&lib) / avg(&fl));
                targets.add(
                    "PHP u1 redislock (FFI)",
                    "≤ 1.10× phpredis floor",
                    format!(
                        "{r50:.2}× p50 per-cycle interleaved ({:.1} vs {:.1} µs; means {rmean:.2}×); separate processes {:.2}× (means {:.2}×)",
                        med(&lib),
                        med(&fl),
                        sep_ratio.0,
                        sep_ratio.1
                    ),
                    Some(r50 <= 1.10),
                );
                let mut s = J::obj();
                s.set("lang", "php")
                    .set("impl", "redislock vs phpredis floor, per-cycle interleaved")
                    .set("cycles", lib.len())
                    .set("p50_us", med(&lib))
                    .set("floor_p50_us", med(&fl))
                    .set("mean_us", avg(&lib))
                    .set("floor_mean_us", avg(&fl))
                    .set("ratio_p50", r50)
                    .set("ratio_mean", rmean);
                rep.summary("php_u1_per_cycle", s);
                rows.push(vec![
                    "redislock / floor interleaved".into(),
                    rec.text("version").into(),
                    rec.text("variant").into(),
                    lib.len().to_string(),
                    format!("{} / {}", f1(avg(&lib)), f1(avg(&fl))),
                    format!("{} / {}", f1(med(&lib)), f1(med(&fl))),
                    format!(
                        "{} / {}",
                        f1(lib
                            .get(lib.len() * 99 / 100)
                            .map_or(f64::NAN, |&x| x as f64 / 1e3)),
                        f1(fl
                            .get(fl.len() * 99 / 100)
                            .map_or(f64::NAN, |&x| x as f64 / 1e3))
                    ),
                    f2(r50),
                    f2(rmean),
                    String::new(),
                ]);
            }
            Err(e) => failed.push(format!("interleaved: {e}")),
        }
        let mut title =
            "PHP u1: one process, acquire + release, ratio to the phpredis SET NX PX + DEL floor (rows 1-3: separate processes in rounds; last row: one process alternating floor and redislock cycles, the targets' ratio)"
                .to_owned();
        if !failed.is_empty() {
            title.push_str(&format!(" -- FAILED: {}", failed.join("; ")));
        }
        rep.section(
            &title,
            load.end(server),
            &[
                "peer",
                "version",
                "variant",
                "cycles",
                "mean µs",
                "p50 µs",
                "p99 µs",
                "ratio p50",
                "ratio mean",
                "server calls / cycle",
            ],
            &rows,
        );
    }
    for sc in [Sc::C8, Sc::H2] {
        if !o.wants_php(sc.name()) {
            continue;
        }
        let load = Load::start(server);
        let p = Params {
            sc,
            n: 0,
            target: if sc == Sc::C8 { o.target } else { o.htarget },
            cap: o.cap,
        };
        let mut rows = Vec::new();
        let mut rates = [f64::NAN; 2];
        for (i, peer) in ["redislock", "symfony"].iter().enumerate() {
            eprintln!("  php {} {peer} ...", sc.name());
            let r = if i == 0 {
                php.redislock(port, &p, false)
            } else {
                php.peer(peer, port, &p)
            };
            match r {
                Ok(rec) => {
                    rep.raw(&rec);
                    let m = metrics::contended(&rec);
                    rates[i] = m.rate;
                    let mut row = contended_row("php", rec.text("variant"), &m, rtt_us);
                    row[0] = format!("php {peer}");
                    rows.push(row);
                    rep.summary(
                        &format!("php_{}", sc.name()),
                        contended_summary("php", peer, rec.text("variant"), &m, rtt_us),
                    );
                    if i == 0 {
                        contended_targets(targets, sc, "PHP redislock", &m, None, rtt_us);
                    }
                }
                Err(e) => {
                    let mut row = vec![format!("php {peer}"), format!("FAILED: {e}")];
                    row.resize(CONTENDED_HEADERS.len(), String::new());
                    rows.push(row);
                }
            }
        }
        if sc == Sc::C8 {
            targets.add(
                "c8 redislock (Rust) above Symfony Lock (PHP)",
                "> Symfony",
                format!("{:.0} vs {:.0} incr/s", c8_rust, rates[1]),
                (!rates[1].is_nan() && !c8_rust.is_nan()).then(|| c8_rust > rates[1]),
            );
            targets.add(
                "c8 redislock (PHP) above Symfony Lock (PHP)",
                "> Symfony",
                format!("{:.0} vs {:.0} incr/s", rates[0], rates[1]),
                (!rates[0].is_nan() && !rates[1].is_nan()).then(|| rates[0] > rates[1]),
            );
        }
        rep.section(
            &format!("PHP {}", contended_title(sc, p.target)),
            load.end(server),
            &CONTENDED_HEADERS,
            &rows,
        );
    }
    if o.wants_php("req") {
        request_sections(php, server, o, rep, targets);
    }
}

/// Runs `bench/php/request_loop.php` with `args`; returns its JSON line.
fn request_loop(php: &Php, port: u16, args: &[String]) -> Result<J, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("php/request_loop.php");
    let out = Command::new("php")
        .args(["-d", "ffi.enable=1"])
        .arg(&script)
        .arg(format!("--port={port}"))
        .args(args)
        .arg("--json")
        .env("REDISLOCK_LIB", &php.lib)
        .output()
        .map_err(|e| format!("php: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed ({}): {}",
            script.display(),
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    json::parse(text.lines().last().ok_or("no output")?)
}

/// "req": a client made in every simulated PHP-FPM request. First 2,000 requests in one fresh
/// PHP process per variant (redislock `Client::fromUrl` + acquire + release, phpredis `pconnect`
/// and `connect` + SET NX PX + compare-and-delete): µs per request, threads and connections
/// after. Then the warm worker: one process alternating redislock and phpredis `pconnect`
/// requests, `--n` of each, for the target ratio.
fn request_sections(php: &Php, server: &Server, o: &Opts, rep: &mut Report, targets: &mut Targets) {
    let port = server.port;
    let load = Load::start(server);
    let mut rows = Vec::new();
    let labels = [
        (
            "phpredis-pconnect",
            "phpredis pconnect + SET NX PX + compare-and-delete",
        ),
        (
            "phpredis-connect",
            "phpredis connect + SET NX PX + compare-and-delete + close",
        ),
        (
            "redislock",
            "Client::fromUrl + acquire + release, client dropped",
        ),
    ];
    for (variant, label) in labels {
        eprintln!("  php req: 2000 requests, {variant} ...");
        match request_loop(
            php,
            port,
            &["--n=2000".into(), format!("--variant={variant}")],
        ) {
            Ok(r) => {
                let f = |k: &str| r.get(k).and_then(J::as_f64).unwrap_or(f64::NAN);
                rows.push(vec![
                    label.to_owned(),
                    f1(f("us_per_request")),
                    f1(f("p50_us")),
                    f1(f("p99_us")),
                    format!(
                        "{} ({})",
                        r.int("threads_after"),
                        r.int("library_threads_after")
                    ),
                    r.int("connections").to_string(),
                ]);
                let mut s = J::obj();
                s.set("lang", "php")
                    .set("impl", variant)
                    .set("requests", 2000)
                    .set("us_per_request", f("us_per_request"))
                    .set("p50_us", f("p50_us"))
                    .set("p99_us", f("p99_us"))
                    .set("threads_after", r.int("threads_after"))
                    .set("library_threads_after", r.int("library_threads_after"))
                    .set("connections", r.int("connections"));
                rep.summary("php_requests", s);
            }
            Err(e) => {
                let mut row = vec![label.to_owned(), format!("FAILED: {e}")];
                row.resize(6, String::new());
                rows.push(row);
            }
        }
    }
    rep.section(
        "PHP requests: 2,000 simulated requests in one fresh PHP process per row, each making its own client (bench/php/request_loop.php)",
        load.end(server),
        &[
            "each request",
            "µs per request (mean)",
            "p50 µs",
            "p99 µs",
            "threads after (library's)",
            "connections opened",
        ],
        &rows,
    );

    let load = Load::start(server);
    eprintln!(
        "  php req: warm worker, {} requests of each, interleaved ...",
        o.n
    );
    let mut rows = Vec::new();
    match request_loop(php, port, &[format!("--n={}", o.n), "--interleave".into()]) {
        Ok(r) => {
            let f = |k: &str| r.get(k).and_then(J::as_f64).unwrap_or(f64::NAN);
            let (r50, rmean) = (f("ratio_p50"), f("ratio_mean"));
            targets.add(
                "PHP warm worker: fromUrl + acquire + release",
                "≤ 1.15× phpredis pconnect",
                format!(
                    "{r50:.2}× p50 per request interleaved ({:.1} vs {:.1} µs; means {rmean:.2}×)",
                    f("redislock_p50_us"),
                    f("pconnect_p50_us")
                ),
                (!r50.is_nan()).then_some(r50 <= 1.15),
            );
            for (label, k) in [
                ("Client::fromUrl + acquire + release", "redislock"),
                (
                    "phpredis pconnect + SET NX PX + compare-and-delete",
                    "pconnect",
                ),
            ] {
                rows.push(vec![
                    label.to_owned(),
                    r.int("requests").to_string(),
                    f1(f(&format!("{k}_mean_us"))),
                    f1(f(&format!("{k}_p50_us"))),
                    f1(f(&format!("{k}_p99_us"))),
                    if k == "redislock" {
                        f2(r50)
                    } else {
                        String::new()
                    },
                    if k == "redislock" {
                        f2(rmean)
                    } else {
                        String::new()
                    },
                ]);
            }
            let mut s = J::obj();
            s.set("lang", "php")
                .set(
                    "impl",
                    "redislock fromUrl per request vs phpredis pconnect, interleaved",
                )
                .set("requests", r.int("requests"))
                .set("p50_us", f("redislock_p50_us"))
                .set("pconnect_p50_us", f("pconnect_p50_us"))
                .set("mean_us", f("redislock_mean_us"))
                .set("pconnect_mean_us", f("pconnect_mean_us"))
                .set("ratio_p50", r50)
                .set("ratio_mean", rmean);
            rep.summary("php_warm_worker", s);
        }
        Err(e) => {
            let mut row = vec!["interleaved".to_owned(), format!("FAILED: {e}")];
            row.resize(7, String::new());
            rows.push(row);
        }
    }
    rep.section(
        "PHP warm worker: one process alternating, request by request, a redislock request (Client::fromUrl + acquire + release) and a phpredis pconnect one (SET NX PX + compare-and-delete)",
        load.end(server),
        &[
            "each request",
            "requests",
            "mean µs",
            "p50 µs",
            "p99 µs",
            "ratio p50",
            "ratio mean",
        ],
        &rows,
    );
}
