//! The Redlock stops section (`--only redlock-stops`, a part of `redlock`): how Redlock keeps
//! serving while one of three masters is stopped (SIGSTOP: its connections stay open, nothing
//! answers until SIGCONT).
//!
//! Eight threads of this process race on one lock name through `redlock://` over three
//! test-kit masters (the library's default timeouts, re-check interval and lease, auto-renewal
//! on); under the lock each does a non-atomic counter increment (GET, then SET) on the single
//! server, so a lost update shows an overlap the holders did not see. Three runs, each with its own
//! client and its own three fresh masters (a key a stop leaves behind lives out its lease):
//!
//! - **in turn**: each master stopped for [`STOP`] in turn, `--stops-gap` (4 s) between a SIGCONT
//!   and the next SIGSTOP;
//! - **home only**: only the lock's home master stopped, once (the master its waiters block on
//!   while all answer: FNV-1a 64 of the lock key modulo the masters, as in the library; the lock
//!   key is the name, as no key prefix is set);
//! - **not home only**: only the master after the home master stopped, once.
//!
//! Per stop: grants/s over the [`WINDOW`] before the SIGSTOP, during the stop, and over the
//! [`WINDOW`] after the SIGCONT; the longest wait (a thread's request → its grant, errors retried
//! within it) among the waits that overlap the stop, and the longest time with no grant at all
//! within it; and how many waiters were blocked (BLPOP) on each master just before the SIGSTOP,
//! which shows the home master. Per run: grants, lost updates (grants − counter), overlaps (a
//! holder found another inside), acquire and release errors by kind, fairness once every
//! master is back (per-thread grants max/min over the last [`FAIR`]), and the lock key still on
//! each master once every thread has finished (nobody holds the lock then: such a key only
//! expires).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use redislock_testkit::{RedisServer, RedlockMasters};

use crate::json::J;
use crate::report::{Load, Report, Targets, f1, f2};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys::connect;
use crate::topology::{self, Procs};

const MASTERS: usize = 3;
const THREADS: usize = 8;
/// How long a master stays stopped.
const STOP: Duration = Duration::from_secs(5);
/// The race before the first stop.
const WARM: Duration = Duration::from_secs(4);
/// The race after the last SIGCONT.
const TAIL: Duration = Duration::from_secs(6);
/// The before and after windows of a stop's rates.
const WINDOW: Duration = Duration::from_secs(3);
/// The last seconds of a run, every master back, over which fairness is measured.
const FAIR: Duration = Duration::from_secs(5);
/// Each acquire's wait bound (an acquire that runs out is retried within the same wait).
const WAIT: Duration = Duration::from_secs(30);
/// The lock name the threads race on.
const NAME: &str = "pb:stops:lock";

/// One grant: when its wait began, when the lock was granted, and to which thread.
struct Grant {
    req: Instant,
    acq: Instant,
    worker: usize,
}

/// One stop of a master.
struct Stop {
    master: usize,
    from: Instant,
    to: Instant,
    /// Clients blocked in BLPOP on each master just before the SIGSTOP.
    blocked: Vec<usize>,
}

/// What one run measured.
struct Run {
    label: &'static str,
    stops: Vec<Stop>,
    grants: Vec<Grant>,
    /// When the threads were told to stop (every master back since [`TAIL`]).
    end: Instant,
    counter: i64,
    overlaps: u64,
    errors: Vec<(String, usize)>,
    /// The lock key's PTTL (ms) on each master once every thread has finished (no holder
    /// left): a key still there is one nobody will delete, and it lives out its lease.
    left: Vec<Option<i64>>,
}

