//! Network partitions on loopback with nftables: drop the packets between chosen ports, heal,
//! and remove everything when done.
//!
//! Each [`Partition`] is an nftables table of its own, `ip redislock_kit_<pid>_<n>`, with one
//! chain on the `input` hook (priority -10) that drops matching TCP packets arriving on `lo`
//! from and to `127.0.0.0/8`. Dropping on input, not output, is what a partition does: the
//! sender's `send` succeeds and TCP retransmits into silence, where a drop on output would fail
//! the send at once with `EPERM`. Healing flushes the chain: retransmissions then get through
//! and the connections carry on, as after a real partition.
//!
//! Matching is by port, and a connection has only one well-known port: the server's. A client
//! connects from an ephemeral port (32768 and up), so "client ↔ server" is "every packet to or
//! from the server's port", and [`cut_port`](Partition::cut_port) takes the ports of the
//! connections to spare (a replica's or a sentinel's link to that server, as
//! [`peer_ports`] reads them from `CLIENT LIST`). New connections of those peers come from new
//! ports and are cut too; a partition that must spare them for longer than the peers keep their
//! links needs the peers on a source address of their own.
//!
//! The table is deleted when the `Partition` is dropped (also on a panic's unwinding), and
//! [`Partition::new`] deletes the tables left by kit processes that no longer exist. When nft
//! cannot be used (not installed, not root, no nf_tables) [`Partition::new`] says why, and the
//! case is skipped by the test, which prints that reason.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The prefix of every table the kit makes.
const TABLE_PREFIX: &str = "redislock_kit_";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// One direction of a server's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Packets to the server (requests are lost; replies to what got through still arrive).
    ToServer,
    /// Packets from the server (requests arrive and run; their replies are lost).
    FromServer,
    /// Both.
    Both,
}

/// An nftables table of the kit's own that drops chosen loopback traffic (see the module
/// documentation). Rules add up; [`heal`](Self::heal) removes them all; drop removes the table.
#[derive(Debug)]
pub struct Partition {
    table: String,
}

impl Partition {
    /// A new, empty partition table, or why there cannot be one (nft missing, not root, no
    /// nf_tables). Deletes the kit's tables left by dead processes first.
    pub fn new() -> Result<Partition, String> {
        available()?;
        remove_stale_tables();
        let table = format!(
            "{TABLE_PREFIX}{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        nft(&format!(
            "add table ip {table}\n\
             add chain ip {table} cut {{ type filter hook input priority -10; policy accept; }}\n"
        ))?;
        Ok(Partition { table })
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Drops the packets of every connection to the server on `port` (in `direction`), except
    /// those of the connections whose other end is one of `spare` (ports of peers' links).
    pub fn cut_port(&self, port: u16, direction: Direction, spare: &[u16]) {
        let mut rules = Vec::new();
        let except = |field: &str| match spare {
            [] => String::new(),
            ports => format!("tcp {field} != {} ", set(ports)),
        };
        if direction != Direction::FromServer {
            rules.push(format!("tcp dport {port} {}drop", except("sport")));
        }
        if direction != Direction::ToServer {
            rules.push(format!("tcp sport {port} {}drop", except("dport")));
        }
        self.add(&rules);
    }

    /// Drops every packet between the server on `port` and the connections made from the
    /// loopback address `source` (both ways): with a group whose peers connect from their own
    /// address ([`SentinelGroup::start_with_peer_source`]), the master cut from its replicas and
    /// sentinels while its clients (on 127.0.0.1) still reach it.
    ///
    /// [`SentinelGroup::start_with_peer_source`]: crate::SentinelGroup::start_with_peer_source
    pub fn cut_port_from(&self, port: u16, source: &str) {
        let source: std::net::Ipv4Addr = source
            .parse()
            .unwrap_or_else(|e| panic!("not an IPv4 address: {source}: {e}"));
        assert!(source.is_loopback(), "{source} is not a loopback address");
        self.add(&[
            format!("ip saddr {source} tcp dport {port} drop"),
            format!("ip daddr {source} tcp sport {port} drop"),
        ]);
    }

