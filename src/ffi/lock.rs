//! `redislock_lock`: a held (or formerly held) lock.

use std::ffi::{c_char, c_void};
use std::time::Duration;

use super::client::redislock_client;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use super::last_error;
use super::text::write_text;
use crate::AnyLock;
use crate::Error;

/// A lock acquired through a client or a request, of any kind a request can take; the
/// functions below work on each (those that do not apply to a kind say so). Thread-safe: any
/// thread may query, extend or release it, but it must be freed (once) when no other thread
/// uses it. It stays usable after its client is freed. In a child process after fork() it is
/// not the child's: release and extend report REDISLOCK_FORKED, and freeing it leaves the
/// parent's lock alone.
pub struct redislock_lock {
    _private: [u8; 0],
}

/// The Rust value behind a `redislock_lock`: a grant of any kind.
impl BoxHandle for redislock_lock {
    type Inner = AnyLock;
}

/// One attempt to acquire the lock `name` (`name_len` bytes at `name`; any bytes, 1 to 4096 of
/// them) with the client's defaults; a `redislock_request` takes a lock with settings of its
/// own. On success `*lock_out` is a new held lock to free with `redislock_lock_free`.
/// Errors: HELD (another owner holds it), NULL_PARAMETER (`name` NULL with a length),
/// INVALID_ARGUMENT (empty or oversized name), CONNECTION, REDIS_ERROR, LIMIT_REACHED
/// (max_renewed_locks auto-renewed locks held).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_try_acquire(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(lock_out);
        let lock = try_rust!(client.try_acquire(name));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(AnyLock::from(lock))) };
        REDISLOCK_OK
    }
}

/// Acquires the lock `name` with the client's defaults like `redislock_lock_try_acquire`,
/// waiting up to `wait_ms` milliseconds (at most 30 days) for it. A waiter does not poll: the
/// holder's release hands the lock to the longest-waiting thread or process and wakes it.
/// `wait_ms` 0 makes one attempt, which fails with WAIT_TIMEOUT when the lock is held. On
/// success `*lock_out` is a new held lock to free with `redislock_lock_free`.
/// Errors: WAIT_TIMEOUT (not granted in time), and those of `redislock_lock_try_acquire` except
/// HELD.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_acquire(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    wait_ms: u64,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(lock_out);
        let lock = try_rust!(client.acquire(name, Duration::from_millis(wait_ms)));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(AnyLock::from(lock))) };
        REDISLOCK_OK
    }
}

/// Releases the lock (or hands it to the longest waiter). Does not free the handle.
/// OK means it was still ours until now. While the server cannot be reached (a failover) it
/// tries again for up to the client's release timeout (`redislock_config_set_release_timeout_ms`),
/// never past the lease. Errors: NOT_HELD (released already, or its lease ran out, or it was lost
/// or taken over: the protected work may have overlapped another holder's), FORKED (in a child
/// process after fork()), NULL_PARAMETER, CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_release(lock: *mut redislock_lock) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_rust!(lock.release());
        REDISLOCK_OK
    }
}

/// Releases the lock like `redislock_lock_release`, but without blocking on a server that
/// cannot be reached (a failover): one try; if it finds no server, CONNECTION is returned and
/// the release goes on on a thread of the library until it is answered or the lease ends (the
/// handle reports the lock held until then). What `redislock_lock_free` of a held lock does,
/// keeping the handle: for the end of a request, where nothing may wait.
/// Errors: NOT_HELD, FORKED, NULL_PARAMETER, CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_release_in_background(
    lock: *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_rust!(lock.release_in_background());
        REDISLOCK_OK
    }
}

/// Resets the lease to `lease_ms` milliseconds from now (1 ms to 30 days, at least 100 ms for an
/// auto-renewed lock), if the key still holds our token; auto-renewal goes on with the new lease.
/// Errors: NOT_HELD, FORKED, INVALID_ARGUMENT, NULL_PARAMETER, CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_extend(
    lock: *mut redislock_lock,
    lease_ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_rust!(lock.extend(Duration::from_millis(lease_ms)));
        REDISLOCK_OK
    }
}

