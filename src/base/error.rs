//! The one error type of the library.
//!
//! Every failure has an [`ErrorKind`], so a caller can always tell apart "held by someone else",
//! "wait timed out", "not held any more", bad input, an unreachable server, an error reply from
//! Redis, a handle used after `fork()`, a configured limit, and an internal bug. Messages name the
//! lock and the server (password masked), never the lock token.

use std::fmt;

/// Defines [`ErrorKind`] and the list of its variants from one declaration, so that the list
/// ([`ErrorKind::ALL`], from which the C boundary's tables are derived and checked) can never
/// miss a kind.
macro_rules! error_kinds {
    ($( $(#[$doc:meta])* $kind:ident => $summary:literal, )*) => {
        /// What kind of failure an [`Error`] is. The C boundary maps each kind to one result code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $( $(#[$doc])* $kind, )*
        }

        impl ErrorKind {
            /// Every kind, in declaration order.
            pub(crate) const ALL: &'static [ErrorKind] = &[$(ErrorKind::$kind),*];

            /// A static one-line description of the kind, without the detail of a particular
            /// failure (the C boundary's `redislock_result_message` text).
            pub(crate) fn summary(self) -> &'static str {
                match self {
                    $( ErrorKind::$kind => $summary, )*
                }
            }
        }
    };
}

error_kinds! {
    /// A single acquire attempt found the lock held by another owner.
    Held => "the lock is held by another owner",
    /// An acquire with a wait bound was not granted before the bound ran out.
    WaitTimeout => "the lock was not granted within the wait bound",
    /// Release or extend found the lock no longer ours: it was released already, its lease ran
    /// out, it was found lost by renewal, or another owner took it over.
    NotHeld => "the lock is not held any more (released, expired, lost or taken over)",
    /// Bad input: empty or oversized name, zero or absurd lease, invalid URL or configuration.
    InvalidArgument => "invalid argument or configuration",
    /// Redis could not be reached, did not answer within the configured timeouts, or the server
    /// at the address does not speak the Redis protocol.
    Connection => "Redis is unreachable, did not answer in time, or is not a Redis server",
    /// Redis answered with an error reply (`NOPERM`, `READONLY`, `WRONGTYPE`, ...).
    Redis => "Redis replied with an error",
    /// A lock handle was used in a child process after `fork()`; the lock belongs to the parent.
    Forked => "the lock handle was used in a forked child process; the lock is the parent's",
    /// A configured bound was reached (auto-renewed locks per client).
    LimitReached => "a configured limit was reached (max_renewed_locks)",
    /// A bug in this library or an impossible reply; please report it.
    Internal => "internal error in redislock (please report it)",
    /// A waiting acquire was cancelled through its [`Cancel`](crate::Cancel) handle.
    Cancelled => "the acquire was cancelled",
}

/// An error from any operation of this library: a kind and a message for humans.
///
/// ```
/// use redislock::{Error, ErrorKind};
/// let e = Error::invalid_argument("lock name is empty");
/// assert_eq!(e.kind(), ErrorKind::InvalidArgument);
/// assert!(e.is_invalid_argument());
/// assert_eq!(e.to_string(), "invalid argument: lock name is empty");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: Box<str>,
    timeout: bool,
    code: Option<Box<str>>,
    stale: bool,
}

impl Error {
    fn new(kind: ErrorKind, message: String) -> Error {
        Error {
            kind,
            message: message.into_boxed_str(),
            timeout: false,
            code: None,
            stale: false,
        }
    }

    pub(crate) fn held(name: &str) -> Error {
        Error::new(
            ErrorKind::Held,
            format!("lock {name} is held by another owner"),
        )
    }

    pub(crate) fn wait_timeout(name: &str, waited: std::time::Duration) -> Error {
        Error::new(
            ErrorKind::WaitTimeout,
            format!(
                "lock {name} was not granted within {} ms",
                waited.as_millis()
            ),
        )
    }

    /// A wait that saw nothing it waited for, in the waiter's own words (an observer's wait
    /// for a change, say).
    pub(crate) fn nothing_within(what: String) -> Error {
        Error::new(ErrorKind::WaitTimeout, what)
    }

