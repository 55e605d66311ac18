//! The panic boundary: no panic ever unwinds into C.
//!
//! Since Rust 1.81 a panic leaving an `extern "C"` function aborts the process; a library must
//! not take its host down for a bug of its own, so each exported function catches panics and
//! reports them instead.

use std::any::Any;
use std::ffi::c_char;

use super::enums::redislock_result;
use super::last_error;

/// What an exported function returns when it cannot do its work for a reason the caller only
/// learns from the return value: a caught panic, or a NULL where a pointer is required.
pub(crate) trait FailValue {
    /// Returned after a caught panic.
    fn panicked() -> Self;
    /// Returned when a required pointer parameter is NULL.
    fn null_parameter() -> Self;
}

impl FailValue for redislock_result {
    fn panicked() -> Self {
        redislock_result::REDISLOCK_PANIC
    }
    fn null_parameter() -> Self {
        redislock_result::REDISLOCK_NULL_PARAMETER
    }
}

impl FailValue for bool {
    fn panicked() -> Self {
        false
    }
    fn null_parameter() -> Self {
        false
    }
}

impl FailValue for u64 {
    fn panicked() -> Self {
        0
    }
    fn null_parameter() -> Self {
        0
    }
}

impl FailValue for u32 {
    fn panicked() -> Self {
        0
    }
    fn null_parameter() -> Self {
        0
    }
}

impl FailValue for crate::ffi::enums::redislock_held_as {
    fn panicked() -> Self {
        Self::REDISLOCK_HELD_NONE
    }
    fn null_parameter() -> Self {
        Self::REDISLOCK_HELD_NONE
    }
}

impl FailValue for usize {
    fn panicked() -> Self {
        0
    }
    fn null_parameter() -> Self {
        0
    }
}

impl FailValue for () {
    fn panicked() -> Self {}
    fn null_parameter() -> Self {}
}

impl FailValue for *const c_char {
    fn panicked() -> Self {
        std::ptr::null()
    }
    fn null_parameter() -> Self {
        std::ptr::null()
    }
}

/// Records a caught panic as this thread's last error and returns the panic value of `T`.
pub(crate) fn caught<T: FailValue>(payload: Box<dyn Any + Send>) -> T {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    last_error::set(format!(
        "panic in redislock (a bug, please report it): {what}"
    ));
    // The payload may itself panic when dropped; never let that escape either.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(payload)));
    T::panicked()
}

/// Runs the body of an exported function, turning a panic into the function's
/// [`FailValue::panicked`] value. The body is a closure: `return` in it (also from the `try_*!`
/// macros) returns from the exported function.
///
/// `AssertUnwindSafe` is sound here because nothing observes half-done state after a panic:
/// handles are updated by whole-value replacement, and the Rust API's locks (`base/sync.rs`) do
/// not poison.
macro_rules! ffi_panic_boundary {
    ( $($body:tt)* ) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| { $($body)* })) {
            Ok(value) => value,
            Err(payload) => $crate::ffi::panic::caught(payload),
        }
    };
}