/// Whether the lock is still ours as far as this process knows, without a round trip: not
/// released, not found lost by renewal, lease not run out, and this is the process that
/// acquired it. false for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_is_held(lock: *const redislock_lock) -> bool {
    ffi_panic_boundary! {
        try_ref!(lock).is_held()
    }
}

/// Milliseconds the lock is surely still ours (0 when not held, and for NULL). Counted from
/// before the acquiring request was sent, less a margin for clock drift.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_remaining_ms(lock: *const redislock_lock) -> u64 {
    ffi_panic_boundary! {
        let remaining = try_ref!(lock).remaining().as_millis();
        u64::try_from(remaining).unwrap_or(u64::MAX)
    }
}

/// Writes the fencing token of this grant to `*token_out`: strictly larger than that of every
/// earlier fenced grant of the same name (for a read lock: larger than that of the writer
/// before it; readers holding at once are not ordered among themselves). On a Sentinel group or
/// a Cluster it is ordered first by the failover epoch of the master that granted it (epoch × 2^48 +
/// counter), so a split brain's old master grants below the new one. Pass it to the protected
/// resource, which should refuse writes carrying a smaller token than it has seen.
/// Errors: INVALID_ARGUMENT (the lock was acquired without fencing; permits, which have none;
/// a set, whose names each have one: see `redislock_lock_fencing_token_at`), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_fencing_token(
    lock: *const redislock_lock,
    token_out: *mut u64,
) -> redislock_result {
    write_fencing_token(lock, None, token_out)
}

/// Writes the fencing token of name `index` of a set (in the order the names were given to
/// `redislock_request_new_set`, from 0) to `*token_out`; each name's token comes from its own
/// counter. For any other lock, index 0 is its one token, as `redislock_lock_fencing_token`
/// gives it. Errors: INVALID_ARGUMENT (acquired without fencing, index out of range, permits),
/// NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_fencing_token_at(
    lock: *const redislock_lock,
    index: usize,
    token_out: *mut u64,
) -> redislock_result {
    write_fencing_token(lock, Some(index), token_out)
}

/// The body of both fencing-token functions: the token of a lock of one name (`index` `None`)
/// or of one index, written to `*token_out`.
fn write_fencing_token(
    lock: *const redislock_lock,
    index: Option<usize>,
    token_out: *mut u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_out!(token_out);
        let token = match index {
            None => lock.fencing_token(),
            Some(index) => lock.fencing_token_at(index),
        };
        let Some(token) = try_rust!(token) else {
            return last_error::fail(&Error::invalid_argument(format!(
                "lock {} was acquired without fencing: it has no fencing token",
                lock.shown()
            )));
        };
        // SAFETY: `token_out` is not NULL (checked above) and points to writable memory for a
        // `uint64_t` (calling conventions).
        unsafe { write_out(token_out, token) };
        REDISLOCK_OK
    }
}

/// Turns a write lock into a read lock without a gap (one round trip): no writer can come in
/// between, and the readers waiting at the head of the queue are let in with it. On success
/// `*read_out` is a new read lock, with the write lock's lease, auto-renewal and fencing token,
/// to free with `redislock_lock_free`; `lock` is then no longer held (its release reports
/// NOT_HELD) but must still be freed. There is no upgrade: release the read lock and acquire
/// the write lock. Errors: INVALID_ARGUMENT (not a write lock), NOT_HELD (released already, or
/// lost), FORKED, NULL_PARAMETER, CONNECTION, REDIS_ERROR (on a failure for want of an answer,
/// the lock is left to its lease).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_downgrade(
    lock: *const redislock_lock,
    read_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let held = try_ref!(lock);
        try_out!(read_out);
        let read = try_rust!(held.downgrade());
        // SAFETY: `read_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(read_out, into_handle::<redislock_lock>(read)) };
        REDISLOCK_OK
    }
}

