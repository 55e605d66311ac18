//! A second process of a test: the test binary re-executed in a child role, from both sides.
//!
//! The parent starts it with [`ChildProcess::start`], which gives it its role and a private
//! directory; the child's test function takes its side with [`child_role`]. Through the
//! directory the child says it is ready ([`Role::ready`]), waits to be told to go
//! ([`Role::wait_go`]) and reports values ([`Role::report`]), without a Redis key or a parse of
//! its output. The parent can kill it with SIGKILL (`kill -9`: a holder that vanishes without a
//! release), stop and continue it, and waits for it with a bound; a child still running when
//! its handle is dropped (a failed test) is killed and reaped.
//!
//! [`fork_and_check`] is for what a forked child inherits: it forks the calling process, runs a
//! check in the child and reports whether it held; a child that hangs is killed after a bound and
//! reported with its threads' stacks.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{kill_and_reap, signal};
use crate::{CHILD_ROLE_ENV, POLL, child_env, eventually, spawn_self, unique_name, wait_child};

/// Environment variable giving a child its private directory.
pub const CHILD_DIR_ENV: &str = "REDISLOCK_CHILD_DIR";

/// How long a child may take to exit once it has been killed, or to report after it exited.
const REAP_LIMIT: Duration = Duration::from_secs(10);

/// A child process running one child-role test of this test binary (see [`child_role`]).
///
/// ```ignore
/// #[test]
/// fn a_killed_holder_frees_the_lock() {
///     let mut child = ChildProcess::start("child_holder", "holder", &[("URL", url.clone())]);
///     child.wait_ready(Duration::from_secs(20));
///     // ... the lock is held by the child ...
///     child.kill9();
///     // ... and is free once its lease has run out ...
/// }
///
/// #[test]
/// #[ignore = "child role, run by ChildProcess"]
/// fn child_holder() {
///     let Some(role) = child_role("holder") else { return };
///     let lock = Client::open(&role.var("URL")).unwrap().try_acquire("x").unwrap();
///     role.ready("");
///     role.hold();
/// }
/// ```
pub struct ChildProcess {
    child: Option<Child>,
    pid: u32,
    dir: PathBuf,
}

impl ChildProcess {
    /// Re-executes this test binary running only `test` (its full path in the test crate, e.g.
    /// `child_holder` or `module::child_holder`) as `role`, with `envs` besides the role and
    /// the child's directory. Its output is collected by [`wait`](Self::wait).
    pub fn start(test: &str, role: &str, envs: &[(&str, String)]) -> ChildProcess {
        let dir = std::env::temp_dir().join(unique_name("redislock-child"));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let mut all = vec![
            (CHILD_ROLE_ENV, role.to_string()),
            (CHILD_DIR_ENV, dir.display().to_string()),
        ];
        all.extend(envs.iter().cloned());
        let child = spawn_self(test, &all);
        ChildProcess {
            pid: child.id(),
            child: Some(child),
            dir,
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the child calls [`Role::ready`] and returns what it passed. Panics, with
    /// the child's output, if it exits first or `limit` passes.
    pub fn wait_ready(&mut self, limit: Duration) -> String {
        let ready = self.dir.join("ready");
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(text) = fs::read_to_string(&ready) {
                return text;
            }
            let exited = self
                .child
                .as_mut()
                .is_none_or(|c| !matches!(c.try_wait(), Ok(None)));
            if exited || Instant::now() >= deadline {
                let why = if exited {
                    "exited before it was ready"
                } else {
                    "was not ready in time"
                };
                let out = self.take_output();
                panic!("child {} {why} ({limit:?})\n{}", self.pid, out);
            }
            thread::sleep(POLL);
        }
    }

    /// Tells the child to go on (see [`Role::wait_go`]).
    pub fn go(&self) {
        fs::write(self.dir.join("go"), "").expect("cannot write the child's go mark");
    }

    /// What the child reported under `key` (see [`Role::report`]), if it did.
    pub fn reported(&self, key: &str) -> Option<String> {
        fs::read_to_string(self.dir.join(format!("report-{key}"))).ok()
    }

    /// `kill -9`: SIGKILL, and reaps the child. Returns when the signal was sent.
    pub fn kill9(&mut self) -> Instant {
        let at = Instant::now();
        if let Some(mut c) = self.child.take() {
            kill_and_reap(&mut c);
        }
        at
    }

    /// SIGSTOP, and waits until the child is stopped.
    pub fn stop(&self) {
        self.signal(libc::SIGSTOP);
        assert!(
            eventually(REAP_LIMIT, || self.state() == Some('T')),
            "child {} did not stop: state {:?}",
            self.pid,
            self.state()
        );
    }

    /// SIGCONT.
    pub fn cont(&self) {
        self.signal(libc::SIGCONT);
    }

    /// Waits up to `limit` for the child to end and returns its output (see [`wait_child`]).
    /// What it [reported](Self::reported) stays readable until the handle is dropped.
    pub fn wait(&mut self, limit: Duration) -> Output {
        let child = self.child.take().expect("the child was killed");
        wait_child(child, limit)
    }

    /// [`wait`](Self::wait), and asserts that the child's test passed.
    pub fn wait_ok(&mut self, limit: Duration) -> Output {
        let pid = self.pid;
        let out = self.wait(limit);
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "child {pid} failed ({})\n{}",
            out.status,
            output_text(&out)
        );
        out
    }

