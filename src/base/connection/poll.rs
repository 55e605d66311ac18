//! The wait on many connections' sockets at once (`poll(2)`), for Redlock's rounds to read the
//! masters' replies in the order they arrive.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Waits until one of `fds` can be read (or has failed or hung up), at most `timeout`: its index,
/// or `None` when the time passed. A signal does not end the wait.
#[allow(unsafe_code)] // poll(2): the one system call std does not wrap
pub(crate) fn first_readable(fds: &[RawFd], timeout: Duration) -> io::Result<Option<usize>> {
    let mut polled: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        // Rounded up: a wait of 0.3 ms is 1 ms, not a busy loop.
        let ms = left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: `polled` is a live, exclusively borrowed array of `polled.len()` pollfds.
        let n = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, ms) };
        if n > 0 {
            return Ok(polled.iter().position(|p| p.revents != 0));
        }
        if n == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
