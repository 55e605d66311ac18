//! Starts a Redis set-up on free loopback ports for test runners in other languages (the C and
//! PHP tests), and drives its faults from standard input.
//!
//! ```text
//! redislock-testkit single|sentinel|cluster
//! ```
//!
//! Prints `URL <url>` (a `redis://`, `redis-sentinel://` or `redis-cluster://` URL), one
//! `NODE <i> <port>` line per data node and `SENTINEL <i> <port>` per sentinel, then `READY`.
//! Then reads commands, one per line, and answers `OK` (or `ERR <why>`):
//! `kill|pause|resume|restart node|sentinel <i>`, and `master` (answers `MASTER <port>` for a
//! Sentinel group). At end of input everything is stopped and removed; if the process is killed
//! instead, its servers die with it (parent-death signal).

use std::io::{self, BufRead, Write};

use redislock_testkit::{Cluster, RedisServer, SentinelGroup};

enum Setup {
    Single(RedisServer),
    Sentinel(SentinelGroup),
    Cluster(Cluster),
}

impl Setup {
    fn url(&self) -> String {
        match self {
            Setup::Single(s) => s.url(),
            Setup::Sentinel(g) => g.url(),
            Setup::Cluster(c) => c.url(),
        }
    }

    fn nodes(&self) -> &[RedisServer] {
        match self {
            Setup::Single(s) => std::slice::from_ref(s),
            Setup::Sentinel(g) => g.nodes(),
            Setup::Cluster(c) => c.nodes(),
        }
    }

    fn sentinels(&self) -> &[RedisServer] {
        match self {
            Setup::Sentinel(g) => g.sentinels(),
            _ => &[],
        }
    }
}

fn main() {
    let kind = std::env::args().nth(1).unwrap_or_default();
    let setup = match kind.as_str() {
        "single" => Setup::Single(RedisServer::start()),
        "sentinel" => Setup::Sentinel(SentinelGroup::start()),
        "cluster" => Setup::Cluster(Cluster::start()),
        _ => {
            eprintln!("usage: redislock-testkit single|sentinel|cluster");
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
        let answer = run(&setup, line.split_whitespace().collect());
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
                "pause" => server.pause(),
                "resume" => server.resume(),
                "restart" => server.restart(),
                _ => return format!("ERR unknown action {action}"),
            }
            "OK".into()
        }
        _ => "ERR usage: kill|pause|resume|restart node|sentinel <i>, or master".into(),
    }
}
