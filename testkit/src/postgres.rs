//! A private PostgreSQL server for the tests of fenced writes to SQL resources.
//!
//! [`Postgres::start`] runs Debian's `initdb` and `postgres` (from `/usr/lib/postgresql/<version>/bin`,
//! the newest version installed, or the directory named by `$REDISLOCK_TEST_PG_BIN`) in a fresh
//! temp directory: trust authentication for the `postgres` superuser, listening on 127.0.0.1 on a
//! free port of the kit (never 5432, so a PostgreSQL the machine runs is never touched), its unix
//! socket in the temp directory, `fsync=off`. It waits until the server accepts a session.
//! Dropping it stops the server (immediate shutdown, then SIGKILL) and removes the directory.
//!
//! `initdb` and `postgres` refuse to run as root: when the tests run as root, both run as the
//! `postgres` user (created by Debian's package) and the temp directory is handed to it.

use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{kill_and_reap, signal, spawn_anchored};
use crate::server::free_port;
use crate::{POLL, START_ATTEMPTS, unique_name};

/// Environment variable naming the directory holding `initdb`, `postgres` and `psql`.
pub const PG_BIN_ENV: &str = "REDISLOCK_TEST_PG_BIN";

/// How long the server may take to accept a session after being spawned.
const PG_READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long the immediate shutdown on drop may take before SIGKILL.
const PG_STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// The port of a PostgreSQL the machine may run; never used here.
const PG_DEFAULT_PORT: u16 = 5432;

/// A running private PostgreSQL; see the module documentation.
pub struct Postgres {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    bin: PathBuf,
}