    /// The same error (kind, timeout, code) with its message's `from` prefix put as `to`: a
    /// kind's own words for a refusal ("lock \"x\"" → "election \"x\""). Unchanged when the
    /// message does not start so.
    pub(crate) fn reworded(mut self, from: &str, to: &str) -> Error {
        if let Some(rest) = self.message.strip_prefix(from) {
            self.message = format!("{to}{rest}").into();
        }
        self
    }

    /// The same error with `note` added to its message (after a colon).
    pub(crate) fn with_note(mut self, note: &str) -> Error {
        self.message = format!("{}: {note}", self.message).into();
        self
    }

    pub(crate) fn not_held(name: &str, why: &str) -> Error {
        Error::new(
            ErrorKind::NotHeld,
            format!("lock {name} is not held any more: {why}"),
        )
    }

    /// An invalid-argument error with the given explanation.
    pub fn invalid_argument(what: impl fmt::Display) -> Error {
        Error::new(
            ErrorKind::InvalidArgument,
            format!("invalid argument: {what}"),
        )
    }

    /// A fenced write refused: the writer's fence is older than the resource's (a later holder
    /// of the lock wrote since). Of kind [`ErrorKind::NotHeld`], told apart by
    /// [`is_stale`](Error::is_stale).
    pub(crate) fn stale(resource: &str, token: u64, stored: &str) -> Error {
        let mut e = Error::new(
            ErrorKind::NotHeld,
            format!(
                "stale write to {resource} refused: fencing token {token} is older than the \
                 resource's fence {stored} (a later holder wrote); nothing was written"
            ),
        );
        e.stale = true;
        e
    }

    pub(crate) fn connection(server: &str, what: impl fmt::Display, timeout: bool) -> Error {
        let mut e = Error::new(ErrorKind::Connection, format!("Redis at {server}: {what}"));
        e.timeout = timeout;
        e
    }

    /// A Redlock failure, of the kind a single server's would have, with a message that says what
    /// each master answered (`stores/redlock/`). `code`: for [`ErrorKind::Redis`], the reply's code.
    pub(crate) fn quorum(
        kind: ErrorKind,
        message: String,
        timeout: bool,
        code: Option<&str>,
    ) -> Error {
        let mut e = Error::new(kind, message);
        e.timeout = timeout;
        e.code = code.map(Into::into);
        e
    }

    pub(crate) fn forked(name: &str) -> Error {
        Error::new(
            ErrorKind::Forked,
            format!(
                "lock {name} was acquired by the parent process; a forked child neither renews nor \
                 releases it"
            ),
        )
    }

    pub(crate) fn limit(what: impl fmt::Display) -> Error {
        Error::new(ErrorKind::LimitReached, format!("limit reached: {what}"))
    }

    pub(crate) fn cancelled(name: &str) -> Error {
        Error::new(
            ErrorKind::Cancelled,
            format!("acquire of lock {name} was cancelled"),
        )
    }

    pub(crate) fn internal(what: impl fmt::Display) -> Error {
        Error::new(ErrorKind::Internal, format!("internal error: {what}"))
    }

    /// Converts a redis-rs error met while talking to `server`.
    pub(crate) fn from_redis(server: &str, e: &redis::RedisError) -> Error {
        use redis::ErrorKind as K;
        match e.kind() {
            K::Server(_) | K::Extension | K::AuthenticationFailed => {
                let fallback = if e.kind() == K::AuthenticationFailed {
                    "WRONGPASS"
                } else {
                    "ERR"
                };
                let code = e.code().filter(|c| !c.is_empty()).unwrap_or(fallback);
                let detail = e.detail().unwrap_or("");
                // Redis before 7.0 wraps an error raised inside a script as `ERR Error running
                // script …`; the code inside is what the caller needs to see.
                let (code, detail) = match code {
                    "ERR" => script_error_inside(detail).unwrap_or((code, detail)),
                    _ => (code, detail),
                };
                let mut err = Error::new(
                    ErrorKind::Redis,
                    format!("Redis at {server} replied: {code} {detail}"),
                );
                err.code = Some(code.into());
                err
            }
            // The OS's words for a timed-out read (EAGAIN) do not say it was one.
            K::Io if e.is_timeout() && e.to_string().contains("os error") => Error::connection(
                server,
                format!(
                    "no reply in time ({e}): the server does not answer (stopped, overloaded, \
                     or not a Redis server)"
                ),
                true,
            ),
            K::Io => Error::connection(server, e, e.is_timeout()),
            // redis-rs reports both a reply stream it cannot parse and a well-formed reply of
            // an unexpected type as `Parse`; only the parser's errors read "Parse error at".
            // A stream that is not RESP at all means the peer is not a Redis server (an HTTP
            // or SSH server, a TLS port reached with redis://): a problem of the address, not
            // a bug, and the parser's dump of the bytes helps no one.
            K::Parse if e.detail().is_some_and(|d| d.starts_with("Parse error at")) => Error::new(
                ErrorKind::Connection,
                format!(
                    "the server at {server} did not answer in the Redis protocol (is it a \
                         Redis server? a TLS port needs a rediss:// URL)"
                ),
            ),
            K::InvalidClientConfig => match e.detail() {
                Some(detail) if e.to_string().starts_with(crate::base::connection::TOO_OLD) => {
                    Error::invalid_argument(detail)
                }
                _ => Error::invalid_argument(e),
            },
            _ => Error::internal(format!("unexpected reply from Redis at {server}: {e}")),
        }
    }

