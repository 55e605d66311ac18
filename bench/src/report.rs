//! The standalone report: markdown tables, the targets table, JSON summary lines, the raw
//! records file, and the CPU-of-other-tenants figure printed with every section.

use std::fs::File;
use std::io::Write as _;
use std::time::Instant;

use crate::json::J;
use crate::metrics::Contended;
use crate::scenario::Sc;
use crate::sys::{cpu_secs, machine_busy_secs};

/// The Redis processes a section measures against, for their CPU time: one server, or a
/// Sentinel group with the single server beside it.
pub trait RedisCpu {
    /// User + system CPU seconds of those processes so far (None when not visible).
    fn redis_cpu_secs(&self) -> Option<f64>;
}

/// CPU of other tenants (machine busy time less this process, its children and the Redis
/// processes) over a section, in cores: the noise indicator printed with every table.
pub struct Load {
    t: Instant,
    busy: f64,
    own: f64,
    redis: f64,
}

pub fn own_cpu() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    let kids = if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) } == 0 {
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    } else {
        0.0
    };
    cpu_secs("self").unwrap_or(0.0) + kids
}

impl Load {
    pub fn start(server: &(impl RedisCpu + ?Sized)) -> Load {
        Load {
            t: Instant::now(),
            busy: machine_busy_secs().unwrap_or(0.0),
            own: own_cpu(),
            redis: server.redis_cpu_secs().unwrap_or(0.0),
        }
    }
    /// (other tenants' cores, bench cores, redis cores). A Redis process that the bench reaps
    /// within the section counts as the bench's (its CPU moves to the bench's children's): keep
    /// such processes out of `server`.
    pub fn end(&self, server: &(impl RedisCpu + ?Sized)) -> (f64, f64, f64) {
        let wall = self.t.elapsed().as_secs_f64();
        let own = own_cpu() - self.own;
        let redis = server.redis_cpu_secs().unwrap_or(0.0) - self.redis;
        let busy = machine_busy_secs().unwrap_or(0.0) - self.busy;
        (
            (busy - own - redis).max(0.0) / wall,
            own / wall,
            redis / wall,
        )
    }
}

pub struct Report {
    pub summaries: Vec<J>,
    pub raw: Option<File>,
}

impl Report {
    pub fn raw(&mut self, rec: &J) {
        if let Some(f) = self.raw.as_mut() {
            writeln!(f, "{}", rec.line()).expect("write raw record");
        }
    }
    pub fn section(
        &mut self,
        title: &str,
        load: (f64, f64, f64),
        headers: &[&str],
        rows: &[Vec<String>],
    ) {
        let mut s = if load.0.is_nan() {
            format!("\n### {title}\n\n(measured within the section above)\n\n")
        } else {
            format!(
                "\n### {title}\n\nCPU during this section (cores): other tenants {:.2}, bench {:.2}, redis-server {:.2}\n\n",
                load.0, load.1, load.2
            )
        };
        s.push_str(&table(headers, rows));
        print!("{s}");
    }
    pub fn summary(&mut self, section: &str, mut j: J) {
        let mut o = J::obj();
        o.set("kind", "summary").set("section", section);
        if let J::Obj(kv) = &mut j {
            for (k, v) in kv.drain(..) {
                o.set(&k, v);
            }
        }
        self.summaries.push(o);
    }
}

pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::from("|");
        for (i, c) in cells.iter().enumerate() {
            s.push_str(&format!(" {c:<width$} |", width = w[i]));
        }
        s.push('\n');
        s
    };
    let mut s = line(headers.iter().map(|h| h.to_string()).collect());
    s.push_str(&line(w.iter().map(|&n| "-".repeat(n)).collect()));
    for r in rows {
        s.push_str(&line(r.clone()));
    }
    s
}

pub fn f1(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{x:.1}")
    }
}
pub fn f2(x: f64) -> String {
    if x.is_nan() {
        "n/a".into()
    } else {
        format!("{x:.2}")
    }
}
pub fn verdict(ok: bool) -> String {
    if ok { "meets".into() } else { "MISSES".into() }
}

/// A target line: what, target, measured, verdict.
pub struct Targets(pub Vec<Vec<String>>);

impl Targets {
    pub fn add(&mut self, what: &str, target: &str, measured: String, ok: Option<bool>) {
        let v = ok.map_or("n/a".into(), verdict);
        self.0.push(vec![what.into(), target.into(), measured, v]);
    }
}

pub const CONTENDED_HEADERS: [&str; 12] = [
    "impl",
    "variant",
    "incr",
    "incr/s",
    "final counter",
    "lost / overlaps",
    "per-worker min-max (ratio)",
    "same-worker re-acquire",
    "acquire wait p50 / p99 / max ms",
    "handoffs",
    "handoff mean / p50 / p99 / max µs",
    "handoff p50 / p99 in RTT",
];

