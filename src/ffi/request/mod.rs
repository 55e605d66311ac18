//! `redislock_request`: how one lock is to be taken, set piece by piece before acquiring.
//!
//! A request is the C face of the Rust API's requests ([`Request`](crate::Request) of every
//! kind): an exclusive lock, the read or the write side of a read/write lock, Redisson's RLock,
//! permits of a semaphore or a set of exclusive locks. Because a Rust request borrows its
//! client and names, the handle cannot keep one. It keeps, as a plain struct ([`CRequest`]), the
//! client (a cheap shared handle), what it takes ([`Kind`]: set by its `_new` function, and for
//! one name by `redislock_request_set_kind`), copies of the names, and one field per option,
//! `None` while it is the client's default. Each acquire makes a fresh Rust request from them in
//! one place, [`CRequest::run`]. So one request serves any number of acquires, and it never
//! holds a lock itself.
//!
//! Adding a setter is a field of [`CRequest`], the `extern "C" fn` that converts its arguments
//! and stores them there, and the line of [`CRequest::run`] that hands the value to the Rust
//! request. The setters only store; as with `redislock_config`, the values are checked all
//! together where they are used, by the Rust API when the request acquires. What a setter does
//! check is whether it applies to what the request takes at all (permits to a semaphore, an
//! owner token to an exclusive lock...): a setter that does not apply fails with
//! INVALID_ARGUMENT and changes nothing, whatever order the setters are called in.

use std::time::Duration;

use super::cancel::redislock_cancel;
use super::client::redislock_client;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::enums::{KindCode, redislock_kind};
use super::handle::{BoxHandle, free_handle, handle_ref, into_handle, write_out};
use super::last_error;
use super::lock::redislock_lock;
use crate::kind::{Exclusive, Kind, Read, Redisson, Semaphore, Set, Write};
use crate::metrics::KindLabel;
use crate::{AnyLock, Error, MAX_SET_NAMES};

mod options;

pub(crate) use options::CRequest;
use options::Call;
use options::Setting;

/// How one lock is to be taken: what it takes (one lock name: an exclusive lock, or a read or
/// write lock; permits of a semaphore; a set of names), and whichever of its lease,
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
    type Inner = CRequest;
}

// The enum is the header's copy of the kinds' descriptors (`kind::Descriptor::c_kind`), which
// the setters read: the numbers are checked here, the names by the drift tests.
const _: () = {
    use redislock_kind::*;
    let pairs = [
        (REDISLOCK_KIND_EXCLUSIVE, Exclusive::DESCRIPTOR),
        (REDISLOCK_KIND_READ, Read::DESCRIPTOR),
        (REDISLOCK_KIND_WRITE, Write::DESCRIPTOR),
        (REDISLOCK_KIND_REDISSON, Redisson::DESCRIPTOR),
        #[cfg(feature = "recipe-kind")]
        (REDISLOCK_KIND_RECIPE, crate::kind::Recipe::DESCRIPTOR),
    ];
    let mut i = 0;
    while i < pairs.len() {
        let (code, d) = pairs[i];
        assert!(matches!(d.c_kind, Some((_, n)) if n == code as u32));
        i += 1;
    }
};

/// An owner token passed from C as bytes, as text. Bytes that are not UTF-8 become U+FFFD,
/// which the token check of the Rust API refuses like any character that is not printable
/// ASCII.
fn owner_text(owner: &[u8]) -> String {
    String::from_utf8_lossy(owner).into_owned()
}

/// A request for the lock `name` (`name_len` bytes at `name`; any bytes, 1 to 4096 of them,
/// checked when it is used) of `client`, with every setting at the client's default: its
/// exclusive lock, or a side of its read/write lock after `redislock_request_set_kind`. The name
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
        let request = CRequest::new(client, Exclusive::DESCRIPTOR, vec![name.to_vec()], 0);
        // SAFETY: `request_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(request_out, into_handle::<redislock_request>(request)) };
        REDISLOCK_OK
    }
}

