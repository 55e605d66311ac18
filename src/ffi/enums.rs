//! The C ABI's enums and the raw numbers C passes where one is expected: a leaf module, which
//! every other module of `ffi/` may use and which uses none of them (after rustls-ffi, whose
//! enums sit apart from the objects that return them). The mapping from
//! [`ErrorKind`](crate::ErrorKind) to result codes and their texts are in `result.rs`; the
//! kinds of lock are described, C numbers included, by their descriptors
//! ([`crate::kind::Descriptor`]), which `request/mod.rs` checks `redislock_kind` against.

/// The outcome of a call. The numbers are stable: a code is never renumbered or reused.
/// `redislock_result_message` gives a static text per code, and
/// `redislock_last_error_message` the detail of the last failure on the calling thread.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum redislock_result {
    /// Success.
    REDISLOCK_OK = 0,
    /// A single acquire attempt found the lock held by another owner.
    REDISLOCK_HELD = 1,
    /// An acquire with a wait bound was not granted before the bound ran out.
    REDISLOCK_WAIT_TIMEOUT = 2,
    /// Release or extend found the lock no longer ours: released already, lease run out, found
    /// lost by renewal, or taken over by another owner.
    REDISLOCK_NOT_HELD = 3,
    /// Bad input: empty or oversized name, zero or absurd lease or wait, invalid URL or
    /// configuration, a lock without fencing asked for its fencing token.
    REDISLOCK_INVALID_ARGUMENT = 4,
    /// Redis could not be reached, did not answer within the configured timeouts, or the server
    /// at the address does not speak the Redis protocol.
    REDISLOCK_CONNECTION = 5,
    /// Redis answered with an error reply (NOPERM, READONLY, WRONGTYPE, ...).
    REDISLOCK_REDIS_ERROR = 6,
    /// A lock handle was used in a child process after fork(); the lock is the parent's.
    REDISLOCK_FORKED = 7,
    /// A configured bound was reached (max_renewed_locks).
    REDISLOCK_LIMIT_REACHED = 8,
    /// A bug in redislock or an impossible reply from Redis; please report it.
    REDISLOCK_INTERNAL = 9,
    /// A required pointer parameter was NULL.
    REDISLOCK_NULL_PARAMETER = 10,
    /// A panic inside redislock was caught at the C boundary (a bug; please report it).
    REDISLOCK_PANIC = 11,
    /// A waiting acquire was cancelled through its `redislock_cancel`.
    REDISLOCK_CANCELLED = 12,
    /// A fenced write was refused: its fencing token is older than the resource's fence (a later
    /// holder wrote since); nothing was written (`redislock_fenced_*`).
    REDISLOCK_STALE = 13,
}

/// A result code as received from C. A C caller can pass any number where a `redislock_result`
/// is expected, and an out-of-range value in a Rust enum would be undefined behaviour, so
/// parameters take the raw number. cbindgen shows it as `redislock_result` (see the
/// `[export.rename]` entry in cbindgen.toml), which in C is a `uint32_t` typedef: same ABI.
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct ResultCode(pub u32);

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
    /// The recipe kind (a library built with the cargo feature `recipe-kind`, for its tests).
    #[cfg(feature = "recipe-kind")]
    REDISLOCK_KIND_RECIPE = 100,
}

/// A kind as received from C: any number may come, and an out-of-range value in a Rust enum
/// would be undefined behaviour, so the parameter takes the raw number. cbindgen shows it as
/// `redislock_kind` (see the `[export.rename]` entry in cbindgen.toml), a `uint32_t` typedef in
/// C: same ABI.
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct KindCode(pub u32);

/// Whose waiters `redislock_client_inspect` counts. The numbers are stable.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redislock_inspect_kind {
    /// The exclusive lock's.
    REDISLOCK_INSPECT_EXCLUSIVE = 0,
    /// The read/write lock's.
    REDISLOCK_INSPECT_RWLOCK = 1,
    /// The semaphore's.
    REDISLOCK_INSPECT_SEMAPHORE = 2,
    /// Every kind's the name is used as.
    REDISLOCK_INSPECT_ANY = 3,
}

