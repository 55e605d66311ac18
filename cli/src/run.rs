//! `redislock run`: the lock held while a command runs. Signals are taken one at a time by the
//! thread that waits (see `signals.rs`): while waiting for the lock, SIGINT, SIGTERM and SIGHUP
//! cancel the wait; while the command runs they are forwarded to it, with SIGKILL after
//! `--kill-after`; a lost lock gets the command what `--on-lost` says. The command dies with
//! redislock, even by `kill -9` (the parent-death signal, SIGKILL).
//!
//! Run from a script or cron (no terminal in the foreground), the command gets a process group
//! of its own and every signal goes to the whole group, as timeout(1) does: a shell command's
//! own children get them too. Run from a terminal's foreground, the command stays in
//! redislock's group, so that it can read the terminal and gets Ctrl-C from it directly;
//! signals then go to the command's process alone.

use std::io;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::kind::{Descriptor, Exclusive, Kind as _, Leader, Read, Redisson, Semaphore, Write};
use redislock::metrics::KindLabel;
use redislock::{AnyLock, Cancel, Client, Error, MAX_WAIT};

use crate::args::{Connection, OnLost, RunArgs, Wait};
use crate::connect;
use crate::exit::{self, Failure};
use crate::signals::{self, FORWARDED};

/// How often the loop looks at the lock even without a signal (a lost report is a signal; this
/// is the fallback).
const LOOK_EVERY: Duration = Duration::from_millis(500);

/// The wait bound: `None` for one attempt.
pub fn wait_bound(w: &Wait) -> Option<Duration> {
    if w.no_wait {
        None
    } else {
        Some(w.wait.unwrap_or(MAX_WAIT).min(MAX_WAIT))
    }
}

/// Acquires with `attempt(wait)` (`None`: one attempt); without `--wait`, waits again after
/// each longest wait the library takes, so without a bound.
pub fn acquire<T>(
    w: &Wait,
    mut attempt: impl FnMut(Option<Duration>) -> Result<T, Error>,
) -> Result<T, Error> {
    loop {
        match attempt(wait_bound(w)) {
            Err(e) if e.is_wait_timeout() && w.wait.is_none() && !w.no_wait => continue,
            other => return other,
        }
    }
}

/// The kind of lock `run` (or `elect`) was asked for, as its flags say.
fn kind_of(a: &RunArgs) -> &'static Descriptor {
    let k = &a.kind;
    if a.identity.is_some() {
        Leader::DESCRIPTOR
    } else if k.permits.is_some() {
        Semaphore::DESCRIPTOR
    } else if k.redisson {
        Redisson::DESCRIPTOR
    } else if k.read {
        Read::DESCRIPTOR
    } else if k.write {
        Write::DESCRIPTOR
    } else {
        Exclusive::DESCRIPTOR
    }
}

/// Whether the options given apply to `kind`, as its descriptor says.
fn check_options(kind: &Descriptor, a: &RunArgs) -> Result<(), Failure> {
    let flag = kind.cli_flag.unwrap_or("--id");
    if (a.at_least.is_some() || a.at_most.is_some()) && !kind.bounds {
        let without: Vec<&str> = redislock::kind::ALL
            .iter()
            .filter(|d| !d.bounds)
            .filter_map(|d| d.cli_flag)
            .collect();
        let (last, others) = without.split_last().expect("a kind without bounds");
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "--at-least and --at-most apply to exclusive locks only (not with {} or {last})",
                others.join(", ")
            ),
        ));
    }
    if a.fencing && !kind.fencing_option() {
        return Err(Failure::new(
            exit::USAGE,
            format!(
                "--fencing does not apply to {flag}: {} have no fencing tokens",
                kind.plural
            ),
        ));
    }
    Ok(())
}

