//! The oversell demo: why a shop needs a lock around "read the stock, check it, write it back".
//!
//! A stock of 100 units is put in Redis. 32 threads then buy units as fast as they can, each
//! purchase being the classic non-atomic read-modify-write: `GET stock`; if it is above zero,
//! pause 200 µs (standing in for real work, such as charging a card) and `SET stock` to one less.
//!
//! - Without a lock, threads read the same stock and overwrite each other's updates: far more
//!   than 100 units are sold.
//! - With redislock around each purchase (one [`Client`] shared by all threads; waiters are woken
//!   by the holder's release), exactly 100 units are sold and the stock ends at 0.
//!
//! Run it with `cargo run --release --example oversell`. The Redis server used is, in order:
//! `$REDIS_URL` if set; else `127.0.0.1:6379` if it answers PING (skipped when
//! `REDISLOCK_DEMO_NO_DEFAULT=1`); else a private `redis-server` from `PATH` on a free loopback
//! port, without persistence, stopped on exit. `REDIS_URL` is a plain URL,
//! `redis://[user:password@]host:port/db`, a Sentinel URL,
//! `redis-sentinel://[user:password@]host1:port1,host2:port2[/db]#master` (`rediss-sentinel://`
//! for TLS to the data nodes), a Cluster URL,
//! `redis-cluster://[user:password@]host1:port1,host2:port2` (`rediss-cluster://` for TLS): the
//! locks get the URL as it is (and follow failovers), and the stock is kept on the master the
//! sentinels name at the start, or on the cluster's master for the demo's keys. With a Redlock
//! URL, `redlock://[user:password@]host1:port1,host2:port2,host3:port3[/db]`, the locks live on
//! a majority of the masters and the stock on the first one; the marks waiters leave on the
//! masters expire within about two seconds.
//!
//! `examples/fenced_write.rs` chooses its server with the same functions (this file is a module
//! of it).
//!
//! The demo only touches keys under its own `redislock-demo:{<pid>-<random>}:` prefix (its
//! hash tag keeps them in one cluster slot) and deletes them by name at the end: it never lists
//! or flushes keys. Exit code: 0 when the locked run sold
//! exactly the stock, 1 when it did not or failed, 2 when no usable Redis server was found.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{self, Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;

const STOCK: i64 = 100;
const THREADS: usize = 32;
const RACE_WINDOW: Duration = Duration::from_micros(200);
const LOCK_WAIT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(2);

pub(crate) type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The demo's unique key prefix, `redislock-demo:{<pid>-<random>}:` (its hash tag keeps the keys
/// in one Cluster slot); exit code 1 when there are no random numbers.
pub(crate) fn demo_prefix() -> Result<String, ExitCode> {
    match getrandom::u32() {
        Ok(random) => Ok(format!(
            "redislock-demo:{{{}-{random:08x}}}:",
            process::id()
        )),
        Err(e) => {
            eprintln!("error: no random numbers: {e}");
            Err(ExitCode::from(1))
        }
    }
}

fn main() -> ExitCode {
    let prefix = match demo_prefix() {
        Ok(prefix) => prefix,
        Err(code) => return code,
    };
    // `_server`, a private redis-server if one was started, is stopped when main returns.
    let (url, data_url, _server) = match pick_server(&format!("{prefix}stock")) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("No usable Redis server: {e}.");
            if std::env::var_os("REDIS_URL").is_some() {
                // The user named a server: installing one here would not help.
                eprintln!("REDIS_URL is set, and the server it names is unreachable or refuses");
                eprintln!("the demo: check that it runs at that host and port, that a firewall");
                eprintln!("lets it through, and the URL's password and database; or unset");
                eprintln!("REDIS_URL to let the demo start a private redis-server.");
            } else {
                eprintln!("Install Redis (apt-get install redis-server, brew install redis, ...)");
                eprintln!(
                    "or point REDIS_URL at a server: REDIS_URL=redis://:password@host:6379/0"
                );
            }
            return ExitCode::from(2);
        }
    };
    match run(&url, &data_url, &prefix) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Runs both races: the locks through `url`, the stock on the server of `data_url`, every key
