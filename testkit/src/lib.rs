//! The test kit of redislock: real Redis servers for tests, benchmarks, the fuzz target, the
//! soak and the C and PHP test runners. Never a mock of Redis, never port 6379, only loopback.
//!
//! * [`RedisServer`] starts a real `redis-server` bound to `127.0.0.1` on a free port, with no
//!   persistence and a private temp directory. It can be killed, paused (SIGSTOP), resumed
//!   (SIGCONT) and restarted on the same port. Dropping it kills the process and removes the
//!   directory, also when the test panics.
//! * [`SentinelGroup`] starts a master, two replicas and three sentinels (`redis-server
//!   --sentinel`) and waits until the sentinels agree on the master and see the replicas and
//!   each other; [`Cluster`] starts six nodes and joins them into a cluster of three masters with
//!   a replica each, and waits for `cluster_state:ok`; [`RedlockMasters`] starts independent
//!   masters for Redlock. Every node is a [`RedisServer`], so any node can be killed, paused and
//!   restarted.
//! * [`Setup`] holds a set-up of any [`Topology`]; [`Shared::get`] gives the tests of a run one
//!   set-up of a topology to share across their processes (started once, by a keeper process;
//!   see `shared.rs`), for tests that harm nothing of it.
//! * [`ChildProcess`] runs the test binary again in a child role ([`child_role`] is the child's
//!   side), to hold a lock in another process, kill it with `kill -9`, stop and continue it;
//!   [`fork_and_check`] forks the test process to check what a forked child inherits. The
//!   lower-level [`spawn_self`] / [`child_env`] / [`wait_child`] are what they are made of.
//! * Network faults: [`FaultProxy`] (a TCP proxy in front of a server with Toxiproxy's faults:
//!   latency, blackhole, reset mid-reply, slow close, bandwidth, cut all) and [`Partition`]
//!   (nftables rules dropping loopback traffic between ports, healed, removed on drop).
//! * [`History`], [`FencedResource`] and [`check`]: clients record their calls, the fenced
//!   resource what it accepted, and the checker reports overlaps, stale tokens accepted, lost
//!   updates, liveness gaps and overrun bounds.
//! * [`Postgres`] starts a private PostgreSQL (Debian's `initdb` and `postgres`, run as the
//!   `postgres` user when the tests run as root) on a free loopback port, for the tests of
//!   fenced writes to SQL rows; never the machine's own PostgreSQL on 5432.
//! * [`unique_name`] gives per-test unique key / lock names; [`get`], [`exists`], [`pttl`],
//!   [`llen`], [`wait_for_len`], [`leftover_keys`] and [`eventually`] are the small helpers
//!   every test file wants.
//! * The binary `redislock-testkit` starts a set-up from the command line for the runners in
//!   other languages: `scripts/ci/c-tests.sh`, the PHP tests (`bindings/php/tests/Support/
//!   RedisServer.php`, told where it is by `REDISLOCK_TESTKIT`) and `scripts/bench/soak.sh`. It prints
//!   the URL and ports, then takes commands on standard input (`kill`, `term`, `pause`, `resume`,
//!   `restart`, `pid`, `running`, `log` of any node or sentinel, `master`, `quit`) and stops
//!   everything at end of input; see `src/bin/redislock-testkit.rs` for the protocol.
//!
//! The binary is `$REDISLOCK_TEST_REDIS_SERVER` if set, else `redis-server` from `PATH`; set-ups
//! started `_on` [`Server::Valkey`] run `$REDISLOCK_TEST_VALKEY_SERVER`, else `valkey-server`. Every
//! process started here is spawned from one long-lived helper thread with `PR_SET_PDEATHSIG =
//! SIGKILL` on Linux, so even if the test process dies without unwinding no `redis-server` is
//! left behind.

