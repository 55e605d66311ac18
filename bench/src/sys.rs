//! What the benchmark reads from outside: /proc (threads, memory, CPU), Redis INFO, versions,
//! and the small statistics every table uses.

use std::time::Duration;

use crate::json::J;

/// Version of redislock and of redis-rs, from the workspace's Cargo.lock at build time.
pub fn versions() -> String {
    let lock = include_str!("../../Cargo.lock");
    let version = |name: &str| {
        lock.split("[[package]]")
            .find(|p| p.contains(&format!("\nname = \"{name}\"\n")))
            .and_then(|p| p.lines().find_map(|l| l.strip_prefix("version = \"")))
            .map(|v| v.trim_end_matches('"'))
            .unwrap_or("?")
    };
    format!(
        "redislock {} / redis-rs {}",
        version("redislock"),
        version("redis")
    )
}

pub fn redis_rs_version() -> String {
    versions().rsplit(' ').next().unwrap_or("?").to_owned()
}

/// A field of /proc/<pid>/status in kB or as a count ("VmRSS", "VmHWM", "Threads").
pub fn status_field(pid: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// User + system CPU seconds of a process, from /proc/<pid>/stat.
pub fn cpu_secs(pid: &str) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after the command name: state is field 3 (index 0 here); utime/stime are fields 14/15
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks())
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Busy CPU seconds of the whole machine (all cores), from /proc/stat.
pub fn machine_busy_secs() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = text
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy = v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)?;
    Some(busy as f64 / clock_ticks())
}

pub fn connect(url: &str) -> redis::Connection {
    let c = redis::Client::open(url)
        .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(5)))
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c
}

pub fn info(con: &mut redis::Connection, section: &str) -> String {
    redis::cmd("INFO").arg(section).query(con).expect("INFO")
}

/// `name:value` from an INFO reply.
pub fn info_field<'a>(raw: &'a str, name: &str) -> Option<&'a str> {
    raw.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// INFO commandstats as `{"cmdstat_set": {"calls": 3, "usec": 9, ...}, ...}`.
pub fn commandstats(raw: &str) -> J {
    let mut out = J::obj();
    for line in raw.lines() {
        let Some((name, vals)) = line.trim().split_once(':') else {
            continue;
        };
        if !name.starts_with("cmdstat_") {
            continue;
        }
        let mut o = J::obj();
        for kv in vals.split(',') {
            if let Some((k, v)) = kv.split_once('=') {
                let v = match (v.parse::<i64>(), v.parse::<f64>()) {
                    (Ok(i), _) => J::Int(i),
                    (_, Ok(f)) => J::Num(f),
                    _ => J::Str(v.to_owned()),
                };
                o.set(k, v);
            }
        }
        out.set(name, o);
    }
    out
}

/// Sums two commandstats objects (calls, usec, failed/rejected calls); usec_per_call is
/// recomputed.
pub fn merge_commandstats(a: &J, b: &J) -> J {
    let mut out = a.clone();
    for (name, stats) in b.entries() {
        let mut merged = a.get(name).cloned().unwrap_or_else(J::obj);
        for (k, v) in stats.entries() {
            if k == "usec_per_call" {
                continue;
            }
            let sum = merged.get(k).and_then(J::as_i64).unwrap_or(0) + v.as_i64().unwrap_or(0);
            merged.set(k, sum);
        }
        let calls = merged.int("calls");
        if calls > 0 {
            merged.set("usec_per_call", merged.int("usec") as f64 / calls as f64);
        }
        out.set(name, merged);
    }
    out
}

/// Server calls in a commandstats object, without CONFIG and INFO (the harness's own).
pub fn server_calls(cs: &J) -> i64 {
    cs.entries()
        .iter()
        .filter(|(k, _)| !k.starts_with("cmdstat_config") && !k.starts_with("cmdstat_info"))
        .map(|(_, v)| v.int("calls"))
        .sum()
}

/// "evalsha 1.00, set 1.00, ..." per cycle.
pub fn command_mix(cs: &J, per: u64) -> String {
    let mut v: Vec<(String, i64)> = cs
        .entries()
        .iter()
        .filter(|(k, _)| !k.starts_with("cmdstat_config") && !k.starts_with("cmdstat_info"))
        .map(|(k, v)| (k.trim_start_matches("cmdstat_").to_owned(), v.int("calls")))
        .filter(|(_, c)| *c > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.iter()
        .map(|(k, c)| format!("{k} {:.2}", *c as f64 / per.max(1) as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Nearest-rank percentile of sorted values (the same rule as the peers' analyze.py).
pub fn pct_sorted(s: &[u64], p: f64) -> f64 {
    if s.is_empty() {
        return f64::NAN;
    }
    let k = ((p / 100.0 * (s.len() - 1) as f64).round() as usize).min(s.len() - 1);
    s[k] as f64
}

pub fn mean(v: &[u64]) -> f64 {
    if v.is_empty() {
        f64::NAN
    } else {
        v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64
    }
}

/// A small xorshift generator (hold times, floor tokens): no rand dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut b = [0u8; 8];
        let _ = getrandom::fill(&mut b);
        Rng(u64::from_le_bytes(b) ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