/// A request for permits of the semaphore `name` (`name_len` bytes, as for
/// `redislock_request_new`), which has `permits` permits (1 to 10,000; the first user of a name
/// fixes the number while anything is held or waiting, and a request giving another number
/// fails to acquire with INVALID_ARGUMENT). Each acquire takes one permit, or as many as
/// `redislock_request_set_permits` says, as one grant with its own lease and (by default)
/// auto-renewal; permits are granted in arrival order. Semaphores have no fencing tokens and no
/// owner tokens. The numbers are checked by the acquire. On success `*request_out` is a new
/// request to free with `redislock_request_free`. Errors: NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_new_semaphore(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    permits: u32,
    request_out: *mut *mut redislock_request,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(request_out);
        let request = CRequest::new(client, Semaphore::DESCRIPTOR, vec![name.to_vec()], permits);
        // SAFETY: `request_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(request_out, into_handle::<redislock_request>(request)) };
        REDISLOCK_OK
    }
}

/// A request for the exclusive locks of `count` names at once (1 to 256 of them, no name twice,
/// each 1 to 4096 bytes: checked by the acquire): name i is `names_len[i]` bytes at `names[i]`.
/// The names are copied. An acquire takes all of them or none, in one round trip, and never
/// holds some while it waits for others; the lock it makes releases, extends and renews them
/// together, and is lost as a whole if any of them is. With fencing each name gets a token
/// from its own counter (`redislock_lock_fencing_token_at`). No owner tokens. On success
/// `*request_out` is a new request to free with `redislock_request_free`.
/// Errors: NULL_PARAMETER (`names` or `names_len` NULL with a count, a name NULL with a
/// length), INVALID_ARGUMENT (more than 256 names).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_new_set(
    client: *const redislock_client,
    names: *const *const u8,
    names_len: *const usize,
    count: usize,
    request_out: *mut *mut redislock_request,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        try_out!(request_out);
        if count > MAX_SET_NAMES {
            // Refused before reading the arrays, which the count says are this long.
            return last_error::fail(&Error::invalid_argument(format!(
                "a set holds at most {MAX_SET_NAMES} names, got {count}"
            )));
        }
        let (pointers, lens) = if count == 0 {
            (&[][..], &[][..])
        } else {
            if names.is_null() {
                last_error::null_parameter("names");
                return redislock_result::REDISLOCK_NULL_PARAMETER;
            }
            if names_len.is_null() {
                last_error::null_parameter("names_len");
                return redislock_result::REDISLOCK_NULL_PARAMETER;
            }
            // SAFETY: both are non-NULL (checked above) and point to `count` readable elements
            // that do not change during the call (calling conventions); `count` is at most
            // MAX_SET_NAMES, so the slices' sizes are far below isize::MAX.
            unsafe {
                (std::slice::from_raw_parts(names, count), std::slice::from_raw_parts(names_len, count))
            }
        };
        let mut copied = Vec::with_capacity(count);
        for (&name, &name_len) in pointers.iter().zip(lens) {
            copied.push(try_bytes!(name, name_len).to_vec());
        }
        let request = CRequest::new(client, Set::DESCRIPTOR, copied, 0);
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
        try_mut!(request).lease = Some(Duration::from_millis(lease_ms));
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
        try_mut!(request).auto_renew = Some(on);
        REDISLOCK_OK
    }
}

/// Whether each grant gets a fencing token (see `redislock_lock_fencing_token`; default: the
/// client's fencing). Readers and writers of a name share its counter with its exclusive lock:
/// a writer's token is larger than that of every grant before it, a reader's larger than that
/// of the writer before it. Errors: INVALID_ARGUMENT (a semaphore request: permits have no
/// fencing tokens), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_fencing(
    request: *mut redislock_request,
    on: bool,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        try_rust!(request.check(Setting::Fencing));
        request.fencing = Some(on);
        REDISLOCK_OK
    }
}

/// Which side of its name a request made by `redislock_request_new` takes: the exclusive lock
/// (the default), or a read or the write lock of the name's read/write lock. Readers share the
/// name; a writer (like an exclusive lock) is alone. Waiters are served in arrival order: a
/// reader arriving after a waiting writer queues behind it, and a release wakes exactly the
/// waiters that can proceed. A read or write lock of a name and its exclusive lock exclude each
/// other. REDISSON makes it Redisson's RLock of the name instead (docs/redisson.md): reentrant
/// per calling OS thread, shared with Java services that lock the name with Redisson.
/// Errors: INVALID_ARGUMENT (a number that is no `redislock_kind`; a semaphore or set request;
/// READ, WRITE or REDISSON for a request with an owner token; REDISSON for a request with
/// fencing set), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_kind(
    request: *mut redislock_request,
    kind: KindCode,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        let new_kind = try_rust!(options::of_code(kind.0));
        try_rust!(request.check(Setting::Side));
        try_rust!(request.check_switch(new_kind));
        request.kind = new_kind;
        REDISLOCK_OK
    }
}