fn take(client: &Client, a: &RunArgs, cancel: &Cancel) -> Result<AnyLock, Failure> {
    let name = a.name.as_str();
    let kind = kind_of(a);
    check_options(kind, a)?;
    let held: Result<AnyLock, Error> = match kind.label {
        KindLabel::Leader => {
            let id = a.identity.as_deref().unwrap_or_default();
            let leader = client.leader(name).identity(id).cancel_on(cancel);
            acquire(&a.wait, |w| match w {
                Some(w) => leader.campaign(w),
                None => leader.try_campaign(),
            })
            .map(AnyLock::from)
        }
        KindLabel::Semaphore => {
            let (take, total) = a.kind.permits.unwrap_or_default();
            let sem = client.semaphore(name, total).cancel_on(cancel);
            acquire(&a.wait, |w| match w {
                Some(w) => sem.acquire(take, w),
                None => sem.try_acquire(take),
            })
            .map(AnyLock::from)
        }
        KindLabel::Redisson => {
            let lock = client.redisson_lock(name).cancel_on(cancel);
            acquire(&a.wait, |w| match w {
                Some(w) => lock.acquire(w),
                None => lock.try_acquire(),
            })
            .map(AnyLock::from)
        }
        KindLabel::Read | KindLabel::Write => {
            let rw = client.rw_lock(name).fencing(a.fencing).cancel_on(cancel);
            let write = kind.label == KindLabel::Write;
            acquire(&a.wait, |w| match (write, w) {
                (false, Some(w)) => rw.read(w).map(AnyLock::from),
                (false, None) => rw.try_read().map(AnyLock::from),
                (true, Some(w)) => rw.write(w).map(AnyLock::from),
                (true, None) => rw.try_write().map(AnyLock::from),
            })
        }
        KindLabel::Exclusive => {
            let mut lock = client.lock(name).fencing(a.fencing).cancel_on(cancel);
            if let Some(d) = a.at_least {
                lock = lock.at_least(d);
            }
            if let Some(d) = a.at_most {
                lock = lock.at_most(d);
            }
            acquire(&a.wait, |w| match w {
                Some(w) => lock.acquire(w),
                None => lock.try_acquire(),
            })
            .map(AnyLock::from)
        }
        // A kind whose flag `kind_of` picks must have its own arm above: no kind quietly
        // takes another kind's lock.
        _ => {
            return Err(Failure::new(
                exit::SOFTWARE,
                format!("redislock run cannot take {}", kind.what),
            ));
        }
    };
    Ok(held?)
}

/// How long after a signal the acquire may take to return, cancelled, before redislock exits
/// without it (with the same status): the cancel ends a wait at once, not a connect or a call
/// to Redis in flight, which only their timeouts end.
const CANCEL_GRACE: Duration = Duration::from_millis(300);

/// While the lock is waited for (connecting included): a thread that takes SIGINT, SIGTERM and
/// SIGHUP, records the first and cancels the wait; if the acquire has not returned
/// [`CANCEL_GRACE`] later, it exits the process with 128 + the signal's number.
struct WaitWatch {
    done: Arc<AtomicBool>,
    got: Arc<AtomicI32>,
    thread: thread::JoinHandle<()>,
}

impl WaitWatch {
    fn start(cancel: Arc<Cancel>) -> io::Result<WaitWatch> {
        let (done, got) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicI32::new(0)),
        );
        let (d, g) = (done.clone(), got.clone());
        let thread = thread::Builder::new()
            .name("redislock-signals".into())
            .spawn(move || {
                let mut give_up = None::<Instant>;
                while !d.load(Ordering::Acquire) {
                    let wait = match give_up {
                        None => Duration::from_secs(1),
                        Some(at) => match at.checked_duration_since(Instant::now()) {
                            Some(left) if !left.is_zero() => left,
                            // Still in a call the cancel does not reach (a connect, a call on
                            // its read timeout): nothing can be held yet but what a lease ends.
                            _ => std::process::exit(128 + g.load(Ordering::Acquire)),
                        },
                    };
                    if let Some(t) = signals::take(wait)
                        && FORWARDED.contains(&t.signo)
                    {
                        let _ = g.compare_exchange(0, t.signo, Ordering::AcqRel, Ordering::Acquire);
                        cancel.cancel();
                        give_up.get_or_insert(Instant::now() + CANCEL_GRACE);
                    }
                }
            })?;
        Ok(WaitWatch { done, got, thread })
    }

    /// Ends the thread (woken at once by a SIGCHLD of its own); the signal that came, if any.
    fn stop(self) -> Option<libc::c_int> {
        use std::os::unix::thread::JoinHandleExt;
        self.done.store(true, Ordering::Release);
        // SAFETY: the thread is alive until joined below; the signal is one it takes.
        unsafe {
            libc::pthread_kill(self.thread.as_pthread_t(), libc::SIGCHLD);
        }
        let _ = self.thread.join();
        match self.got.load(Ordering::Acquire) {
            0 => None,
            s => Some(s),
        }
    }
}

