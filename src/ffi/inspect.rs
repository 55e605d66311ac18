//! `redislock_inspect`: a look at a lock without holding it (`redislock_client_inspect`), read
//! through getters so that it can grow.

use std::ffi::{CString, c_char};
use std::ptr;
use std::sync::OnceLock;
use std::time::Duration;

use super::client::redislock_client;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::enums::{InspectKindCode, redislock_held_as, redislock_inspect_kind};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use super::last_error;
use crate::{Error, HeldAs, LockInfo, LockKind};

/// What a lock looked like at one moment (`redislock_client_inspect`): whether it was held, as
/// what, by how many, for how long yet, how many waited, its fencing counter; never a token.
/// Read it with the `redislock_inspect_*` getters; free it with `redislock_inspect_free`.
pub struct redislock_inspect {
    _private: [u8; 0],
}

impl BoxHandle for redislock_inspect {
    type Inner = LockInfo;
}

/// Looks at the lock `name` (`name_len` bytes) without holding it: one round trip (with
/// Redlock, one to every master; held there means held by one owner on a majority). `kind` is
/// whose waiters are counted. On success `*inspect_out` is a new handle to free with
/// `redislock_inspect_free`.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (name; `kind` out of range; on Redlock, a `kind`
/// other than EXCLUSIVE and ANY), CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_inspect(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    kind: InspectKindCode,
    inspect_out: *mut *mut redislock_inspect,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(inspect_out);
        // The C values and `LockKind::ALL` are in one order (`enums.rs`'s tests check it by name).
        let place = redislock_inspect_kind::ALL
            .iter()
            .position(|&c| c as u32 == kind.0);
        let Some(&kind) = place.and_then(|i| LockKind::ALL.get(i)) else {
            let n = kind.0;
            let known: Vec<String> = LockKind::ALL
                .iter()
                .enumerate()
                .map(|(i, k)| format!("{} {i}", k.name().to_uppercase()))
                .collect();
            return last_error::fail(&Error::invalid_argument(format!(
                "{n} is not a redislock_inspect_kind ({})",
                known.join(", ")
            )));
        };
        let info = try_rust!(client.inspect(name, kind));
        // SAFETY: `inspect_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(inspect_out, into_handle::<redislock_inspect>(info)) };
        REDISLOCK_OK
    }
}

/// Whether anything held the lock. false for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_is_held(inspect: *const redislock_inspect) -> bool {
    ffi_panic_boundary! {
        try_ref!(inspect).held
    }
}

/// What held the lock; REDISLOCK_HELD_NONE when free, and for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_held_as(
    inspect: *const redislock_inspect,
) -> redislock_held_as {
    ffi_panic_boundary! {
        redislock_held_as::of(try_ref!(inspect).held_as)
    }
}

/// The name of a `redislock_held_as` value, as the command-line tool and the PHP package write
/// it: the enumerator's name without `REDISLOCK_HELD_`, in lower case ("exclusive" for
/// REDISLOCK_HELD_EXCLUSIVE). NULL for REDISLOCK_HELD_NONE and for a number that is no
/// `redislock_held_as`. A static NUL-terminated text: never free it.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_held_as_name(held_as: u32) -> *const c_char {
    ffi_panic_boundary! {
        static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
        NAMES
            .get_or_init(|| {
                HeldAs::ALL
                    .into_iter()
                    .map(|h| (h.code(), static_text(h.name())))
                    .collect()
            })
            .iter()
            .find(|(code, _)| *code == held_as)
            .map_or(ptr::null(), |(_, name)| name.as_ptr())
    }
}

/// The names of the `redislock_inspect_kind` values in the order of their numbers, separated by
/// ", ": each the enumerator's name without `REDISLOCK_INSPECT_`, in lower case ("exclusive" for
/// REDISLOCK_INSPECT_EXCLUSIVE), as the command-line tool and the PHP package take them. A
/// static NUL-terminated text: never free it.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_kind_names() -> *const c_char {
    ffi_panic_boundary! {
        static NAMES: OnceLock<CString> = OnceLock::new();
        NAMES
            .get_or_init(|| static_text(&LockKind::ALL.map(LockKind::name).join(", ")))
            .as_ptr()
    }
}

/// `text` as a C string, for the statics above (a name has no NUL).
fn static_text(text: &str) -> CString {
    CString::new(text).expect("a name without NUL")
}

/// How many grants held the lock: 1 for one owner, else the grants that `held_as` names (the
/// readers, the grants of permits, the owners of a reentrant lock); 0 when free or held by a
/// key of another type, and for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_holders(inspect: *const redislock_inspect) -> u32 {
    ffi_panic_boundary! {
        try_ref!(inspect).holders
    }
}