/// How many permits each acquire of a semaphore request takes, as one grant (default 1; 1 to
/// the semaphore's number of permits, checked by the acquire). A request for k permits waits
/// its turn: later requests, even for fewer, do not overtake it.
/// Errors: INVALID_ARGUMENT (not a semaphore request), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_permits(
    request: *mut redislock_request,
    permits: u32,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        try_rust!(request.check(Setting::Permits));
        request.take = permits;
        REDISLOCK_OK
    }
}

/// Acquire with the owner token `owner` (`owner_len` bytes, copied: 16 to 256 printable ASCII
/// characters, no spaces, checked by the acquire) instead of a fresh random one: for
/// applications that name the owner themselves. The token is a bearer secret: make it as hard
/// to guess as a password. A lock acquired with it can be found with `redislock_is_owned_by`
/// and taken over with `redislock_request_restore`. Default: a random 128-bit token per
/// acquire. Exclusive locks only. Errors: INVALID_ARGUMENT (a request for a read or write
/// lock, a semaphore or a set), NULL_PARAMETER (`owner` NULL with a length).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_owner_token(
    request: *mut redislock_request,
    owner: *const u8,
    owner_len: usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        let owner = owner_text(try_bytes!(owner, owner_len));
        try_rust!(request.check(Setting::OwnerToken));
        request.owner = Some(owner);
        REDISLOCK_OK
    }
}

/// Holds each lock the request takes at least `at_least_ms` after it was granted (default: no
/// minimum): a release (or free) before then leaves the key holding the owner token until then,
/// its expiry set to the time left, so nobody takes the name before, even if the process exits;
/// renewal stops at the release all the same. Waiters get the name at their next re-check after
/// the key expires. A release after it frees the lock as usual. For jobs run on several hosts
/// that must run once per interval. 1 ms to 30 days, no longer than the request's at_most and,
/// without auto-renewal, than its lease: checked by the acquire (INVALID_ARGUMENT, nothing
/// held). Exclusive locks only. Errors: INVALID_ARGUMENT (a request for another kind),
/// NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_at_least_ms(
    request: *mut redislock_request,
    at_least_ms: u64,
) -> redislock_result {
    set_bound(request, Setting::AtLeast, |r| {
        r.at_least = Some(Duration::from_millis(at_least_ms))
    })
}

/// Holds each lock the request takes at most `at_most_ms` after it was granted (default: no
/// maximum): renewal never extends the lease past then (a longer lease, and an extend, are cut
/// to it), and when that time comes the lock is reported lost (`redislock_lock_is_lost`, the
/// lost-lock callback; the metrics' reason `at_most`). 1 ms to 30 days, checked by the acquire.
/// Exclusive locks only. Errors: INVALID_ARGUMENT (a request for another kind), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_set_at_most_ms(
    request: *mut redislock_request,
    at_most_ms: u64,
) -> redislock_result {
    set_bound(request, Setting::AtMost, |r| {
        r.at_most = Some(Duration::from_millis(at_most_ms))
    })
}

/// Sets `at_least` or `at_most` (`setting`), where the kind has them.
fn set_bound(
    request: *mut redislock_request,
    setting: Setting,
    set: impl FnOnce(&mut CRequest),
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_mut!(request);
        try_rust!(request.check(setting));
        set(request);
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
        request.cancel = unsafe { handle_ref::<redislock_cancel>(cancel) }.cloned();
        REDISLOCK_OK
    }
}