/// under `prefix`.
fn run(url: &str, data_url: &str, prefix: &str) -> Res<()> {
    let (stock_key, lock_name) = (format!("{prefix}stock"), format!("{prefix}lock"));
    let data = redis::Client::open(data_url)?;
    // Dropped when run returns, also on errors: deletes the stock, the lock key and the lock's
    // companion keys (fencing counter, waiter queue, Redlock's waiter queue; a waiter's own keys
    // expire by themselves), by exact name. The lock name has the prefix's hash tag, so its
    // companions are the name and a suffix (src/base/keys.rs).
    let companions = [":fence", ":q", ":rq"].map(|suffix| format!("{lock_name}{suffix}"));
    let mut keys = vec![stock_key.clone(), lock_name.clone()];
    keys.extend(companions);
    let _cleanup = Cleanup(data.clone(), keys);
    let client = Client::builder(url).pool_size(THREADS as u32).build()?;
    println!("{THREADS} threads buy from a stock of {STOCK} (keys {prefix}*)\n");
    println!("run          threads   sold  final stock  oversold     time  lock acquisitions/s");
    let (sold, stock) = race(&data, &stock_key, None)?;
    let lost = sold as i64 - (STOCK - stock);
    let (sold, stock) = race(&data, &stock_key, Some((&client, &lock_name)))?;
    println!("\nWithout a lock: {lost} stock updates were overwritten by concurrent buyers.");
    if sold != STOCK as u64 || stock != 0 {
        return Err(
            format!("the locked run sold {sold}, leaving {stock} (expected {STOCK}, 0)").into(),
        );
    }
    println!("With redislock: exactly {STOCK} sold, stock 0. Correct.");
    Ok(())
}

/// Puts `STOCK` units in Redis and lets `THREADS` threads buy until it is gone, each purchase
/// under the lock `name` when `lock` is `Some((client, name))`. Prints a row of the table and
/// returns the units sold and the final stock.
fn race(data: &redis::Client, key: &str, lock: Option<(&Client, &str)>) -> Res<(u64, i64)> {
    let mut conn = connect(data)?;
    redis::cmd("SET").arg(key).arg(STOCK).exec(&mut conn)?;
    let (sold, attempts) = (AtomicU64::new(0), AtomicU64::new(0));
    let started = Instant::now();
    thread::scope(|s| -> Res<()> {
        let buyer = || -> Res<()> {
            let mut conn = connect(data)?;
            let mut buy_one = || -> Res<bool> {
                attempts.fetch_add(1, Relaxed);
                Ok(match lock {
                    None => buy(&mut conn, key)?,
                    Some((client, name)) => {
                        client.with_lock(name, LOCK_WAIT, |_| buy(&mut conn, key))??
                    }
                })
            };
            while buy_one()? {
                sold.fetch_add(1, Relaxed);
            }
            Ok(())
        };
        let buyers: Vec<_> = (0..THREADS).map(|_| s.spawn(buyer)).collect();
        for b in buyers {
            b.join().map_err(|_| "a buyer thread panicked")??;
        }
        Ok(())
    })?;
    let secs = started.elapsed().as_secs_f64();
    let stock: i64 = redis::cmd("GET").arg(key).query(&mut conn)?;
    let (sold, attempts) = (sold.into_inner(), attempts.into_inner());
    let (run, rate) = match lock {
        Some(_) => ("redislock", format!("{:.0}", attempts as f64 / secs)),
        None => ("no lock", "-".into()),
    };
    let (oversold, ms) = (sold as i64 - STOCK, secs * 1e3);
    println!("{run:<12} {THREADS:>7} {sold:>6} {stock:>12} {oversold:>9} {ms:>6.0} ms {rate:>20}");
    Ok((sold, stock))
}

/// One purchase, a non-atomic read-modify-write. `false`: sold out.
fn buy(conn: &mut redis::Connection, key: &str) -> Res<bool> {
    let stock: i64 = redis::cmd("GET").arg(key).query(conn)?;
    if stock <= 0 {
        return Ok(false);
    }
    thread::sleep(RACE_WINDOW);
    redis::cmd("SET").arg(key).arg(stock - 1).exec(conn)?;
    Ok(true)
}

