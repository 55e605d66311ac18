//! `redislock_request`: how one lock is to be taken, set piece by piece before acquiring.
//!
//! A request is the C face of the Rust API's requests: [`LockRequest`] (an exclusive lock),
//! [`RwLockRequest`] (the read or the write side of a read/write lock), [`SemaphoreRequest`]
//! (permits of a semaphore) and [`MultiLockRequest`] (a set of exclusive locks). It names what
//! it takes ([`Target`]: set by its `_new` function, and for one name by
//! `redislock_request_set_kind`) and starts from its client's defaults; each setter overrides
//! one of them, and whatever was never set stays the client's. Because a Rust request borrows
//! its client and names, the handle cannot keep one: it keeps the client (a cheap shared
//! handle), copies of the names and the settings, and each acquire makes a fresh Rust request
//! from them ([`Request::rust_request`]). So one request serves any number of acquires, and it
//! never holds a lock itself.
//!
//! Adding a setter is one function: an `extern "C" fn` that converts its arguments and records
//! a value with [`Request::set`], together with how that value changes a [`RustRequest`].
//! The setters only record; as with `redislock_config`, the values are checked all together
//! where they are used, by the Rust API when the request acquires. What a setter does check is
//! whether it applies to what the request takes at all (permits to a semaphore, an owner token
//! to an exclusive lock...): a setter that does not apply fails with INVALID_ARGUMENT and
//! changes nothing, whatever order the setters are called in.

use std::time::Duration;

use super::cancel::redislock_cancel;
use super::client::redislock_client;
use super::handle::{BoxHandle, free_handle, handle_ref, into_handle, write_out};
use super::last_error;
use super::lock::redislock_lock;
use super::result::redislock_result::{self, REDISLOCK_OK};
use crate::api::guard::AnyLock;
use crate::{
    Cancel, Client, Error, LockRequest, MAX_SET_NAMES, MultiLockRequest, RedissonLockRequest,
    RwLockRequest, SemaphoreRequest,
};

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
    type Inner = Request;
}

/// Which side of one lock name a request takes (`redislock_request_set_kind`). The numbers are
/// stable.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redislock_kind {
    /// The exclusive lock of the name (the default).
    REDISLOCK_KIND_EXCLUSIVE = 0,
    /// A read lock of the read/write lock of the name: shared with other readers.
    REDISLOCK_KIND_READ = 1,
    /// The write lock of the read/write lock of the name: alone, and excluding exclusive locks
    /// of the name too.
    REDISLOCK_KIND_WRITE = 2,
    /// Redisson's RLock of the name (docs/redisson.md), shared with Java services that lock it
    /// with Redisson: reentrant per calling OS thread, woken by Redisson's unlock message. No
    /// fencing, no owner token; refused on Redlock URLs.
    REDISLOCK_KIND_REDISSON = 3,
}

/// A kind as received from C: any number may come, and an out-of-range value in a Rust enum
/// would be undefined behaviour, so the parameter takes the raw number. cbindgen shows it as
/// `redislock_kind` (see the `[export.rename]` entry in cbindgen.toml), a `uint32_t` typedef in
/// C: same ABI.
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct KindCode(pub u32);

impl redislock_kind {
    fn from_u32(n: u32) -> Option<redislock_kind> {
        use redislock_kind::*;
        [
            REDISLOCK_KIND_EXCLUSIVE,
            REDISLOCK_KIND_READ,
            REDISLOCK_KIND_WRITE,
            REDISLOCK_KIND_REDISSON,
        ]
        .into_iter()
        .find(|&k| k as u32 == n)
    }
}

/// What a request takes, fixed by its `_new` function (and for one name, its side by
/// `redislock_request_set_kind`).
#[derive(Debug)]
enum Target {
    /// One lock name: its exclusive lock, or a side of its read/write lock.
    Name { name: Vec<u8>, kind: redislock_kind },
    /// `take` permits (`redislock_request_set_permits`, default 1) of the semaphore `name`,
    /// which has `permits`.
    Semaphore {
        name: Vec<u8>,
        permits: u32,
        take: u32,
    },
    /// The exclusive locks of all of `names`, at once.
    Set { names: Vec<Vec<u8>> },
}

impl Target {
    /// What it takes, for messages: "a read lock", "a semaphore"...
    fn what(&self) -> &'static str {
        match self {
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_EXCLUSIVE,
                ..
            } => "an exclusive lock",
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_READ,
                ..
            } => "a read lock",
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_WRITE,
                ..
            } => "a write lock",
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_REDISSON,
                ..
            } => "a Redisson lock",
            Target::Semaphore { .. } => "a semaphore",
            Target::Set { .. } => "a set of locks",
        }
    }

    fn is_exclusive(&self) -> bool {
        matches!(
            self,
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_EXCLUSIVE,
                ..
            }
        )
    }
}

