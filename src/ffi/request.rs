//! `redislock_request`: how one lock is to be taken, set piece by piece before acquiring.
//!
//! A request is the C face of [`LockRequest`]: it names a lock of a client and starts from that
//! client's defaults; each setter overrides one of them, and whatever was never set stays the
//! client's. Because a `LockRequest` borrows its client and name, the handle cannot keep one:
//! it keeps the client (a cheap shared handle), a copy of the name and the settings, and each
//! acquire makes a fresh `LockRequest` from them ([`Request::lock_request`]). So one request
//! serves any number of acquires, and it never holds a lock itself.
//!
//! Adding a setter is one function: an `extern "C" fn` that converts its arguments and records
//! a value with [`Request::set`], together with how that value changes a `LockRequest`.
//! Nothing else in this file changes. The setters here only record (a NULL pointer is the only
//! error they report); as with `redislock_config`, the values are checked all together where
//! they are used, by the Rust API when the request acquires.
//!
//! A kind (read or write lock, semaphore permits) is not a change to a `LockRequest` but a
//! choice of Rust request (`Client::rw_lock`, `Client::semaphore`), each with its own acquire.
//! It belongs in a field of [`Request`] that its setter sets and the acquire functions match
//! on; the recorded settings then need to reach that request type too, by making the apply
//! functions take an enum of the Rust request types instead of a `LockRequest`.

use std::time::Duration;

use super::cancel::redislock_cancel;
use super::client::redislock_client;
use super::handle::{BoxHandle, free_handle, handle_ref, into_handle, write_out};
use super::lock::redislock_lock;
use super::result::redislock_result::{self, REDISLOCK_OK};
use crate::{Client, LockRequest};

/// How one lock is to be taken: a lock name of a client, and whichever of its lease,
/// auto-renewal, fencing, owner token and cancel handle should differ from the client's
/// defaults (a setting never set is the client's). It holds no lock: one request may be used
/// for any number of acquires, one after the other or at once from several threads, each
/// making a lock of its own. Its setters and `redislock_request_free` need it to themselves:
/// no other thread may use it during those calls. It keeps what it needs of its client, which
/// may be freed before it.
pub struct redislock_request {
    _private: [u8; 0],
}

impl BoxHandle for redislock_request {
    type Inner = Request;
}

/// The Rust value behind a `redislock_request`.
pub(crate) struct Request {
    client: Client,
    name: Vec<u8>,
    /// What differs from the client's defaults, one entry per setter, in the order first set.
    settings: Vec<Setting>,
}

/// A value recorded by one setter.
struct Setting {
    /// The setter's name: setting the same thing again replaces the entry.
    key: &'static str,
    value: Box<dyn Apply>,
}

/// How a recorded value changes a lock request made from the client's defaults.
trait Apply: Send + Sync {
    fn apply<'a>(&'a self, request: LockRequest<'a>) -> LockRequest<'a>;
}

/// A value and the function that applies it. The function gets the value by reference for as
/// long as the `LockRequest` lives, so a setting may lend it borrowed data (an owner token).
type ApplyFn<T> = for<'a> fn(LockRequest<'a>, &'a T) -> LockRequest<'a>;

struct Value<T> {
    value: T,
    apply: ApplyFn<T>,
}

impl<T: Send + Sync> Apply for Value<T> {
    fn apply<'a>(&'a self, request: LockRequest<'a>) -> LockRequest<'a> {
        (self.apply)(request, &self.value)
    }
}

impl Request {
    /// Records `value` under `key`, replacing what the same setter recorded before; `apply`
    /// says how it changes a `LockRequest`.
    fn set<T: Send + Sync + 'static>(&mut self, key: &'static str, value: T, apply: ApplyFn<T>) {
        let value: Box<dyn Apply> = Box::new(Value { value, apply });
        match self.settings.iter_mut().find(|s| s.key == key) {
            Some(setting) => setting.value = value,
            None => self.settings.push(Setting { key, value }),
        }
    }

    /// Forgets what the setter `key` recorded: the client's default applies again.
    fn unset(&mut self, key: &'static str) {
        self.settings.retain(|s| s.key != key);
    }

    /// A lock request with the client's defaults and every recorded setting. The Rust API
    /// checks the values when it acquires.
    fn lock_request(&self) -> LockRequest<'_> {
        self.settings
            .iter()
            .fold(self.client.lock(&self.name), |request, setting| {
                setting.value.apply(request)
            })
    }
}

/// An owner token passed from C as bytes, as text. Bytes that are not UTF-8 become U+FFFD,
/// which the token check of the Rust API refuses like any character that is not printable
/// ASCII.
fn owner_text(owner: &[u8]) -> String {
    String::from_utf8_lossy(owner).into_owned()
}

/// A request for the lock `name` (`name_len` bytes at `name`; any bytes, 1 to 4096 of them,
/// checked when it is used) of `client`, with every setting at the client's default. The name
/// is copied. On success `*request_out` is a new request to free with `redislock_request_free`.
/// Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_new(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    request_out: *mut *mut redislock_request,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(request_out);
        let request = Request { client: client.clone(), name: name.to_vec(), settings: Vec::new() };
        // SAFETY: `request_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(request_out, into_handle::<redislock_request>(request)) };
        REDISLOCK_OK
    }
}