/// A data connection with connect, read and write timeouts.
pub(crate) fn connect(data: &redis::Client) -> Res<redis::Connection> {
    let conn = data.get_connection_with_timeout(TIMEOUT)?;
    conn.set_read_timeout(Some(TIMEOUT))?;
    conn.set_write_timeout(Some(TIMEOUT))?;
    Ok(conn)
}

/// Deletes the given keys of the demo, by exact name, when dropped.
pub(crate) struct Cleanup(pub(crate) redis::Client, pub(crate) Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Cleanup(data, keys) = self;
        let del = |mut c: redis::Connection| Ok(redis::cmd("DEL").arg(&*keys).exec(&mut c)?);
        if let Err(e) = connect(data).and_then(del) {
            eprintln!("warning: could not delete the keys {keys:?}: {e}");
        }
    }
}

/// Chooses the server (see the top comment): the URL for the locks, the URL of the server that
/// keeps the stock (`stock_key`), and the private server if one was started.
pub(crate) fn pick_server(stock_key: &str) -> Res<(String, String, Option<PrivateServer>)> {
    if let Ok(url) = std::env::var("REDIS_URL") {
        let ping = || -> Res<String> {
            let data_url = data_server(&url, stock_key)?;
            let mut conn = connect(&redis::Client::open(data_url.as_str())?)?;
            redis::cmd("PING").exec(&mut conn)?;
            Ok(data_url)
        };
        let data_url = ping().map_err(|e| format!("REDIS_URL {}: {e}", mask(&url)))?;
        if data_url == url {
            println!("Redis: {} (from REDIS_URL)", mask(&url));
        } else {
            println!(
                "Redis: {} (from REDIS_URL), master {}",
                mask(&url),
                mask(&data_url)
            );
        }
        return Ok((url, data_url, None));
    }
    let probe = std::env::var_os("REDISLOCK_DEMO_NO_DEFAULT").is_none_or(|v| v != "1");
    if probe && answers_ping(6379) {
        println!("Redis: redis://127.0.0.1:6379/ (found running)");
        let url = "redis://127.0.0.1:6379/".to_owned();
        return Ok((url.clone(), url, None));
    }
    let server = PrivateServer::start()?;
    let url = format!("redis://127.0.0.1:{}/", server.port);
    println!("Redis: {url} (private redis-server, stopped on exit)");
    Ok((url.clone(), url, Some(server)))
}

/// The plain URL of the server that keeps the stock, found as a client of `url`'s topology
/// finds its data server: a plain URL is that server; a Sentinel URL names the master its
/// sentinels report; a Cluster URL, the master serving the slot of `stock_key`, whose
/// `{hash tag}` keeps all the demo's keys in one slot; a Redlock URL, its first master.
fn data_server(url: &str, stock_key: &str) -> Res<String> {
    match url.split_once("://") {
        Some(("redis-sentinel", rest)) => sentinel_master("redis", rest),
        Some(("rediss-sentinel", rest)) => sentinel_master("rediss", rest),
        Some(("redis-cluster", rest)) => cluster_master("redis", rest, stock_key),
        Some(("rediss-cluster", rest)) => cluster_master("rediss", rest, stock_key),
        Some(("redlock", rest)) => Ok(first_master("redis", rest)),
        Some(("rediss-redlock", rest)) => Ok(first_master("rediss", rest)),
        _ => Ok(url.to_owned()),
    }
}

/// Asks the nodes of a Cluster URL (`rest` is `[user:password@]h1:p1,h2:p2[/]`), in order,
/// which master serves `key`: a `GET` of it answers from that master, or is redirected there
/// (`MOVED slot host:port`). Returns `scheme://[user:password@]host:port`.
fn cluster_master(scheme: &str, rest: &str, key: &str) -> Res<String> {
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let (user_info, nodes) = match authority.rsplit_once('@') {
        Some((user_info, nodes)) => (format!("{user_info}@"), nodes),
        None => (String::new(), authority),
    };
    let mut failures = Vec::new();
    for node in nodes.split(',') {
        let node_url = format!("{scheme}://{user_info}{node}");
        let ask = || -> Res<String> {
            let mut conn = connect(&redis::Client::open(node_url.as_str())?)?;
            match redis::cmd("GET")
                .arg(key)
                .query::<Option<String>>(&mut conn)
            {
                Ok(_) => Ok(node_url.clone()),
                Err(e) => match e.redirect_node() {
                    Some((addr, _slot)) => Ok(format!("{scheme}://{user_info}{addr}")),
                    None => Err(e.into()),
                },
            }
        };
        match ask() {
            Ok(master) => return Ok(master),
            Err(e) => failures.push(format!("{node}: {e}")),
        }
    }
    Err(format!("no cluster node answered ({})", failures.join("; ")).into())
}