/// The permits held, of a name held by permits (0 otherwise, and for NULL).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_permits_held(inspect: *const redislock_inspect) -> u32 {
    ffi_panic_boundary! {
        try_ref!(inspect).permits_held
    }
}

/// The number of permits of a name held by permits, while something fixes it; 0 otherwise, and
/// for NULL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_permits(inspect: *const redislock_inspect) -> u32 {
    ffi_panic_boundary! {
        try_ref!(inspect).permits.unwrap_or(0)
    }
}

/// Milliseconds until the lock frees itself if no holder renews it (with Redlock, the shortest
/// among the majority that holds it); 0 when free, and for NULL; UINT64_MAX for a key without
/// expiry.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_remaining_ms(inspect: *const redislock_inspect) -> u64 {
    ffi_panic_boundary! {
        let info = try_ref!(inspect);
        match info.remaining {
            Some(r) => u64::try_from(r.as_millis()).unwrap_or(u64::MAX),
            None if info.held => u64::MAX,
            None => Duration::ZERO.as_millis() as u64,
        }
    }
}

/// Writes the number of waiters queued (of the kind asked for) to `*waiters_out`.
/// Errors: INVALID_ARGUMENT (Redlock, whose masters keep a queue each, with no agreed count),
/// NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_waiters(
    inspect: *const redislock_inspect,
    waiters_out: *mut u32,
) -> redislock_result {
    ffi_panic_boundary! {
        let info = try_ref!(inspect);
        try_out!(waiters_out);
        let unknown =
            "the number of waiters is not known with Redlock: each master keeps a queue of its own";
        write_known(info.waiters, waiters_out, unknown)
    }
}

/// Writes the name's fencing counter (the token of the latest fenced grant; 0 before the first)
/// to `*counter_out`.
/// Errors: INVALID_ARGUMENT (Redlock, which has no fencing tokens), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_fencing_counter(
    inspect: *const redislock_inspect,
    counter_out: *mut u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let info = try_ref!(inspect);
        try_out!(counter_out);
        let unknown = "Redlock has no fencing tokens, so no fencing counter";
        write_known(info.fencing_counter, counter_out, unknown)
    }
}

/// Writes `value` to `out` (checked not NULL), or fails with INVALID_ARGUMENT saying `unknown`.
fn write_known<T>(value: Option<T>, out: *mut T, unknown: &str) -> redislock_result {
    let Some(value) = value else {
        return last_error::fail(&Error::invalid_argument(unknown));
    };
    // SAFETY: `out` is not NULL (checked by the caller) and points to writable memory for a `T`
    // (calling conventions).
    unsafe { write_out(out, value) };
    REDISLOCK_OK
}

/// Frees the handle. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_inspect_free(inspect: *mut redislock_inspect) {
    ffi_panic_boundary! {
        // SAFETY: `inspect` is NULL or a live handle that the caller gives up and no other
        // thread uses (calling conventions).
        unsafe { free_handle(inspect) }
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;

    use super::*;

    /// The text of a static C string, or None for NULL.
    fn text(p: *const c_char) -> Option<&'static str> {
        // SAFETY: `p` is NULL or a static NUL-terminated text of this module.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_str().unwrap())
    }

    #[test]
    fn held_as_names_are_the_rust_names() {
        for h in HeldAs::ALL {
            assert_eq!(redislock_held_as::of(Some(h)) as u32, h.code());
            assert_eq!(
                text(redislock_held_as_name(h.code())),
                Some(h.name()),
                "{h:?}"
            );
        }
        let none = redislock_held_as::REDISLOCK_HELD_NONE as u32;
        let beyond = HeldAs::ALL.map(HeldAs::code).into_iter().max().unwrap() + 1;
        for n in [none, beyond, 1000, u32::MAX] {
            assert_eq!(text(redislock_held_as_name(n)), None, "{n}");
        }
    }

    #[test]
    fn inspect_kind_names_are_the_rust_names_by_number() {
        let names: Vec<&str> = text(redislock_inspect_kind_names())
            .unwrap()
            .split(", ")
            .collect();
        assert_eq!(names, LockKind::ALL.map(LockKind::name));
        for c in redislock_inspect_kind::ALL {
            assert_eq!(
                format!("{c:?}"),
                format!("REDISLOCK_INSPECT_{}", names[c as usize].to_uppercase())
            );
        }
        // The same text each time: a static, never rebuilt.
        assert_eq!(
            redislock_inspect_kind_names(),
            redislock_inspect_kind_names()
        );
    }
}