/// Writes the lock's owner token (the random value its key holds while the lock is ours) into
/// `buf`, with the buffer convention of `redislock_last_error_message`: at most `buf_len` bytes,
/// NUL-terminated; returns the token's whole length (0 for NULL). The token is a bearer secret:
/// whoever knows it can release the lock. Hand it only to the code that is to take the lock
/// over (`redislock_request_restore`), and never log it. Exclusive locks only: for any other
/// kind it writes an empty string, returns 0 and sets the last error (INVALID_ARGUMENT).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_owner_token(
    lock: *const redislock_lock,
    buf: *mut c_char,
    buf_len: usize,
) -> usize {
    ffi_panic_boundary! {
        match try_ref!(lock).owner_token() {
            Ok(token) => write_text(token, buf, buf_len),
            Err(e) => {
                last_error::fail(&e);
                write_text("", buf, buf_len)
            }
        }
    }
}

/// Lets the lock outlive its handle: it is no longer renewed, and freeing the handle does not
/// release it, so it ends with its lease unless someone with its owner token releases or
/// extends it first. The handle must still be freed; release and extend then report NOT_HELD.
/// Exclusive locks only. Errors: NOT_HELD (released, lost or detached already), FORKED,
/// INVALID_ARGUMENT (a read or write lock, permits, a set), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_detach(lock: *mut redislock_lock) -> redislock_result {
    ffi_panic_boundary! {
        try_rust!(try_ref!(lock).detach());
        REDISLOCK_OK
    }
}

/// A lost-lock callback: `user_data` as given to `redislock_lock_on_lost`, the lock's name
/// (`name_len` bytes, without the key prefix) and why it was lost (NUL-terminated); both valid
/// only during the call.
pub type redislock_lost_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        name: *const u8,
        name_len: usize,
        reason: *const c_char,
    ),
>;

/// A C callback and its user data, moved to the thread that finds the lock lost.
struct LostCall {
    callback: unsafe extern "C" fn(*mut c_void, *const u8, usize, *const c_char),
    user_data: *mut c_void,
    name: Vec<u8>,
}

// SAFETY: the user data is only handed back to the C callback, on the thread that finds the
// lock lost; the caller of redislock_lock_on_lost promises that this is allowed.
unsafe impl Send for LostCall {}

/// Has `callback` called once if the lock is found lost: renewal found its key gone or taken
/// over, or could not reach Redis before the lease ran out (also when an extend or release finds
/// it gone; never for a release or detach). It runs on the thread that found the loss — usually
/// a library thread — so it must not block, and must not release, extend or free this lock
/// (it may set a flag, write to a pipe, signal a condition variable). When the lock is lost
/// already, it runs at once on this thread. NULL removes a callback set before.
/// Errors: NULL_PARAMETER (`lock`).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_on_lost(
    lock: *const redislock_lock,
    callback: redislock_lost_callback,
    user_data: *mut c_void,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        match callback {
            None => lock.forget_on_lost(),
            Some(callback) => {
                let call = LostCall { callback, user_data, name: lock.name().to_vec() };
                lock.on_lost(move |e| {
                    let call = call;
                    let reason = std::ffi::CString::new(e.message().replace('\0', " "))
                        .unwrap_or_default();
                    // SAFETY: the callback and user data come from the C caller, who promised
                    // they may be called on another thread; the name and reason outlive the call.
                    unsafe {
                        (call.callback)(call.user_data, call.name.as_ptr(), call.name.len(), reason.as_ptr())
                    };
                });
            }
        }
        REDISLOCK_OK
    }
}

/// Frees the handle, releasing the lock first if it is still held (one round trip; errors are
/// ignored: call `redislock_lock_release` first to learn them). In a child process after fork()
/// it only frees the handle: the parent's lock is left alone. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_free(lock: *mut redislock_lock) {
    ffi_panic_boundary! {
        // SAFETY: `lock` is NULL or a live lock that the caller gives up and no other thread
        // uses (calling conventions). Dropping the `Lock` releases it unless it was released,
        // lost, or acquired by another process (its `Drop` checks the pid).
        unsafe { free_handle(lock) }
    }
}