/// Frees a request. Locks acquired with it are not affected. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_free(request: *mut redislock_request) {
    ffi_panic_boundary! {
        // SAFETY: `request` is NULL or a live request that the caller gives up and no other
        // thread uses (calling conventions).
        unsafe { free_handle(request) }
    }
}

/// The lease in milliseconds (default: the client's lease): 1 ms to 30 days, at least 100 ms
/// when the lock auto-renews. Checked by the acquire. Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_lease_ms(
    request: *mut redislock_request,
    lease_ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        try_mut!(request).set("lease_ms", lease_ms, |r, &ms| r.lease(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// Whether a renewal thread keeps the lock alive, extending its lease every lease/3 until it is
/// released or found lost (default: the client's auto_renew). Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_auto_renew(
    request: *mut redislock_request,
    on: bool,
) -> redislock_result {
    ffi_panic_boundary! {
        try_mut!(request).set("auto_renew", on, |r, &on| r.auto_renew(on));
        REDISLOCK_OK
    }
}

/// Whether each grant gets a fencing token (see `redislock_lock_fencing_token`; default: the
/// client's fencing). Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_fencing(
    request: *mut redislock_request,
    on: bool,
) -> redislock_result {
    ffi_panic_boundary! {
        try_mut!(request).set("fencing", on, |r, &on| r.fencing(on));
        REDISLOCK_OK
    }
}

/// Acquire with the owner token `owner` (`owner_len` bytes, copied: 16 to 256 printable ASCII
/// characters, no spaces, checked by the acquire) instead of a fresh random one: for
/// applications that name the owner themselves. The token is a bearer secret: make it as hard
/// to guess as a password. A lock acquired with it can be found with `redislock_is_owned_by`
/// and taken over with `redislock_request_restore`. Default: a random 128-bit token per
/// acquire. Errors: NULL_PARAMETER (`owner` NULL with a length).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_owner_token(
    request: *mut redislock_request,
    owner: *const u8,
    owner_len: usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        let owner = owner_text(try_bytes!(owner, owner_len));
        request.set("owner_token", owner, |r, owner| r.owner_token(owner));
        REDISLOCK_OK
    }
}

/// Lets `cancel` end the request's waiting acquires from another thread: they then fail with
/// REDISLOCK_CANCELLED, leaving no queue entry and no lock behind, and once it is cancelled
/// every acquire of the request fails so at once. The request keeps its own reference: the
/// cancel handle may be freed before the request. NULL removes a cancel handle set before
/// (default: none). Errors: NULL_PARAMETER (`request`).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_cancel(
    request: *mut redislock_request,
    cancel: *const redislock_cancel,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        // SAFETY: `cancel` is NULL or a live cancel handle that no thread frees during the call
        // (calling conventions).
        match unsafe { handle_ref::<redislock_cancel>(cancel) } {
            Some(cancel) => request.set("cancel", cancel.clone(), |r, c| r.cancel_on(c)),
            None => request.unset("cancel"),
        }
        REDISLOCK_OK
    }
}

/// One attempt to acquire the request's lock. On success `*lock_out` is a new held lock to free
/// with `redislock_lock_free`. Errors: HELD (another owner holds it), INVALID_ARGUMENT (empty
/// or oversized name, bad lease, malformed owner token), CANCELLED (its cancel handle was
/// cancelled), NULL_PARAMETER, CONNECTION, REDIS_ERROR, LIMIT_REACHED (max_renewed_locks
/// auto-renewed locks held).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_try_acquire(
    request: *const redislock_request,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_ref!(request);
        try_out!(lock_out);
        let lock = try_rust!(request.lock_request().try_acquire());
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}

/// Acquires the request's lock, waiting up to `wait_ms` milliseconds (at most 30 days) for it.
/// A waiter does not poll: the holder's release hands the lock to the longest-waiting thread or
/// process and wakes it. `wait_ms` 0 makes one attempt, which fails with WAIT_TIMEOUT when the
/// lock is held. On success `*lock_out` is a new held lock to free with `redislock_lock_free`.
/// Errors: WAIT_TIMEOUT (not granted in time), CANCELLED (ended through its cancel handle), and
/// those of `redislock_request_try_acquire` except HELD.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_acquire(
    request: *const redislock_request,
    wait_ms: u64,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_ref!(request);
        try_out!(lock_out);
        let wait = Duration::from_millis(wait_ms);
        let lock = try_rust!(request.lock_request().acquire(wait));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}

/// A handle for the request's lock, held now with the owner token `owner` (`owner_len` bytes,
/// from `redislock_lock_owner_token`, maybe in another process), to release or extend it: the
/// lease is reset to the request's lease (one round trip), and the lock auto-renews if the
/// request says so. The request's fencing, owner token and cancel handle do not apply; the
/// handle has no fencing token. On success `*lock_out` is a new held lock to free with
/// `redislock_lock_free`. Errors: NOT_HELD (the key does not hold that token),
/// INVALID_ARGUMENT, NULL_PARAMETER, CONNECTION, REDIS_ERROR, LIMIT_REACHED.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_restore(
    request: *const redislock_request,
    owner: *const u8,
    owner_len: usize,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_ref!(request);
        let owner = owner_text(try_bytes!(owner, owner_len));
        try_out!(lock_out);
        let lock = try_rust!(request.lock_request().restore(&owner));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}