/// One attempt to acquire what the request takes. On success `*lock_out` is a new held lock to
/// free with `redislock_lock_free`. Errors: HELD (another owner holds it; for a read lock, a
/// writer holds it or anyone waits; for permits, fewer are free or earlier requests wait; for a
/// set, any name is held), INVALID_ARGUMENT (empty or oversized name, bad lease, malformed
/// owner token; zero permits, more than the semaphore has, or a number of permits other than
/// the semaphore's; an empty set, or a name twice in it; a name in use as another kind of lock),
/// CANCELLED (its cancel handle was cancelled), NULL_PARAMETER, CONNECTION, REDIS_ERROR,
/// LIMIT_REACHED (max_renewed_locks auto-renewed locks held).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_request_try_acquire(
    request: *const redislock_request,
    lock_out: *mut *mut redislock_lock,
) -> redislock_result {
    ffi_panic_boundary! {
        let request = try_ref!(request);
        try_out!(lock_out);
        let lock = try_rust!(request.run(Call::Try));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}

/// Acquires what the request takes, waiting up to `wait_ms` milliseconds (at most 30 days) for
/// it. A waiter does not poll: a release hands the lock to the longest-waiting threads or
/// processes that can now proceed, and wakes them (a set waits without holding any of its
/// names). `wait_ms` 0 makes one attempt, which fails with WAIT_TIMEOUT when the
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
        let lock = try_rust!(request.run(Call::Wait(wait)));
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
/// `redislock_lock_free`. Exclusive locks only. Errors: NOT_HELD (the key does not hold that
/// token), INVALID_ARGUMENT (also for a request for a read or write lock, a semaphore or a
/// set), NULL_PARAMETER, CONNECTION, REDIS_ERROR, LIMIT_REACHED.
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
        let lock = try_rust!(request.run(Call::Restore(&owner)));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}

impl CRequest {
    /// Takes what the request takes, as `call` says: the one place where the stored options
    /// become a request of the Rust API, which checks them. The setters refuse what does not
    /// apply to the kind, so each kind uses all of its options here.
    fn run(&self, call: Call<'_>) -> Result<AnyLock, Error> {
        let c = &self.client;
        let name: &[u8] = self.names.first().map_or(&[], Vec::as_slice);
        Ok(match (self.kind.label, call) {
            (KindLabel::Exclusive, call) => {
                let request = self.with_fencing(c.lock(name));
                let request = match &self.owner {
                    Some(owner) => request.owner_token(owner),
                    None => request,
                };
                let request = match self.at_least {
                    Some(d) => request.at_least(d),
                    None => request,
                };
                let request = match self.at_most {
                    Some(d) => request.at_most(d),
                    None => request,
                };
                match call {
                    Call::Try => request.try_acquire()?.into(),
                    Call::Wait(w) => request.acquire(w)?.into(),
                    Call::Restore(owner) => request.restore(owner)?.into(),
                }
            }
            (_, Call::Restore(_)) => return Err(self.does_not_apply("restore")),
            (KindLabel::Read, Call::Try) => self.with_fencing(c.rw_lock(name)).try_read()?.into(),
            (KindLabel::Read, Call::Wait(w)) => self.with_fencing(c.rw_lock(name)).read(w)?.into(),
            (KindLabel::Write, Call::Try) => self.with_fencing(c.rw_lock(name)).try_write()?.into(),
            (KindLabel::Write, Call::Wait(w)) => {
                self.with_fencing(c.rw_lock(name)).write(w)?.into()
            }
            (KindLabel::Redisson, Call::Try) => self
                .with_options(c.redisson_lock(name))
                .try_acquire()?
                .into(),
            (KindLabel::Redisson, Call::Wait(w)) => {
                self.with_options(c.redisson_lock(name)).acquire(w)?.into()
            }
            #[cfg(feature = "recipe-kind")]
            (KindLabel::Recipe, Call::Try) => {
                self.with_options(c.recipe_lock(name)).try_acquire()?.into()
            }
            #[cfg(feature = "recipe-kind")]
            (KindLabel::Recipe, Call::Wait(w)) => {
                self.with_options(c.recipe_lock(name)).acquire(w)?.into()
            }
            (KindLabel::Semaphore, Call::Try) => {
                let request = self.with_options(c.semaphore(name, self.permits));
                request.try_acquire(self.take)?.into()
            }
            (KindLabel::Semaphore, Call::Wait(w)) => {
                let request = self.with_options(c.semaphore(name, self.permits));
                request.acquire(self.take, w)?.into()
            }
            (KindLabel::Leader, call) => {
                // The Rust API checks the rest (empty, too long, control characters).
                let identity = std::str::from_utf8(&self.identity)
                    .map_err(|_| Error::invalid_argument("the leader's identity is not UTF-8"))?;
                let request = self.with_options(c.leader(name)).identity(identity);
                match call {
                    Call::Wait(w) => request.campaign(w)?.into(),
                    _ => request.try_campaign()?.into(),
                }
            }
            (KindLabel::Set, Call::Try) => self
                .with_fencing(c.lock_all(&self.names))
                .try_acquire()?
                .into(),
            (KindLabel::Set, Call::Wait(w)) => self
                .with_fencing(c.lock_all(&self.names))
                .acquire(w)?
                .into(),
        })
    }
}