/// The lock's home master: FNV-1a 64 of the lock key modulo the masters (the library's rule,
/// `src/stores/redlock/mod.rs`, not public; the blocked-waiter counts of each stop check it).
fn home(key: &[u8], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// Clients blocked (CLIENT LIST's flag `b`: the waiters' BLPOP) on each master, 0 where it does
/// not answer.
fn blocked(masters: &[RedisServer]) -> Vec<usize> {
    masters
        .iter()
        .map(|m| {
            let Ok(mut con) = m.try_conn() else { return 0 };
            redis::cmd("CLIENT")
                .arg("LIST")
                .query::<String>(&mut con)
                .map(|l| {
                    l.lines()
                        .filter(|c| {
                            c.split(' ')
                                .any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')))
                        })
                        .count()
                })
                .unwrap_or(0)
        })
        .collect()
}

/// The whole section.
pub fn section(o: &Opts, server: &Server, rep: &mut Report, targets: &mut Targets) {
    if !topology::wants(o, "redlock", "redlock-stops") {
        return;
    }
    // A fresh set of masters for each run: a key a stop leaves behind on a master (it lives
    // out its lease) must not weigh on the next run.
    let home = home(NAME.as_bytes(), MASTERS);
    let plan: [(&'static str, Vec<usize>); 3] = [
        ("in turn", (0..MASTERS).collect()),
        ("home only", vec![home]),
        ("not home only", vec![(home + 1) % MASTERS]),
    ];
    eprintln!(
        "  redlock stops: starting {} × {MASTERS} masters ...",
        plan.len()
    );
    let Some(groups) = topology::start("Redlock with a master stopped", || {
        plan.clone().map(|_| RedlockMasters::start(MASTERS))
    }) else {
        return;
    };
    let procs = Procs {
        server,
        pids: groups
            .iter()
            .flat_map(|g| g.masters().iter().map(RedisServer::pid))
            .collect(),
    };
    let loadavg = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split(' ').take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|_| "?".into())
    };
    let load_before = loadavg();
    let load = Load::start(&procs);
    let runs: Vec<Run> = plan
        .iter()
        .zip(&groups)
        .map(|((label, stop), group)| race(group, server, label, stop, o.stops_gap))
        .collect();
    let cpu = load.end(&procs);
    let masters: Vec<String> = plan
        .iter()
        .zip(&groups)
        .map(|((label, _), g)| {
            let addrs: Vec<String> = g.masters().iter().map(RedisServer::addr).collect();
            format!("{} ({label})", addrs.join(", "))
        })
        .collect();
    println!(
        "\n## Redlock with a master stopped\n\nmasters (independent, no persistence, fresh for each run) {}; the lock {NAME:?}'s home master: {home}; the counter on the single server 127.0.0.1:{}; {THREADS} threads, library defaults (lease, timeouts, re-check interval), auto-renewal on; each stop {} s, {} s from a SIGCONT to the next SIGSTOP; load average {load_before} before, {} after\n",
        masters.join("; "),
        server.port,
        STOP.as_secs(),
        o.stops_gap.as_secs_f64(),
        loadavg(),
    );
    let mut rows = Vec::new();
    let mut sums = Vec::new();
    for run in &runs {
        let (r, s) = report(run, home);
        rows.extend(r);
        sums.push(s);
    }
    rep.section(
        &format!(
            "Redlock with a master stopped: c8 on one name, each stop {} s (grants/s over the {} s before, the stop, the {} s after)",
            STOP.as_secs(),
            WINDOW.as_secs(),
            WINDOW.as_secs()
        ),
        cpu,
        &[
            "run",
            "master stopped",
            "home?",
            "waiters blocked per master before",
            "grants/s before → during → after",
            "during / before",
            "longest wait ms",
            "longest with no grant ms",
        ],
        &rows,
    );
    rep.section(
        "Redlock with a master stopped: per run",
        (f64::NAN, f64::NAN, f64::NAN),
        &[
            "run",
            "grants",
            "lost / overlaps",
            "errors",
            "fairness after (per-thread min-max, max/min)",
            "longest wait ms (whole run)",
            "lock key left per master after the run (PTTL s)",
        ],
        &sums,
    );
    for run in &runs {
        let worst = run
            .stops
            .iter()
            .map(|s| rate(run, s.from, s.to) / rate(run, s.from - WINDOW, s.from))
            .fold(f64::INFINITY, f64::min);
        let lost = run.grants.len() as i64 - run.counter;
        targets.add(
            &format!("redlock, a master stopped ({})", run.label),
            "grants/s during each stop ≥ 50% of before; 0 overlaps, 0 lost",
            format!(
                "worst stop {:.0}% of before; {} overlaps, {lost} lost",
                worst * 100.0,
                run.overlaps
            ),
            Some(worst >= 0.5 && run.overlaps == 0 && lost == 0),
        );
    }
    for run in &runs {
        for (k, s) in run.stops.iter().enumerate() {
            let mut j = J::obj();
            j.set("run", run.label)
                .set("stop", k + 1)
                .set("master", s.master)
                .set("home", s.master == home)
                .set(
                    "blocked_before",
                    J::Arr(s.blocked.iter().map(|&b| J::from(b)).collect()),
                )
                .set("grants_per_s_before", rate(run, s.from - WINDOW, s.from))
                .set("grants_per_s_during", rate(run, s.from, s.to))
                .set("grants_per_s_after", rate(run, s.to, s.to + WINDOW))
                .set("longest_wait_ms", longest_wait(run, s.from, s.to))
                .set("longest_no_grant_ms", longest_gap(run, s.from, s.to));
            rep.summary("redlock_stops", j);
        }
        let (min, max) = fairness(run);
        let mut j = J::obj();
        j.set("run", run.label)
            .set("grants", run.grants.len())
            .set("final_counter", run.counter)
            .set("overlaps", run.overlaps)
            .set("errors", run.errors.iter().map(|(_, n)| n).sum::<usize>())
            .set("fair_min", min)
            .set("fair_max", max)
            .set(
                "left_pttl_ms",
                J::Arr(
                    run.left
                        .iter()
                        .map(|l| l.map_or(J::Null, J::from))
                        .collect(),
                ),
            );
        rep.summary("redlock_stops_run", j);
    }
}

