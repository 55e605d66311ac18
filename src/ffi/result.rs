//! Result codes: one enum with explicit numbers that are never reused, the one mapping from
//! [`ErrorKind`], and the static text of each code.

use std::ffi::c_char;

use super::last_error::write_text;
use crate::ErrorKind;

/// The outcome of a call. The numbers are stable: a code is never renumbered or reused.
/// `redislock_result_message` gives a static text per code, and
/// `redislock_last_error_message` the detail of the last failure on the calling thread.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum redislock_result {
    /// Success.
    REDISLOCK_OK = 0,
    /// A single acquire attempt found the lock held by another owner.
    REDISLOCK_HELD = 1,
    /// An acquire with a wait bound was not granted before the bound ran out.
    REDISLOCK_WAIT_TIMEOUT = 2,
    /// Release or extend found the lock no longer ours: released already, lease run out, found
    /// lost by renewal, or taken over by another owner.
    REDISLOCK_NOT_HELD = 3,
    /// Bad input: empty or oversized name, zero or absurd lease or wait, invalid URL or
    /// configuration, a lock without fencing asked for its fencing token.
    REDISLOCK_INVALID_ARGUMENT = 4,
    /// Redis could not be reached, or did not answer within the configured timeouts.
    REDISLOCK_CONNECTION = 5,
    /// Redis answered with an error reply (NOPERM, READONLY, WRONGTYPE, ...).
    REDISLOCK_REDIS_ERROR = 6,
    /// A lock handle was used in a child process after fork(); the lock is the parent's.
    REDISLOCK_FORKED = 7,
    /// A configured bound was reached (max_renewed_locks).
    REDISLOCK_LIMIT_REACHED = 8,
    /// A bug in redislock or an impossible reply from Redis; please report it.
    REDISLOCK_INTERNAL = 9,
    /// A required pointer parameter was NULL.
    REDISLOCK_NULL_PARAMETER = 10,
    /// A panic inside redislock was caught at the C boundary (a bug; please report it).
    REDISLOCK_PANIC = 11,
    /// A waiting acquire was cancelled through its `redislock_cancel`.
    REDISLOCK_CANCELLED = 12,
}

use redislock_result::*;

impl redislock_result {
    /// The one mapping from Rust error kinds to C result codes. Inside the crate the match is
    /// exhaustive despite `#[non_exhaustive]`, so a new kind cannot be forgotten here.
    pub(crate) fn from_kind(kind: ErrorKind) -> redislock_result {
        match kind {
            ErrorKind::Held => REDISLOCK_HELD,
            ErrorKind::WaitTimeout => REDISLOCK_WAIT_TIMEOUT,
            ErrorKind::NotHeld => REDISLOCK_NOT_HELD,
            ErrorKind::InvalidArgument => REDISLOCK_INVALID_ARGUMENT,
            ErrorKind::Connection => REDISLOCK_CONNECTION,
            ErrorKind::Redis => REDISLOCK_REDIS_ERROR,
            ErrorKind::Forked => REDISLOCK_FORKED,
            ErrorKind::LimitReached => REDISLOCK_LIMIT_REACHED,
            ErrorKind::Internal => REDISLOCK_INTERNAL,
            ErrorKind::Cancelled => REDISLOCK_CANCELLED,
        }
    }

    /// Every code, in numeric order.
    pub(crate) fn all() -> [redislock_result; 13] {
        [
            REDISLOCK_OK,
            REDISLOCK_HELD,
            REDISLOCK_WAIT_TIMEOUT,
            REDISLOCK_NOT_HELD,
            REDISLOCK_INVALID_ARGUMENT,
            REDISLOCK_CONNECTION,
            REDISLOCK_REDIS_ERROR,
            REDISLOCK_FORKED,
            REDISLOCK_LIMIT_REACHED,
            REDISLOCK_INTERNAL,
            REDISLOCK_NULL_PARAMETER,
            REDISLOCK_PANIC,
            REDISLOCK_CANCELLED,
        ]
    }

    /// The code with this number, if there is one.
    pub(crate) fn from_u32(n: u32) -> Option<redislock_result> {
        Self::all().into_iter().find(|&c| c as u32 == n)
    }

    /// The static text of a code.
    pub(crate) fn message(self) -> &'static str {
        match self {
            REDISLOCK_OK => "success",
            REDISLOCK_HELD => "the lock is held by another owner",
            REDISLOCK_WAIT_TIMEOUT => "the lock was not granted within the wait bound",
            REDISLOCK_NOT_HELD => {
                "the lock is not held any more (released, expired, lost or taken over)"
            }
            REDISLOCK_INVALID_ARGUMENT => "invalid argument or configuration",
            REDISLOCK_CONNECTION => "Redis is unreachable or did not answer in time",
            REDISLOCK_REDIS_ERROR => "Redis replied with an error",
            REDISLOCK_FORKED => {
                "the lock handle was used in a forked child process; the lock is the parent's"
            }
            REDISLOCK_LIMIT_REACHED => "a configured limit was reached (max_renewed_locks)",
            REDISLOCK_INTERNAL => "internal error in redislock (please report it)",
            REDISLOCK_NULL_PARAMETER => "a required pointer parameter was NULL",
            REDISLOCK_PANIC => "a panic was caught inside redislock (please report it)",
            REDISLOCK_CANCELLED => "the acquire was cancelled",
        }
    }
}

/// A result code as received from C. A C caller can pass any number where a `redislock_result`
/// is expected, and an out-of-range value in a Rust enum would be undefined behaviour, so
/// parameters take the raw number. cbindgen shows it as `redislock_result` (see the
/// `[export.rename]` entry in cbindgen.toml), which in C is a `uint32_t` typedef: same ABI.
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct ResultCode(pub u32);

/// Writes the static text of `code` into `buf` ("unknown result code" for a number that is no
/// code). Buffer convention: at most `buf_len` bytes are written, always NUL-terminated (the
/// text is cut if needed); `buf` may be NULL when `buf_len` is 0, to learn the length. Returns
/// the length of the whole text without the NUL: a value `>= buf_len` means the text was cut.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_result_message(
    code: ResultCode,
    buf: *mut c_char,
    buf_len: usize,
) -> usize {
    ffi_panic_boundary! {
        let text = redislock_result::from_u32(code.0).map_or("unknown result code", |c| c.message());
        write_text(text, buf, buf_len)
    }
}
