//! Exit statuses (sysexits.h where one fits) and the one-line errors that go with them.

use std::fmt;

use redislock::{Error, ErrorKind};

/// Bad usage (EX_USAGE).
pub const USAGE: u8 = 64;
/// Redis unreachable, not Redis, or failing (EX_UNAVAILABLE).
pub const UNAVAILABLE: u8 = 69;
/// An internal error (EX_SOFTWARE).
pub const SOFTWARE: u8 = 70;
/// Not acquired within the wait, or held with `--no-wait` (EX_TEMPFAIL).
pub const TEMPFAIL: u8 = 75;
/// The lock was lost while the command ran, or is not held with the given token.
pub const LOST: u8 = 76;
/// `fenced`: the write was refused as stale, a later fencing token wrote since (EX_NOPERM).
pub const STALE: u8 = 77;
/// Bad URL, option or password (EX_CONFIG).
pub const CONFIG: u8 = 78;
/// The command cannot be run.
pub const CANNOT_RUN: u8 = 126;
/// The command is not found.
pub const NOT_FOUND: u8 = 127;

/// A failure of redislock itself: a one-line message and the status to exit with.
#[derive(Debug)]
pub struct Failure {
    pub status: u8,
    pub message: String,
}

impl Failure {
    pub fn new(status: u8, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<Error> for Failure {
    /// The library's error, with what to do about it.
    fn from(e: Error) -> Failure {
        let refused_auth = matches!(e.redis_code(), Some("WRONGPASS" | "NOAUTH"));
        let (status, hint) = match e.kind() {
            _ if refused_auth => (
                CONFIG,
                "check the user and password (REDISLOCK_PASSWORD overrides the URL's)",
            ),
            _ if e.redis_code() == Some("NOPERM") => (
                CONFIG,
                "the Redis user lacks a command, key or channel redislock needs (its ACL rules: \
                 docs/operations.md)",
            ),
            ErrorKind::InvalidArgument => (CONFIG, "check the URL and options (redislock --help)"),
            ErrorKind::Connection => (
                UNAVAILABLE,
                "check that Redis runs at the URL's address and answers (--timeout)",
            ),
            ErrorKind::Redis | ErrorKind::LimitReached => (UNAVAILABLE, "check the Redis server"),
            ErrorKind::Held | ErrorKind::WaitTimeout => (TEMPFAIL, "try again later"),
            ErrorKind::NotHeld => (LOST, "the lock is not held with this owner token"),
            _ => (SOFTWARE, "please report this"),
        };
        let text = one_line(&e.to_string());
        // The server's words may end a sentence ("... or user is disabled.").
        Failure::new(status, format!("{}: {hint}", text.trim_end_matches('.')))
    }
}

/// `s` on one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}
