//! The C ABI of redislock: the only module with `unsafe` code and `extern "C"` functions.
//!
//! It converts, checks and forwards; the logic lives in the Rust API, which never imports this
//! module. The headers `include/redislock.h` (C, C++) and `include/redislock_php.h` (PHP FFI)
//! are generated from these files by `scripts/ci/gen-headers.sh` with cbindgen; the calling
//! conventions they state are in `cbindgen.toml`.
//!
//! Layout, after rustls-ffi: one module per C object ([`config`], [`client`], [`request`],
//! [`lock`], [`cancel`], [`metrics`]) and glue modules for the panic boundary ([`panic`]), handles and
//! pointers ([`handle`]), result codes ([`result`], with the one mapping from
//! [`ErrorKind`](crate::ErrorKind)), the thread-local detail of the last failure
//! ([`last_error`]) and the buffer convention ([`text`]). The C enums sit in a leaf of their
//! own ([`enums`]), so that no two modules import each other.
//!
//! Every exported function is a plain `extern "C" fn` whose body runs inside
//! `ffi_panic_boundary!`, so a panic never unwinds into C: it becomes `REDISLOCK_PANIC` (or
//! false / 0 / NULL for functions that return no result code).

// The C names (`redislock_client`, `REDISLOCK_OK`) are the ABI; Rust naming rules do not apply.
#![allow(non_camel_case_types)]
// Exported functions take raw pointers from C and are deliberately not `unsafe fn`: their safety
// contract is the header's calling conventions (NULL or a valid, live pointer), which C cannot
// be made to acknowledge. Every dereference happens in an `unsafe` block with its SAFETY note.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[macro_use]
mod panic;
#[macro_use]
mod handle;
pub mod cancel;
pub mod client;
pub mod config;
pub mod enums;
pub mod fenced;
pub mod inspect;
pub mod last_error;
pub mod leader;
pub mod lock;
pub mod log;
pub mod metrics;
pub mod request;
pub mod result;
pub mod text;

use std::ffi::c_char;

/// The library version as a static NUL-terminated string, such as `"0.4.0"`. Never free it.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_version() -> *const c_char {
    ffi_panic_boundary! {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast::<c_char>()
    }
}

#[cfg(test)]
mod drift_tests;
#[cfg(test)]
mod tests;