    /// The kind of failure.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The message without the kind: the same text as `Display`.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// For [`ErrorKind::Redis`]: the error code of the server's reply, such as `NOPERM`.
    pub fn redis_code(&self) -> Option<&str> {
        self.code.as_deref()
    }
    /// The lock is held by another owner (single attempt).
    pub fn is_held(&self) -> bool {
        self.kind == ErrorKind::Held
    }
    /// The wait bound ran out before the lock was granted.
    pub fn is_wait_timeout(&self) -> bool {
        self.kind == ErrorKind::WaitTimeout
    }
    /// The lock is not ours any more (released, expired, lost or taken over).
    pub fn is_not_held(&self) -> bool {
        self.kind == ErrorKind::NotHeld
    }
    /// A fenced write was refused as stale: its fence is older than the one the resource has
    /// seen, so a later holder of the lock wrote since, and nothing was written
    /// ([`FencedResource`](crate::FencedResource)). Its kind is [`ErrorKind::NotHeld`]: the
    /// writer's lock is not its own any more.
    pub fn is_stale(&self) -> bool {
        self.stale
    }
    /// Bad input or configuration.
    pub fn is_invalid_argument(&self) -> bool {
        self.kind == ErrorKind::InvalidArgument
    }
    /// Redis unreachable or not answering in time.
    pub fn is_connection(&self) -> bool {
        self.kind == ErrorKind::Connection
    }
    /// A connect, read, write or pool-checkout timeout (a [`ErrorKind::Connection`] error).
    pub fn is_timeout(&self) -> bool {
        self.timeout
    }
    /// Whether the call may succeed if repeated a little later, on the lock's server as the
    /// deployment names it then: the server could not be reached or did not answer (it may have
    /// died, its replica not promoted yet), or it answered that it cannot serve right now
    /// (`LOADING` after a restart, `MASTERDOWN`, `READONLY` from a demoted master, a Cluster's
    /// `CLUSTERDOWN` or `TRYAGAIN`). What a release, an extend and a queued waiter ride out.
    pub(crate) fn is_transient(&self) -> bool {
        match self.kind {
            ErrorKind::Connection => true,
            ErrorKind::Redis => matches!(
                self.redis_code(),
                Some("LOADING" | "MASTERDOWN" | "READONLY" | "CLUSTERDOWN" | "TRYAGAIN")
            ),
            _ => false,
        }
    }
    /// Redis replied with an error.
    pub fn is_redis_error(&self) -> bool {
        self.kind == ErrorKind::Redis
    }
    /// A handle was used in a forked child.
    pub fn is_forked(&self) -> bool {
        self.kind == ErrorKind::Forked
    }
    /// A waiting acquire was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.kind == ErrorKind::Cancelled
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}: {})", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

