//! The signals redislock handles: blocked in every thread from the start (threads inherit the
//! mask), and taken one at a time with `sigtimedwait`, so that no handler runs asynchronously.
//! The lost-lock report arrives the same way: the library's callback sends SIGUSR1 to this
//! process.

use std::io;
use std::mem::MaybeUninit;
use std::time::Duration;

/// The signals forwarded to the command (and that cancel a wait).
pub const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];
/// Sent by the lost-lock callback to this process.
pub const LOST: libc::c_int = libc::SIGUSR1;

/// A signal taken from the pending set.
#[derive(Debug, Clone, Copy)]
pub struct Taken {
    pub signo: libc::c_int,
    /// Sent by the kernel for a terminal (Ctrl-C, a hang-up): the terminal's foreground process
    /// group, the command included, got it too.
    pub from_terminal: bool,
}

fn set() -> libc::sigset_t {
    let mut set = MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: sigemptyset initialises the set; sigaddset is given valid signal numbers.
    unsafe {
        libc::sigemptyset(set.as_mut_ptr());
        for s in FORWARDED.iter().chain(&[libc::SIGCHLD, LOST]) {
            libc::sigaddset(set.as_mut_ptr(), *s);
        }
        set.assume_init()
    }
}

/// Blocks the handled signals in this thread, and so in every thread started after it. Call
/// first thing in `main`.
pub fn block() -> io::Result<()> {
    let set = set();
    // SAFETY: a valid set; the old mask is not wanted.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// The next handled signal, waiting at most `timeout`; `None` when none came.
pub fn take(timeout: Duration) -> Option<Taken> {
    let set = set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    // SAFETY: valid set, info and timeout pointers.
    let signo = unsafe { libc::sigtimedwait(&set, info.as_mut_ptr(), &ts) };
    if signo < 0 {
        return None; // EAGAIN (timeout) or EINTR
    }
    // SAFETY: sigtimedwait filled it in.
    let info = unsafe { info.assume_init() };
    Some(Taken {
        signo,
        from_terminal: info.si_code == libc::SI_KERNEL,
    })
}

/// Sends `signo` to `pid`.
pub fn send(pid: libc::pid_t, signo: libc::c_int) {
    // SAFETY: kill has no memory effects; a pid that is gone gives ESRCH, ignored.
    unsafe {
        libc::kill(pid, signo);
    }
}

/// Tells this process's signal loop that the lock was lost (from the library's callback:
/// `kill` is safe on any thread and never blocks).
pub fn report_lost() {
    // SAFETY: as in `send`.
    unsafe {
        libc::kill(libc::getpid(), LOST);
    }
}
