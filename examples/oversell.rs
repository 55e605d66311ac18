//! The oversell demo: why a shop needs a lock around "read stock, check it, write it back".
//!
//! A stock of 100 units is put in Redis. 32 threads then buy units as fast as they can, each
//! purchase being the classic non-atomic read-modify-write: `GET stock`; if it is above zero,
//! pause 200 µs (standing in for real work, such as charging a card) and `SET stock` to one less.
//!
//! - Without a lock, threads read the same stock and overwrite each other's updates: far more
//!   than 100 units are sold.
//! - With redislock around each purchase (one [`Client`] shared by all threads, waits woken by
//!   the holder's release), exactly 100 units are sold and the stock ends at 0.
//!
//! Run it with `cargo run --release --example oversell`. The Redis server used is, in order:
//! `$REDIS_URL` if set; else `127.0.0.1:6379` if it answers PING (skipped when
//! `REDISLOCK_DEMO_NO_DEFAULT=1`); else a private `redis-server` from `PATH` on a free loopback
//! port, without persistence, stopped on exit. The demo only touches keys under its own
//! `redislock-demo:<pid>-<random>:` prefix and deletes them by name at the end: it never lists
//! or flushes keys. Exit code: 0 when the locked run sold exactly the stock, 1 when it did not
//! or failed, 2 when no Redis server could be found.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;

const STOCK: i64 = 100;
const THREADS: usize = 32;
const RACE_WINDOW: Duration = Duration::from_micros(200);
const LOCK_WAIT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(2);

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let (url, _server) = match pick_server() {
        Ok(Some(found)) => found,
        Ok(None) => {
            eprintln!(
                "No Redis server found: REDIS_URL is not set, 127.0.0.1:6379 does not answer"
            );
            eprintln!("and no redis-server is on PATH. Install one (apt-get install redis-server,");
            eprintln!(
                "brew install redis, ...) or point REDIS_URL at a server: REDIS_URL=redis://host:6379/0"
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&url) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// One run's outcome.
struct Outcome {
    sold: u64,
    stock: i64,
    elapsed: Duration,
    acquisitions: u64,
}

fn run(url: &str) -> Res<bool> {
    let prefix = format!(
        "redislock-demo:{}-{:08x}:",
        std::process::id(),
        getrandom::u32()?
    );
    let (stock_key, lock_name) = (format!("{prefix}stock"), format!("{prefix}lock"));
    let data = redis::Client::open(url)?;
    // Dropped last in this function, also on errors: deletes exactly the keys the demo made.
    let _cleanup = Cleanup {
        data: data.clone(),
        // The lock key and its companions (fencing counter, waiter queue and entries).
        keys: [&stock_key, &lock_name]
            .map(String::clone)
            .into_iter()
            .chain([":fence", ":q", ":w"].map(|s| format!("{{{lock_name}}}{s}")))
            .collect(),
    };
    let client = Client::builder(url).pool_size(THREADS as u32).build()?;
    println!("{THREADS} threads buy from a stock of {STOCK}, keys under {prefix}*\n");

    let unlocked = race(&data, &stock_key, |buy| buy())?;
    let locked = race(&data, &stock_key, |buy| {
        client.with_lock(&lock_name, LOCK_WAIT, |_lock| buy())?
    })?;

    println!("run          threads   sold  final stock  oversold     time  lock acquisitions/s");
    for (name, o, with_lock) in [("no lock", &unlocked, false), ("redislock", &locked, true)] {
        let rate = if with_lock {
            format!("{:.0}", o.acquisitions as f64 / o.elapsed.as_secs_f64())
        } else {
            "-".into()
        };
        let oversold = o.sold as i64 - STOCK;
        let ms = o.elapsed.as_secs_f64() * 1e3;
        println!(
            "{name:<12} {THREADS:>7} {:>6} {:>12} {oversold:>9} {ms:>6.0} ms {rate:>20}",
            o.sold, o.stock
        );
    }
    println!();
    println!(
        "Without a lock: {} units sold from a stock of {STOCK} ({} lost updates).",
        unlocked.sold,
        unlocked.sold as i64 - (STOCK - unlocked.stock)
    );
    let ok = locked.sold == STOCK as u64 && locked.stock == 0;
    if ok {
        println!("With redislock: exactly {STOCK} sold, stock 0. Correct.");
    } else {
        println!(
            "With redislock: WRONG: sold {}, final stock {} (expected {STOCK} and 0).",
            locked.sold, locked.stock
        );
    }
    Ok(ok)
}

/// Puts `STOCK` units in Redis and lets `THREADS` threads buy until it is gone. Each purchase
/// goes through `guard`, which runs the unprotected `buy` (directly, or under a lock).
fn race<G>(data: &redis::Client, stock_key: &str, guard: G) -> Res<Outcome>
where
    G: Fn(&mut dyn FnMut() -> Res<bool>) -> Res<bool> + Sync,
{
    let mut conn = connect(data)?;
    redis::cmd("SET")
        .arg(stock_key)
        .arg(STOCK)
        .exec(&mut conn)?;
    let (sold, acquisitions) = (AtomicU64::new(0), AtomicU64::new(0));
    let started = Instant::now();
    thread::scope(|s| -> Res<()> {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| -> Res<()> {
                    let mut conn = connect(data)?;
                    // One purchase: true when a unit was sold, false when sold out.
                    let mut buy = || -> Res<bool> {
                        acquisitions.fetch_add(1, Ordering::Relaxed);
                        let stock: i64 = redis::cmd("GET").arg(stock_key).query(&mut conn)?;
                        if stock <= 0 {
                            return Ok(false);
                        }
                        thread::sleep(RACE_WINDOW);
                        redis::cmd("SET")
                            .arg(stock_key)
                            .arg(stock - 1)
                            .exec(&mut conn)?;
                        sold.fetch_add(1, Ordering::Relaxed);
                        Ok(true)
                    };
                    while guard(&mut buy)? {}
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            w.join().map_err(|_| "a buyer thread panicked")??;
        }
        Ok(())
    })?;
    let elapsed = started.elapsed();
    let stock: i64 = redis::cmd("GET").arg(stock_key).query(&mut conn)?;
    Ok(Outcome {
        sold: sold.into_inner(),
        stock,
        elapsed,
        acquisitions: acquisitions.into_inner(),
    })
}

/// A data connection with connect, read and write timeouts.
fn connect(data: &redis::Client) -> Res<redis::Connection> {
    let conn = data.get_connection_with_timeout(TIMEOUT)?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    Ok(conn)
}

/// Deletes the demo's keys, by exact name, when dropped.
struct Cleanup {
    data: redis::Client,
    keys: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let deleted = connect(&self.data)
            .and_then(|mut c| Ok(redis::cmd("DEL").arg(&self.keys).exec(&mut c)?));
        if let Err(e) = deleted {
            eprintln!(
                "warning: could not delete the demo's keys {:?}: {e}",
                self.keys
            );
        }
    }
}

/// Chooses the server (see the top comment). `None`: there is none.
fn pick_server() -> Res<Option<(String, Option<PrivateServer>)>> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        println!("Redis: {} (from REDIS_URL)", mask(&url));
        return Ok(Some((url, None)));
    }
    if std::env::var_os("REDISLOCK_DEMO_NO_DEFAULT").is_none_or(|v| v != "1") && answers_ping(6379)
    {
        println!("Redis: redis://127.0.0.1:6379/ (found running)");
        return Ok(Some(("redis://127.0.0.1:6379/".into(), None)));
    }
    let Some(server) = PrivateServer::start()? else {
        return Ok(None);
    };
    let url = format!("redis://127.0.0.1:{}/", server.port);
    println!("Redis: {url} (private redis-server, stopped on exit)");
    Ok(Some((url, Some(server))))
}

