//! `redislock_cancel`: ends a waiting acquire from another thread.

use super::client::redislock_client;
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use super::lock::{redislock_lock, redislock_lock_options, request};
use super::result::redislock_result::{self, REDISLOCK_OK};
use crate::Cancel;

use std::time::Duration;

/// A cancel handle: `redislock_cancel_cancel` ends every `redislock_lock_acquire_cancellable`
/// given it that is waiting, and fails later ones at once, with REDISLOCK_CANCELLED. Thread-safe:
/// cancel from any thread while others wait with it. Once cancelled it stays cancelled.
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

/// Frees a cancel handle; no acquire may be using it. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_cancel_free(cancel: *mut redislock_cancel) {
    ffi_panic_boundary! {
        // SAFETY: `cancel` is NULL or a live handle that the caller gives up and no acquire
        // uses any more (calling conventions).
        unsafe { free_handle(cancel) }
    }
}

/// `redislock_lock_acquire` that `cancel` can end from another thread: then it fails with
/// REDISLOCK_CANCELLED, leaving no queue entry and no lock behind. `cancel` NULL: the same as
/// `redislock_lock_acquire`. On success `*lock_out` is a new held lock to free with
/// `redislock_lock_free`. Errors: CANCELLED, and those of `redislock_lock_acquire`.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_acquire_cancellable(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    options: *const redislock_lock_options,
    wait_ms: u64,
    cancel: *const redislock_cancel,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(lock_out);
        // SAFETY: `cancel` is NULL or a live cancel handle that no thread frees during the call
        // (calling conventions).
        let cancel = unsafe { super::handle::handle_ref::<redislock_cancel>(cancel) };
        let mut request = request(client, name, options);
        if let Some(cancel) = cancel {
            request = request.cancel_on(cancel);
        }
        let lock = try_rust!(request.acquire(Duration::from_millis(wait_ms)));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}