    fn signal(&self, sig: libc::c_int) {
        assert!(self.child.is_some(), "child {} was killed", self.pid);
        signal(self.pid, sig);
    }

    /// The state letter of the child from `/proc/<pid>/stat` (`T` when stopped).
    fn state(&self) -> Option<char> {
        let stat = fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        stat[stat.rfind(')')? + 1..].trim_start().chars().next()
    }

    /// Kills the child if it still runs and returns its output as text.
    fn take_output(&mut self) -> String {
        match self.child.take() {
            Some(c) => {
                signal(c.id(), libc::SIGCONT);
                signal(c.id(), libc::SIGKILL);
                output_text(&wait_child(c, REAP_LIMIT))
            }
            None => "(killed)".into(),
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_and_reap(&mut c);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A child's standard output and error, for a failure message.
pub fn output_text(out: &Output) -> String {
    format!(
        "--- stdout ---\n{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The child's side of a [`ChildProcess`].
pub struct Role {
    dir: Option<PathBuf>,
}

/// In a child-role test: `Some` when this process was started to play `role`, `None` in a
/// normal run (mark such tests `#[ignore]`, so that only a parent runs them; they return at once
/// under `--include-ignored`).
pub fn child_role(role: &str) -> Option<Role> {
    if child_env(CHILD_ROLE_ENV).as_deref() != Some(role) {
        return None;
    }
    Some(Role {
        dir: child_env(CHILD_DIR_ENV).map(PathBuf::from),
    })
}

impl Role {
    /// The environment variable `name`, which the parent must have given.
    pub fn var(&self, name: &str) -> String {
        child_env(name).unwrap_or_else(|| panic!("the child's {name} is not set"))
    }

    /// Tells the parent this child is ready, with `value` for it to read
    /// ([`ChildProcess::wait_ready`]).
    pub fn ready(&self, value: &str) {
        self.write("ready", value);
    }

    /// Waits until the parent calls [`ChildProcess::go`]; panics after `limit`.
    pub fn wait_go(&self, limit: Duration) {
        let go = self.dir().join("go");
        assert!(
            eventually(limit, || go.exists()),
            "the parent did not say go within {limit:?}"
        );
    }

    /// Reports `value` under `key` ([`ChildProcess::reported`]).
    pub fn report(&self, key: &str, value: &str) {
        self.write(&format!("report-{key}"), value);
    }

    /// Sleeps until the parent kills this process (at most 10 minutes).
    pub fn hold(&self) {
        thread::sleep(Duration::from_secs(600));
    }

    fn dir(&self) -> &Path {
        self.dir
            .as_deref()
            .expect("this child was not started by ChildProcess::start")
    }

    /// Writes `file` whole at once (a rename), so the parent never reads it half written.
    fn write(&self, file: &str, value: &str) {
        let tmp = self.dir().join(format!("{file}.tmp"));
        fs::write(&tmp, value).expect("cannot write in the child's directory");
        fs::rename(&tmp, self.dir().join(file)).expect("cannot rename in the child's directory");
    }
}

/// Forks the calling process. The forked child runs `check` on its copy of `inherited` (which
/// it may consume: release a lock it inherited, say) and ends at once with `_exit`, without
/// destructors or exit handlers: 0 when `check` returned true, 1 when it returned false or
/// panicked. The caller waits for it, and gets `inherited` back (its own copy, untouched by the
/// child) with whether `check` held.
///
/// Only the calling thread exists in the forked child: `check` must not wait for anything the
/// other threads of the test would do. Using the library under test there is the point.
///
/// A forked child still running after [`FORK_CHECK_LIMIT`] is a hang (a lock a thread of the
/// parent held at the fork, say): its threads' stacks are taken (gdb, else what `/proc` tells),
/// it is killed, and this panics with them, before the test's own bound runs out.
pub fn fork_and_check<T>(inherited: T, check: impl FnOnce(T) -> bool) -> (T, bool) {
    fork_and_check_within(FORK_CHECK_LIMIT, inherited, check)
}

/// How long [`fork_and_check`] waits for its forked child.
pub const FORK_CHECK_LIMIT: Duration = Duration::from_secs(60);

/// [`fork_and_check`] with a bound of `limit` on the forked child.
pub fn fork_and_check_within<T>(
    limit: Duration,
    inherited: T,
    check: impl FnOnce(T) -> bool,
) -> (T, bool) {
    let mut inherited = std::mem::ManuallyDrop::new(inherited);
    // SAFETY: fork(2) has no memory-safety preconditions; in the child only this thread runs
    // `check` and then `_exit`s, so nothing of the parent's other threads is waited for, and
    // no destructor of the parent's state runs there.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: this process's copy of `inherited` is taken once, here, and the process ends
        // below without touching it again.
        let value = unsafe { std::mem::ManuallyDrop::take(&mut inherited) };
        let held = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(value)))
            .unwrap_or(false);
        // SAFETY: ends the forked process without running the parent's destructors.
        unsafe { libc::_exit(if held { 0 } else { 1 }) };
    }
    let mut status = 0;
    let deadline = Instant::now() + limit;
    loop {
        // SAFETY: waits for the process forked above, which only this call reaps.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if waited == pid {
            break;
        }
        assert_eq!(waited, 0, "waitpid: {}", std::io::Error::last_os_error());
        if Instant::now() >= deadline {
            let stacks = stacks_of(pid as u32);
            signal(pid as u32, libc::SIGKILL);
            // SAFETY: reaps the process forked above, killed just now.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!(
                "the forked child {pid} still ran after {limit:?} (killed); its threads:\n{stacks}"
            );
        }
        thread::sleep(POLL);
    }
    let held = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (std::mem::ManuallyDrop::into_inner(inherited), held)
}

