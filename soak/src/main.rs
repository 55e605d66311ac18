//! Rust soak worker: `soak_worker <lock_url> <resource_file> <lock_name> <seconds> <threads>`.
//!
//! Each thread loops until the deadline: acquire (fencing, fixed lease, wait bound), read the
//! stock through the fencing-checked file resource, sleep a little, write stock+1 with the
//! token, release. Prints one `STATS ...` line (see scripts/bench/soak.sh for the format).
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};

const WAIT: Duration = Duration::from_millis(2000);
const LEASE: Duration = Duration::from_millis(1500);
const MAX_ITERATIONS: u64 = 10_000_000;

/// The protected resource: a file holding "value highest_token", changed only under flock.
/// `read` registers the token (rejecting one below the highest seen), `write` sets the value if
/// the token is still >= the highest seen. Returns None when the token is stale.
fn resource(path: &str, token: u64, new_value: Option<u64>) -> std::io::Result<Option<u64>> {
    let mut f = OpenOptions::new().read(true).write(true).open(path)?;
    f.lock()?; // flock(LOCK_EX); released when `f` is closed
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    let mut it = s.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    let (value, highest) = (it.next().unwrap(), it.next().unwrap());
    if token < highest {
        return Ok(None);
    }
    let value = new_value.unwrap_or(value);
    f.set_len(0)?;
    f.seek(SeekFrom::Start(0))?;
    f.write_all(format!("{value} {token}\n").as_bytes())?;
    Ok(Some(value))
}

#[derive(Default)]
struct Stats {
    iterations: u64,
    increments: u64,
    lost: u64,
    stale_reads: u64,
    stale_writes: u64,
    errors: BTreeMap<String, u64>,
}

fn class(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Held => "HELD",
        ErrorKind::WaitTimeout => "WAIT_TIMEOUT",
        ErrorKind::NotHeld => "NOT_HELD",
        ErrorKind::InvalidArgument => "INVALID_ARGUMENT",
        ErrorKind::Connection => "CONNECTION",
        ErrorKind::Redis => "REDIS_ERROR",
        ErrorKind::Forked => "FORKED",
        ErrorKind::LimitReached => "LIMIT_REACHED",
        ErrorKind::Internal => "INTERNAL",
        ErrorKind::Cancelled => "CANCELLED",
        _ => "OTHER",
    }
}

fn rand_ms(seed: &mut u64, max: u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % (max + 1)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    assert!(
        a.len() == 6,
        "usage: soak_worker <lock_url> <resource_file> <lock_name> <seconds> <threads>"
    );
    let (url, file, name) = (a[1].clone(), a[2].clone(), a[3].clone());
    let seconds: u64 = a[4].parse().unwrap();
    let threads: usize = a[5].parse().unwrap();
    let client = Client::builder(&url)
        .connect_timeout(Duration::from_millis(500))
        .read_timeout(Duration::from_millis(1000))
        .write_timeout(Duration::from_millis(1000))
        .checkout_timeout(Duration::from_millis(2000))
        .build()
        .expect("client");
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let total = Mutex::new(Stats::default());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (client, file, name, total) = (&client, &file, &name, &total);
            s.spawn(move || {
                let mut st = Stats::default();
                let mut seed =
                    0x9E37_79B9_7F4A_7C15u64 ^ ((std::process::id() as u64) << 8) ^ t as u64;
                let err = |st: &mut Stats, what: String| *st.errors.entry(what).or_default() += 1;
                while Instant::now() < deadline && st.iterations < MAX_ITERATIONS {
                    st.iterations += 1;
                    let lock = match client
                        .lock(name.as_str())
                        .lease(LEASE)
                        .auto_renew(false)
                        .fencing(true)
                        .acquire(WAIT)
                    {
                        Ok(l) => l,
                        Err(e) => {
                            err(&mut st, format!("acquire:{}", class(e.kind())));
                            if e.kind() != ErrorKind::WaitTimeout {
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            continue;
                        }
                    };
                    let token = lock.fencing_token().expect("fenced lock without a token");
                    match resource(file, token, None).expect("resource read") {
                        None => st.stale_reads += 1,
                        Some(v) => {
                            std::thread::sleep(Duration::from_micros(rand_ms(&mut seed, 3000)));
                            match resource(file, token, Some(v + 1)).expect("resource write") {
                                Some(_) => st.increments += 1,
                                None => st.stale_writes += 1,
                            }
                        }
                    }
                    match lock.release() {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::NotHeld => st.lost += 1,
                        Err(e) => err(&mut st, format!("release:{}", class(e.kind()))),
                    }
                }
                let mut tot = total.lock().unwrap();
                tot.iterations += st.iterations;
                tot.increments += st.increments;
                tot.lost += st.lost;
                tot.stale_reads += st.stale_reads;
                tot.stale_writes += st.stale_writes;
                for (k, v) in st.errors {
                    *tot.errors.entry(k).or_default() += v;
                }
            });
        }
    });
    let t = total.into_inner().unwrap();
    let errors: Vec<String> = t.errors.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "STATS lang=rust workers={threads} iterations={} increments={} lost={} stale_reads={} stale_writes={} errors={}",
        t.iterations,
        t.increments,
        t.lost,
        t.stale_reads,
        t.stale_writes,
        if errors.is_empty() {
            "-".to_string()
        } else {
            errors.join(",")
        }
    );
}
