//! Set-ups shared by the tests of one run, across their processes.
//!
//! `cargo nextest` runs every test in a process of its own, so a set-up a test starts lives
//! only as long as that test. A Cluster or a Sentinel group takes seconds to form; tests that
//! need one but never harm it (no kill, no pause, no flush: names of their own, see
//! [`unique_name`](crate::unique_name)) can share one instead, with [`Shared::get`].
//!
//! The first test of a run that asks for a topology starts a keeper: the test binary again,
//! running the test that [`shared_keeper!`](crate::shared_keeper) defines, in a session of its
//! own and detached from the test. The keeper starts the set-up, writes its URL and ports to a
//! state file, and keeps it while the run goes on; the tests that follow read the state file.
//! Each test process holds a shared `flock` on the set-up's users file for as long as it lives.
//! The keeper stops the set-up and exits when the run's runner (the parent of the test
//! processes: nextest, or cargo) has gone, or when no test process has used the set-up for
//! [`IDLE`]; its servers die with it (parent-death signal), also when it is killed.
//!
//! The files are in `$TMPDIR/redislock-shared-<runner pid>/<topology>/`: `start.lock` (held
//! while a set-up is looked for or started), `users.lock`, `state` and `keeper.log`. The last
//! keeper of a run removes them; those of a run whose keepers all stopped for want of users
//! before it ended are removed by the next run.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::server::connect;
use crate::{Server, Setup, Topology, child_env, cluster, sentinel};

/// How long a keeper keeps a set-up that no test process uses.
pub const IDLE: Duration = Duration::from_secs(30);
/// The name of the keeper's test at the root of the test crate (see [`shared_keeper!`]).
///
/// [`shared_keeper!`]: crate::shared_keeper
pub const KEEPER_TEST: &str = "shared_topology_keeper";
/// How long a keeper may take to start its set-up.
const START_LIMIT: Duration = Duration::from_secs(120);
/// How often the keeper looks at its users and at the runner.
const KEEPER_POLL: Duration = Duration::from_millis(100);

const TOPOLOGY_ENV: &str = "REDISLOCK_SHARED_TOPOLOGY";
const SERVER_ENV: &str = "REDISLOCK_SHARED_SERVER";
const DIR_ENV: &str = "REDISLOCK_SHARED_DIR";
const RUNNER_ENV: &str = "REDISLOCK_SHARED_RUNNER";

/// Defines the keeper of shared set-ups, a test named [`KEEPER_TEST`]: invoke it once at the
/// root of every test crate that calls [`Shared::get`]. In a normal run the test is ignored,
/// and under `--include-ignored` it returns at once.
#[macro_export]
macro_rules! shared_keeper {
    () => {
        #[test]
        #[ignore = "keeper of the shared set-ups, started by Shared::get"]
        fn shared_topology_keeper() {
            $crate::keep_shared_setup();
        }
    };
}

/// A set-up of one topology shared by the tests of this run (see the module's documentation).
/// The tests must not harm it: kill, pause or flush nothing.
#[derive(Debug)]
pub struct Shared {
    topology: Topology,
    server: Server,
    url: String,
    nodes: Vec<u16>,
    sentinels: Vec<u16>,
    /// Held (shared) as long as this process lives: the keeper sees a user.
    _user: File,
}

impl Shared {
    /// The run's set-up of `topology`, started if none is running.
    pub fn get(topology: Topology) -> &'static Shared {
        Self::get_on(topology, Server::Redis)
    }

    /// The run's set-up of `topology` running `server`'s program, started if none is running.
    pub fn get_on(topology: Topology, server: Server) -> &'static Shared {
        const N: usize = Topology::ALL.len() * Server::ALL.len();
        static SHARED: [OnceLock<Shared>; N] = [const { OnceLock::new() }; N];
        let t = Topology::ALL.iter().position(|t| *t == topology).unwrap();
        let s = Server::ALL.iter().position(|s| *s == server).unwrap();
        SHARED[t * Server::ALL.len() + s].get_or_init(|| join(topology, server))
    }

    pub fn topology(&self) -> Topology {
        self.topology
    }

    /// The server program the set-up runs.
    pub fn server(&self) -> Server {
        self.server
    }

    /// The URL a client is built from.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The ports of the data nodes (see [`Setup::nodes`]).
    pub fn nodes(&self) -> &[u16] {
        &self.nodes
    }

    /// A connection to the server that holds `key` now: the server, the group's master, the
    /// master of `key`'s slot, or the first Redlock master.
    pub fn conn_for(&self, key: &str) -> redis::Connection {
        let port = match self.topology {
            Topology::Single | Topology::Redlock => self.nodes[0],
            Topology::Sentinel => {
                sentinel::master_port_of(self.sentinels.iter().map(|p| port_conn(*p)))
                    .expect("no sentinel answers")
            }
            Topology::Cluster => {
                let mut any = self
                    .nodes
                    .iter()
                    .find_map(|p| port_conn(*p).ok())
                    .expect("no cluster node answers");
                cluster::slot_master_port(&mut any, key)
            }
        };
        port_conn(port).unwrap_or_else(|e| panic!("cannot connect to 127.0.0.1:{port}: {e}"))
    }

    /// Connections to every server that holds a copy of `key` in its own right: every master
    /// of Redlock (a lock is held where a majority of them hold its key), else the one of
    /// [`conn_for`](Self::conn_for).
    pub fn conns_for(&self, key: &str) -> Vec<redis::Connection> {
        match self.topology {
            Topology::Redlock => self
                .nodes
                .iter()
                .map(|p| port_conn(*p).unwrap_or_else(|e| panic!("127.0.0.1:{p}: {e}")))
                .collect(),
            _ => vec![self.conn_for(key)],
        }
    }
}

