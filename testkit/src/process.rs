//! Child processes: spawned so that they die with the test process, signalled, reaped; and
//! test binaries that re-execute themselves as a second process.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::POLL;

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `cmd` from a helper thread that lives as long as the process, with
/// the parent-death signal set to SIGKILL (Linux): the child dies with the test
/// process, also when it dies without unwinding. Every server of the kit is
/// started so; tests use it for servers of their own. `PR_SET_PDEATHSIG` fires
/// when the *thread* that forked the child exits, so forking from the
/// short-lived test threads would kill servers as soon as e.g. a helper
/// thread that called `restart()` finishes; the dedicated thread avoids that.
pub fn spawn_anchored(mut cmd: Command) -> io::Result<Child> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec and only
        // calls async-signal-safe functions (prctl, getppid, _exit); it does
        // not allocate or take locks.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // The parent may have died between fork and prctl.
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }

    static SPAWNER: OnceLock<mpsc::Sender<SpawnJob>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        thread::Builder::new()
            .name("redislock-test-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the test spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    tx.send((cmd, reply_tx))
        .map_err(|_| io::Error::other("test spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| io::Error::other("test spawner thread is gone"))?
}

pub(crate) fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions. Callers only pass
    // the pid of a child we still own and have not reaped, so the pid cannot
    // have been recycled for an unrelated process.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// SIGCONT (in case it is stopped) + SIGKILL, then reap.
pub(crate) fn kill_and_reap(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        signal(child.id(), libc::SIGCONT);
        signal(child.id(), libc::SIGKILL);
    }
    let _ = child.wait();
}

/// Re-executes the current test binary running only `test_name`, with the
/// extra environment variables `envs`; stdout/stderr are piped.
///
/// Arguments passed: `<test_name> --exact --nocapture --test-threads=1
/// --include-ignored`. These are plain libtest arguments, so this works both
/// under `cargo test` and under `cargo nextest run` (nextest builds the same
/// libtest binary and itself runs it as `<binary> --exact <name> --nocapture`).
/// `test_name` is the full path inside the test crate, e.g. `child_writer`
/// or `some_mod::child_writer`.
///
/// Pattern:
///
/// ```ignore
/// mod support;
/// use support::{CHILD_ROLE_ENV, RedisServer, child_env, spawn_self, wait_child};
///
/// #[test]
/// fn two_processes_race() {
///     let server = RedisServer::start();
///     let child = spawn_self(
///         "child_racer",
///         &[(CHILD_ROLE_ENV, "racer".into()), ("REDISLOCK_TEST_URL", server.url())],
///     );
///     // ... do the parent's half of the work ...
///     let out = wait_child(child, std::time::Duration::from_secs(30));
///     assert!(out.status.success());
/// }
///
/// // Child role: does nothing unless started by `spawn_self`.
/// #[test]
/// #[ignore = "child role of two_processes_race"]
/// fn child_racer() {
///     if child_env(CHILD_ROLE_ENV).as_deref() != Some("racer") {
///         return;
///     }
///     let url = child_env("REDISLOCK_TEST_URL").unwrap();
///     // ... the child's half ...
/// }
/// ```
///
/// The `#[ignore]` keeps the child role out of normal runs; the env-var
/// check keeps it harmless under `--include-ignored`. Prefer [`wait_child`]
/// over `wait_with_output`: it has a timeout and detects a `test_name`
/// that matched no test (libtest would report success for "0 tests").
/// The child is killed if the parent test process dies.
pub fn spawn_self(test_name: &str, envs: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("current_exe() failed");
    let mut cmd = Command::new(&exe);
    cmd.arg(test_name)
        .args([
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .envs(envs.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawn_anchored(cmd).unwrap_or_else(|e| panic!("cannot re-execute {}: {e}", exe.display()))
}

/// The environment variable `name`, if set and non-empty.
pub fn child_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Waits for a child from [`spawn_self`] and collects its output. Panics
/// (after killing it) if it runs longer than `timeout`, and panics if the
/// test name matched no test. Does not check the exit status.
pub fn wait_child(mut child: Child, timeout: Duration) -> Output {
    fn drain(pipe: Option<impl Read + Send + 'static>) -> thread::JoinHandle<Vec<u8>> {
        thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait().expect("waitpid failed") {
            Some(status) => break Some(status),
            None if Instant::now() >= deadline => {
                kill_and_reap(&mut child);
                break None;
            }
            None => thread::sleep(POLL),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let Some(status) = status else {
        panic!(
            "child test process timed out after {timeout:?} and was killed\n\
             --- stdout ---\n{}\n--- stderr ---\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    let text = String::from_utf8_lossy(&stdout);
    assert!(
        !text.contains("running 0 tests"),
        "spawn_self: the test name matched no test (use the full path, e.g. `module::name`)\n\
         --- stdout ---\n{text}"
    );
    Output {
        status,
        stdout,
        stderr,
    }
}

/// `wait_child` + assert success, printing the child's output on failure.
pub fn wait_child_ok(child: Child, timeout: Duration) -> Output {
    let out = wait_child(child, timeout);
    assert!(
        out.status.success(),
        "child test process failed ({})\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Builds the library and the example `name` of the crate at `root` with cargo, in the
/// profile of the running test binary (`<target>/<profile>/deps/...`), within `timeout`, and
/// returns the example's path as cargo reports it. (`cargo test --test NAME` and nextest build
/// no examples, and one merely found under `target/<profile>/examples` may be stale.)
pub fn cargo_build_example(root: &Path, name: &str, timeout: Duration) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe() failed");
    let profile = match exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
    {
        Some(dir) if dir != "debug" => dir.to_string_lossy().into_owned(),
        _ => "dev".to_owned(),
    };
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    // Without the variables cargo sets for running this test: build scripts that watch them
    // (ring's watches CARGO_PKG_* and CARGO_MANIFEST_DIR) would rerun here, and again at the
    // next ordinary build.
    let set_for_test = |key: &str| {
        ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_"]
            .iter()
            .any(|prefix| key.starts_with(prefix))
            || matches!(
                key,
                "CARGO_CRATE_NAME" | "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR" | "OUT_DIR"
            )
    };
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(set_for_test) {
            cargo.env_remove(&key);
        }
    }
    let child = cargo
        .args(["build", "--lib", "--example", name, "--profile", &profile])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run cargo");
    let out = wait_child(child, timeout);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo build --example {name} failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // One JSON message per line; the example is the build's only artifact with an executable.
    let executable = stdout.lines().find_map(|line| {
        let path = line.split("\"executable\":\"").nth(1)?.split('"').next()?;
        Some(PathBuf::from(path))
    });
    executable
        .filter(|path| path.is_file())
        .unwrap_or_else(|| panic!("cargo reported no {name} executable:\n{stdout}"))
}
