//! Unit tests of the C boundary that need no Redis server. The full C API is exercised from C
//! by `ffi-tests/c` (driven by `tests/ffi_c.rs`); the repository's copies of its numbers are
//! checked by `drift_tests.rs`.

use std::ffi::{CStr, c_char};
use std::ptr;
use std::time::Duration;

use super::client::*;
use super::config::*;
use super::enums::{KindCode, ResultCode, redislock_kind, redislock_result, redislock_result::*};
use super::last_error::redislock_last_error_message;
use super::lock::*;
use super::redislock_version;
use super::request::*;
use super::result::redislock_result_message;
use crate::ErrorKind;

fn last_error() -> String {
    let mut buf = [0 as c_char; 512];
    let n = redislock_last_error_message(buf.as_mut_ptr(), buf.len());
    // SAFETY: the function NUL-terminates within the buffer.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(n, text.len());
    text
}

fn boundary_around<T: super::panic::FailValue>(f: impl FnOnce() -> T) -> T {
    ffi_panic_boundary! { f() }
}

#[test]
fn panics_become_results_and_messages() {
    let r: redislock_result = boundary_around(|| panic!("boom {}", 42));
    assert_eq!(r, REDISLOCK_PANIC);
    assert!(last_error().contains("boom 42"), "{}", last_error());
    assert!(!boundary_around::<bool>(|| panic!("static text")));
    assert!(last_error().contains("static text"));
    assert_eq!(boundary_around::<u64>(|| panic!("x")), 0);
    assert!(boundary_around::<*const c_char>(|| panic!("x")).is_null());
}

#[test]
fn every_kind_has_a_distinct_code_and_text() {
    let codes: Vec<_> = ErrorKind::ALL
        .iter()
        .map(|&k| redislock_result::from_kind(k))
        .collect();
    for (i, (&kind, a)) in ErrorKind::ALL.iter().zip(&codes).enumerate() {
        assert_ne!(*a, REDISLOCK_OK);
        assert!(codes[i + 1..].iter().all(|b| b != a), "{a:?} twice");
        assert_eq!(a.kind(), Some(kind));
        assert_eq!(a.message(), kind.summary());
    }
    let mut all: Vec<_> = redislock_result::all().collect();
    all.sort_by_key(|&c| c as u32);
    for (n, code) in all.iter().enumerate() {
        assert_eq!(
            *code as u32, n as u32,
            "codes are numbered 0, 1, 2, ... without gaps"
        );
        assert_eq!(redislock_result::from_u32(n as u32), Some(*code));
    }
    assert_eq!(redislock_result::from_u32(all.len() as u32), None);
    let texts: Vec<_> = all.iter().map(|c| c.message()).collect();
    for (i, t) in texts.iter().enumerate() {
        assert!(!t.is_empty() && *t != "unknown result code", "{:?}", all[i]);
        assert!(!texts[i + 1..].contains(t), "text {t:?} twice");
    }
}

#[test]
fn messages_follow_the_buffer_convention() {
    let full = redislock_result_message(ResultCode(REDISLOCK_HELD as u32), ptr::null_mut(), 0);
    assert_eq!(full, "the lock is held by another owner".len());
    let mut buf = [0x55 as c_char; 8];
    let n = redislock_result_message(ResultCode(1), buf.as_mut_ptr(), buf.len());
    assert_eq!(n, full);
    // SAFETY: NUL-terminated within the buffer.
    assert_eq!(
        unsafe { CStr::from_ptr(buf.as_ptr()) }.to_bytes(),
        b"the loc"
    );
    let mut one = [0x55 as c_char; 1];
    redislock_result_message(ResultCode(1), one.as_mut_ptr(), 1);
    assert_eq!(one[0], 0);
    let n = redislock_result_message(ResultCode(999), ptr::null_mut(), 0);
    assert_eq!(n, "unknown result code".len());
}

