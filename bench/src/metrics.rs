//! Figures computed from the README's JSON records (Rust and PHP alike), with the same rules
//! as the peers' analyze.py: nearest-rank percentiles, records sorted by acquire time, handoff
//! = next holder's acquire returned - previous holder called release.

use crate::json::J;
use crate::sys::{mean, merge_commandstats, pct_sorted};

/// Per-cycle latency of a u1 record, in µs.
#[derive(Debug, Clone, Copy)]
pub struct Cycle {
    pub cycles: i64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// wall / cycles (what analyze.py reports as µs/cycle).
    pub wall_us: f64,
}

pub fn cycle(rec: &J) -> Cycle {
    let mut v: Vec<u64> = rec
        .ints("cycle_ns")
        .into_iter()
        .map(|x| x.max(0) as u64)
        .collect();
    v.sort_unstable();
    let cycles = rec.int("cycles");
    Cycle {
        cycles,
        mean_us: mean(&v) / 1e3,
        p50_us: pct_sorted(&v, 50.0) / 1e3,
        p99_us: pct_sorted(&v, 99.0) / 1e3,
        max_us: v.last().map_or(f64::NAN, |&x| x as f64 / 1e3),
        wall_us: rec.int("wall_ns") as f64 / 1e3 / cycles.max(1) as f64,
    }
}

/// Cycles (or increments) per second over the record's wall time.
pub fn rate(rec: &J) -> f64 {
    rec.int("cycles") as f64 / (rec.int("wall_ns") as f64 / 1e9)
}

/// Contended figures of a c8/h2 record.
#[derive(Debug, Clone)]
pub struct Contended {
    pub incs: i64,
    pub rate: f64,
    pub final_counter: i64,
    pub lost: i64,
    pub overlaps: usize,
    pub min_incs: i64,
    pub max_incs: i64,
    /// Share of consecutive pairs where the same worker re-acquired.
    pub same_worker: f64,
    /// acquire() call -> return, µs.
    pub wait_p50_us: f64,
    pub wait_p99_us: f64,
    pub wait_max_us: f64,
    /// Cross-worker handoffs (release called -> other worker's acquire returned), ns, sorted.
    pub handoffs_ns: Vec<u64>,
}

impl Contended {
    pub fn handoff_us(&self, p: f64) -> f64 {
        pct_sorted(&self.handoffs_ns, p) / 1e3
    }
    pub fn handoff_mean_us(&self) -> f64 {
        mean(&self.handoffs_ns) / 1e3
    }
    pub fn handoff_max_us(&self) -> f64 {
        self.handoffs_ns
            .last()
            .map_or(f64::NAN, |&x| x as f64 / 1e3)
    }
    pub fn fairness(&self) -> f64 {
        self.max_incs as f64 / self.min_incs.max(1) as f64
    }
}

pub fn contended(rec: &J) -> Contended {
    let mut rs: Vec<Vec<i64>> = rec
        .get("records")
        .map(|a| {
            a.as_arr()
                .iter()
                .map(|r| r.as_arr().iter().filter_map(J::as_i64).collect())
                .collect()
        })
        .unwrap_or_default();
    rs.retain(|r| r.len() == 5);
    rs.sort_by_key(|r| r[1]);
    let incs = rec.ints("worker_incs");
    let total: i64 = incs.iter().sum();
    let mut waits: Vec<u64> = rs.iter().map(|r| (r[1] - r[0]).max(0) as u64).collect();
    waits.sort_unstable();
    let pairs: Vec<(&Vec<i64>, &Vec<i64>)> = rs.iter().zip(rs.iter().skip(1)).collect();
    let mut handoffs: Vec<u64> = pairs
        .iter()
        .filter(|(a, b)| a[4] != b[4])
        .map(|(a, b)| (b[1] - a[2]).max(0) as u64)
        .collect();
    handoffs.sort_unstable();
    Contended {
        incs: total,
        rate: rate(rec),
        final_counter: rec.int("final_counter"),
        lost: total - rec.int("final_counter"),
        overlaps: pairs.iter().filter(|(a, b)| b[1] < a[2]).count(),
        min_incs: incs.iter().copied().min().unwrap_or(0),
        max_incs: incs.iter().copied().max().unwrap_or(0),
        same_worker: pairs.iter().filter(|(a, b)| a[4] == b[4]).count() as f64
            / pairs.len().max(1) as f64,
        wait_p50_us: pct_sorted(&waits, 50.0) / 1e3,
        wait_p99_us: pct_sorted(&waits, 99.0) / 1e3,
        wait_max_us: waits.last().map_or(f64::NAN, |&x| x as f64 / 1e3),
        handoffs_ns: handoffs,
    }
}

/// Merges the records of several rounds of one uncontended configuration into one record:
/// cycles, wall time, connections and command calls summed, `cycle_ns` concatenated.
pub fn merge(rounds: &[J]) -> J {
    let mut out = rounds[0].clone();
    let mut cycle_ns: Vec<J> = Vec::new();
    let (mut cycles, mut wall, mut conns, mut capped) = (0, 0, 0, false);
    let mut cs = J::obj();
    for r in rounds {
        cycles += r.int("cycles");
        wall += r.int("wall_ns");
        conns += r.int("total_connections_received");
        capped |= r.get("capped").and_then(J::as_bool).unwrap_or(false);
        cs = merge_commandstats(&cs, r.get("commandstats").unwrap_or(&J::Null));
        if let Some(a) = r.get("cycle_ns") {
            cycle_ns.extend(a.as_arr().iter().cloned());
        }
    }
    out.set("cycles", cycles)
        .set("wall_ns", wall)
        .set("capped", capped)
        .set("commandstats", cs)
        .set("total_connections_received", conns)
        .set("rounds", rounds.len());
    if out.get("cycle_ns").is_some() {
        out.set("cycle_ns", J::Arr(cycle_ns));
    }
    out
}
