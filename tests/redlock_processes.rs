//! Redlock with several processes racing on one name (each its own client, so each its own view
//! of which masters rest), while the name's home master (the one its waiters block on) is
//! stopped (SIGSTOP: connections stay open, nothing answers). Threads of one process share that
//! view; processes do not, and nothing but the masters connects them.
//!
//! The workers use the library's defaults (timeouts, re-check interval, lease), as a PHP worker
//! does. Bounds are generous (2 cores, noisy machine): they check that grants go on during the
//! stop, not how fast.

mod support;

use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redislock::Client;
use support::{ChildProcess, RedisServer, RedlockMasters, child_role, unique_name};

/// Worker processes.
const WORKERS: usize = 8;
/// The race before the stop.
const WARM: Duration = Duration::from_secs(3);
/// How long the home master stays stopped.
const STOP: Duration = Duration::from_secs(4);
/// From a SIGCONT to the next SIGSTOP, and the race after the last one.
const GAP: Duration = Duration::from_secs(2);
/// The longest time without a grant a stop may cause: about one read timeout (2 s by default),
/// which finds the stopped master out.
const MAX_GAP: Duration = Duration::from_millis(2_500);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The lock's home master: FNV-1a 64 of the lock key modulo the masters (the library's rule in
/// `src/stores/redlock/mod.rs`; the lock key is the name, as no key prefix is set).
fn home(key: &[u8], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// Eight worker processes race on one name while each master is stopped for 4 s in turn, the
/// name's home master last (`scripts/bench/redlock-stops-php.sh` runs the same shape with PHP). Holders
/// never overlap, and no stop stalls the processes: within each, no stretch without a grant
/// longer than about one read timeout (which finds the stopped master out).
#[test]
fn each_master_stopped_in_turn_stalls_no_process() {
    let masters = RedlockMasters::start(3);
    let counter = RedisServer::start();
    let name = unique_name("procs");
    let home = home(name.as_bytes(), 3);
    let until = now_ms() + (WARM + (STOP + GAP) * 3).as_millis() as u64 + 1_000;
    let mut children: Vec<ChildProcess> = (0..WORKERS)
        .map(|w| {
            ChildProcess::start(
                "child_racer",
                "racer",
                &[
                    ("REDISLOCK_TEST_URL", masters.url()),
                    ("REDISLOCK_TEST_COUNTER", counter.url()),
                    ("REDISLOCK_TEST_LOCK", name.clone()),
                    ("REDISLOCK_TEST_WORKER", w.to_string()),
                    ("REDISLOCK_TEST_UNTIL", until.to_string()),
                ],
            )
        })
        .collect();
    for c in &mut children {
        c.wait_ready(Duration::from_secs(60));
    }
    for c in &children {
        c.go();
    }
    thread::sleep(WARM);
    // Each master in turn, the home master last (every process has seen the others stop).
    let order: Vec<usize> = (1..=3).map(|k| (home + k) % 3).collect();
    let mut stops = Vec::new();
    for &m in &order {
        let from = now_ms();
        masters.masters()[m].pause();
        let paused = Instant::now();
        thread::sleep(STOP);
        masters.masters()[m].resume();
        stops.push((m, from, from + paused.elapsed().as_millis() as u64));
        thread::sleep(GAP);
    }
    let mut grants = Vec::new();
    let mut overlaps = 0;
    for c in &mut children {
        c.wait_ok(Duration::from_secs(120));
        let got = c.reported("grants").expect("a worker reported no grants");
        grants.extend(got.split(',').filter_map(|g| g.parse::<u64>().ok()));
        overlaps += c
            .reported("overlaps")
            .and_then(|o| o.parse::<u64>().ok())
            .expect("a worker reported no overlaps");
    }
    grants.sort_unstable();
    println!("{} grants, {overlaps} overlaps", grants.len());
    assert_eq!(overlaps, 0, "holders overlapped");
    let mut stalls = Vec::new();
    for (m, from, to) in stops {
        let count = |a: u64, b: u64| grants.iter().filter(|&&g| g >= a && g < b).count();
        let before = count(from - 2_000, from) as f64 / 2.0;
        let during = count(from, to) as f64 / ((to - from) as f64 / 1e3);
        let mut edges: Vec<u64> = vec![from];
        edges.extend(grants.iter().copied().filter(|&g| g > from && g < to));
        edges.push(to);
        let gap = edges.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let which = if m == home { "home" } else { "not home" };
        println!(
            "master {m} ({which}) stopped {} ms: grants/s {before:.0} before, {during:.1} during \
             ({:.0}%); longest without a grant {gap} ms",
            to - from,
            during / before.max(1.0) * 100.0
        );
        assert!(before > 0.0, "no grant before the stop of master {m}");
        if gap >= MAX_GAP.as_millis() as u64 {
            stalls.push(format!("master {m} ({which}): no grant for {gap} ms"));
        }
    }
    assert!(stalls.is_empty(), "stalled: {}", stalls.join("; "));
}

/// The stall of every process by an attempt that waits on a stopped master: with the name's
/// home master stopped, another owner's key about to expire on a second master (a failed
/// attempt's leftover, say) and the third master free, a process's attempt is granted by the
/// third master only, and the outcome hangs on the stopped one. While that attempt waits, it
/// holds the third master, so every process that comes meanwhile is refused there, and none is
/// woken when it gives up. The attempt must give the stopped master no more than a grace once
/// the others have answered: the lock is granted soon after the other owner's key expires, not a
/// read timeout (2 s by default) later.
#[test]
fn an_attempt_waiting_on_a_stopped_master_stalls_no_process() {
    const OTHER_KEY: Duration = Duration::from_millis(300);
    let masters = RedlockMasters::start(3);
    let name = unique_name("split-by-stop");
    let home = home(name.as_bytes(), 3);
    let mut children: Vec<ChildProcess> = (0..3)
        .map(|w| {
            ChildProcess::start(
                "child_once",
                "once",
                &[
                    ("REDISLOCK_TEST_URL", masters.url()),
                    ("REDISLOCK_TEST_LOCK", name.clone()),
                    ("REDISLOCK_TEST_WORKER", w.to_string()),
                ],
            )
        })
        .collect();
    for c in &mut children {
        c.wait_ready(Duration::from_secs(60));
    }
    masters.masters()[home].pause();
    let () = redis::cmd("SET")
        .arg(&name)
        .arg("another-owner-token")
        .arg("PX")
        .arg(OTHER_KEY.as_millis() as u64)
        .query(&mut masters.masters()[(home + 1) % 3].conn())
        .unwrap();
    let start = now_ms();
    for c in &children {
        c.go();
        thread::sleep(Duration::from_millis(100));
    }
    let mut granted = Vec::new();
    for c in &mut children {
        c.wait_ok(Duration::from_secs(60));
        let at: u64 = c
            .reported("granted")
            .and_then(|g| g.parse().ok())
            .expect("a worker reported no grant");
        granted.push(at - start);
    }
    masters.masters()[home].resume();
    granted.sort_unstable();
    println!(
        "home master {home} stopped; the other owner's key lived {OTHER_KEY:?}; granted after \
         {granted:?} ms"
    );
    assert!(
        granted[0] < 1_500,
        "the first grant came {} ms after the first attempt",
        granted[0]
    );
    assert!(
        granted[2] < 4_000,
        "the last grant came {} ms after the first attempt",
        granted[2]
    );
}

/// Child role of `an_attempt_waiting_on_a_stopped_master_stalls_no_process`: once told to go,
/// acquires the lock (waiting up to 30 s), reports when it got it (Unix ms), holds it 20 ms
/// and releases it.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_once() {
    let Some(role) = child_role("once") else {
        return;
    };
    let client = Client::open(&role.var("REDISLOCK_TEST_URL")).unwrap();
    let name = role.var("REDISLOCK_TEST_LOCK");
    role.ready(&role.var("REDISLOCK_TEST_WORKER"));
    role.wait_go(Duration::from_secs(60));
    let lock = client.acquire(&name, Duration::from_secs(30)).unwrap();
    role.report("granted", &now_ms().to_string());
    thread::sleep(Duration::from_millis(20));
    lock.release().unwrap();
}

