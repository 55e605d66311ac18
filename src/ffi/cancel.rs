//! `redislock_cancel`: ends a waiting acquire from another thread.

use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use crate::Cancel;

/// A cancel handle: `redislock_cancel_cancel` ends every waiting acquire of the requests given
/// it (`redislock_request_set_cancel`), and fails their later ones at once, with
/// REDISLOCK_CANCELLED. Thread-safe: cancel from any thread while others wait with it. Once
/// cancelled it stays cancelled.
pub struct redislock_cancel {
    _private: [u8; 0],
}

impl BoxHandle for redislock_cancel {
    type Inner = Cancel;
}

/// A new cancel handle, not cancelled. On success `*cancel_out` is to be freed with
/// `redislock_cancel_free` once no acquire uses it. Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_cancel_new(cancel_out: *mut *mut redislock_cancel) -> redislock_result {
    ffi_panic_boundary! {
        try_out!(cancel_out);
        // SAFETY: `cancel_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(cancel_out, into_handle::<redislock_cancel>(Cancel::new())) };
        REDISLOCK_OK
    }
}

/// Cancels: every acquire waiting with this handle returns REDISLOCK_CANCELLED within about a
/// round trip, leaving no queue entry and no lock behind (a lock handed to it meanwhile is
/// passed on); later acquires with it fail at once. Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_cancel_cancel(cancel: *const redislock_cancel) -> redislock_result {
    ffi_panic_boundary! {
        try_ref!(cancel).cancel();
        REDISLOCK_OK
    }
}

/// Whether `redislock_cancel_cancel` was called (false for NULL).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_cancel_is_cancelled(cancel: *const redislock_cancel) -> bool {
    ffi_panic_boundary! {
        try_ref!(cancel).is_cancelled()
    }
}

/// Frees a cancel handle. Requests given it keep a reference of their own and go on working,
/// now with nothing left to cancel them. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_cancel_free(cancel: *mut redislock_cancel) {
    ffi_panic_boundary! {
        // SAFETY: `cancel` is NULL or a live handle that the caller gives up and no acquire
        // uses any more (calling conventions).
        unsafe { free_handle(cancel) }
    }
}