/// The Rust value behind a `redislock_request`.
pub(crate) struct Request {
    client: Client,
    target: Target,
    /// What differs from the client's defaults, one entry per setter, in the order first set.
    settings: Vec<Setting>,
}

/// A value recorded by one setter.
struct Setting {
    /// The setter's name: setting the same thing again replaces the entry.
    key: &'static str,
    value: Box<dyn Apply>,
}

/// A Rust request of any kind, made from a request's target with the client's defaults; the
/// recorded settings change it, then it acquires.
pub(crate) enum RustRequest<'a> {
    Lock(LockRequest<'a>),
    Rw(RwLockRequest<'a>),
    Semaphore(SemaphoreRequest<'a>),
    Set(MultiLockRequest<'a>),
    Redisson(RedissonLockRequest<'a>),
}

impl<'a> RustRequest<'a> {
    fn lease(self, lease: Duration) -> Self {
        match self {
            Self::Lock(r) => Self::Lock(r.lease(lease)),
            Self::Rw(r) => Self::Rw(r.lease(lease)),
            Self::Semaphore(r) => Self::Semaphore(r.lease(lease)),
            Self::Set(r) => Self::Set(r.lease(lease)),
            Self::Redisson(r) => Self::Redisson(r.lease(lease)),
        }
    }

    fn auto_renew(self, on: bool) -> Self {
        match self {
            Self::Lock(r) => Self::Lock(r.auto_renew(on)),
            Self::Rw(r) => Self::Rw(r.auto_renew(on)),
            Self::Semaphore(r) => Self::Semaphore(r.auto_renew(on)),
            Self::Set(r) => Self::Set(r.auto_renew(on)),
            Self::Redisson(r) => Self::Redisson(r.auto_renew(on)),
        }
    }

    /// Semaphores and Redisson locks have no fencing; the setter refuses it for them (and
    /// `redislock_request_set_kind` refuses REDISSON once it is set), so it never gets here.
    fn fencing(self, on: bool) -> Self {
        match self {
            Self::Lock(r) => Self::Lock(r.fencing(on)),
            Self::Rw(r) => Self::Rw(r.fencing(on)),
            Self::Set(r) => Self::Set(r.fencing(on)),
            other @ (Self::Semaphore(_) | Self::Redisson(_)) => other,
        }
    }

    /// Only exclusive locks take an owner token; the setter refuses it for the others.
    fn owner_token(self, owner: &'a str) -> Self {
        match self {
            Self::Lock(r) => Self::Lock(r.owner_token(owner)),
            other => other,
        }
    }

    fn cancel_on(self, cancel: &'a Cancel) -> Self {
        match self {
            Self::Lock(r) => Self::Lock(r.cancel_on(cancel)),
            Self::Rw(r) => Self::Rw(r.cancel_on(cancel)),
            Self::Semaphore(r) => Self::Semaphore(r.cancel_on(cancel)),
            Self::Set(r) => Self::Set(r.cancel_on(cancel)),
            Self::Redisson(r) => Self::Redisson(r.cancel_on(cancel)),
        }
    }
}

/// How a recorded value changes a Rust request made from the client's defaults.
trait Apply: Send + Sync {
    fn apply<'a>(&'a self, request: RustRequest<'a>) -> RustRequest<'a>;
}

/// A value and the function that applies it. The function gets the value by reference for as
/// long as the Rust request lives, so a setting may lend it borrowed data (an owner token).
type ApplyFn<T> = for<'a> fn(RustRequest<'a>, &'a T) -> RustRequest<'a>;

struct Value<T> {
    value: T,
    apply: ApplyFn<T>,
}

impl<T: Send + Sync> Apply for Value<T> {
    fn apply<'a>(&'a self, request: RustRequest<'a>) -> RustRequest<'a> {
        (self.apply)(request, &self.value)
    }
}

impl Request {
    /// A request of `client` for `target` with every setting at the client's default.
    fn new(client: &Client, target: Target) -> Request {
        Request {
            client: client.clone(),
            target,
            settings: Vec::new(),
        }
    }

    /// Records `value` under `key`, replacing what the same setter recorded before; `apply`
    /// says how it changes a Rust request.
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

    fn is_set(&self, key: &str) -> bool {
        self.settings.iter().any(|s| s.key == key)
    }

    /// The error of a setter or call that does not apply to what this request takes.
    fn does_not_apply(&self, what: &str) -> Error {
        Error::invalid_argument(format!(
            "{what} does not apply to a request for {}",
            self.target.what()
        ))
    }

    /// A Rust request with the client's defaults and every recorded setting. The Rust API
    /// checks the values when it acquires.
    fn rust_request(&self) -> RustRequest<'_> {
        let c = &self.client;
        let request = match &self.target {
            Target::Name {
                name,
                kind: redislock_kind::REDISLOCK_KIND_EXCLUSIVE,
            } => RustRequest::Lock(c.lock(name)),
            Target::Name {
                name,
                kind: redislock_kind::REDISLOCK_KIND_REDISSON,
            } => RustRequest::Redisson(c.redisson_lock(name)),
            Target::Name { name, .. } => RustRequest::Rw(c.rw_lock(name)),
            Target::Semaphore { name, permits, .. } => {
                RustRequest::Semaphore(c.semaphore(name, *permits))
            }
            Target::Set { names } => RustRequest::Set(c.lock_all(names)),
        };
        self.settings
            .iter()
            .fold(request, |request, setting| setting.value.apply(request))
    }

    /// Acquires what the request takes: waiting up to `wait`, or one attempt for `None`.
    fn acquire(&self, wait: Option<Duration>) -> Result<AnyLock, Error> {
        let write = matches!(
            self.target,
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_WRITE,
                ..
            }
        );
        let take = match self.target {
            Target::Semaphore { take, .. } => take,
            _ => 0,
        };
        Ok(match (self.rust_request(), wait) {
            (RustRequest::Lock(r), Some(w)) => r.acquire(w)?.into(),
            (RustRequest::Lock(r), None) => r.try_acquire()?.into(),
            (RustRequest::Rw(r), Some(w)) if write => r.write(w)?.into(),
            (RustRequest::Rw(r), None) if write => r.try_write()?.into(),
            (RustRequest::Rw(r), Some(w)) => r.read(w)?.into(),
            (RustRequest::Rw(r), None) => r.try_read()?.into(),
            (RustRequest::Semaphore(r), Some(w)) => r.acquire(take, w)?.into(),
            (RustRequest::Semaphore(r), None) => r.try_acquire(take)?.into(),
            (RustRequest::Set(r), Some(w)) => r.acquire(w)?.into(),
            (RustRequest::Set(r), None) => r.try_acquire()?.into(),
            (RustRequest::Redisson(r), Some(w)) => r.acquire(w)?.into(),
            (RustRequest::Redisson(r), None) => r.try_acquire()?.into(),
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
        let kind = redislock_kind::REDISLOCK_KIND_EXCLUSIVE;
        let request = Request::new(client, Target::Name { name: name.to_vec(), kind });
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
        let target = Target::Semaphore { name: name.to_vec(), permits, take: 1 };
        let request = Request::new(client, target);
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
        let request = Request::new(client, Target::Set { names: copied });
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
        let redisson = matches!(
            request.target,
            Target::Name {
                kind: redislock_kind::REDISLOCK_KIND_REDISSON,
                ..
            }
        );
        if matches!(request.target, Target::Semaphore { .. }) || redisson {
            return last_error::fail(&request.does_not_apply("fencing"));
        }
        request.set("fencing", on, |r, &on| r.fencing(on));
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
        let Some(new_kind) = redislock_kind::from_u32(kind.0) else {
            return last_error::fail(&Error::invalid_argument(format!(
                "{} is not a redislock_kind (EXCLUSIVE 0, READ 1, WRITE 2, REDISSON 3)",
                kind.0
            )));
        };
        let owner = request.is_set("owner_token");
        let fencing = request.is_set("fencing");
        let Target::Name { kind, .. } = &mut request.target else {
            return last_error::fail(&request.does_not_apply("a lock kind"));
        };
        if owner && new_kind != redislock_kind::REDISLOCK_KIND_EXCLUSIVE {
            return last_error::fail(&Error::invalid_argument(
                "an owner token applies to exclusive locks only: read, write and Redisson locks \
                 take none",
            ));
        }
        if fencing && new_kind == redislock_kind::REDISLOCK_KIND_REDISSON {
            return last_error::fail(&Error::invalid_argument(
                "fencing does not apply to a Redisson lock: Redisson's locks have no fencing \
                 tokens",
            ));
        }
        *kind = new_kind;
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
        let Target::Semaphore { take, .. } = &mut request.target else {
            return last_error::fail(&request.does_not_apply("a number of permits"));
        };
        *take = permits;
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
        if !request.target.is_exclusive() {
            return last_error::fail(&request.does_not_apply("an owner token"));
        }
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
        let lock = try_rust!(request.acquire(None));
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
        let lock = try_rust!(request.acquire(Some(wait)));
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
        let RustRequest::Lock(lock_request) = request.rust_request() else {
            return last_error::fail(&request.does_not_apply("restore"));
        };
        let lock = AnyLock::from(try_rust!(lock_request.restore(&owner)));
        // SAFETY: `lock_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(lock_out, into_handle::<redislock_lock>(lock)) };
        REDISLOCK_OK
    }
}
