//! The "kinds" section: the read/write lock and the semaphore under load, each for a fixed
//! time (`KINDS_SECS` per configuration), so that the section stays short.
//!
//! read-mostly: 8 workers on one name, each operation a read (90%) or a write (10%), drawn at
//! random: take the lock, run a tiny critical section on an in-memory counter (a read loads it,
//! a write loads and stores it plus one, on purpose not atomically, so that two writers at once
//! would lose an increment), release. Three configurations in the same run: redislock's
//! `rw_lock` (reads shared), redislock's exclusive lock for every operation, and the floor
//! (redis-rs, no library: `SET NX PX` + compare-and-delete script, 1 ms sleep after a refusal;
//! every operation exclusive), run in `ROUNDS` rounds of a share of the time each, the order
//! rotating every round, so that drifting machine load hits all three alike. Acquire latency (call → return) is kept apart for reads and
//! writes. Overlaps are checked in memory: each holder counts itself in (readers, writers)
//! after its acquire returns and out before it calls release, so a count seen is a real one; a
//! reader beside a writer, or two writers, is an overlap.
//!
//! semaphore: 8 workers, 3 permits, each takes 1 permit, holds it 1 ms, releases. Throughput,
//! grants per worker (max/min), the most holders seen at once (counted the same way; must be
//! ≤ 3), and the handoff latency: for a grant whose request was made before the latest release
//! that preceded it (it was waiting), the time from that release call to the grant's return.

use std::sync::Barrier;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;

use crate::json::J;
use crate::lockers::{Floor, redislock_client};
use crate::report::{Load, Report, f1, f2};
use crate::scenario::{LEASE, Locker};
use crate::server::Server;
use crate::sys::{Rng, pct_sorted};

/// How long each configuration runs in all.
const KINDS_SECS: f64 = 8.0;
/// Rounds of the read-mostly configurations (each runs `KINDS_SECS / ROUNDS` per round).
const ROUNDS: usize = 4;
/// Workers in both scenarios.
const WORKERS: usize = 8;
/// Permits of the semaphore.
const PERMITS: u32 = 3;
/// How long a semaphore permit is held.
const HOLD: Duration = Duration::from_millis(1);
/// An acquire's wait bound: long enough never to run out here; running out is a failure.
const WAIT: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, PartialEq)]
enum RwImpl {
    RwLock,
    Exclusive,
    Floor,
}

impl RwImpl {
    fn name(self) -> &'static str {
        match self {
            RwImpl::RwLock => "redislock rw_lock",
            RwImpl::Exclusive => "redislock lock (all exclusive)",
            RwImpl::Floor => "floor (redis-rs, no lib; all exclusive)",
        }
    }
    fn key(self) -> &'static str {
        match self {
            RwImpl::RwLock => "kinds:rw",
            RwImpl::Exclusive => "kinds:ex",
            RwImpl::Floor => "kinds:floor",
        }
    }
}

/// What one worker holds during an operation.
enum Held {
    Read(redislock::ReadLock),
    Write(redislock::WriteLock),
    Lock(redislock::Lock),
    Floor((String, String)),
}

/// Who holds the name right now, as seen by the holders themselves.
#[derive(Default)]
struct Holders {
    readers: AtomicI64,
    writers: AtomicI64,
    overlaps: AtomicU64,
}

