//! The detail of the last failed call on each thread, like `errno` with a message.
//!
//! A result code says what kind of failure happened; the message says which lock, which server
//! and why, in the words of the Rust [`Error`]. It is kept per thread, so threads sharing a
//! client never see each other's failures, and only a failure replaces it.

use std::cell::RefCell;
use std::ffi::c_char;

use super::enums::redislock_result;
use super::text::write_text;
use crate::Error;

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Replaces this thread's last error message.
pub(crate) fn set(message: impl Into<String>) {
    let message = message.into();
    // `try_with` fails only while the thread is being torn down; there is no one left to tell.
    let _ = LAST_ERROR.try_with(|cell| {
        if let Ok(mut cell) = cell.try_borrow_mut() {
            *cell = message;
        }
    });
}

/// Records `e` as this thread's last error and returns its result code.
pub(crate) fn fail(e: &Error) -> redislock_result {
    set(e.to_string());
    if e.is_stale() {
        return redislock_result::REDISLOCK_STALE;
    }
    redislock_result::from_kind(e.kind())
}

/// Records "`param` is NULL" as this thread's last error.
pub(crate) fn null_parameter(param: &str) {
    set(format!("NULL pointer passed as `{param}`"));
}

/// Writes the detail of this thread's last failed call into `buf`: which lock, which server and
/// why (never a lock token; a password in the URL is masked). Empty when no call on this
/// thread has failed yet. Successful calls do not clear it, so read it right after the failure.
///
/// Buffer convention: at most `buf_len` bytes are written, always NUL-terminated (the text is
/// cut if needed); `buf` may be NULL when `buf_len` is 0, to learn the length. Returns the length
/// of the whole text without the NUL: a value `>= buf_len` means the text was cut.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_last_error_message(buf: *mut c_char, buf_len: usize) -> usize {
    ffi_panic_boundary! {
        LAST_ERROR
            .try_with(|cell| match cell.try_borrow() {
                Ok(text) => write_text(&text, buf, buf_len),
                Err(_) => write_text("", buf, buf_len),
            })
            .unwrap_or_else(|_| write_text("", buf, buf_len))
    }
}