/// The stacks of every thread of `pid`, for a report: gdb's backtraces when gdb is there and
/// answers within [`REAP_LIMIT`], else each thread's name, state, kernel wait channel and system
/// call from `/proc`.
fn stacks_of(pid: u32) -> String {
    let gdb = std::process::Command::new("timeout")
        .arg(REAP_LIMIT.as_secs().to_string())
        .args([
            "gdb",
            "-p",
            &pid.to_string(),
            "-batch",
            "-ex",
            "thread apply all bt",
        ])
        .stdin(std::process::Stdio::null())
        .output();
    if let Ok(out) = gdb {
        let text = String::from_utf8_lossy(&out.stdout);
        let frames: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with('#') || l.starts_with("Thread "))
            .collect();
        if !frames.is_empty() {
            return frames.join("\n");
        }
    }
    let read = |path: String| fs::read_to_string(path).unwrap_or_default();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return "(no /proc entry)".into();
    };
    tasks
        .flatten()
        .map(|t| {
            let at = t.path().display().to_string();
            format!(
                "thread {}: {} state {} wchan {} syscall {}",
                t.file_name().to_string_lossy(),
                read(format!("{at}/comm")).trim(),
                read(format!("{at}/stat"))
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim(),
                read(format!("{at}/wchan")).trim(),
                read(format!("{at}/syscall")).trim(),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
