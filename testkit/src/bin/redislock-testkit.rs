//! Starts a Redis set-up on free loopback ports for test runners in other languages (the C and
//! PHP tests, the soak), and drives its faults from standard input.
//!
//! ```text
//! redislock-testkit single [REDIS-SERVER-ARG...]    e.g. single --requirepass secret
//! redislock-testkit sentinel
//! redislock-testkit cluster
//! redislock-testkit redlock [N]                     three (or N) independent masters
//! ```
//!
//! Prints `URL <url>` (a `redis://`, `redis-sentinel://`, `redis-cluster://` or `redlock://`
//! URL), one
//! `NODE <i> <port>` line per data node and `SENTINEL <i> <port>` per sentinel, then `READY`.
//! Then reads commands, one per line, and answers each with one line:
//!
//! | command | answer |
//! |---|---|
//! | `kill node\|sentinel <i>` | `OK`: SIGKILL, reaped (no-op if it is not running) |
//! | `term node\|sentinel <i>` | `OK`: SIGTERM, and waits (up to 5 s) until it has exited |
//! | `pause node\|sentinel <i>` | `OK`: SIGSTOP |
//! | `resume node\|sentinel <i>` | `OK`: SIGCONT |
//! | `restart node\|sentinel <i>` | `OK`: killed if running, started again (empty) on the same port, answering |
//! | `pid node\|sentinel <i>` | `PID <n>`: its current (or last) process id |
//! | `running node\|sentinel <i>` | `RUNNING yes` or `RUNNING no` (a paused server runs) |
//! | `log node\|sentinel <i>` | `LOG <path>`: its `redis.log` |
//! | `master` | `MASTER <port>`: the master the sentinels name (Sentinel groups only) |
//! | `quit` | `OK` once everything is stopped and removed; then the program exits |
//!
//! A command that fails answers `ERR <why>` and changes nothing else. At end of input (or
//! `quit`) everything is stopped and removed; if the process is killed instead, its servers die
//! with it (parent-death signal).

use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::{Cluster, RedisServer, RedlockMasters, SentinelGroup, Setup};

/// How long `term` waits for a server to exit after SIGTERM.
const TERM_TIMEOUT: Duration = Duration::from_secs(5);

const USAGE: &str =
    "usage: redislock-testkit single [REDIS-SERVER-ARG...] | sentinel | cluster | redlock [N]";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let setup = match args.split_first() {
        Some((kind, rest)) if kind == "single" => {
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            Setup::Single(RedisServer::start_with(&rest))
        }
        Some((kind, [])) if kind == "sentinel" => Setup::Sentinel(SentinelGroup::start()),
        Some((kind, [])) if kind == "cluster" => Setup::Cluster(Cluster::start()),
        Some((kind, [])) if kind == "redlock" => Setup::Redlock(RedlockMasters::start(3)),
        Some((kind, [n])) if kind == "redlock" && n.parse::<usize>().is_ok_and(|n| n > 0) => {
            Setup::Redlock(RedlockMasters::start(n.parse().unwrap_or(3)))
        }
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    };
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "URL {}", setup.url());
    for (i, n) in setup.nodes().iter().enumerate() {
        let _ = writeln!(out, "NODE {i} {}", n.port());
    }
    for (i, s) in setup.sentinels().iter().enumerate() {
        let _ = writeln!(out, "SENTINEL {i} {}", s.port());
    }
    let _ = writeln!(out, "READY");
    let _ = out.flush();
    for line in io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line.trim() == "quit" {
            drop(setup);
            let _ = writeln!(out, "OK");
            let _ = out.flush();
            return;
        }
        // The kit panics on what it cannot do (pause a dead server, a port still busy at
        // restart): that is one failed command, not the end of the set-up.
        let answer = panic::catch_unwind(AssertUnwindSafe(|| {
            run(&setup, line.split_whitespace().collect())
        }))
        .unwrap_or_else(|e| {
            let why = e
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("panicked");
            format!("ERR {}", why.lines().next().unwrap_or("panicked"))
        });
        let _ = writeln!(out, "{answer}");
        let _ = out.flush();
    }
}

fn run(setup: &Setup, words: Vec<&str>) -> String {
    match words.as_slice() {
        ["master"] => match &setup {
            Setup::Sentinel(g) => match g.master_port() {
                Some(port) => format!("MASTER {port}"),
                None => "ERR no sentinel answers".into(),
            },
            _ => "ERR not a Sentinel group".into(),
        },
        [action, which, index] => {
            let servers = match *which {
                "node" => setup.nodes(),
                "sentinel" => setup.sentinels(),
                _ => return format!("ERR unknown kind {which}"),
            };
            let Some(server) = index.parse::<usize>().ok().and_then(|i| servers.get(i)) else {
                return format!("ERR no {which} {index}");
            };
            match *action {
                "kill" => server.kill(),
                "term" => return term(server),
                "pause" => server.pause(),
                "resume" => server.resume(),
                "restart" => server.restart(),
                "pid" => return format!("PID {}", server.pid()),
                "running" => {
                    return format!("RUNNING {}", if server.is_running() { "yes" } else { "no" });
                }
                "log" => return format!("LOG {}", server.dir().join("redis.log").display()),
                _ => return format!("ERR unknown action {action}"),
            }
            "OK".into()
        }
        _ => "ERR usage: kill|term|pause|resume|restart|pid|running|log node|sentinel <i>, \
              master, or quit"
            .into(),
    }
}

/// SIGTERM (after a SIGCONT, so a paused server can act on it), then waits until the process
/// has exited and is reaped. A server still there after [`TERM_TIMEOUT`] is killed.
fn term(server: &RedisServer) -> String {
    if !server.is_running() {
        return "OK".into();
    }
    let pid = server.pid() as libc::pid_t;
    // SAFETY: kill(2) has no memory-safety preconditions. `pid` is our running child: only
    // `server` reaps it (in `is_running` / `kill`, on this thread), so until then the pid cannot
    // have been given to another process.
    unsafe {
        libc::kill(pid, libc::SIGCONT);
        libc::kill(pid, libc::SIGTERM);
    }
    let deadline = Instant::now() + TERM_TIMEOUT;
    while server.is_running() {
        if Instant::now() >= deadline {
            server.kill();
            return format!(
                "ERR pid {pid} did not exit within {TERM_TIMEOUT:?} of SIGTERM; killed"
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
    "OK".into()
}