/// The first master of a Redlock URL (`rest` is `[user:password@]h1:p1,h2:p2,h3:p3[/db]`), as
/// `scheme://[user:password@]h1:p1[/db]`.
fn first_master(scheme: &str, rest: &str) -> String {
    let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let (user_info, masters) = match authority.rsplit_once('@') {
        Some((user_info, masters)) => (format!("{user_info}@"), masters),
        None => (String::new(), authority),
    };
    let first = masters.split(',').next().unwrap_or(masters);
    format!("{scheme}://{user_info}{first}{path}")
}

/// Asks the sentinels of a Sentinel URL (`rest` is `[user:password@]h1:p1,h2:p2[/db]#master`),
/// in order, for the master's address (`SENTINEL GET-MASTER-ADDR-BY-NAME`); the first that
/// names it wins. Returns `scheme://[user:password@]master-host:master-port[/db]`.
fn sentinel_master(scheme: &str, rest: &str) -> Res<String> {
    let (rest, name) = rest.rsplit_once('#').ok_or("no #master name at the end")?;
    let (authority, path) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let (user_info, sentinels) = match authority.rsplit_once('@') {
        Some((user_info, sentinels)) => (format!("{user_info}@"), sentinels),
        None => (String::new(), authority),
    };
    let mut failures = Vec::new();
    for sentinel in sentinels.split(',') {
        let ask = || -> Res<Option<(String, u16)>> {
            let port = if sentinel.contains(':') { "" } else { ":26379" };
            let mut conn = connect(&redis::Client::open(format!("redis://{sentinel}{port}/"))?)?;
            let cmd = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(name)
                .query(&mut conn);
            Ok(cmd?)
        };
        match ask() {
            Ok(Some((host, port))) => {
                let host = if host.contains(':') {
                    format!("[{host}]")
                } else {
                    host
                };
                return Ok(format!("{scheme}://{user_info}{host}:{port}{path}"));
            }
            Ok(None) => failures.push(format!("{sentinel} knows no master {name:?}")),
            Err(e) => failures.push(format!("{sentinel}: {e}")),
        }
    }
    Err(format!("no sentinel named the master ({})", failures.join("; ")).into())
}

/// Whether 127.0.0.1:`port` answers an unauthenticated PING within about 300 ms.
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
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let user = url[s + 3..at].split_once(':').map_or("", |(u, _)| u);
            format!("{}{user}:***{}", &url[..s + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

/// A `redis-server` child on a free loopback port; killed, and its directory removed, on drop.
pub(crate) struct PrivateServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PrivateServer {
    fn start() -> Res<PrivateServer> {
        let dir = std::env::temp_dir().join(format!("redislock-demo-{}", process::id()));
        std::fs::create_dir_all(&dir)?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let spawned = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--port")
            .arg(port.to_string())
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = spawned.map_err(|e| {
            let _ = std::fs::remove_dir_all(&dir);
            match e.kind() {
                std::io::ErrorKind::NotFound => "REDIS_URL is not set, 127.0.0.1:6379 does not \
                    answer PING, and there is no redis-server on PATH"
                    .to_string(),
                _ => format!("cannot start redis-server: {e}"),
            }
        })?;
        // From here on, dropping `server` (also on the error returns) stops it.
        let mut server = PrivateServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !answers_ping(port) {
            if let Some(status) = server.child.try_wait()? {
                return Err(format!("private redis-server exited at start: {status}").into());
            } else if Instant::now() > deadline {
                return Err("private redis-server did not answer PING within 5 s".into());
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
