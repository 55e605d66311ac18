//! Leader election from C (docs/leaders.md): a campaign is a request
//! (`redislock_request_new_leader`) acquired as any other, its leadership a `redislock_lock`
//! (`redislock_lock_is_held`: still the leader; `redislock_lock_release`: resign;
//! `redislock_lock_epoch`); observers read `redislock_leader_info` handles.

use std::ffi::c_char;
use std::time::Duration;

use super::client::redislock_client;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use super::lock::redislock_lock;
use super::request::{CRequest, redislock_request};
use super::text::write_text;
use crate::LeaderInfo;
use crate::kind::{Kind, Leader};

/// Who led an election at one moment (`redislock_client_leader`,
/// `redislock_client_wait_leader_change`): its identity, epoch and remaining lease; never its
/// token. Read it with the `redislock_leader_info_*` getters; free it with
/// `redislock_leader_info_free`.
pub struct redislock_leader_info {
    _private: [u8; 0],
}

impl BoxHandle for redislock_leader_info {
    type Inner = LeaderInfo;
}

/// A campaign for the leadership of the election `name` (`name_len` bytes, as for
/// `redislock_request_new`) under the identity `identity` (`identity_len` bytes, copied: UTF-8,
/// 1 to 256 bytes, no control characters, checked when it campaigns), which observers see; the
/// leader's token is never shown. Campaign with `redislock_request_try_acquire` (one attempt:
/// HELD when another leads) or `redislock_request_acquire` (waits up to its bound, woken by a
/// resign on the election's channel, or when the leader's lease runs out). The leadership is a
/// `redislock_lock`: `redislock_lock_is_held` says whether this process still leads (false once
/// its lease may have run out), `redislock_lock_epoch` gives its epoch, `redislock_lock_release`
/// resigns, `redislock_lock_on_lost` reports a loss. Lease, auto-renewal and cancel apply as to
/// a lock; the epoch is always fenced (`redislock_request_set_fencing` does not apply), and
/// Redlock URLs refuse elections. On success `*request_out` is a new request to free with
/// `redislock_request_free`. Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_new_leader(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    identity: *const u8,
    identity_len: usize,
    request_out: *mut *mut redislock_request,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        let identity = try_bytes!(identity, identity_len);
        try_out!(request_out);
        let mut request = CRequest::new(client, Leader::DESCRIPTOR, vec![name.to_vec()], 0);
        request.identity = identity.to_vec();
        // SAFETY: `request_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(request_out, into_handle::<redislock_request>(request)) };
        REDISLOCK_OK
    }
}

/// Writes the epoch of a leadership to `*epoch_out`: its fencing token, strictly larger than
/// every earlier leader's of the election (see `redislock_lock_fencing_token`). Pass it to the
/// resources the leader writes, which refuse an epoch smaller than one they saw.
/// Errors: INVALID_ARGUMENT (not a leadership), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_epoch(
    lock: *const redislock_lock,
    epoch_out: *mut u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_out!(epoch_out);
        let epoch = try_rust!(lock.epoch());
        // SAFETY: `epoch_out` is not NULL (checked above) and points to writable memory for a
        // `uint64_t` (calling conventions).
        unsafe { write_out(epoch_out, epoch) };
        REDISLOCK_OK
    }
}

/// Writes `info` (a new handle), or NULL for nobody, to `*info_out`.
fn write_info(
    info: Option<LeaderInfo>,
    info_out: *mut *mut redislock_leader_info,
) -> redislock_result {
    let handle = info.map_or(std::ptr::null_mut(), into_handle::<redislock_leader_info>);
    // SAFETY: `info_out` is not NULL (checked by the caller) and points to writable memory for
    // a pointer (calling conventions).
    unsafe { write_out(info_out, handle) };
    REDISLOCK_OK
}

/// Who leads the election `name` (`name_len` bytes) now, without campaigning: one round trip.
/// On success `*info_out` is a new handle to free with `redislock_leader_info_free`, or NULL
/// when nobody leads. Errors: NULL_PARAMETER, INVALID_ARGUMENT (name; the name held as a plain
/// lock; a Redlock URL), CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_leader(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    info_out: *mut *mut redislock_leader_info,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(info_out);
        let info = try_rust!(client.leader_info(name));
        write_info(info, info_out)
    }
}

/// Waits up to `timeout_ms` milliseconds (at most 30 days) until the election `name` is led by
/// another epoch than `since_epoch` (0: nobody led; else the epoch of the last
/// `redislock_leader_info`), woken by the change published on the election's channel, or when
/// the leader's lease runs out (a killed leader publishes nothing): no polling. On success
/// `*info_out` is who leads then (a new handle to free with `redislock_leader_info_free`), or
/// NULL when nobody does. Errors: WAIT_TIMEOUT (nothing changed in time), and those of
/// `redislock_client_leader`.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_wait_leader_change(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    since_epoch: u64,
    timeout_ms: u64,
    info_out: *mut *mut redislock_leader_info,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(info_out);
        let since = (since_epoch != 0).then_some(since_epoch);
        let timeout = Duration::from_millis(timeout_ms);
        let info = try_rust!(client.wait_for_leader_change(name, since, timeout));
        write_info(info, info_out)
    }
}

/// Writes the leader's identity (UTF-8) into `buf`, with the buffer convention of
/// `redislock_last_error_message`: at most `buf_len` bytes, NUL-terminated, `buf` may be NULL
/// when `buf_len` is 0. Returns the identity's length in bytes (0 for NULL `info`).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_leader_info_identity(
    info: *const redislock_leader_info,
    buf: *mut c_char,
    buf_len: usize,
) -> usize {
    ffi_panic_boundary! {
        let info = try_ref!(info);
        write_text(&info.identity, buf, buf_len)
    }
}

/// The leader's epoch (see `redislock_lock_epoch`); 0 for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_leader_info_epoch(info: *const redislock_leader_info) -> u64 {
    ffi_panic_boundary! {
        try_ref!(info).epoch
    }
}

/// Milliseconds left of the leader's lease when it was read (the leader renews it while it
/// leads); 0 for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_leader_info_remaining_ms(info: *const redislock_leader_info) -> u64 {
    ffi_panic_boundary! {
        u64::try_from(try_ref!(info).remaining.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Frees the handle. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_leader_info_free(info: *mut redislock_leader_info) {
    ffi_panic_boundary! {
        // SAFETY: `info` is NULL or a live handle that the caller gives up and no other thread
        // uses (calling conventions).
        unsafe { free_handle(info) }
    }
}
