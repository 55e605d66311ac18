//! Renewal at scale: N auto-renewed locks (lease 3 s, so renewed every second) held for a
//! while by one client, in a child process of its own so that its threads, memory and CPU are
//! its alone. The client is built with `max_renewed_locks(N)` and asked for N + 1 locks: the
//! extra one must be refused with `LimitReached` before touching Redis. When an operating-system
//! limit (threads, pids, memory mappings) comes first, the library refuses earlier, also with
//! `LimitReached`: the child then holds what it got and reports where and why it was refused.
//!
//! The child prints one JSON line; the parent adds redis-server's CPU over the child's run.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};

use crate::json::{self, J};
use crate::sys::{cpu_secs, status_field};

#[derive(Clone, Debug)]
pub struct ScaleArgs {
    pub locks: usize,
    pub secs: f64,
    pub lease: Duration,
    /// The client's `pool_size` (None: the library's default).
    pub pool_size: Option<u32>,
}

fn snapshot() -> (u64, u64, u64) {
    (
        status_field("self", "Threads").unwrap_or(0),
        status_field("self", "VmRSS").unwrap_or(0),
        status_field("self", "VmHWM").unwrap_or(0),
    )
}

/// The child's side: acquire, hold, look, release; returns the JSON summary.
pub fn child(url: &str, a: &ScaleArgs) -> J {
    let cpu = || cpu_secs("self").unwrap_or(f64::NAN);
    let n = a.locks;
    let mut builder = Client::builder(url)
        .lease(a.lease)
        .auto_renew(true)
        .max_renewed_locks(n);
    if let Some(size) = a.pool_size {
        builder = builder.pool_size(size);
    }
    let client = builder.build().expect("client");
    // One round trip first, so the baseline includes the connected client.
    drop(
        client
            .lock(b"pb:scale:warm")
            .try_acquire()
            .expect("warm-up lock"),
    );
    let (threads0, rss0, _) = snapshot();
    let cpu0 = cpu();
    let t0 = Instant::now();
    let mut locks = Vec::with_capacity(n);
    // A refusal (LimitReached) before N: the library saw an operating-system limit coming.
    let mut early_refusal = None;
    for i in 0..n {
        let name = format!("pb:scale:{n}:{i}");
        match client.lock(name.as_bytes()).try_acquire() {
            Ok(l) => locks.push(l),
            Err(e) if e.kind() == ErrorKind::LimitReached => {
                early_refusal = Some(e.to_string());
                break;
            }
            Err(e) => panic!("acquire {name}: {e}"),
        }
    }
    let held = locks.len();
    let acquire_s = t0.elapsed().as_secs_f64();
    let extra = client
        .lock(format!("pb:scale:{n}:extra").as_bytes())
        .try_acquire();
    let (refused, refusal) = match &extra {
        Ok(_) => (false, "granted (no refusal)".to_owned()),
        Err(e) => (
            e.kind() == ErrorKind::LimitReached,
            format!("{:?}: {e}", e.kind()),
        ),
    };
    drop(extra);
    let cpu1 = cpu();
    let hold_start = Instant::now();
    let (mut max_threads, mut max_rss) = (0, 0);
    while hold_start.elapsed().as_secs_f64() < a.secs {
        let left = a.secs - hold_start.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs_f64(left.clamp(0.0, 1.0)));
        let (t, r, _) = snapshot();
        max_threads = max_threads.max(t);
        max_rss = max_rss.max(r);
    }
    let held_s = hold_start.elapsed().as_secs_f64();
    let cpu2 = cpu();
    let stats = client.stats();
    let not_held = locks.iter().filter(|l| !l.is_held()).count();
    let lost = locks.iter().filter(|l| l.is_lost()).count();
    let (threads_end, rss_end, hwm) = snapshot();
    let t1 = Instant::now();
    let mut release_errors = 0;
    // Why releases failed (a lost lock says why it was lost), with counts.
    let mut reasons: std::collections::BTreeMap<String, u64> = Default::default();
    for l in locks {
        if let Err(e) = l.release() {
            release_errors += 1;
            // The message names the lock first; the reason follows the last colon.
            let text = e.to_string();
            let why = text.rsplit(": ").next().unwrap_or(&text).to_owned();
            *reasons.entry(why).or_default() += 1;
        }
    }
    let reasons = reasons
        .iter()
        .map(|(why, n)| format!("{n}× {why}"))
        .collect::<Vec<_>>()
        .join("; ");
    let release_s = t1.elapsed().as_secs_f64();
    let mut o = J::obj();
    o.set("kind", "renewal_scale")
        .set("locks", n)
        .set("lease_ms", a.lease.as_millis() as u64)
        .set(
            "pool_size",
            a.pool_size
                .map(|s| s.to_string())
                .unwrap_or("default".into()),
        )
        .set("hold_s", held_s)
        .set("held", held)
        .set("refused_early", early_refusal.is_some())
        .set("early_refusal", early_refusal.unwrap_or_default())
        .set("max_renewed_locks", n)
        .set("extra_refused", refused)
        .set("extra_result", refusal)
        .set("acquire_s", acquire_s)
        .set("release_s", release_s)
        .set("not_held_at_end", not_held)
        .set("is_lost_at_end", lost)
        .set("stats_lost_locks", stats.lost_locks)
        .set("stats_late_renewals", stats.late_renewals)
        .set("stats_renewals", stats.renewals)
        .set("stats_renewal_threads", stats.renewal_threads)
        .set("release_errors", release_errors)
        .set("release_errors_why", reasons)
        .set("threads_before", threads0)
        .set("threads_held", threads_end)
        .set("threads_max", max_threads.max(threads_end))
        .set("rss_before_kib", rss0)
        .set("rss_held_kib", rss_end)
        .set("rss_max_sampled_kib", max_rss.max(rss_end))
        .set("hwm_kib", hwm)
        .set("cpu_acquire_s", cpu1 - cpu0)
        .set("cpu_hold_s", cpu2 - cpu1)
        .set("cpu_total_s", cpu() - cpu0);
    o
}

/// The parent's side: runs the child (this same binary) and adds redis-server's CPU.
pub fn run(port: u16, redis_cpu: &dyn Fn() -> Option<f64>, a: &ScaleArgs) -> Result<J, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let r0 = redis_cpu();
    let t0 = Instant::now();
    let out = Command::new(exe)
        .args([
            "--scale-child",
            &a.locks.to_string(),
            "--port",
            &port.to_string(),
        ])
        .args(["--scale-secs", &a.secs.to_string()])
        .args(["--scale-lease-ms", &a.lease.as_millis().to_string()])
        .args(
            a.pool_size
                .map(|s| vec!["--scale-pool-size".to_owned(), s.to_string()])
                .unwrap_or_default(),
        )
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| e.to_string())?;
    let wall = t0.elapsed().as_secs_f64();
    let r1 = redis_cpu();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().rev().find(|l| l.starts_with('{'));
    let (Some(line), true) = (line, out.status.success()) else {
        return Err(format!(
            "scale child ({} locks) failed: {}",
            a.locks, out.status
        ));
    };
    let mut j = json::parse(line)?;
    j.set("child_wall_s", wall);
    if let (Some(a), Some(b)) = (r0, r1) {
        j.set("redis_cpu_s", b - a);
    }
    Ok(j)
}