fn port_conn(port: u16) -> redis::RedisResult<redis::Connection> {
    connect(&format!("redis://127.0.0.1:{port}/"))
}

const RUN_DIR_PREFIX: &str = "redislock-shared-";

/// The files of the run's set-up of `topology` on `server` (Redis's keep the topology's name).
fn dir_of(runner: u32, topology: Topology, server: Server) -> PathBuf {
    let run = std::env::temp_dir().join(format!("{RUN_DIR_PREFIX}{runner}"));
    match server {
        Server::Redis => run.join(topology.name()),
        _ => run.join(format!("{}-{}", topology.name(), server.name())),
    }
}

/// Removes the files of runs whose runner has gone: their keepers have gone too (a keeper that
/// stopped for want of users before its run ended leaves them).
fn sweep_ended_runs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let runner = name
            .to_str()
            .and_then(|n| n.strip_prefix(RUN_DIR_PREFIX))
            .and_then(|pid| pid.parse::<u32>().ok());
        if runner.is_some_and(|pid| !alive(pid)) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Finds the run's set-up of `topology`, or starts its keeper and waits for it; then holds a
/// shared lock on its users file.
fn join(topology: Topology, server: Server) -> Shared {
    // SAFETY: getppid(2) has no preconditions.
    let runner = unsafe { libc::getppid() } as u32;
    sweep_ended_runs();
    let dir = dir_of(runner, topology, server);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let start = lock_file(&dir.join("start.lock"));
    flock(&start, libc::LOCK_EX);
    let state = match read_state(&dir) {
        Some(state) if alive(state.keeper) => state,
        _ => start_keeper(topology, server, &dir, runner),
    };
    let user = lock_file(&dir.join("users.lock"));
    // The keeper only stops while it holds `start.lock`, which this process holds now.
    flock(&user, libc::LOCK_SH);
    drop(start);
    Shared {
        topology,
        server,
        url: state.url,
        nodes: state.nodes,
        sentinels: state.sentinels,
        _user: user,
    }
}