/// One race on `group`: the threads start, then each master of `stop` is stopped in turn.
fn race(
    group: &RedlockMasters,
    server: &Server,
    label: &'static str,
    stop: &[usize],
    gap: Duration,
) -> Run {
    eprintln!("  redlock stops: {label} ...");
    let client = Client::builder(&group.url())
        .auto_renew(true)
        .build()
        .expect("client");
    let ckey = format!("pb:stops:counter:{label}");
    let mut admin = connect(&server.url());
    let () = redis::cmd("SET")
        .arg(&ckey)
        .arg(0)
        .query(&mut admin)
        .expect("SET counter");
    let done = AtomicBool::new(false);
    let inside = AtomicU64::new(0);
    let overlaps = AtomicU64::new(0);
    let errors = Mutex::new(Vec::<(String, usize)>::new());
    let error = |what: String| {
        let mut e = errors.lock().unwrap();
        match e.iter_mut().find(|(k, _)| *k == what) {
            Some((_, n)) => *n += 1,
            None => e.push((what, 1)),
        }
    };
    let mut stops = Vec::new();
    let mut end = Instant::now();
    let grants: Vec<Grant> = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|worker| {
                let (client, ckey, done, inside, overlaps, error) =
                    (&client, &ckey, &done, &inside, &overlaps, &error);
                let url = server.url();
                thread::Builder::new()
                    .name(format!("bench-stops-{worker}"))
                    .spawn_scoped(s, move || {
                        let mut data = connect(&url);
                        let mut out = Vec::new();
                        while !done.load(Ordering::Relaxed) {
                            let req = Instant::now();
                            let lock = loop {
                                match client.lock(NAME).acquire(WAIT) {
                                    Ok(lock) => break Some(lock),
                                    Err(e) if e.is_wait_timeout() => {}
                                    Err(e) => {
                                        error(format!("acquire {:?}", e.kind()));
                                        thread::sleep(Duration::from_millis(1));
                                    }
                                }
                                if done.load(Ordering::Relaxed) {
                                    break None;
                                }
                            };
                            let Some(lock) = lock else { break };
                            let acq = Instant::now();
                            if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                                overlaps.fetch_add(1, Ordering::SeqCst);
                            }
                            let v: i64 = counter(&mut data, &url, redis::cmd("GET").arg(ckey));
                            let () =
                                counter(&mut data, &url, redis::cmd("SET").arg(ckey).arg(v + 1));
                            inside.fetch_sub(1, Ordering::SeqCst);
                            if let Err(e) = lock.release() {
                                error(format!("release {:?}", e.kind()));
                            }
                            out.push(Grant { req, acq, worker });
                        }
                        out
                    })
                    .expect("spawn a racer")
            })
            .collect();
        thread::sleep(WARM);
        for (k, &m) in stop.iter().enumerate() {
            if k > 0 {
                thread::sleep(gap);
            }
            let master = &group.masters()[m];
            let blocked = blocked(group.masters());
            let from = Instant::now();
            master.pause();
            thread::sleep(STOP);
            master.resume();
            stops.push(Stop {
                master: m,
                from,
                to: Instant::now(),
                blocked,
            });
        }
        thread::sleep(TAIL);
        end = Instant::now();
        done.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a racer panicked"))
            .collect()
    });
    let counter: i64 = redis::cmd("GET").arg(&ckey).query(&mut admin).unwrap();
    let left = group
        .masters()
        .iter()
        .map(|m| {
            let pttl: i64 = redis::cmd("PTTL")
                .arg(NAME)
                .query(&mut m.conn())
                .expect("PTTL");
            (pttl >= 0).then_some(pttl)
        })
        .collect();
    Run {
        label,
        stops,
        grants,
        end,
        counter,
        overlaps: overlaps.load(Ordering::SeqCst),
        errors: errors.into_inner().unwrap(),
        left,
    }
}