/// `redislock run`: returns the status to exit with.
pub fn run(conn: &Connection, a: RunArgs) -> Result<u8, Failure> {
    signals::block().map_err(|e| Failure::new(exit::SOFTWARE, format!("signal mask: {e}")))?;
    let client = connect::client(conn, a.lease, true)?;
    let cancel = Arc::new(Cancel::new());
    let watch = WaitWatch::start(cancel.clone())
        .map_err(|e| Failure::new(exit::SOFTWARE, format!("cannot start a thread: {e}")))?;
    let held = take(&client, &a, &cancel);
    let signalled = watch.stop();
    let held = match (held, signalled) {
        (Ok(held), None) => held,
        (Ok(held), Some(s)) => {
            let _ = held.release();
            return Ok(128 + s as u8);
        }
        (Err(_), Some(s)) => return Ok(128 + s as u8),
        (Err(e), None) => return Err(e),
    };
    let why = Arc::new(std::sync::Mutex::new(String::new()));
    {
        let why = why.clone();
        held.on_lost(move |e| {
            if let Ok(mut w) = why.lock() {
                *w = e.to_string();
            }
            signals::report_lost();
        });
    }

    let group = !in_terminal_foreground();
    let mut child = match spawn(&a, held.fencing_token().ok().flatten(), group) {
        Ok(child) => child,
        Err(e) => {
            let _ = held.release();
            let program = a.command[0].to_string_lossy();
            let status = if e.kind() == io::ErrorKind::NotFound {
                exit::NOT_FOUND
            } else {
                exit::CANNOT_RUN
            };
            return Err(Failure::new(status, format!("cannot run {program}: {e}")));
        }
    };
    let (status, lost) = supervise(&mut child, &held, &a, group);
    let status = status_code(status);
    let what = if a.identity.is_some() {
        "the leadership of election"
    } else {
        "lock"
    };
    match held.release() {
        _ if lost => {}
        Ok(()) => return Ok(status),
        Err(e) if e.is_not_held() => {}
        Err(e) => {
            eprintln!(
                "redislock: warning: {} (no answer within --release-timeout: the lock ends \
                 with its lease)",
                exit::one_line(&e.to_string())
            );
            return Ok(status);
        }
    }
    let at_most = why.lock().is_ok_and(|w| w.contains("at_most"));
    Err(Failure::new(
        exit::LOST,
        if at_most {
            format!(
                "lock {:?} was held for --at-most while the command ran: the command was \
                 stopped, and its work may overlap the next holder's",
                a.name
            )
        } else {
            format!(
                "{what} {:?} was lost while the command ran (expired, deleted or taken over); \
                 the command's work may overlap another holder's",
                a.name
            )
        },
    ))
}