    /// Drops every packet from and to the loopback address `addr` (the connections a node made
    /// from it: [`Cluster::start_with_peer_source`]'s first node's links to the others).
    ///
    /// [`Cluster::start_with_peer_source`]: crate::Cluster::start_with_peer_source
    pub fn cut_address(&self, addr: &str) {
        let addr: std::net::Ipv4Addr = addr
            .parse()
            .unwrap_or_else(|e| panic!("not an IPv4 address: {addr}: {e}"));
        assert!(
            addr.is_loopback() && addr != std::net::Ipv4Addr::LOCALHOST,
            "{addr} is not a loopback address of a node's own"
        );
        self.add(&[
            format!("ip saddr {addr} drop"),
            format!("ip daddr {addr} drop"),
        ]);
    }

    /// Drops every packet between ports `a` and ports `b`, both ways.
    pub fn cut_between(&self, a: &[u16], b: &[u16]) {
        self.cut_one_way(a, b);
        self.cut_one_way(b, a);
    }

    /// Drops the packets from ports `from` to ports `to` (one direction only).
    pub fn cut_one_way(&self, from: &[u16], to: &[u16]) {
        if from.is_empty() || to.is_empty() {
            return;
        }
        self.add(&[format!(
            "tcp sport {} tcp dport {} drop",
            set(from),
            set(to)
        )]);
    }

    /// Removes every rule: the partition heals (the table stays for new rules).
    pub fn heal(&self) {
        nft(&format!("flush chain ip {} cut\n", self.table))
            .unwrap_or_else(|e| panic!("cannot heal partition {}: {e}", self.table));
    }

    /// The table's rules as `nft list table` prints them (for a test's log).
    pub fn rules(&self) -> String {
        output(&["list", "table", "ip", &self.table]).unwrap_or_else(|e| e)
    }

    fn add(&self, rules: &[String]) {
        let script: String = rules
            .iter()
            .map(|r| {
                format!(
                    "add rule ip {} cut iifname \"lo\" ip saddr 127.0.0.0/8 ip daddr 127.0.0.0/8 {r}\n",
                    self.table
                )
            })
            .collect();
        nft(&script).unwrap_or_else(|e| panic!("cannot add to partition {}: {e}", self.table));
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        if let Err(e) = nft(&format!("delete table ip {}\n", self.table)) {
            eprintln!("partition: cannot delete table {}: {e}", self.table);
        }
    }
}

/// Whether nft can be used here, or why not (checked once per process: version, root, and a
/// table made and deleted).
pub fn available() -> Result<(), String> {
    static CHECK: OnceLock<Result<(), String>> = OnceLock::new();
    CHECK
        .get_or_init(|| {
            output(&["--version"]).map_err(|e| {
                format!("nft cannot be run ({e}); install Debian's nftables (scripts/setup.sh)")
            })?;
            // SAFETY: geteuid(2) has no preconditions.
            if unsafe { libc::geteuid() } != 0 {
                return Err("nftables rules need root (the tests run as another user)".into());
            }
            let probe = format!("{TABLE_PREFIX}probe_{}", std::process::id());
            nft(&format!("add table ip {probe}\ndelete table ip {probe}\n"))
                .map_err(|e| format!("nf_tables refuses a table: {e}"))
        })
        .clone()
}

/// The ports of the links that a server's peers hold to it, as its `CLIENT LIST` shows them: its
/// replicas (flag `S`), and sentinels (names `sentinel-…`).
pub fn peer_ports(con: &mut redis::Connection) -> Vec<u16> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(con)
        .expect("CLIENT LIST failed");
    list.lines()
        .filter(|line| {
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|kv| kv.strip_prefix(name))
                    .unwrap_or("")
            };
            field("flags=").contains('S') || field("name=").starts_with("sentinel-")
        })
        .filter_map(|line| {
            let addr = line.split(' ').find_map(|kv| kv.strip_prefix("addr="))?;
            addr.rsplit(':').next()?.parse().ok()
        })
        .collect()
}