fn answers_ping(port: u16) -> bool {
    let ping = || -> std::io::Result<bool> {
        let t = Duration::from_millis(300);
        let mut s = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), t)?;
        s.set_read_timeout(Some(t))?;
        s.write_all(b"PING\r\n")?;
        let mut reply = [0u8; 5];
        s.read_exact(&mut reply)?;
        Ok(&reply == b"+PONG")
    };
    ping().unwrap_or(false)
}

/// The URL with the password (or a lone user-info part) replaced by `***`.
fn mask(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let host_start = url[start..].find('/').map_or(url.len(), |i| start + i);
    match url[start..host_start].rfind('@') {
        Some(at) => {
            let info = &url[start..start + at];
            let user = info.split_once(':').map_or("", |(u, _)| u);
            format!("{}{user}:***{}", &url[..start], &url[start + at..])
        }
        None => url.to_owned(),
    }
}

/// A `redis-server` child on a free loopback port; killed, and its directory removed, on drop.
struct PrivateServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PrivateServer {
    /// `Ok(None)` when there is no `redis-server` on `PATH`.
    fn start() -> Res<Option<PrivateServer>> {
        let dir = std::env::temp_dir().join(format!("redislock-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return match e.kind() {
                    std::io::ErrorKind::NotFound => Ok(None),
                    _ => Err(format!("cannot start redis-server: {e}").into()),
                };
            }
        };
        let mut server = PrivateServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !answers_ping(port) {
            if let Some(status) = server.child.try_wait()? {
                return Err(format!("redis-server exited at start ({status})").into());
            }
            if Instant::now() > deadline {
                return Err("redis-server did not answer within 5 s".into());
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(Some(server))
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