#[test]
fn cut_text_never_splits_a_character() {
    let mut buf = [0x55 as c_char; 3];
    let n = super::text::write_text("aé!", buf.as_mut_ptr(), buf.len());
    assert_eq!(n, 4);
    // "aé" is 3 bytes; only "a" fits before the NUL without splitting "é".
    assert_eq!(buf[..2], [b'a' as c_char, 0]);
}

#[test]
fn version_is_the_crate_version() {
    // SAFETY: a static NUL-terminated string.
    let v = unsafe { CStr::from_ptr(redislock_version()) };
    assert_eq!(v.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
}

#[test]
fn configs_are_checked_when_building() {
    let mut config = ptr::null_mut();
    assert_eq!(
        redislock_config_new(c"redis://127.0.0.1:1/".as_ptr(), &mut config),
        REDISLOCK_OK
    );
    assert_eq!(redislock_config_set_pool_size(config, 0), REDISLOCK_OK);
    let mut client = ptr::null_mut();
    assert_eq!(
        redislock_client_from_config(config, &mut client),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(
        client.is_null(),
        "out-parameters are written only on success"
    );
    assert!(
        last_error().contains("pool_size must be between 1 and 10000, got 0"),
        "{}",
        last_error()
    );
    assert_eq!(redislock_config_set_pool_size(config, 4), REDISLOCK_OK);
    assert_eq!(redislock_config_set_lease_ms(config, 5000), REDISLOCK_OK);
    assert_eq!(redislock_config_set_auto_renew(config, false), REDISLOCK_OK);
    assert_eq!(redislock_config_set_fencing(config, true), REDISLOCK_OK);
    assert_eq!(
        redislock_client_from_config(config, &mut client),
        REDISLOCK_OK
    );
    redislock_config_free(config);
    // SAFETY: a live client made above.
    let rust = unsafe { super::handle::handle_ref(client) }.unwrap();
    assert_eq!(rust.default_lease(), Duration::from_millis(5000));
    assert!(!rust.default_auto_renew());
    assert!(rust.default_fencing());
    // A lease out of range is refused before any connection, with the accepted range.
    let mut request = ptr::null_mut();
    assert_eq!(
        redislock_request_new(client, c"n".as_ptr().cast(), 1, &mut request),
        REDISLOCK_OK
    );
    let mut lock = ptr::null_mut();
    for (lease_ms, auto_renew, range) in [
        (
            0,
            false,
            "lease must be between 1 ms and 30 days (at least 100 ms if auto-renewed)",
        ),
        (u64::MAX, true, "lease must be between 1 ms and 30 days"),
        (
            99,
            true,
            "an auto-renewed lease must be between 100 ms and 30 days, got 99 ms",
        ),
    ] {
        assert_eq!(
            redislock_request_set_lease_ms(request, lease_ms),
            REDISLOCK_OK
        );
        assert_eq!(
            redislock_request_set_auto_renew(request, auto_renew),
            REDISLOCK_OK
        );
        assert_eq!(
            redislock_request_try_acquire(request, &mut lock),
            REDISLOCK_INVALID_ARGUMENT
        );
        assert!(last_error().contains(range), "{}", last_error());
    }
    assert!(lock.is_null());
    redislock_request_free(request);
    redislock_client_free(client);
}

#[test]
fn documented_defaults_are_the_defaults() {
    let mut client = ptr::null_mut();
    assert_eq!(
        redislock_client_new(c"redis://127.0.0.1:1/".as_ptr(), &mut client),
        REDISLOCK_OK
    );
    // SAFETY: a live client made above.
    let rust = unsafe { super::handle::handle_ref(client) }.unwrap();
    assert_eq!(rust.default_lease(), Duration::from_secs(30));
    assert!(rust.default_auto_renew());
    assert!(!rust.default_fencing());
    redislock_client_free(client);
}

#[test]
fn null_parameters_are_refused_and_named() {
    let mut client = ptr::null_mut();
    assert_eq!(
        redislock_client_new(ptr::null(), &mut client),
        REDISLOCK_NULL_PARAMETER
    );
    assert!(last_error().contains("`url`"), "{}", last_error());
    assert_eq!(
        redislock_client_new(c"redis://127.0.0.1:1/".as_ptr(), ptr::null_mut()),
        REDISLOCK_NULL_PARAMETER
    );
    assert!(last_error().contains("`client_out`"), "{}", last_error());
    let mut lock = ptr::null_mut();
    assert_eq!(
        redislock_lock_try_acquire(ptr::null(), c"x".as_ptr().cast(), 1, &mut lock),
        REDISLOCK_NULL_PARAMETER
    );
    assert!(!redislock_lock_is_held(ptr::null()));
    assert_eq!(redislock_lock_remaining_ms(ptr::null()), 0);
    redislock_lock_free(ptr::null_mut());
    redislock_client_free(ptr::null_mut());
    redislock_config_free(ptr::null_mut());
}

#[test]
fn non_utf8_urls_are_invalid() {
    let mut client = ptr::null_mut();
    let url = [b'r', 0xff, 0];
    assert_eq!(
        redislock_client_new(url.as_ptr().cast(), &mut client),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(client.is_null());
}

/// A client of a server that is not there: an acquire that gets past the checks fails with
/// CONNECTION, so a test can tell which values were accepted.
fn client_of_nothing() -> *mut redislock_client {
    let mut client = ptr::null_mut();
    assert_eq!(
        redislock_client_new(c"redis://127.0.0.1:1/".as_ptr(), &mut client),
        REDISLOCK_OK
    );
    client
}

#[test]
fn requests_refuse_null_and_name_the_parameter() {
    let client = client_of_nothing();
    let mut request = ptr::null_mut();
    let mut lock: *mut redislock_lock = ptr::null_mut();
    let name = c"n".as_ptr().cast();
    let calls: [(&str, &dyn Fn() -> redislock_result); 11] = [
        ("client", &|| {
            redislock_request_new(ptr::null(), name, 1, &mut ptr::null_mut())
        }),
        ("name", &|| {
            redislock_request_new(client, ptr::null(), 1, &mut ptr::null_mut())
        }),
        ("request_out", &|| {
            redislock_request_new(client, name, 1, ptr::null_mut())
        }),
        ("request", &|| {
            redislock_request_set_lease_ms(ptr::null_mut(), 1000)
        }),
        ("request", &|| {
            redislock_request_set_auto_renew(ptr::null_mut(), true)
        }),
        ("request", &|| {
            redislock_request_set_fencing(ptr::null_mut(), true)
        }),
        ("request", &|| {
            redislock_request_set_owner_token(ptr::null_mut(), name, 1)
        }),
        ("request", &|| {
            redislock_request_set_cancel(ptr::null_mut(), ptr::null())
        }),
        ("request", &|| {
            redislock_request_try_acquire(ptr::null(), &mut ptr::null_mut())
        }),
        ("request", &|| {
            redislock_request_acquire(ptr::null(), 10, &mut ptr::null_mut())
        }),
        ("request", &|| {
            redislock_request_restore(ptr::null(), name, 1, &mut ptr::null_mut())
        }),
    ];
    for (param, call) in calls {
        assert_eq!(call(), REDISLOCK_NULL_PARAMETER, "{param}");
        assert!(
            last_error().contains(&format!("`{param}`")),
            "{}",
            last_error()
        );
    }
    assert_eq!(
        redislock_request_new(client, name, 1, &mut request),
        REDISLOCK_OK
    );
    let lock_out = &mut lock as *mut *mut redislock_lock;
    let calls: [(&str, &dyn Fn() -> redislock_result); 5] = [
        ("owner", &|| {
            redislock_request_set_owner_token(request, ptr::null(), 20)
        }),
        ("lock_out", &|| {
            redislock_request_try_acquire(request, ptr::null_mut())
        }),
        ("lock_out", &|| {
            redislock_request_acquire(request, 10, ptr::null_mut())
        }),
        ("owner", &|| {
            redislock_request_restore(request, ptr::null(), 20, lock_out)
        }),
        ("lock_out", &|| {
            redislock_request_restore(request, name, 1, ptr::null_mut())
        }),
    ];
    for (param, call) in calls {
        assert_eq!(call(), REDISLOCK_NULL_PARAMETER, "{param}");
        assert!(
            last_error().contains(&format!("`{param}`")),
            "{}",
            last_error()
        );
    }
    assert!(lock.is_null());
    redislock_request_free(request);
    redislock_request_free(ptr::null_mut());
    redislock_client_free(client);
}

#[test]
fn request_settings_are_checked_by_the_acquire_and_replaced_by_a_second_call() {
    let client = client_of_nothing();
    let mut request = ptr::null_mut();
    let mut lock = ptr::null_mut();
    assert_eq!(
        redislock_request_new(client, c"n".as_ptr().cast(), 1, &mut request),
        REDISLOCK_OK
    );
    // Recorded without a check; refused by the acquire (before any connection).
    assert_eq!(redislock_request_set_lease_ms(request, 0), REDISLOCK_OK);
    assert_eq!(
        redislock_request_try_acquire(request, &mut lock),
        REDISLOCK_INVALID_ARGUMENT
    );
    // The second value replaces the first: the acquire gets as far as the network.
    assert_eq!(redislock_request_set_lease_ms(request, 5000), REDISLOCK_OK);
    assert_eq!(
        redislock_request_try_acquire(request, &mut lock),
        REDISLOCK_CONNECTION
    );
    // A malformed owner token: too short, not UTF-8, not printable.
    for owner in [
        &b"short"[..],
        b"\xff\xfe-0123456789abcdef",
        b"with space 0123456789",
    ] {
        assert_eq!(
            redislock_request_set_owner_token(request, owner.as_ptr(), owner.len()),
            REDISLOCK_OK
        );
        assert_eq!(
            redislock_request_acquire(request, 10, &mut lock),
            REDISLOCK_INVALID_ARGUMENT,
            "{owner:?}"
        );
        assert!(last_error().contains("owner token"), "{}", last_error());
    }
    let good = b"order-42-0123456789";
    assert_eq!(
        redislock_request_set_owner_token(request, good.as_ptr(), good.len()),
        REDISLOCK_OK
    );
    assert_eq!(
        redislock_request_try_acquire(request, &mut lock),
        REDISLOCK_CONNECTION
    );
    // The restore has a token of its own, checked the same way.
    assert_eq!(
        redislock_request_restore(request, b"short".as_ptr(), 5, &mut lock),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(lock.is_null());
    redislock_request_free(request);
    redislock_client_free(client);
}

#[test]
fn a_cancelled_request_fails_at_once_and_null_takes_the_cancel_away() {
    let client = client_of_nothing();
    let mut request = ptr::null_mut();
    let mut cancel = ptr::null_mut();
    let mut lock = ptr::null_mut();
    assert_eq!(
        redislock_request_new(client, c"n".as_ptr().cast(), 1, &mut request),
        REDISLOCK_OK
    );
    assert_eq!(
        super::cancel::redislock_cancel_new(&mut cancel),
        REDISLOCK_OK
    );
    assert_eq!(redislock_request_set_cancel(request, cancel), REDISLOCK_OK);
    assert_eq!(super::cancel::redislock_cancel_cancel(cancel), REDISLOCK_OK);
    // The request keeps its own reference: the handle may go first.
    super::cancel::redislock_cancel_free(cancel);
    assert_eq!(
        redislock_request_acquire(request, 1000, &mut lock),
        REDISLOCK_CANCELLED
    );
    assert_eq!(
        redislock_request_try_acquire(request, &mut lock),
        REDISLOCK_CANCELLED
    );
    assert_eq!(
        redislock_request_set_cancel(request, ptr::null()),
        REDISLOCK_OK
    );
    assert_eq!(
        redislock_request_try_acquire(request, &mut lock),
        REDISLOCK_CONNECTION
    );
    assert!(lock.is_null());
    redislock_request_free(request);
    redislock_client_free(client);
}

#[test]
fn a_request_outlives_its_client() {
    let client = client_of_nothing();
    let mut request = ptr::null_mut();
    let mut lock = ptr::null_mut();
    assert_eq!(
        redislock_request_new(client, c"n".as_ptr().cast(), 1, &mut request),
        REDISLOCK_OK
    );
    redislock_client_free(client);
    assert_eq!(
        redislock_request_try_acquire(request, &mut lock),
        REDISLOCK_CONNECTION
    );
    assert!(last_error().contains("127.0.0.1:1"), "{}", last_error());
    redislock_request_free(request);
}

/// A request for `target` of a client of nothing (no server answers), made by `new`.
fn request_of(
    new: impl FnOnce(*mut redislock_client, *mut *mut redislock_request) -> redislock_result,
) -> (*mut redislock_client, *mut redislock_request) {
    let client = client_of_nothing();
    let mut request = ptr::null_mut();
    assert_eq!(new(client, &mut request), REDISLOCK_OK);
    (client, request)
}

fn free_request((client, request): (*mut redislock_client, *mut redislock_request)) {
    redislock_request_free(request);
    redislock_client_free(client);
}

#[test]
fn setters_that_do_not_apply_to_the_kind_are_refused_and_change_nothing() {
    use redislock_kind::*;
    let name = c"n".as_ptr().cast();
    let owner = b"order-42-0123456789";
    let mut lock = ptr::null_mut();

    // One name: a kind that is none, permits, and an owner token with a read or write kind
    // (whichever comes first) are refused.
    let one = request_of(|c, out| redislock_request_new(c, name, 1, out));
    assert_eq!(
        redislock_request_set_kind(one.1, KindCode(4)),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(
        last_error().contains("4 is not a redislock_kind"),
        "{}",
        last_error()
    );
    assert_eq!(
        redislock_request_set_permits(one.1, 2),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(
        last_error()
            .contains("a number of permits does not apply to a request for an exclusive lock"),
        "{}",
        last_error()
    );
    assert_eq!(
        redislock_request_set_owner_token(one.1, owner.as_ptr(), owner.len()),
        REDISLOCK_OK
    );
    assert_eq!(
        redislock_request_set_kind(one.1, KindCode(REDISLOCK_KIND_READ as u32)),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(last_error().contains("owner token"), "{}", last_error());
    // Still an exclusive lock with its owner token: restore is allowed and reaches the network.
    assert_eq!(
        redislock_request_restore(one.1, owner.as_ptr(), owner.len(), &mut lock),
        REDISLOCK_CONNECTION
    );
    free_request(one);

    let rw = request_of(|c, out| redislock_request_new(c, name, 1, out));
    for kind in [REDISLOCK_KIND_READ, REDISLOCK_KIND_WRITE] {
        assert_eq!(
            redislock_request_set_kind(rw.1, KindCode(kind as u32)),
            REDISLOCK_OK
        );
        assert_eq!(
            redislock_request_set_owner_token(rw.1, owner.as_ptr(), owner.len()),
            REDISLOCK_INVALID_ARGUMENT
        );
        assert_eq!(
            redislock_request_restore(rw.1, owner.as_ptr(), owner.len(), &mut lock),
            REDISLOCK_INVALID_ARGUMENT
        );
        assert!(
            last_error().contains("restore does not apply"),
            "{}",
            last_error()
        );
        assert_eq!(redislock_request_set_fencing(rw.1, true), REDISLOCK_OK);
        assert_eq!(
            redislock_request_try_acquire(rw.1, &mut lock),
            REDISLOCK_CONNECTION
        );
    }
    // Back to exclusive: the owner token applies again.
    assert_eq!(
        redislock_request_set_kind(rw.1, KindCode(REDISLOCK_KIND_EXCLUSIVE as u32)),
        REDISLOCK_OK
    );
    assert_eq!(
        redislock_request_set_owner_token(rw.1, owner.as_ptr(), owner.len()),
        REDISLOCK_OK
    );
    free_request(rw);

    // A semaphore: no kind, no fencing, no owner token, no restore.
    let sem = request_of(|c, out| redislock_request_new_semaphore(c, name, 1, 3, out));
    assert_eq!(
        redislock_request_set_kind(sem.1, KindCode(REDISLOCK_KIND_READ as u32)),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(
        redislock_request_set_fencing(sem.1, true),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(
        last_error().contains("fencing does not apply to a request for a semaphore"),
        "{}",
        last_error()
    );
    assert_eq!(
        redislock_request_set_owner_token(sem.1, owner.as_ptr(), owner.len()),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(
        redislock_request_restore(sem.1, owner.as_ptr(), owner.len(), &mut lock),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(redislock_request_set_permits(sem.1, 2), REDISLOCK_OK);
    assert_eq!(redislock_request_set_lease_ms(sem.1, 5000), REDISLOCK_OK);
    assert_eq!(
        redislock_request_try_acquire(sem.1, &mut lock),
        REDISLOCK_CONNECTION
    );
    free_request(sem);

    // A set: fencing yes; kind, permits and owner token no.
    let names = [c"a".as_ptr().cast::<u8>(), c"b".as_ptr().cast()];
    let lens = [1usize, 1];
    let set =
        request_of(|c, out| redislock_request_new_set(c, names.as_ptr(), lens.as_ptr(), 2, out));
    assert_eq!(
        redislock_request_set_kind(set.1, KindCode(REDISLOCK_KIND_WRITE as u32)),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(
        redislock_request_set_permits(set.1, 1),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert_eq!(
        redislock_request_set_owner_token(set.1, owner.as_ptr(), owner.len()),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(
        last_error().contains("an owner token does not apply to a request for a set of locks"),
        "{}",
        last_error()
    );
    assert_eq!(redislock_request_set_fencing(set.1, true), REDISLOCK_OK);
    assert_eq!(
        redislock_request_try_acquire(set.1, &mut lock),
        REDISLOCK_CONNECTION
    );
    free_request(set);
    assert!(lock.is_null());
}

#[test]
fn kind_values_are_checked_by_the_acquire_before_any_connection() {
    let name = c"n".as_ptr().cast();
    let mut lock = ptr::null_mut();
    // Permits: zero, or more than the semaphore has; a semaphore of zero or too many permits.
    for (n, k, what) in [
        (3, 0, "a request for 0 permits"),
        (3, 4, "a request for 4 permits"),
        (0, 1, "must have 1 to 10000 permits, got 0"),
        (10_001, 1, "must have 1 to 10000 permits, got 10001"),
    ] {
        let sem = request_of(|c, out| redislock_request_new_semaphore(c, name, 1, n, out));
        assert_eq!(redislock_request_set_permits(sem.1, k), REDISLOCK_OK);
        assert_eq!(
            redislock_request_acquire(sem.1, 10, &mut lock),
            REDISLOCK_INVALID_ARGUMENT,
            "{n} {k}"
        );
        assert!(last_error().contains(what), "{}", last_error());
        free_request(sem);
    }
    // Sets: empty, a name twice, an empty name.
    let (a, b) = (c"a".as_ptr().cast::<u8>(), c"b".as_ptr().cast::<u8>());
    for (names, lens, what) in [
        (vec![], vec![], "empty"),
        (vec![a, b, a], vec![1, 1, 1], "given twice"),
        (vec![a, b], vec![1, 0], "empty"),
    ] {
        let set = request_of(|c, out| {
            redislock_request_new_set(c, names.as_ptr(), lens.as_ptr(), names.len(), out)
        });
        assert_eq!(
            redislock_request_try_acquire(set.1, &mut lock),
            REDISLOCK_INVALID_ARGUMENT
        );
        assert!(last_error().contains(what), "{}", last_error());
        free_request(set);
    }
    // Refused by the constructor: more than 256 names (the arrays are not read), NULL arrays or
    // names.
    let client = client_of_nothing();
    let mut request = ptr::null_mut();
    assert_eq!(
        redislock_request_new_set(client, ptr::null(), ptr::null(), 257, &mut request),
        REDISLOCK_INVALID_ARGUMENT
    );
    assert!(last_error().contains("at most 256"), "{}", last_error());
    let lens = [1usize, 1];
    let names = [a, ptr::null()];
    for (names, lens, param) in [
        (ptr::null(), lens.as_ptr(), "`names`"),
        ([a, b].as_ptr(), ptr::null(), "`names_len`"),
        (names.as_ptr(), lens.as_ptr(), "`name`"),
    ] {
        assert_eq!(
            redislock_request_new_set(client, names, lens, 2, &mut request),
            REDISLOCK_NULL_PARAMETER
        );
        assert!(last_error().contains(param), "{}", last_error());
    }
    assert!(request.is_null());
    // NULL arrays are fine with a count of 0 (the acquire then says the set is empty).
    assert_eq!(
        redislock_request_new_set(client, ptr::null(), ptr::null(), 0, &mut request),
        REDISLOCK_OK
    );
    redislock_request_free(request);
    redislock_client_free(client);
    assert!(lock.is_null());
}

#[test]
fn lock_functions_of_other_kinds_refuse_null() {
    let mut out = ptr::null_mut();
    let mut token = 0u64;
    assert_eq!(
        redislock_lock_downgrade(ptr::null(), &mut out),
        REDISLOCK_NULL_PARAMETER
    );
    assert!(last_error().contains("`lock`"), "{}", last_error());
    assert_eq!(
        redislock_lock_fencing_token_at(ptr::null(), 0, &mut token),
        REDISLOCK_NULL_PARAMETER
    );
    assert!(out.is_null());
}

/// A child forked while a thread of the parent is inside the log callback logs, and replaces
/// the callback, without waiting for that thread.
#[test]
fn a_forked_child_never_waits_for_a_log_callback_a_parent_thread_is_in() {
    use super::enums::redislock_log_level;
    use super::log::redislock_set_log_callback;
    use std::ffi::c_void;
    use std::sync::atomic::{AtomicBool, Ordering};

    static INSIDE: AtomicBool = AtomicBool::new(false);
    static LET_GO: AtomicBool = AtomicBool::new(false);
    unsafe extern "C" fn slow(_: *mut c_void, _: redislock_log_level, _: *const c_char) {
        INSIDE.store(true, Ordering::SeqCst);
        while !LET_GO.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    unsafe extern "C" fn quiet(_: *mut c_void, _: redislock_log_level, _: *const c_char) {}
    let trace = redislock_log_level::REDISLOCK_LOG_TRACE;
    let off = redislock_log_level::REDISLOCK_LOG_OFF;

    assert_eq!(
        redislock_set_log_callback(Some(slow), ptr::null_mut(), trace),
        REDISLOCK_OK
    );
    let logger = std::thread::spawn(|| log::warn!(target: "redislock", "inside the callback"));
    while !INSIDE.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ((), child_ok) =
        redislock_testkit::fork_and_check_within(Duration::from_secs(10), (), |()| {
            let replaced = redislock_set_log_callback(Some(quiet), ptr::null_mut(), trace);
            log::warn!(target: "redislock", "in the forked child");
            let off = redislock_set_log_callback(None, ptr::null_mut(), off);
            replaced == REDISLOCK_OK && off == REDISLOCK_OK
        });
    LET_GO.store(true, Ordering::SeqCst);
    logger.join().unwrap();
    assert_eq!(
        redislock_set_log_callback(None, ptr::null_mut(), off),
        REDISLOCK_OK
    );
    assert!(
        child_ok,
        "the forked child could not replace the log callback"
    );
}