/// The command, started with the lock's variables, the signal mask cleared and the
/// parent-death signal set.
fn spawn(a: &RunArgs, fence: Option<u64>, group: bool) -> io::Result<Child> {
    let mut cmd = std::process::Command::new(&a.command[0]);
    cmd.args(&a.command[1..]).env("REDISLOCK_NAME", &a.name);
    // A leader's fencing token is its epoch.
    let (var, other) = match a.identity {
        Some(_) => ("REDISLOCK_EPOCH", "REDISLOCK_FENCING_TOKEN"),
        None => ("REDISLOCK_FENCING_TOKEN", "REDISLOCK_EPOCH"),
    };
    cmd.env_remove(other);
    match fence {
        Some(f) => cmd.env(var, f.to_string()),
        None => cmd.env_remove(var),
    };
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the closure runs in the child between fork and exec and calls only
    // async-signal-safe functions (sigemptyset, sigprocmask, setpgid, prctl, getppid).
    unsafe {
        cmd.pre_exec(move || {
            if group && libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // redislock may have died before the signal was set: then nothing would come.
            if libc::getppid() != parent {
                return Err(io::Error::other(
                    "redislock exited before the command started",
                ));
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// Waits for the command, forwarding signals and acting on a lost lock. Returns its exit status
/// and whether the lock was lost.
fn supervise(child: &mut Child, held: &AnyLock, a: &RunArgs, group: bool) -> (ExitStatus, bool) {
    let pid = child.id() as libc::pid_t;
    // The whole process group, or the command's process.
    let pid = if group { -pid } else { pid };
    let (mut kill_at, mut killed, mut lost) = (None::<Instant>, false, false);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (status, lost),
            Ok(None) => {}
            Err(_) => match child.wait() {
                Ok(status) => return (status, lost),
                // A wait status whose exit code is EX_SOFTWARE.
                Err(_) => return (ExitStatus::from_raw((exit::SOFTWARE as i32) << 8), lost),
            },
        }
        let now = Instant::now();
        let timeout = kill_at.filter(|_| !killed).map_or(LOOK_EVERY, |t| {
            t.saturating_duration_since(now).min(LOOK_EVERY)
        });
        let taken = signals::take(timeout);
        if let Some(t) = taken
            && FORWARDED.contains(&t.signo)
        {
            // A terminal's signal reached the command already (same process group).
            if group || !t.from_terminal {
                signals::send(pid, t.signo);
            }
            kill_at.get_or_insert(Instant::now() + a.supervise.kill_after);
        }
        if !lost && (held.is_lost() || taken.is_some_and(|t| t.signo == signals::LOST)) {
            lost = true;
            let what = match a.supervise.on_lost {
                OnLost::Term => "sending the command SIGTERM",
                OnLost::Kill => "sending the command SIGKILL",
                OnLost::Ignore => "leaving the command running (--on-lost ignore)",
            };
            let lock = if a.identity.is_some() {
                "the leadership of election"
            } else {
                "lock"
            };
            eprintln!("redislock: {lock} {:?} was lost; {what}", a.name);
            match a.supervise.on_lost {
                OnLost::Term => {
                    signals::send(pid, libc::SIGTERM);
                    kill_at.get_or_insert(Instant::now() + a.supervise.kill_after);
                }
                OnLost::Kill => signals::send(pid, libc::SIGKILL),
                OnLost::Ignore => {}
            }
        }
        if !killed && kill_at.is_some_and(|t| Instant::now() >= t) {
            eprintln!(
                "redislock: the command still runs {} ms after the signal; sending SIGKILL",
                a.supervise.kill_after.as_millis()
            );
            signals::send(pid, libc::SIGKILL);
            killed = true;
        }
    }
}

/// Whether standard input is a terminal whose foreground process group is redislock's.
fn in_terminal_foreground() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp have no memory effects.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// The status to exit with for the command's: its code, or 128+N when killed by signal N.
fn status_code(s: ExitStatus) -> u8 {
    match (s.code(), s.signal()) {
        (Some(code), _) => code as u8,
        (None, Some(sig)) => 128u8.wrapping_add(sig as u8),
        _ => exit::SOFTWARE,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Cli, Command};

    fn checked(args: &[&str]) -> Result<&'static str, String> {
        let mut argv = vec!["redislock", "run"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["name", "--", "true"]);
        let Command::Run(a) = Cli::try_parse_from(argv).unwrap().command else {
            unreachable!()
        };
        let kind = kind_of(&a);
        check_options(kind, &a)
            .map(|()| kind.name())
            .map_err(|f| f.message)
    }

    /// The flags pick the kind, and the options are checked against its descriptor, with the
    /// messages the tool always gave.
    #[test]
    fn flags_pick_the_kind_and_options_are_checked_against_it() {
        assert_eq!(checked(&[]), Ok("exclusive"));
        assert_eq!(checked(&["--read", "--fencing"]), Ok("read"));
        assert_eq!(checked(&["--write"]), Ok("write"));
        assert_eq!(checked(&["--permits", "1/3"]), Ok("semaphore"));
        assert_eq!(checked(&["--redisson"]), Ok("redisson"));
        assert_eq!(
            checked(&["--fencing", "--at-least", "1s", "--at-most", "1m"]),
            Ok("exclusive")
        );
        assert_eq!(
            checked(&["--permits", "1/3", "--fencing"]),
            Err("--fencing does not apply to --permits: semaphores have no fencing tokens".into())
        );
        assert_eq!(
            checked(&["--redisson", "--fencing"]),
            Err(
                "--fencing does not apply to --redisson: Redisson's locks have no fencing tokens"
                    .into()
            )
        );
        for flag in ["--read", "--write", "--redisson"] {
            assert_eq!(
                checked(&[flag, "--at-most", "1m"]),
                Err(
                    "--at-least and --at-most apply to exclusive locks only (not with --read, \
                     --write, --permits or --redisson)"
                        .into()
                )
            );
        }
    }
}