pub fn contended_title(sc: Sc, target: i64) -> String {
    if sc == Sc::C8 {
        format!("c8: eight workers, one key, GET/SET counter to {target}")
    } else {
        format!(
            "h2: two workers strictly alternating, hold 0-100 ms, {target} increments (handoff = release called → other's acquire returned)"
        )
    }
}

pub fn contended_row(lang: &str, variant: &str, m: &Contended, rtt_us: f64) -> Vec<String> {
    vec![
        lang.into(),
        variant.into(),
        m.incs.to_string(),
        format!("{:.0}", m.rate),
        m.final_counter.to_string(),
        format!("{} / {}", m.lost, m.overlaps),
        format!("{}-{} ({:.2})", m.min_incs, m.max_incs, m.fairness()),
        format!("{:.0}%", m.same_worker * 100.0),
        format!(
            "{:.2} / {:.2} / {:.2}",
            m.wait_p50_us / 1e3,
            m.wait_p99_us / 1e3,
            m.wait_max_us / 1e3
        ),
        m.handoffs_ns.len().to_string(),
        format!(
            "{} / {} / {} / {}",
            f1(m.handoff_mean_us()),
            f1(m.handoff_us(50.0)),
            f1(m.handoff_us(99.0)),
            f1(m.handoff_max_us())
        ),
        format!(
            "{} / {}",
            f2(m.handoff_us(50.0) / rtt_us),
            f2(m.handoff_us(99.0) / rtt_us)
        ),
    ]
}

pub fn contended_summary(lang: &str, peer: &str, variant: &str, m: &Contended, rtt_us: f64) -> J {
    let mut s = J::obj();
    s.set("lang", lang)
        .set("impl", peer)
        .set("variant", variant)
        .set("increments", m.incs)
        .set("incr_per_s", m.rate)
        .set("final_counter", m.final_counter)
        .set("lost", m.lost)
        .set("overlaps", m.overlaps)
        .set("min_incs", m.min_incs)
        .set("max_incs", m.max_incs)
        .set("same_worker_share", m.same_worker)
        .set("wait_max_us", m.wait_max_us)
        .set("handoffs", m.handoffs_ns.len())
        .set("handoff_mean_us", m.handoff_mean_us())
        .set("handoff_p50_us", m.handoff_us(50.0))
        .set("handoff_p99_us", m.handoff_us(99.0))
        .set("handoff_max_us", m.handoff_max_us())
        .set("rtt_us", rtt_us);
    s
}

/// The targets of a contended scenario. `floor` is the no-library handoff floor measured in the
/// same run (queue + BLPOP, release hands over): the handoff and throughput targets are ratios to
/// it. RTT multiples are information only (a handoff also measures the machine's thread wake-up).
pub fn contended_targets(
    t: &mut Targets,
    sc: Sc,
    who: &str,
    m: &Contended,
    floor: Option<&Contended>,
    rtt_us: f64,
) {
    let ok = m.lost == 0 && m.overlaps == 0;
    let (p50, p99) = (m.handoff_us(50.0), m.handoff_us(99.0));
    if sc == Sc::C8 {
        t.add(
            &format!("c8 {who}: correct"),
            "final = increments, 0 overlaps",
            format!("{} / {}, {} overlaps", m.final_counter, m.incs, m.overlaps),
            Some(ok),
        );
        t.add(
            &format!("c8 {who}: fair"),
            "max/min ≤ 1.5, longest wait ≤ 20 ms",
            format!("{:.2}, {:.1} ms", m.fairness(), m.wait_max_us / 1e3),
            Some(m.fairness() <= 1.5 && m.wait_max_us <= 20_000.0),
        );
        if let Some(f) = floor {
            let r = m.rate / f.rate;
            t.add(
                &format!("c8 {who}: throughput"),
                "≥ 0.90× handoff floor",
                format!("{:.0} vs {:.0} incr/s = {r:.2}×", m.rate, f.rate),
                Some(ok && r >= 0.90),
            );
            let fp50 = f.handoff_us(50.0);
            let r = p50 / fp50;
            t.add(
                &format!("c8 {who}: handoff p50"),
                "≤ 1.30× handoff floor",
                format!(
                    "{p50:.1} vs {fp50:.1} µs = {r:.2}× ({:.2} RTT)",
                    p50 / rtt_us
                ),
                Some(r <= 1.30),
            );
        }
    } else {
        match floor {
            Some(f) => {
                let fp50 = f.handoff_us(50.0);
                let r = p50 / fp50;
                t.add(
                    &format!("h2 {who}: handoff p50"),
                    "≤ 1.10× handoff floor",
                    format!(
                        "{p50:.0} vs {fp50:.0} µs = {r:.2}× ({:.2} RTT; p99 {p99:.0} µs)",
                        p50 / rtt_us
                    ),
                    Some(ok && r <= 1.10),
                );
            }
            None => t.add(
                &format!("h2 {who}: handoff"),
                "(information: no floor in this language)",
                format!("p50 {p50:.0} µs = {:.2} RTT, p99 {p99:.0} µs", p50 / rtt_us),
                None,
            ),
        }
    }
}
