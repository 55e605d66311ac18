//! # redislock
//!
//! Blocking Redis locks for threaded Rust programs, with a C ABI so that C and PHP (through FFI)
//! use the very same implementation.
//!
//! - Acquire is the classic `SET key token NX PX lease` with a 128-bit random token; release and
//!   extend are Lua compare-and-act scripts, so programs using that classic pattern on the same
//!   key exclude and are excluded by this library.
//! - Every lock has a finite lease. Auto-renewed locks (the default) have a renewal thread that
//!   extends the lease every lease/3 while the key still holds the token; a lock found gone,
//!   taken over, or unrenewable until its lease ran out is marked lost, and the holder can see it.
//! - Waiting does not spin: a release hands the lock directly to the oldest waiter and wakes it,
//!   with a jittered fallback re-check for holders that vanish.
//! - Optional fencing tokens, strictly increasing per lock name.
//! - Beyond the exclusive lock: read/write locks ([`Client::rw_lock`]), semaphores
//!   ([`Client::semaphore`]) and sets of locks taken all or none ([`Client::lock_all`]), with
//!   the same leases, renewal, fair waiting and lost-grant reports.
//! - Fork-safe: a client used after `fork()` rebuilds its pools; a lock inherited across fork is
//!   not the child's.
//!
//! ```no_run
//! use std::time::Duration;
//! use redislock::Client;
//!
//! let client = Client::open("redis://127.0.0.1:6379/")?;
//! let lock = client.acquire("stock:42", Duration::from_secs(5))?;
//! // ... the critical section ...
//! lock.release()?;
//! # Ok::<(), redislock::Error>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod acquire;
mod backend;
mod cancel;
mod client;
mod config;
mod error;
// The C ABI: its `#[unsafe(no_mangle)] extern "C"` functions are exported from the cdylib and
// staticlib whatever the module's visibility, and are not part of the Rust API.
#[allow(unsafe_code)]
mod ffi;
mod keys;
mod kinds;
mod lock;
mod ops;
mod pool;
mod quorum;
mod renewal;
mod replication;
mod scripts;
mod token;
mod topology;
mod waiting;

pub use backend::MAX_PERSISTENT_BACKENDS;
pub use cancel::Cancel;
pub use client::{Client, LockRequest};
pub use config::{ClientBuilder, MAX_LEASE, MAX_WAIT, MIN_RENEWED_LEASE};
pub use error::{Error, ErrorKind};
pub use keys::MAX_NAME_LEN;
pub use kinds::{
    MAX_PERMITS, MAX_SET_NAMES, MultiLock, MultiLockRequest, Permits, ReadLock, RwLockRequest,
    SemaphoreRequest, WriteLock,
};
pub use lock::Lock;
pub use renewal::{IDLE_EXIT, Stats};
pub use token::{MAX_OWNER_LEN, MIN_OWNER_LEN};

/// The README's Rust examples, compiled as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