/// Starts the keeper and waits until it has written the state file.
fn start_keeper(topology: Topology, server: Server, dir: &Path, runner: u32) -> State {
    let _ = fs::remove_file(dir.join("state"));
    let exe = std::env::current_exe().expect("current_exe() failed");
    let log_path = dir.join("keeper.log");
    let log = File::create(&log_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", log_path.display()));
    let mut cmd = Command::new(&exe);
    cmd.args([
        KEEPER_TEST,
        "--exact",
        "--nocapture",
        "--test-threads=1",
        "--include-ignored",
    ])
    .env(TOPOLOGY_ENV, topology.name())
    .env(SERVER_ENV, server.name())
    .env(DIR_ENV, dir)
    .env(RUNNER_ENV, runner.to_string())
    .stdin(Stdio::null())
    .stdout(log.try_clone().expect("cannot dup the keeper's log"))
    .stderr(log);
    // SAFETY: runs in the forked child before exec and only calls setsid(2), which is
    // async-signal-safe. A session of its own: signals for the test's process group (a
    // runner's timeout, ^C) are not for the keeper, which outlives the test.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut keeper = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the keeper {}: {e}", exe.display()));
    let deadline = Instant::now() + START_LIMIT;
    let state = loop {
        if let Some(state) = read_state(dir) {
            break state;
        }
        let exited = keeper.try_wait().ok().flatten();
        if exited.is_some() || Instant::now() >= deadline {
            if exited.is_none() {
                let _ = keeper.kill();
                let _ = keeper.wait();
            }
            panic!(
                "the keeper of the shared {} set-up on {} {} (is `redislock_testkit::shared_keeper!()` \
                 at the root of this test crate?)\n--- {} ---\n{}",
                topology.name(),
                server.name(),
                match exited {
                    Some(status) => format!("exited ({status})"),
                    None => format!("did not start it within {START_LIMIT:?}"),
                },
                log_path.display(),
                fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    // Reaped when it exits, should this process still run then.
    thread::spawn(move || keeper.wait());
    state
}

/// The keeper's side, run by the test that [`shared_keeper!`](crate::shared_keeper) defines:
/// starts the set-up, publishes it, keeps it while it is used. Returns at once unless started
/// as a keeper.
pub fn keep_shared_setup() {
    let Some(topology) = child_env(TOPOLOGY_ENV) else {
        return;
    };
    let topology = Topology::from_name(&topology).expect("unknown topology");
    let server = child_env(SERVER_ENV)
        .map(|s| Server::from_name(&s).expect("unknown server"))
        .unwrap_or_default();
    let dir = PathBuf::from(child_env(DIR_ENV).expect("no keeper directory"));
    let runner: u32 = child_env(RUNNER_ENV)
        .and_then(|p| p.parse().ok())
        .expect("no runner pid");
    let setup = Setup::start_on(topology, server);
    let ports = |servers: &[crate::RedisServer]| -> Vec<u16> {
        servers.iter().map(crate::RedisServer::port).collect()
    };
    let state = State {
        keeper: std::process::id(),
        url: setup.url(),
        nodes: ports(setup.nodes()),
        sentinels: ports(setup.sentinels()),
    };
    state.write(&dir);
    println!(
        "keeping {} on {} at {}",
        topology.name(),
        server.name(),
        state.url
    );
    let users = lock_file(&dir.join("users.lock"));
    let start = lock_file(&dir.join("start.lock"));
    let mut idle_since: Option<Instant> = None;
    let runner_gone = loop {
        thread::sleep(KEEPER_POLL);
        if !alive(runner) {
            break true;
        }
        if !try_flock(&users, libc::LOCK_EX) {
            idle_since = None;
            continue;
        }
        flock(&users, libc::LOCK_UN);
        if idle_since.get_or_insert_with(Instant::now).elapsed() < IDLE {
            continue;
        }
        // Stop only while no test looks for the set-up, and none uses it.
        flock(&start, libc::LOCK_EX);
        if try_flock(&users, libc::LOCK_EX) {
            let _ = fs::remove_file(dir.join("state"));
            break false;
        }
        flock(&start, libc::LOCK_UN);
        idle_since = None;
    };
    println!(
        "stopping {}: {}",
        topology.name(),
        if runner_gone {
            "the run ended"
        } else {
            "unused"
        }
    );
    drop(setup);
    if runner_gone {
        let _ = fs::remove_dir_all(&dir);
        if let Some(parent) = dir.parent() {
            // Only once every topology's keeper has gone.
            let _ = fs::remove_dir(parent);
        }
    }
}

/// What the keeper publishes.
struct State {
    keeper: u32,
    url: String,
    nodes: Vec<u16>,
    sentinels: Vec<u16>,
}

impl State {
    fn write(&self, dir: &Path) {
        let list = |ports: &[u16]| -> String {
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let text = format!(
            "{}\n{}\n{}\n{}\n",
            self.keeper,
            self.url,
            list(&self.nodes),
            list(&self.sentinels)
        );
        let tmp = dir.join("state.tmp");
        fs::write(&tmp, text).expect("cannot write the state file");
        fs::rename(&tmp, dir.join("state")).expect("cannot rename the state file");
    }
}

fn read_state(dir: &Path) -> Option<State> {
    let text = fs::read_to_string(dir.join("state")).ok()?;
    let mut lines = text.lines();
    let ports = |line: Option<&str>| -> Option<Vec<u16>> {
        line?
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| p.parse().ok())
            .collect()
    };
    Some(State {
        keeper: lines.next()?.parse().ok()?,
        url: lines.next()?.to_string(),
        nodes: ports(lines.next())?,
        sentinels: ports(lines.next())?,
    })
}

/// Whether a process with this pid exists.
fn alive(pid: u32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let found = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

fn lock_file(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open {}: {e}", path.display()))
}

/// flock(2), waiting (and retried when a signal interrupts it).
fn flock(file: &File, op: libc::c_int) {
    loop {
        // SAFETY: flock(2) on a descriptor this `File` owns.
        if unsafe { libc::flock(file.as_raw_fd(), op) } == 0 {
            return;
        }
        let e = io::Error::last_os_error();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted, "flock failed: {e}");
    }
}

/// flock(2) without waiting: whether the lock was taken.
fn try_flock(file: &File, op: libc::c_int) -> bool {
    // SAFETY: flock(2) on a descriptor this `File` owns.
    unsafe { libc::flock(file.as_raw_fd(), op | libc::LOCK_NB) == 0 }
}
