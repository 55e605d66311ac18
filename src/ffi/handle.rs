//! Handles and pointers: how a C pointer becomes a Rust reference, and back.
//!
//! Every C object (`redislock_config`, `redislock_client`, `redislock_lock`) is an opaque,
//! zero-sized type in Rust; a pointer to it is really a `Box` of the Rust value named by
//! [`BoxHandle::Inner`]. That is written only here: `into_handle` makes one, `handle_ref` /
//! `handle_mut` borrow it and `free_handle` drops it. (A `Client` is itself a cheap shared
//! handle, so even the thread-safe client needs no `Arc` at this level.)
//!
//! The `try_*!` macros check a parameter and, when it is unusable, record the reason as the
//! thread's last error and `return` the function's failure value from the panic-boundary
//! closure.

use std::ffi::{CStr, c_char};

use super::enums::redislock_result;
use super::last_error;
use crate::Error;

/// An opaque C type whose pointers own a boxed `Inner`.
pub(crate) trait BoxHandle {
    /// The Rust value behind the handle.
    type Inner;
}

/// Boxes `value` and gives its handle to C, which must pass it to the matching `_free`.
pub(crate) fn into_handle<H: BoxHandle>(value: H::Inner) -> *mut H {
    Box::into_raw(Box::new(value)).cast::<H>()
}

/// Borrows the value behind a handle; `None` for NULL.
///
/// # Safety
/// `handle` is NULL or was made by [`into_handle`] for `H` and not freed, and it is not freed
/// while the returned reference lives.
pub(crate) unsafe fn handle_ref<'a, H: BoxHandle>(handle: *const H) -> Option<&'a H::Inner> {
    // SAFETY: by the contract above a non-NULL `handle` points to a live, boxed `H::Inner`.
    unsafe { handle.cast::<H::Inner>().as_ref() }
}

/// Mutably borrows the value behind a handle; `None` for NULL.
///
/// # Safety
/// As for [`handle_ref`], and no other reference to the value exists while this one lives.
pub(crate) unsafe fn handle_mut<'a, H: BoxHandle>(handle: *mut H) -> Option<&'a mut H::Inner> {
    // SAFETY: by the contract above a non-NULL `handle` points to a live, boxed `H::Inner` that
    // nothing else borrows.
    unsafe { handle.cast::<H::Inner>().as_mut() }
}

/// Drops the value behind a handle; nothing for NULL.
///
/// # Safety
/// `handle` is NULL or was made by [`into_handle`] for `H` and not freed, and nothing uses it
/// any more.
pub(crate) unsafe fn free_handle<H: BoxHandle>(handle: *mut H) {
    if !handle.is_null() {
        // SAFETY: by the contract above the pointer came from `Box::into_raw` of an `H::Inner`
        // and ownership comes back here exactly once.
        drop(unsafe { Box::from_raw(handle.cast::<H::Inner>()) });
    }
}

/// Writes an out-parameter.
///
/// # Safety
/// `out` is a non-NULL pointer to writable, aligned memory for a `T`. The old value is
/// overwritten without being dropped.
pub(crate) unsafe fn write_out<T>(out: *mut T, value: T) {
    // SAFETY: by the contract above.
    unsafe { out.write(value) }
}

/// Borrows `len` bytes at `ptr` (a lock name or key prefix). `len` 0 gives an empty slice even
/// for NULL; NULL with a length is `REDISLOCK_NULL_PARAMETER`.
///
/// # Safety
/// When `ptr` is not NULL it points to `len` readable bytes that stay unchanged while the slice
/// lives.
pub(crate) unsafe fn bytes<'a>(
    ptr: *const u8,
    len: usize,
    param: &str,
) -> Result<&'a [u8], redislock_result> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        last_error::null_parameter(param);
        return Err(redislock_result::REDISLOCK_NULL_PARAMETER);
    }
    if len > isize::MAX as usize {
        let e = Error::invalid_argument(format!("`{param}` length {len} is absurd"));
        return Err(last_error::fail(&e));
    }
    // SAFETY: non-NULL, `len` readable bytes by the contract above, and `len <= isize::MAX`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows a NUL-terminated UTF-8 string (a Redis URL).
///
/// # Safety
/// When `ptr` is not NULL it points to a NUL-terminated string that stays unchanged while the
/// result lives.
pub(crate) unsafe fn c_str<'a>(
    ptr: *const c_char,
    param: &str,
) -> Result<&'a str, redislock_result> {
    if ptr.is_null() {
        last_error::null_parameter(param);
        return Err(redislock_result::REDISLOCK_NULL_PARAMETER);
    }
    // SAFETY: non-NULL and NUL-terminated by the contract above.
    let s = unsafe { CStr::from_ptr(ptr) };
    s.to_str().map_err(|_| {
        last_error::fail(&Error::invalid_argument(format!(
            "`{param}` is not valid UTF-8"
        )))
    })
}

/// `let client = try_ref!(client);`: the value behind a `const` handle parameter, or `return`
/// the function's NULL-parameter value.
macro_rules! try_ref {
    ($handle:ident) => {
        // SAFETY: the header's calling conventions: a handle argument is NULL or a live handle
        // of its type that no other thread frees during the call.
        match unsafe { $crate::ffi::handle::handle_ref($handle) } {
            Some(inner) => inner,
            None => {
                $crate::ffi::last_error::null_parameter(stringify!($handle));
                return $crate::ffi::panic::FailValue::null_parameter();
            }
        }
    };
}

/// `let config = try_mut!(config);`: as [`try_ref!`] for a handle the call may change.
macro_rules! try_mut {
    ($handle:ident) => {
        // SAFETY: the header's calling conventions: a non-const handle argument is NULL or a
        // live handle of its type that no other thread uses during the call.
        match unsafe { $crate::ffi::handle::handle_mut($handle) } {
            Some(inner) => inner,
            None => {
                $crate::ffi::last_error::null_parameter(stringify!($handle));
                return $crate::ffi::panic::FailValue::null_parameter();
            }
        }
    };
}

/// `try_out!(lock_out);`: checks that an out-parameter is not NULL, or `return`s
/// `REDISLOCK_NULL_PARAMETER`.
macro_rules! try_out {
    ($out:ident) => {
        if $out.is_null() {
            $crate::ffi::last_error::null_parameter(stringify!($out));
            return $crate::ffi::enums::redislock_result::REDISLOCK_NULL_PARAMETER;
        }
    };
}

/// `let name = try_bytes!(name, name_len);`: a pointer + length byte string, or `return` the
/// error code.
macro_rules! try_bytes {
    ($ptr:ident, $len:ident) => {
        // SAFETY: the header's calling conventions: a non-NULL byte pointer points to `len`
        // readable bytes that do not change during the call.
        match unsafe { $crate::ffi::handle::bytes($ptr, $len, stringify!($ptr)) } {
            Ok(bytes) => bytes,
            Err(code) => return code,
        }
    };
}

/// `let url = try_str!(url);`: a NUL-terminated UTF-8 string, or `return` the error code.
macro_rules! try_str {
    ($ptr:ident) => {
        // SAFETY: the header's calling conventions: a non-NULL string pointer points to a
        // NUL-terminated string that does not change during the call.
        match unsafe { $crate::ffi::handle::c_str($ptr, stringify!($ptr)) } {
            Ok(s) => s,
            Err(code) => return code,
        }
    };
}

/// `let lock = try_rust!(client.try_acquire(name));`: the `Ok` value of a Rust API call, or
/// record the error as the thread's last error and `return` its result code.
macro_rules! try_rust {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(e) => return $crate::ffi::last_error::fail(&e),
        }
    };
}
