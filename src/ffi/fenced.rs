//! `redislock_fenced`: a resource kept in Redis written only with a fencing token not older than
//! its own (`FencedResource`), and `redislock_lock_fence_epoch`.

use super::client::redislock_client;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use super::last_error;
use super::lock::redislock_lock;
use crate::{Error, Fence, FencedResource};

/// A resource kept in Redis at one key, written only with a fencing token not older than the
/// last one a write to it was applied with (kept in `{key}:fenced`). Open it with
/// `redislock_fenced_open`; free it with `redislock_fenced_free`. Thread-safe.
pub struct redislock_fenced {
    _private: [u8; 0],
}

impl BoxHandle for redislock_fenced {
    type Inner = FencedResource;
}

/// Opens the resource `key` (`key_len` bytes, used as given: no key prefix) on the servers of
/// `client` (one server, a Sentinel group or a Cluster). Touches no network. On success
/// `*fenced_out` is a new handle to free with `redislock_fenced_free`.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (empty or oversized key; a Redlock client).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_open(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    fenced_out: *mut *mut redislock_fenced,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let key = try_bytes!(key, key_len);
        try_out!(fenced_out);
        let res = try_rust!(FencedResource::with_client(client, key));
        // SAFETY: `fenced_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(fenced_out, into_handle::<redislock_fenced>(res)) };
        REDISLOCK_OK
    }
}

/// Sets the resource to `value` (`value_len` bytes) if `token` is not older than the resource's
/// fence, and advances the fence to `token`, in one script. Errors: STALE (a later token wrote:
/// nothing written), NULL_PARAMETER, CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_set(
    fenced: *const redislock_fenced,
    token: u64,
    value: *const u8,
    value_len: usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let res = try_ref!(fenced);
        let value = try_bytes!(value, value_len);
        try_rust!(res.set(&Fence::new(Vec::new(), token, None), value));
        REDISLOCK_OK
    }
}

/// Adds `n` to the resource's integer (0 when it has none) if `token` is not older than the
/// resource's fence, advances the fence to `token`, and writes the new value to `*value_out`.
/// Errors: STALE (nothing written), NULL_PARAMETER, CONNECTION (also when the connection
/// dropped after the write was sent: whether it applied is unknown), REDIS_ERROR (the value is
/// not an integer).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_incr_by(
    fenced: *const redislock_fenced,
    token: u64,
    n: i64,
    value_out: *mut i64,
) -> redislock_result {
    ffi_panic_boundary! {
        let res = try_ref!(fenced);
        try_out!(value_out);
        let value = try_rust!(res.incr_by(&Fence::new(Vec::new(), token, None), n));
        // SAFETY: `value_out` is not NULL (checked above) and points to writable memory for an
        // `int64_t` (calling conventions).
        unsafe { write_out(value_out, value) };
        REDISLOCK_OK
    }
}

/// Frees the handle. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_free(fenced: *mut redislock_fenced) {
    ffi_panic_boundary! {
        // SAFETY: `fenced` is NULL or a live handle that the caller gives up and no other thread
        // uses (calling conventions).
        unsafe { free_handle(fenced) }
    }
}

/// Writes the failover epoch of the master that granted this fenced lock to `*epoch_out` (the
/// fencing token's high bits: token = epoch × 2^48 + counter) on a Sentinel group or a Cluster,
/// 0 on a single server. Errors: INVALID_ARGUMENT (acquired without fencing; a set or
/// permits), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_fence_epoch(
    lock: *const redislock_lock,
    epoch_out: *mut u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_out!(epoch_out);
        let Some(fence) = try_rust!(lock.fence()) else {
            return last_error::fail(&Error::invalid_argument(format!(
                "lock {} was acquired without fencing: it has no fence",
                lock.shown()
            )));
        };
        // SAFETY: `epoch_out` is not NULL (checked above) and points to writable memory for a
        // `uint64_t` (calling conventions).
        unsafe { write_out(epoch_out, fence.epoch().unwrap_or(0)) };
        REDISLOCK_OK
    }
}
