//! The four scenarios of the peers contract (shared/bench/peers/README.md), run by threads of
//! this process for any [`Locker`]: u1 (1 worker, uncontended), u8 (8 workers, own keys),
//! c8 (8 workers, one key, GET/SET counter), h2 (2 workers strictly alternating, 0-100 ms hold).
//!
//! Common rules kept here: every worker connects and warms up, then waits at a start barrier;
//! the coordinator sends CONFIG RESETSTAT, takes `start` and releases them; times are
//! `Instant` (CLOCK_MONOTONIC) minus `start`; the cap is tested after each u1/u8 cycle and
//! before each c8/h2 acquire (and in h2's wait for the other worker).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use crate::json::{J, ints};
use crate::sys::{Rng, commandstats, connect, info, info_field, merge_commandstats};

/// The lease every implementation uses in the scenarios (README: 10 s everywhere).
pub const LEASE: Duration = Duration::from_secs(10);
/// An acquire "blocks with no deadline": a long wait bound, repeated while it runs out.
pub const LONG_WAIT: Duration = Duration::from_secs(3600);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sc {
    U1,
    U8,
    C8,
    H2,
}

impl Sc {
    pub fn parse(s: &str) -> Option<Sc> {
        Some(match s {
            "u1" => Sc::U1,
            "u8" => Sc::U8,
            "c8" => Sc::C8,
            "h2" => Sc::H2,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Sc::U1 => "u1",
            Sc::U8 => "u8",
            Sc::C8 => "c8",
            Sc::H2 => "h2",
        }
    }
    pub fn workers(self) -> usize {
        match self {
            Sc::U1 => 1,
            Sc::U8 | Sc::C8 => 8,
            Sc::H2 => 2,
        }
    }
    pub fn contended(self) -> bool {
        matches!(self, Sc::C8 | Sc::H2)
    }
}

#[derive(Clone, Debug)]
pub struct Params {
    pub sc: Sc,
    /// u1/u8: timed cycles in all.
    pub n: usize,
    /// c8/h2: counter target.
    pub target: i64,
    pub cap: Duration,
}

/// One lock implementation as one worker thread uses it.
pub trait Locker {
    type Guard;
    /// Blocks until the lock on `key` is held (no deadline).
    fn acquire(&mut self, key: &str) -> Self::Guard;
    fn release(&mut self, guard: Self::Guard);
}

/// What one run measured, in the README's terms.
#[derive(Debug, Default)]
pub struct Outcome {
    pub cycles: u64,
    pub wall_ns: u64,
    pub capped: bool,
    pub cycle_ns: Vec<u64>,
    pub worker_incs: Vec<u64>,
    /// `[t_req, t_acq, t_rel, t_end, worker]`, ns since start.
    pub records: Vec<[u64; 5]>,
    pub final_counter: i64,
    /// Summed over the servers.
    pub commandstats: J,
    /// One per server when there were several (Redlock masters), else empty.
    pub commandstats_per_server: Vec<J>,
    pub total_connections: i64,
}

impl Outcome {
    /// The README's JSON record.
    pub fn record(&self, p: &Params, peer: &str, version: &str, variant: &str) -> J {
        let mut r = J::obj();
        r.set("lang", "rust")
            .set("peer", peer)
            .set("version", version)
            .set("variant", variant)
            .set("scenario", p.sc.name())
            .set("workers", p.sc.workers())
            .set("cycles", self.cycles)
            .set("wall_ns", self.wall_ns)
            .set("capped", self.capped)
            .set("commandstats", self.commandstats.clone())
            .set("total_connections_received", self.total_connections);
        if !self.commandstats_per_server.is_empty() {
            r.set(
                "commandstats_per_master",
                J::Arr(self.commandstats_per_server.clone()),
            );
        }
        if p.sc == Sc::U1 {
            r.set("cycle_ns", ints(&self.cycle_ns));
        }
        if p.sc.contended() {
            r.set("target", p.target)
                .set("final_counter", self.final_counter)
                .set("worker_incs", ints(&self.worker_incs))
                .set(
                    "records",
                    J::Arr(self.records.iter().map(|x| ints(x)).collect()),
                );
        }
        r
    }
}

struct WorkerOut {
    count: u64,
    end: Instant,
    cycle_ns: Vec<u64>,
    records: Vec<[u64; 5]>,
}

/// Runs one scenario with one `Locker` per worker (made by `make(worker_id)` on the worker's
/// thread). `tag` names the keys: `pb:u:rust:<tag>:<w>`, `pb:c:lock:rust:<tag>`, ...
/// The counter and the server statistics are those of `url`.
pub fn run<L, F>(url: &str, tag: &str, p: &Params, make: F) -> Outcome
where
    L: Locker,
    F: Fn(usize) -> L + Sync,
{
    run_on(url, &[], tag, p, make)
}

/// [`run`] with the locks over several servers (Redlock masters): the counter lives on `url`
/// (the first master), and the statistics are summed over `url` and `others` (the record keeps
/// each server's `commandstats` too, in that order).
pub fn run_on<L, F>(url: &str, others: &[String], tag: &str, p: &Params, make: F) -> Outcome
where
    L: Locker,
    F: Fn(usize) -> L + Sync,
{
    let nw = p.sc.workers();
    let mut admin = connect(url);
    let mut other_admins: Vec<redis::Connection> = others.iter().map(|u| connect(u)).collect();
    let lkey = format!("pb:c:lock:rust:{tag}");
    let ckey = format!("pb:c:counter:rust:{tag}");
    if p.sc.contended() {
        let _: () = redis::cmd("DEL")
            .arg(&lkey)
            .arg(&ckey)
            .query(&mut admin)
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(&ckey)
            .arg(0)
            .query(&mut admin)
            .unwrap();
    }
    let ready = AtomicUsize::new(0);
    let barrier = Barrier::new(nw + 1);
    let start = OnceLock::new();
    let results: Vec<WorkerOut> = thread::scope(|s| {
        let handles: Vec<_> = (0..nw)
            .map(|wid| {
                let (ready, barrier, start, make) = (&ready, &barrier, &start, &make);
                let (lkey, ckey) = (&lkey, &ckey);
                thread::Builder::new()
                    .name(format!("bench-w{wid}"))
                    .spawn_scoped(s, move || {
                        let mut lk = make(wid);
                        let mut data = connect(url);
                        let mut go = || {
                            ready.fetch_add(1, Ordering::SeqCst);
                            barrier.wait();
                            *start.get().expect("start")
                        };
                        if p.sc.contended() {
                            contended_worker(wid, p, tag, lkey, ckey, &mut lk, &mut data, &mut go)
                        } else {
                            uncontended_worker(wid, p, tag, &mut lk, &mut go)
                        }
                    })
                    .expect("spawn worker")
            })
            .collect();
        // Every worker has warmed up and is about to park at the barrier.
        while ready.load(Ordering::SeqCst) < nw {
            if handles.iter().any(|h| h.is_finished()) {
                panic!("a worker ended before the start barrier (see its panic above)");
            }
            thread::sleep(Duration::from_millis(2));
        }
        thread::sleep(Duration::from_millis(20));
        for con in std::iter::once(&mut admin).chain(&mut other_admins) {
            let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query(con).unwrap();
        }
        start.set(Instant::now()).unwrap();
        barrier.wait();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let t0 = *start.get().unwrap();
    let wall_ns = results.iter().map(|r| r.end - t0).max().unwrap().as_nanos() as u64;
    let (mut cs, mut total_connections) = (J::obj(), 0);
    let mut per_server = Vec::new();
    for con in std::iter::once(&mut admin).chain(&mut other_admins) {
        let one = commandstats(&info(con, "commandstats"));
        cs = merge_commandstats(&cs, &one);
        per_server.push(one);
        total_connections += info_field(&info(con, "stats"), "total_connections_received")
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(0);
    }
    let mut out = Outcome {
        cycles: results.iter().map(|r| r.count).sum(),
        wall_ns,
        capped: wall_ns as u128 > p.cap.as_nanos(),
        commandstats: cs,
        commandstats_per_server: if others.is_empty() {
            Vec::new()
        } else {
            per_server
        },
        total_connections,
        ..Outcome::default()
    };
    if p.sc.contended() {
        out.final_counter = redis::cmd("GET").arg(&ckey).query(&mut admin).unwrap();
        out.worker_incs = results.iter().map(|r| r.count).collect();
    }
    for r in results {
        out.cycle_ns.extend(r.cycle_ns);
        out.records.extend(r.records);
    }
    out
}

fn uncontended_worker<L: Locker>(
    wid: usize,
    p: &Params,
    tag: &str,
    lk: &mut L,
    go: &mut dyn FnMut() -> Instant,
) -> WorkerOut {
    let nw = p.sc.workers();
    let key = format!("pb:u:rust:{tag}:{wid}");
    for _ in 0..200 {
        let g = lk.acquire(&key);
        lk.release(g);
    }
    let t0 = go();
    let per = p.n / nw;
    let mut out = WorkerOut {
        count: 0,
        end: t0,
        cycle_ns: Vec::with_capacity(if nw == 1 { per } else { 0 }),
        records: Vec::new(),
    };
    for _ in 0..per {
        let s = Instant::now();
        let g = lk.acquire(&key);
        lk.release(g);
        let e = Instant::now();
        if nw == 1 {
            out.cycle_ns.push((e - s).as_nanos() as u64);
        }
        out.count += 1;
        if e - t0 > p.cap {
            break;
        }
    }
    out.end = Instant::now();
    out
}

#[allow(clippy::too_many_arguments)]
fn contended_worker<L: Locker>(
    wid: usize,
    p: &Params,
    tag: &str,
    lkey: &str,
    ckey: &str,
    lk: &mut L,
    data: &mut redis::Connection,
    go: &mut dyn FnMut() -> Instant,
) -> WorkerOut {
    let handoff = p.sc == Sc::H2;
    let warm = format!("pb:c:warm:rust:{tag}:{wid}");
    for _ in 0..20 {
        let g = lk.acquire(&warm);
        lk.release(g);
    }
    let _: Option<i64> = redis::cmd("GET").arg(ckey).query(data).unwrap();
    let mut rng = Rng::new(wid as u64 + 17);
    let t0 = go();
    let ns = |t: Instant| (t - t0).as_nanos() as u64;
    let mut out = WorkerOut {
        count: 0,
        end: t0,
        cycle_ns: Vec::new(),
        records: Vec::new(),
    };
    loop {
        if t0.elapsed() > p.cap {
            break;
        }
        let t_req = Instant::now();
        let g = lk.acquire(lkey);
        let t_acq = Instant::now();
        let v: i64 = redis::cmd("GET").arg(ckey).query(data).unwrap();
        if v >= p.target {
            lk.release(g);
            break;
        }
        let _: () = redis::cmd("SET").arg(ckey).arg(v + 1).query(data).unwrap();
        if handoff {
            thread::sleep(Duration::from_micros(rng.next() % 100_001));
        }
        let t_rel = Instant::now();
        lk.release(g);
        let t_end = Instant::now();
        out.count += 1;
        out.records
            .push([ns(t_req), ns(t_acq), ns(t_rel), ns(t_end), wid as u64]);
        if handoff {
            // Wait outside the lock until the other worker has taken its turn.
            while v + 1 < p.target && t0.elapsed() < p.cap {
                let cur: i64 = redis::cmd("GET").arg(ckey).query(data).unwrap();
                if cur != v + 1 {
                    break;
                }
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
    out.end = Instant::now();
    out
}