/// A `redislock_inspect_kind` as received from C: any number may come (see `KindCode`).
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct InspectKindCode(pub u32);

impl redislock_inspect_kind {
    /// Every value, in the order of their numbers.
    pub(crate) const ALL: [redislock_inspect_kind; 4] = [
        redislock_inspect_kind::REDISLOCK_INSPECT_EXCLUSIVE,
        redislock_inspect_kind::REDISLOCK_INSPECT_RWLOCK,
        redislock_inspect_kind::REDISLOCK_INSPECT_SEMAPHORE,
        redislock_inspect_kind::REDISLOCK_INSPECT_ANY,
    ];
}

/// What holds a lock (`redislock_inspect_held_as`). The numbers are stable.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum redislock_held_as {
    /// Nothing: the lock is free.
    REDISLOCK_HELD_NONE = 0,
    /// One owner: an exclusive lock or a writer (or a plain `SET NX` client).
    REDISLOCK_HELD_EXCLUSIVE = 1,
    /// Readers of a read/write lock.
    REDISLOCK_HELD_READERS = 2,
    /// Permits of a semaphore.
    REDISLOCK_HELD_SEMAPHORE = 3,
    /// A key of another type than the locks use.
    REDISLOCK_HELD_OTHER = 4,
    /// Redisson's lock (`REDISLOCK_KIND_REDISSON`, or Redisson's own `RLock`): its holders are
    /// its owners (client and thread).
    REDISLOCK_HELD_REDISSON = 5,
}

impl redislock_held_as {
    /// Every value, in the order of their numbers.
    const ALL: [redislock_held_as; 6] = [
        redislock_held_as::REDISLOCK_HELD_NONE,
        redislock_held_as::REDISLOCK_HELD_EXCLUSIVE,
        redislock_held_as::REDISLOCK_HELD_READERS,
        redislock_held_as::REDISLOCK_HELD_SEMAPHORE,
        redislock_held_as::REDISLOCK_HELD_OTHER,
        redislock_held_as::REDISLOCK_HELD_REDISSON,
    ];

    /// The value of what held a lock: its number is [`HeldAs::code`] (0 when free).
    pub(crate) fn of(held: Option<crate::HeldAs>) -> redislock_held_as {
        let n = held.map_or(0, crate::HeldAs::code);
        redislock_held_as::ALL
            .into_iter()
            .find(|c| *c as u32 == n)
            .unwrap_or(redislock_held_as::REDISLOCK_HELD_OTHER)
    }
}

#[cfg(test)]
mod inspect_enum_tests {
    use super::*;
    use crate::{HeldAs, LockKind};

    #[test]
    fn the_c_values_are_the_rust_values_by_name() {
        assert_eq!(
            redislock_held_as::of(None),
            redislock_held_as::REDISLOCK_HELD_NONE
        );
        for h in HeldAs::ALL {
            let c = format!("{:?}", redislock_held_as::of(Some(h)));
            assert_eq!(c, format!("REDISLOCK_HELD_{}", h.name().to_uppercase()));
        }
        let c = redislock_inspect_kind::ALL;
        assert_eq!(c.len(), LockKind::ALL.len());
        for (i, k) in LockKind::ALL.into_iter().enumerate() {
            assert_eq!(c[i] as usize, i);
            assert_eq!(
                format!("{:?}", c[i]),
                format!("REDISLOCK_INSPECT_{}", k.name().to_uppercase())
            );
        }
    }
}

/// How important a log record is. Lost locks, late or failing renewals: WARN; reconnects:
/// INFO; handoffs and failed connects: DEBUG. No record holds a lock token or a password.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum redislock_log_level {
    /// No records (as a `max_level`).
    REDISLOCK_LOG_OFF = 0,
    /// Failures of the library itself (a panicking callback).
    REDISLOCK_LOG_ERROR = 1,
    /// Lost locks, late or failing renewals.
    REDISLOCK_LOG_WARN = 2,
    /// Reconnects.
    REDISLOCK_LOG_INFO = 3,
    /// Handoffs to waiters, failed connects.
    REDISLOCK_LOG_DEBUG = 4,
    /// Everything.
    REDISLOCK_LOG_TRACE = 5,
}