impl Postgres {
    /// Initialises a cluster in a fresh temp directory and starts a server on a free loopback
    /// port; returns once it accepts a session. Panics (with the server's log) if it cannot.
    pub fn start() -> Postgres {
        let bin = bin_dir();
        let dir = make_dir();
        let owner = server_user();
        if let Some((uid, gid)) = owner {
            chown(&dir, uid, gid);
        }
        let data = dir.join("data");
        let init_log = dir.join("initdb.log");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"])
            .args(["--no-sync", "--no-instructions"]);
        let status = run_as(initdb, owner, &init_log)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}/initdb: {e}{}", bin.display(), HINT));
        if !status.success() {
            let log = fs::read_to_string(&init_log).unwrap_or_default();
            let _ = fs::remove_dir_all(&dir);
            panic!("initdb failed ({status}):\n{log}");
        }

        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            assert_ne!(port, PG_DEFAULT_PORT);
            match launch(&bin, &dir, owner, port) {
                Ok(child) => {
                    return Postgres {
                        child: Some(child),
                        port,
                        dir,
                        bin,
                    };
                }
                Err(Launch::PortBusy(log)) => last = log,
                Err(Launch::Fatal(msg)) => {
                    let _ = fs::remove_dir_all(&dir);
                    panic!("{msg}");
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        panic!("postgres: no free port after {START_ATTEMPTS} attempts; last log:\n{last}");
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`: the superuser, no password (trust).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The server's temp directory (its data in `data/`, its log, its unix socket).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Runs `sql` with `psql` (stopping at the first error) and returns what it printed,
    /// unaligned and without headers (`-At`): one row a line, columns separated by `|`.
    /// Panics if psql fails.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg(sql)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}/psql: {e}", self.bin.display()));
        assert!(
            out.status.success(),
            "psql failed ({}) on {sql:?}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            stop(&mut child);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

const HINT: &str =
    "\n(PostgreSQL's server is Debian's package `postgresql`; `scripts/setup.sh` installs it)";

enum Launch {
    PortBusy(String),
    Fatal(String),
}

/// `$REDISLOCK_TEST_PG_BIN`, else the newest `/usr/lib/postgresql/<version>/bin` with an
/// `initdb` in it.
fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os(PG_BIN_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    match versions.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL server in {}/<version>/bin (and ${PG_BIN_ENV} is not set){HINT}",
            root.display()
        ),
    }
}

/// The `postgres` user's uid and gid when we are root (initdb and postgres refuse root), else
/// `None`: they run as we do.
fn server_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = CString::new("postgres").unwrap();
    // SAFETY: getpwnam takes a NUL-terminated string; the returned record is read at once,
    // before any other call that could overwrite it (the tests do not call getpw* elsewhere).
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(
        !pw.is_null(),
        "running as root, and there is no `postgres` user to run PostgreSQL as{HINT}"
    );
    // SAFETY: pw is non-null and points to getpwnam's static record.
    Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn chown(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("cannot chown {} to the postgres user: {e}", path.display()));
}

fn make_dir() -> PathBuf {
    for _ in 0..100 {
        let dir = std::env::temp_dir().join(unique_name("redislock-pg"));
        match fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create temp dir {}: {e}", dir.display()),
        }
    }
    panic!("cannot create a unique temp dir");
}

/// `cmd` with its output appended to `log`, run as `owner` if given.
fn run_as(mut cmd: Command, owner: Option<(u32, u32)>, log: &Path) -> Command {
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", log.display()));
    let err = out.try_clone().expect("cannot dup a log file");
    if let Some((uid, gid)) = owner {
        // std drops root's supplementary groups when it sets the uid.
        cmd.gid(gid).uid(uid);
    }
    cmd.current_dir("/")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    cmd
}

fn launch(bin: &Path, dir: &Path, owner: Option<(u32, u32)>, port: u16) -> Result<Child, Launch> {
    let log = dir.join("postgres.log");
    let log_off = fs::metadata(&log).map(|m| m.len()).unwrap_or(0) as usize;
    let log_since = || {
        let text = fs::read(&log).unwrap_or_default();
        String::from_utf8_lossy(&text[log_off.min(text.len())..]).into_owned()
    };
    let mut cmd = Command::new(bin.join("postgres"));
    cmd.arg("-D")
        .arg(dir.join("data"))
        .arg("-p")
        .arg(port.to_string())
        .arg("-k")
        .arg(dir)
        .args(["-c", "listen_addresses=127.0.0.1"])
        .args(["-c", "fsync=off", "-c", "synchronous_commit=off"])
        .args(["-c", "full_page_writes=off", "-c", "shared_buffers=16MB"])
        .args(["-c", "max_connections=40", "-c", "logging_collector=off"]);
    let cmd = run_as(cmd, owner, &log);
    let mut child = spawn_anchored(cmd)
        .map_err(|e| Launch::Fatal(format!("cannot run {}/postgres: {e}{HINT}", bin.display())))?;
    let deadline = Instant::now() + PG_READY_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let text = log_since();
                return Err(if text.contains("could not bind") {
                    Launch::PortBusy(text)
                } else {
                    Launch::Fatal(format!(
                        "postgres on port {port} exited early ({status}); log:\n{text}"
                    ))
                });
            }
            Ok(None) => {}
            Err(e) => {
                kill_and_reap(&mut child);
                return Err(Launch::Fatal(format!("waitpid failed: {e}")));
            }
        }
        if accepts_session(port) {
            return Ok(child);
        }
        if Instant::now() >= deadline {
            kill_and_reap(&mut child);
            return Err(Launch::Fatal(format!(
                "postgres on port {port} did not accept a session within \
                 {PG_READY_TIMEOUT:?}; log:\n{}",
                log_since()
            )));
        }
        thread::sleep(POLL);
    }
}

/// Immediate shutdown (SIGQUIT: the server stops its backends and removes its shared memory),
/// SIGKILL if it takes too long.
fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        signal(child.id(), libc::SIGCONT);
        signal(child.id(), libc::SIGQUIT);
        let deadline = Instant::now() + PG_STOP_TIMEOUT;
        while let Ok(None) = child.try_wait() {
            if Instant::now() >= deadline {
                break;
            }
            thread::sleep(POLL);
        }
    }
    kill_and_reap(child);
}

/// Whether a session for `postgres` on database `postgres` starts: the startup message is
/// answered with AuthenticationOk ('R', 0) and, after the parameters, ReadyForQuery ('Z').
/// While the server starts up it answers with an error ('E') instead.
fn accepts_session(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(1000)));
    let _ = stream.set_write_timeout(Some(Duration::from_millis(1000)));
    let mut body = Vec::new();
    body.extend_from_slice(&196_608u32.to_be_bytes()); // protocol 3.0
    for s in ["user", "postgres", "database", "postgres", ""] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    let mut msg = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    msg.extend_from_slice(&body);
    if stream.write_all(&msg).is_err() {
        return false;
    }
    let mut authenticated = false;
    loop {
        let mut head = [0u8; 5];
        if stream.read_exact(&mut head).is_err() {
            return false;
        }
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if !(4..=1 << 20).contains(&len) {
            return false;
        }
        let mut payload = vec![0u8; len - 4];
        if stream.read_exact(&mut payload).is_err() {
            return false;
        }
        match head[0] {
            b'R' => authenticated = payload.get(..4) == Some(&[0, 0, 0, 0][..]),
            b'Z' => {
                // Terminate ('X') politely.
                let _ = stream.write_all(&[b'X', 0, 0, 0, 4]);
                return authenticated;
            }
            b'E' => return false,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_answers_and_is_gone_after_drop() {
        let pg = Postgres::start();
        assert_ne!(pg.port(), PG_DEFAULT_PORT);
        assert_eq!(pg.psql("SELECT 40 + 2").trim(), "42");
        assert_eq!(
            pg.psql("SHOW fsync; SHOW listen_addresses").trim(),
            "off\n127.0.0.1"
        );
        let (dir, port) = (pg.dir().to_path_buf(), pg.port());
        drop(pg);
        assert!(!dir.exists(), "{} was not removed", dir.display());
        assert!(!accepts_session(port), "a server still answers on {port}");
    }
}