mod child;
mod cluster;
mod history;
mod masters;
mod partition;
mod postgres;
mod process;
mod proxy;
mod sentinel;
mod server;
mod setup;
mod shared;
mod tls;

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use child::{
    CHILD_DIR_ENV, ChildProcess, FORK_CHECK_LIMIT, Role, child_role, fork_and_check,
    fork_and_check_within, output_text,
};
pub use cluster::{Cluster, ISOLATED_SOURCE, slot_master_at};
pub use history::{
    Event, FencedResource, History, Holding, Op, Recorder, Report, check, first_grant_after,
    holdings, monotonic_now,
};
pub use masters::RedlockMasters;
pub use partition::{Direction, Partition, peer_ports};
pub use postgres::{PG_BIN_ENV, Postgres};
pub use process::{
    cargo_build_example, child_env, spawn_anchored, spawn_self, wait_child, wait_child_ok,
};
pub use proxy::{FaultProxy, Faults};
pub use sentinel::{PEER_SOURCE, SentinelGroup};
pub use server::{RedisServer, Server, free_port, silent_port};
pub use setup::{Setup, Topology};
pub use shared::{IDLE, KEEPER_TEST, Shared, keep_shared_setup};
pub use tls::{Pki, TlsServer};

/// Environment variable naming the `redis-server` binary to use.
pub const REDIS_SERVER_ENV: &str = "REDISLOCK_TEST_REDIS_SERVER";
/// Environment variable naming the `valkey-server` binary to use (see [`Server::Valkey`]).
pub const VALKEY_SERVER_ENV: &str = "REDISLOCK_TEST_VALKEY_SERVER";

/// Conventional environment variable telling a re-executed test binary which
/// child role to play (see [`spawn_self`]).
pub const CHILD_ROLE_ENV: &str = "REDISLOCK_CHILD_ROLE";

/// How long a server may take to answer after being spawned.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `restart` keeps retrying while the old port cannot be bound.
pub(crate) const REBIND_TIMEOUT: Duration = Duration::from_secs(5);
/// How many fresh ports `start` tries when the chosen one gets taken.
pub(crate) const START_ATTEMPTS: usize = 5;
/// Connect / read / write timeout of connections made by `conn*`.
pub(crate) const CONN_TIMEOUT: Duration = Duration::from_secs(2);
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// The default Redis port; never used by this module.
pub(crate) const FORBIDDEN_PORT: u16 = 6379;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// `prefix` + pid + process-wide counter + nanoseconds: unique across
/// concurrently running tests and test processes.
pub fn unique_name(prefix: &str) -> String {
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos()
    )
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

// ---- small Redis and timing helpers shared by the test files ----

/// GET `key` as text.
/// A connection to the server on 127.0.0.1:`port` that connects and reads within `limit`, or
/// `None` (for a watcher polling servers while some are cut off or stopped).
pub fn conn_within(port: u16, limit: Duration) -> Option<redis::Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let con = client.get_connection_with_timeout(limit).ok()?;
    con.set_read_timeout(Some(limit)).ok()?;
    Some(con)
}

pub fn get(con: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(con).unwrap()
}

/// Whether `key` exists.
pub fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

/// PTTL of `key` (-2: no key, -1: no expiry).
pub fn pttl(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query(con).unwrap()
}

/// LLEN of `key` (0 when there is no such list).
pub fn llen(con: &mut redis::Connection, key: &str) -> i64 {
    redis::cmd("LLEN").arg(key).query(con).unwrap()
}

/// Waits until the list `key` (a waiter queue, say) holds `n` entries; panics after `limit`.
pub fn wait_for_len(con: &mut redis::Connection, key: &str, n: i64, limit: Duration) {
    assert!(
        eventually(limit, || llen(con, key) == n),
        "{key} never reached {n} entries (has {})",
        llen(con, key)
    );
}

/// Every key of the server but those in `except`: what a test left behind (on a server of its
/// own).
pub fn leftover_keys(con: &mut redis::Connection, except: &[&str]) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(con).unwrap();
    keys.into_iter()
        .filter(|k| !except.contains(&k.as_str()))
        .collect()
}

/// Polls `cond` every 5 ms until it holds (true) or `limit` passes (false).
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}