/// A command on the counter's server, again on a fresh connection if it fails (a signal, such as
/// a debugger's attach, interrupts a read, and the connection's replies are out of step then).
fn counter<T: redis::FromRedisValue>(
    data: &mut redis::Connection,
    url: &str,
    cmd: &redis::Cmd,
) -> T {
    for _ in 0..3 {
        match cmd.query(data) {
            Ok(v) => return v,
            Err(_) => *data = connect(url),
        }
    }
    cmd.query(data)
        .unwrap_or_else(|e| panic!("the counter's server {url}: {e}"))
}

/// Grants per second with their grant in `[from, to)`.
fn rate(run: &Run, from: Instant, to: Instant) -> f64 {
    let n = run
        .grants
        .iter()
        .filter(|g| g.acq >= from && g.acq < to)
        .count();
    n as f64 / (to - from).as_secs_f64()
}

/// The longest wait (request → grant) among those that overlap `[from, to]`, ms.
fn longest_wait(run: &Run, from: Instant, to: Instant) -> f64 {
    run.grants
        .iter()
        .filter(|g| g.req <= to && g.acq >= from)
        .map(|g| (g.acq - g.req).as_secs_f64() * 1e3)
        .fold(0.0, f64::max)
}

/// The longest time within `[from, to]` with no grant, ms.
fn longest_gap(run: &Run, from: Instant, to: Instant) -> f64 {
    let mut t: Vec<Instant> = run
        .grants
        .iter()
        .map(|g| g.acq)
        .filter(|&a| a >= from && a <= to)
        .collect();
    t.sort();
    let edges: Vec<Instant> = std::iter::once(from)
        .chain(t)
        .chain(std::iter::once(to))
        .collect();
    edges
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3)
        .fold(0.0, f64::max)
}

/// Per-thread grants over the last [`FAIR`] of the run, every master back: (min, max).
fn fairness(run: &Run) -> (usize, usize) {
    let from = run.end - FAIR;
    let mut per = [0usize; THREADS];
    for g in run.grants.iter().filter(|g| g.acq >= from) {
        per[g.worker] += 1;
    }
    (
        per.iter().copied().min().unwrap_or(0),
        per.iter().copied().max().unwrap_or(0),
    )
}

/// A run's rows: one per stop, and its summary row.
fn report(run: &Run, home: usize) -> (Vec<Vec<String>>, Vec<String>) {
    let rows = run
        .stops
        .iter()
        .map(|s| {
            let (b, d, a) = (
                rate(run, s.from - WINDOW, s.from),
                rate(run, s.from, s.to),
                rate(run, s.to, s.to + WINDOW),
            );
            vec![
                run.label.into(),
                s.master.to_string(),
                if s.master == home { "home" } else { "not home" }.into(),
                s.blocked
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" / "),
                format!("{b:.0} → {} → {a:.0}", f1(d)),
                format!("{:.0}%", d / b * 100.0),
                format!("{:.0}", longest_wait(run, s.from, s.to)),
                format!("{:.0}", longest_gap(run, s.from, s.to)),
            ]
        })
        .collect();
    let (min, max) = fairness(run);
    let errors = if run.errors.is_empty() {
        "none".into()
    } else {
        run.errors
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let whole = run
        .grants
        .iter()
        .map(|g| (g.acq - g.req).as_secs_f64() * 1e3)
        .fold(0.0, f64::max);
    let sum = vec![
        run.label.into(),
        run.grants.len().to_string(),
        format!(
            "{} / {}",
            run.grants.len() as i64 - run.counter,
            run.overlaps
        ),
        errors,
        format!("{min}-{max} ({})", f2(max as f64 / min.max(1) as f64)),
        format!("{whole:.0}"),
        run.left
            .iter()
            .map(|l| l.map_or("-".into(), |ms| format!("{:.1}", ms as f64 / 1e3)))
            .collect::<Vec<_>>()
            .join(" / "),
    ];
    (rows, sum)
}