/// The code and the rest of an error raised inside a script, from the detail of Redis 6's
/// wrapping `ERR` reply: `Error running script (call to f_…): @user_script:12: WRONGTYPE …`, or
/// `… @user_script:1: @user_script: 1: -READONLY …` for a `redis.call` refused by the server.
/// `None` when the detail is not such a wrapping or the script's error has no code (a Lua error,
/// an unknown command: those stay `ERR`). Redis 7 passes the code through unwrapped.
fn script_error_inside(detail: &str) -> Option<(&str, &str)> {
    let mut rest = detail.strip_prefix("Error running script")?;
    rest = &rest[rest.find("): ")? + 3..];
    // One or two locations, `@user_script:12: ` or `@user_script: 1: `, then an optional `-`.
    while let Some(after) = rest.strip_prefix("@user_script:") {
        let after = after.trim_start_matches(|c: char| c == ' ' || c.is_ascii_digit());
        rest = after.strip_prefix(": ")?;
    }
    let rest = rest.strip_prefix('-').unwrap_or(rest);
    let (code, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    let is_code = code.len() >= 2
        && code.starts_with(|c: char| c.is_ascii_uppercase())
        && code
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    is_code.then_some((code, tail))
}

/// Shows a lock name in messages: quoted, lossy UTF-8, cut to a readable length.
pub(crate) fn show_name(name: &[u8]) -> String {
    const MAX: usize = 64;
    let shown = String::from_utf8_lossy(&name[..name.len().min(MAX)]);
    if name.len() > MAX {
        format!("{shown:?}... ({} bytes)", name.len())
    } else {
        format!("{shown:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_quoted_and_cut() {
        assert_eq!(show_name(b"stock:1"), "\"stock:1\"");
        let long = vec![b'a'; 100];
        assert!(show_name(&long).ends_with("... (100 bytes)"));
        assert_eq!(show_name(&[0xff]), "\"\u{fffd}\"");
    }

    #[test]
    fn a_reply_stream_that_is_not_resp_is_a_connection_error() {
        let e = redis::parse_redis_value(b"HTTP/1.1 400 Bad Request\r\n\r\n").unwrap_err();
        let err = Error::from_redis("127.0.0.1:8080/0", &e);
        assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
        assert!(!err.is_timeout());
        assert_eq!(
            err.to_string(),
            "the server at 127.0.0.1:8080/0 did not answer in the Redis protocol (is it a Redis \
             server? a TLS port needs a rediss:// URL)"
        );
        // redis-rs calls a well-formed reply of an unexpected type a parse error too; from a
        // Redis server that is a bug of ours.
        let e = redis::from_redis_value::<i64>(redis::Value::Nil).unwrap_err();
        let err = Error::from_redis("127.0.0.1:6380/0", &e.into());
        assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
    }

    #[test]
    fn an_error_code_wrapped_by_redis_6_scripts_is_found_inside() {
        let wrapped = |detail: &str| {
            let reply = format!("-ERR {detail}\r\n");
            let v = redis::parse_redis_value(reply.as_bytes()).unwrap();
            Error::from_redis("127.0.0.1:7000/0", &v.extract_error().unwrap_err())
        };
        // The forms Redis 6.2.14 answers: an error reply of the server inside a script, and one
        // a `redis.call` was refused with.
        let e = wrapped(
            "Error running script (call to f_ad66cc4f88e9dd25832b3745b99614303d7ee94f): \
             @user_script:12: WRONGTYPE Operation against a key holding the wrong kind of value",
        );
        assert_eq!(e.redis_code(), Some("WRONGTYPE"), "{e}");
        assert_eq!(
            e.to_string(),
            "Redis at 127.0.0.1:7000/0 replied: WRONGTYPE Operation against a key holding the \
             wrong kind of value"
        );
        let e = wrapped(
            "Error running script (call to f_11e4): @user_script:1: @user_script: 1: -READONLY \
             You can't write against a read only replica.",
        );
        assert_eq!(e.redis_code(), Some("READONLY"), "{e}");
        assert!(e.is_transient());
        // A Lua error or an unknown command has no code: it stays ERR, its text whole.
        for detail in [
            "Error running script (call to f_9851): @user_script:1: user_script:1: x",
            "Error running script (call to f_4f59): @user_script:1: @user_script: 1: Unknown \
             Redis command called from Lua script",
            "wrong number of arguments for 'get' command",
        ] {
            let e = wrapped(detail);
            assert_eq!(e.redis_code(), Some("ERR"), "{e}");
            assert!(e.to_string().ends_with(detail), "{e}");
        }
    }

    #[test]
    fn kinds_have_predicates() {
        assert!(Error::held("\"x\"").is_held());
        assert!(Error::not_held("\"x\"", "expired").is_not_held());
        assert!(Error::connection("s", "down", true).is_timeout());
        assert!(!Error::connection("s", "down", false).is_timeout());
        assert!(Error::forked("\"x\"").is_forked());
        assert_eq!(Error::limit("x").kind(), ErrorKind::LimitReached);
    }
}
