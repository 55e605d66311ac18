//! Result codes: one enum with explicit numbers that are never reused, the one mapping from
//! [`ErrorKind`], and the static text of each code (an error kind's own summary).
//!
//! Tables of these codes kept elsewhere (the PHP package, the C test harness, the soak workers,
//! the fuzz target) are checked against the generated header by `src/ffi/drift_tests.rs` and
//! `tests/c_abi.rs`.

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
    /// Redis could not be reached, did not answer within the configured timeouts, or the server
    /// at the address does not speak the Redis protocol.
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

    /// Every code: those of the C boundary's own, which report no error kind, and each error
    /// kind's. The tests check that this is exactly the enum of the generated header.
    pub(crate) fn all() -> impl Iterator<Item = redislock_result> {
        [REDISLOCK_OK, REDISLOCK_NULL_PARAMETER, REDISLOCK_PANIC]
            .into_iter()
            .chain(ErrorKind::ALL.iter().map(|&k| Self::from_kind(k)))
    }

    /// The code with this number, if there is one.
    pub(crate) fn from_u32(n: u32) -> Option<redislock_result> {
        Self::all().find(|&c| c as u32 == n)
    }

    /// The error kind this code reports, if it is one (not OK, NULL_PARAMETER or PANIC):
    /// derived from [`from_kind`](Self::from_kind), the one mapping.
    pub(crate) fn kind(self) -> Option<ErrorKind> {
        ErrorKind::ALL
            .iter()
            .copied()
            .find(|&k| Self::from_kind(k) == self)
    }

    /// The static text of a code: an error kind's summary, or the text of a code of the C
    /// boundary's own.
    pub(crate) fn message(self) -> &'static str {
        match (self, self.kind()) {
            (_, Some(kind)) => kind.summary(),
            (REDISLOCK_OK, None) => "success",
            (REDISLOCK_NULL_PARAMETER, None) => "a required pointer parameter was NULL",
            (REDISLOCK_PANIC, None) => "a panic was caught inside redislock (please report it)",
            // A code that is neither of these nor any kind's: the tests check there is none.
            (_, None) => "unknown result code",
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
