//! Result codes: one enum with explicit numbers that are never reused, the one mapping from
//! [`ErrorKind`], and the static text of each code (an error kind's own summary).
//!
//! Tables of these codes kept elsewhere (the PHP package, the C test harness, the soak workers,
//! the fuzz target) are checked against the generated header by `src/ffi/drift_tests.rs` and
//! `tests/c_abi.rs`.

use std::ffi::c_char;

use super::enums::{ResultCode, redislock_result};
use super::text::write_text;
use crate::ErrorKind;

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

    /// Every code: those of the C boundary's own, which report no error kind (STALE refines
    /// NOT_HELD: a fenced write refused), and each error kind's. The tests check that this is exactly the enum of the generated header.
    pub(crate) fn all() -> impl Iterator<Item = redislock_result> {
        [
            REDISLOCK_OK,
            REDISLOCK_NULL_PARAMETER,
            REDISLOCK_PANIC,
            REDISLOCK_STALE,
        ]
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
            (REDISLOCK_STALE, None) => {
                "a fenced write was refused: its fencing token is older than the resource's fence"
            }
            // A code that is neither of these nor any kind's: the tests check there is none.
            (_, None) => "unknown result code",
        }
    }
}

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