/// Deletes the kit's tables whose process has gone (a run that died without unwinding).
fn remove_stale_tables() {
    let Ok(list) = output(&["list", "tables"]) else {
        return;
    };
    for line in list.lines() {
        let Some(name) = line.strip_prefix("table ip ") else {
            continue;
        };
        let Some(rest) = name.trim().strip_prefix(TABLE_PREFIX) else {
            continue;
        };
        let pid = rest.split('_').find_map(|p| p.parse::<i32>().ok());
        // SAFETY: kill(2) with signal 0 only checks that the pid exists.
        if pid.is_some_and(|pid| unsafe { libc::kill(pid, 0) } != 0) {
            let _ = nft(&format!("delete table ip {}\n", name.trim()));
        }
    }
}

fn set(ports: &[u16]) -> String {
    match ports {
        [one] => one.to_string(),
        _ => {
            let list: Vec<String> = ports.iter().map(u16::to_string).collect();
            format!("{{ {} }}", list.join(", "))
        }
    }
}

/// Runs `nft -f -` with `script` on its standard input.
fn nft(script: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(script.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "nft -f - failed ({}): {}\nscript:\n{script}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn output(args: &[&str]) -> Result<String, String> {
    let out = Command::new("nft")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::RedisServer;

    fn ping(con: &mut redis::Connection) -> redis::RedisResult<String> {
        redis::cmd("PING").query(con)
    }

    fn table_exists(name: &str) -> bool {
        output(&["list", "tables"]).is_ok_and(|l| l.lines().any(|t| t.trim().ends_with(name)))
    }

    #[test]
    fn cuts_a_port_spares_peers_heals_and_removes_its_table() {
        if let Err(why) = available() {
            println!("SKIPPED: {why}");
            return;
        }
        let srv = RedisServer::start();
        let mut spared = srv.conn();
        let mut cut = srv.conn();
        let spared_port: u16 = {
            let addr: String = redis::cmd("CLIENT").arg("INFO").query(&mut spared).unwrap();
            let field = addr
                .split(' ')
                .find_map(|kv| kv.strip_prefix("addr="))
                .unwrap();
            field.rsplit(':').next().unwrap().parse().unwrap()
        };
        for con in [&mut spared, &mut cut] {
            con.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
        }
        let p = Partition::new().unwrap();
        let table = p.table().to_owned();
        p.cut_port(srv.port(), Direction::Both, &[spared_port]);
        println!("{}", p.rules());
        assert_eq!(ping(&mut spared).unwrap(), "PONG");
        let t = Instant::now();
        assert!(ping(&mut cut).unwrap_err().is_timeout());
        assert!(t.elapsed() < Duration::from_secs(1));
        p.heal();
        // The lost request is retransmitted; its late reply is then read by the next call, so
        // the test reads with a fresh connection.
        assert_eq!(ping(&mut srv.conn()).unwrap(), "PONG");
        p.cut_one_way(&[srv.port()], &[spared_port]);
        assert!(ping(&mut spared).unwrap_err().is_timeout());
        drop(p);
        assert!(!table_exists(&table), "table {table} left behind");
    }

    #[test]
    fn stale_tables_of_dead_processes_are_removed() {
        if let Err(why) = available() {
            println!("SKIPPED: {why}");
            return;
        }
        // A pid that cannot exist (above pid_max's largest value).
        let stale = format!("{TABLE_PREFIX}4194399_0");
        nft(&format!("add table ip {stale}\n")).unwrap();
        let p = Partition::new().unwrap();
        assert!(!table_exists(&stale), "stale table {stale} not removed");
        drop(p);
    }
}
