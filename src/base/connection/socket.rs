//! A plain (TCP or Unix-socket) connection: its socket, and the read buffer kept for the
//! connection's life, from which replies are parsed in place.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use redis::{ErrorKind, RedisError, RedisResult, Value};

use super::resp::reply;

/// How large a connection's read buffer starts (it grows for a larger reply).
const BUFFER: usize = 4096;

/// A plain connection: the socket and what has been read from it but not parsed yet
/// (`buf[start..end]`).
pub(super) struct Own {
    pub(super) sock: Sock,
    buf: Vec<u8>,
    pub(super) start: usize,
    pub(super) end: usize,
    /// Replies to skip: a read of theirs timed out (or was interrupted), so they arrive late.
    skip: usize,
    pub(super) open: bool,
    pub(super) db: i64,
    /// Since when the server has not answered the connection's `HELLO` (see
    /// [`Own::set_read_timeout`]), and the read timeout last asked for meanwhile.
    unanswered: Option<(Instant, Option<Duration>)>,
}

impl Own {
    /// A connection on `sock`, its buffer empty, on database `db` (once set up).
    pub(super) fn new(sock: Sock, db: i64) -> Own {
        Own {
            sock,
            buf: vec![0; BUFFER],
            start: 0,
            end: 0,
            skip: 0,
            open: true,
            db,
            unanswered: None,
        }
    }

    #[inline]
    pub(super) fn send(&mut self, bytes: &[u8]) -> RedisResult<()> {
        self.sock.write_all(bytes).map_err(|e| {
            let e = RedisError::from(e);
            if e.is_unrecoverable_error() {
                self.open = false;
            }
            e
        })
    }

    /// The next reply that is not skipped.
    /// Marks the connection's `HELLO`, sent at `since`, as not answered yet.
    pub(super) fn hello_unanswered(&mut self, since: Instant) {
        self.unanswered = Some((since, None));
    }

    /// Sets how long a read waits. Until the server's first reply to a connection whose `HELLO`
    /// went unanswered, the wait counts from the `HELLO`: a server silent since then has had
    /// that long already, so a first call on the connection (and the give-back of an attempt
    /// that timed out) is not held up by the set-up's wait besides its own timeout.
    pub(super) fn set_read_timeout(&mut self, dur: Option<Duration>) -> io::Result<()> {
        match (&mut self.unanswered, dur) {
            (Some((since, asked)), Some(d)) => {
                *asked = Some(d);
                let left = d.saturating_sub(since.elapsed());
                self.sock
                    .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            }
            _ => self.sock.set_read_timeout(dur),
        }
    }

    pub(super) fn recv(&mut self) -> RedisResult<Value> {
        if self.unanswered.is_some() {
            let reply = self.recv_next();
            // The server answered: reads wait as long as asked again.
            if reply.is_ok()
                && let Some((_, asked)) = self.unanswered.take()
                && let Some(d) = asked
            {
                self.sock.set_read_timeout(Some(d))?;
            }
            return reply;
        }
        self.recv_next()
    }

    fn recv_next(&mut self) -> RedisResult<Value> {
        loop {
            match self.read_value() {
                Ok(v) if self.skip > 0 && !matches!(v, Value::Push { .. }) => self.skip -= 1,
                Ok(v) => return Ok(v),
                Err(e) => {
                    if e.kind() == ErrorKind::Io && self.open {
                        // Timed out or interrupted: its reply comes later and is skipped then.
                        self.skip += 1;
                    }
                    return Err(e);
                }
            }
        }
    }

    /// The next reply, reading as much as it takes.
    fn read_value(&mut self) -> RedisResult<Value> {
        loop {
            match reply(&self.buf[self.start..self.end]) {
                Ok(Some((value, used))) => {
                    self.start += used;
                    if self.start == self.end {
                        (self.start, self.end) = (0, 0);
                    }
                    return Ok(value);
                }
                Ok(None) => self.fill()?,
                Err(e) => {
                    self.close();
                    return Err(e);
                }
            }
        }
    }

    /// Reads what the socket has (waiting up to the read timeout), making room first.
    fn fill(&mut self) -> RedisResult<()> {
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        match self.sock.read(&mut self.buf[self.end..]) {
            Ok(0) => {
                self.close();
                Err(io::Error::from(io::ErrorKind::UnexpectedEof).into())
            }
            Ok(n) => {
                self.end += n;
                Ok(())
            }
            Err(e) => {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) {
                    self.close();
                }
                Err(e.into())
            }
        }
    }

    fn close(&mut self) {
        self.open = false;
        let _ = self.sock.shutdown();
    }
}

/// Makes the socket's close send a reset and drop what is unsent or unacknowledged
/// (`SO_LINGER` on, with a zero timeout).
#[allow(unsafe_code)] // setsockopt(2): std's `set_linger` is not stable
pub(super) fn reset_on_close(s: &TcpStream) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is the stream's, open while `s` is borrowed; the option value is a
    // live `linger` of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(super) enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    pub(super) fn set_read_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_read_timeout(dur),
            Sock::Unix(s) => s.set_read_timeout(dur),
        }
    }
    pub(super) fn set_write_timeout(&self, dur: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_write_timeout(dur),
            Sock::Unix(s) => s.set_write_timeout(dur),
        }
    }
    fn shutdown(&self) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.shutdown(Shutdown::Both),
            Sock::Unix(s) => s.shutdown(Shutdown::Both),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.write_all(buf),
            Sock::Unix(s) => s.write_all(buf),
        }
    }
}

impl AsRawFd for Sock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
}