/// Child role of `each_master_stopped_in_turn_stalls_no_process`: acquires the lock (waiting up to
/// 30 s, as a PHP worker does), marks itself inside on the counter server (a second holder
/// inside is an overlap), and releases, until the time the parent gave; reports its grants'
/// times (Unix ms) and its overlaps.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_racer() {
    let Some(role) = child_role("racer") else {
        return;
    };
    let client = Client::open(&role.var("REDISLOCK_TEST_URL")).unwrap();
    let name = role.var("REDISLOCK_TEST_LOCK");
    let worker = role.var("REDISLOCK_TEST_WORKER");
    let until: u64 = role.var("REDISLOCK_TEST_UNTIL").parse().unwrap();
    let mut data = redis::Client::open(role.var("REDISLOCK_TEST_COUNTER"))
        .unwrap()
        .get_connection()
        .unwrap();
    let inside = format!("{name}:inside");
    role.ready(&worker);
    role.wait_go(Duration::from_secs(60));
    let (mut grants, mut overlaps) = (Vec::new(), 0u64);
    while now_ms() < until {
        let Ok(lock) = client.acquire(&name, Duration::from_secs(30)) else {
            continue;
        };
        grants.push(now_ms().to_string());
        let n: i64 = redis::cmd("INCR").arg(&inside).query(&mut data).unwrap();
        if n != 1 {
            overlaps += 1;
        }
        thread::sleep(Duration::from_micros(200));
        let _: i64 = redis::cmd("DECR").arg(&inside).query(&mut data).unwrap();
        let _ = lock.release();
    }
    role.report("grants", &grants.join(","));
    role.report("overlaps", &overlaps.to_string());
}