impl Holders {
    fn enter(&self, write: bool) {
        let clash = if write {
            self.writers.fetch_add(1, Ordering::SeqCst) > 0
                || self.readers.load(Ordering::SeqCst) > 0
        } else {
            self.readers.fetch_add(1, Ordering::SeqCst);
            self.writers.load(Ordering::SeqCst) > 0
        };
        if clash {
            self.overlaps.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn leave(&self, write: bool) {
        let c = if write { &self.writers } else { &self.readers };
        c.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One read-mostly run's figures.
struct RwOutcome {
    reads: u64,
    writes: u64,
    wall: f64,
    read_ns: Vec<u64>,
    write_ns: Vec<u64>,
    overlaps: u64,
    /// Writes less the counter's final value (0 unless two writers overlapped).
    lost: i64,
}

impl RwOutcome {
    fn add(&mut self, o: RwOutcome) {
        self.reads += o.reads;
        self.writes += o.writes;
        self.wall += o.wall;
        self.read_ns.extend(o.read_ns);
        self.write_ns.extend(o.write_ns);
        self.overlaps += o.overlaps;
        self.lost += o.lost;
    }
}

fn acquire(which: RwImpl, client: &Client, floor: Option<&mut Floor>, write: bool) -> Held {
    let key = which.key();
    let fail = |e: redislock::Error| -> ! { panic!("{} acquire {key}: {e}", which.name()) };
    match which {
        RwImpl::RwLock => {
            let rw = client.rw_lock(key).lease(LEASE).auto_renew(false);
            if write {
                Held::Write(rw.write(WAIT).unwrap_or_else(|e| fail(e)))
            } else {
                Held::Read(rw.read(WAIT).unwrap_or_else(|e| fail(e)))
            }
        }
        RwImpl::Exclusive => Held::Lock(
            client
                .lock(key)
                .lease(LEASE)
                .auto_renew(false)
                .acquire(WAIT)
                .unwrap_or_else(|e| fail(e)),
        ),
        RwImpl::Floor => Held::Floor(floor.expect("floor connection").acquire(key)),
    }
}

fn release(held: Held, floor: Option<&mut Floor>) {
    let r = match held {
        Held::Read(l) => l.release(),
        Held::Write(l) => l.release(),
        Held::Lock(l) => l.release(),
        Held::Floor(g) => {
            floor.expect("floor connection").release(g);
            Ok(())
        }
    };
    if let Err(e) = r {
        panic!("release: {e}");
    }
}

fn read_mostly(url: &str, which: RwImpl, secs: f64) -> RwOutcome {
    let client = redislock_client(url, false);
    let holders = Holders::default();
    let counter = AtomicI64::new(0);
    let start = Barrier::new(WORKERS + 1);
    let mut t0 = Instant::now();
    let per: Vec<(u64, u64, Vec<u64>, Vec<u64>)> = thread::scope(|s| {
        let hs: Vec<_> = (0..WORKERS)
            .map(|w| {
                let (client, holders, counter, start) = (&client, &holders, &counter, &start);
                s.spawn(move || {
                    let mut floor = (which == RwImpl::Floor).then(|| Floor::new(url, w));
                    let mut rng = Rng::new(w as u64 + 1);
                    // Warm up: connect, one operation.
                    let h = acquire(which, client, floor.as_mut(), true);
                    release(h, floor.as_mut());
                    start.wait();
                    let end = Instant::now() + Duration::from_secs_f64(secs);
                    let (mut reads, mut writes) = (0u64, 0u64);
                    let (mut rns, mut wns) = (Vec::new(), Vec::new());
                    while Instant::now() < end {
                        let write = rng.next().is_multiple_of(10);
                        let t = Instant::now();
                        let h = acquire(which, client, floor.as_mut(), write);
                        let ns = t.elapsed().as_nanos() as u64;
                        holders.enter(write);
                        if write {
                            let v = counter.load(Ordering::SeqCst);
                            counter.store(v + 1, Ordering::SeqCst);
                            writes += 1;
                            wns.push(ns);
                        } else {
                            std::hint::black_box(counter.load(Ordering::SeqCst));
                            reads += 1;
                            rns.push(ns);
                        }
                        holders.leave(write);
                        release(h, floor.as_mut());
                    }
                    (reads, writes, rns, wns)
                })
            })
            .collect();
        start.wait();
        t0 = Instant::now();
        hs.into_iter()
            .map(|h| h.join().expect("read-mostly worker"))
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let mut o = RwOutcome {
        reads: 0,
        writes: 0,
        wall,
        read_ns: Vec::new(),
        write_ns: Vec::new(),
        overlaps: holders.overlaps.load(Ordering::SeqCst),
        lost: 0,
    };
    for (r, w, rns, wns) in per {
        o.reads += r;
        o.writes += w;
        o.read_ns.extend(rns);
        o.write_ns.extend(wns);
    }
    o.lost = o.writes as i64 - counter.load(Ordering::SeqCst);
    o
}

/// One semaphore run's figures.
struct SemOutcome {
    grants: Vec<u64>,
    wall: f64,
    max_holders: usize,
    handoffs_ns: Vec<u64>,
}

fn semaphore(url: &str) -> SemOutcome {
    let client = redislock_client(url, false);
    let holders = AtomicUsize::new(0);
    let max_holders = AtomicUsize::new(0);
    let start = Barrier::new(WORKERS + 1);
    let mut t0 = Instant::now();
    let t_base = Instant::now();
    // Per worker: grants and `[t_req, t_acq, t_rel]` in ns since `t_base`.
    let per: Vec<Vec<[u64; 3]>> = thread::scope(|s| {
        let hs: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (client, holders, max_holders, start) =
                    (&client, &holders, &max_holders, &start);
                s.spawn(move || {
                    let sem = client
                        .semaphore("kinds:sem", PERMITS)
                        .lease(LEASE)
                        .auto_renew(false);
                    let ns = || t_base.elapsed().as_nanos() as u64;
                    let p = sem.acquire(1, WAIT).expect("semaphore warm-up");
                    p.release().expect("semaphore warm-up release");
                    start.wait();
                    let end = Instant::now() + Duration::from_secs_f64(KINDS_SECS);
                    let mut recs = Vec::new();
                    while Instant::now() < end {
                        let t_req = ns();
                        let p = sem
                            .acquire(1, WAIT)
                            .unwrap_or_else(|e| panic!("semaphore acquire: {e}"));
                        let t_acq = ns();
                        let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                        max_holders.fetch_max(now, Ordering::SeqCst);
                        thread::sleep(HOLD);
                        holders.fetch_sub(1, Ordering::SeqCst);
                        let t_rel = ns();
                        p.release()
                            .unwrap_or_else(|e| panic!("semaphore release: {e}"));
                        recs.push([t_req, t_acq, t_rel]);
                    }
                    recs
                })
            })
            .collect();
        start.wait();
        t0 = Instant::now();
        hs.into_iter()
            .map(|h| h.join().expect("semaphore worker"))
            .collect()
    });
    let wall = t0.elapsed().as_secs_f64();
    let mut rels: Vec<u64> = per.iter().flatten().map(|r| r[2]).collect();
    rels.sort_unstable();
    let mut handoffs_ns: Vec<u64> = per
        .iter()
        .flatten()
        .filter_map(|&[t_req, t_acq, _]| {
            let i = rels.partition_point(|&r| r < t_acq);
            let last = *rels.get(i.checked_sub(1)?)?;
            (t_req < last).then(|| t_acq - last)
        })
        .collect();
    handoffs_ns.sort_unstable();
    SemOutcome {
        grants: per.iter().map(|r| r.len() as u64).collect(),
        wall,
        max_holders: max_holders.load(Ordering::SeqCst),
        handoffs_ns,
    }
}

fn us(sorted: &[u64], p: f64) -> f64 {
    pct_sorted(sorted, p) / 1e3
}

/// Runs the section and prints its two tables.
pub fn section(server: &Server, url: &str, rep: &mut Report) {
    // ---- read-mostly
    let load = Load::start(server);
    let impls = [RwImpl::Floor, RwImpl::Exclusive, RwImpl::RwLock];
    let mut merged: Vec<Option<RwOutcome>> = impls.iter().map(|_| None).collect();
    for round in 0..ROUNDS {
        for k in 0..impls.len() {
            let i = (k + round) % impls.len();
            eprintln!(
                "  kinds read-mostly round {}/{ROUNDS}: {} ...",
                round + 1,
                impls[i].name()
            );
            let o = read_mostly(url, impls[i], KINDS_SECS / ROUNDS as f64);
            match &mut merged[i] {
                Some(m) => m.add(o),
                slot => *slot = Some(o),
            }
        }
    }
    let mut rows = Vec::new();
    for (which, o) in impls.into_iter().zip(merged) {
        let mut o = o.expect("at least one round");
        o.read_ns.sort_unstable();
        o.write_ns.sort_unstable();
        let rate = (o.reads + o.writes) as f64 / o.wall;
        rows.push(vec![
            which.name().into(),
            format!("{:.0}", rate),
            format!("{} / {}", o.reads, o.writes),
            format!(
                "{} / {}",
                f1(us(&o.read_ns, 50.0)),
                f1(us(&o.read_ns, 99.0))
            ),
            format!(
                "{} / {}",
                f1(us(&o.write_ns, 50.0)),
                f1(us(&o.write_ns, 99.0))
            ),
            o.overlaps.to_string(),
            o.lost.to_string(),
        ]);
        let mut j = J::obj();
        j.set("scenario", "read-mostly")
            .set("impl", which.name())
            .set("workers", WORKERS)
            .set("secs", o.wall)
            .set("ops_per_s", rate)
            .set("reads", o.reads)
            .set("writes", o.writes)
            .set("read_p50_us", us(&o.read_ns, 50.0))
            .set("read_p99_us", us(&o.read_ns, 99.0))
            .set("write_p50_us", us(&o.write_ns, 50.0))
            .set("write_p99_us", us(&o.write_ns, 99.0))
            .set("overlaps", o.overlaps)
            .set("lost_writes", o.lost);
        rep.summary("kinds", j);
    }
    rep.section(
        &format!(
            "kinds: read-mostly ({WORKERS} workers, one name, 90% reads / 10% writes, {KINDS_SECS} s each \
             in {ROUNDS} rounds, order rotating; \
             floor = SET NX PX + EVALSHA compare-and-delete, 1 ms sleep after a refusal)"
        ),
        load.end(server),
        &[
            "implementation",
            "ops/s",
            "reads / writes",
            "read acquire p50 / p99 µs",
            "write acquire p50 / p99 µs",
            "overlaps",
            "lost writes",
        ],
        &rows,
    );

    // ---- semaphore
    let load = Load::start(server);
    eprintln!("  kinds semaphore ...");
    let o = semaphore(url);
    let total: u64 = o.grants.iter().sum();
    let (min, max) = (
        o.grants.iter().copied().min().unwrap_or(0),
        o.grants.iter().copied().max().unwrap_or(0),
    );
    let fairness = max as f64 / min.max(1) as f64;
    let rate = total as f64 / o.wall;
    let row = vec![
        "redislock semaphore".into(),
        format!("{rate:.0}"),
        format!("{min}-{max} ({})", f2(fairness)),
        format!(
            "{} / {}",
            f1(us(&o.handoffs_ns, 50.0)),
            f1(us(&o.handoffs_ns, 99.0))
        ),
        o.handoffs_ns.len().to_string(),
        format!("{} (of {PERMITS})", o.max_holders),
    ];
    let mut j = J::obj();
    j.set("scenario", "semaphore")
        .set("impl", "redislock semaphore")
        .set("workers", WORKERS)
        .set("permits", PERMITS)
        .set("secs", o.wall)
        .set("grants_per_s", rate)
        .set("grants", total)
        .set("min_grants", min)
        .set("max_grants", max)
        .set("handoff_p50_us", us(&o.handoffs_ns, 50.0))
        .set("handoff_p99_us", us(&o.handoffs_ns, 99.0))
        .set("handoffs", o.handoffs_ns.len())
        .set("max_holders", o.max_holders);
    rep.summary("kinds", j);
    rep.section(
        &format!(
            "kinds: semaphore ({WORKERS} workers, {PERMITS} permits, 1 permit each held {} ms, {KINDS_SECS} s)",
            HOLD.as_millis()
        ),
        load.end(server),
        &[
            "implementation",
            "grants/s",
            "grants per worker min-max (max/min)",
            "handoff p50 / p99 µs",
            "handoffs",
            "most holders at once",
        ],
        &[row],
    );
}
