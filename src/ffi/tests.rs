//! Unit tests of the C boundary that need no Redis server. The full C API is exercised from C
//! by `ffi-tests/c` (driven by `tests/ffi_c.rs`).

use std::ffi::{CStr, c_char};
use std::ptr;

use super::client::*;
use super::config::*;
use super::last_error::redislock_last_error_message;
use super::lock::*;
use super::redislock_version;
use super::result::{ResultCode, redislock_result, redislock_result::*, redislock_result_message};
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
    let kinds = [
        ErrorKind::Held,
        ErrorKind::WaitTimeout,
        ErrorKind::NotHeld,
        ErrorKind::InvalidArgument,
        ErrorKind::Connection,
        ErrorKind::Redis,
        ErrorKind::Forked,
        ErrorKind::LimitReached,
        ErrorKind::Internal,
        ErrorKind::Cancelled,
    ];
    let codes: Vec<_> = kinds
        .iter()
        .map(|&k| redislock_result::from_kind(k))
        .collect();
    for (i, a) in codes.iter().enumerate() {
        assert_ne!(*a, REDISLOCK_OK);
        assert!(codes[i + 1..].iter().all(|b| b != a), "{a:?} twice");
    }
    for (n, code) in redislock_result::all().iter().enumerate() {
        assert_eq!(*code as u32, n as u32, "codes are numbered in order");
        assert_eq!(redislock_result::from_u32(n as u32), Some(*code));
    }
    assert_eq!(redislock_result::from_u32(13), None);
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
    let n = super::last_error::write_text("aé!", buf.as_mut_ptr(), buf.len());
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
    assert!(last_error().contains("pool_size"), "{}", last_error());
    assert_eq!(redislock_config_set_pool_size(config, 4), REDISLOCK_OK);
    assert_eq!(redislock_config_set_lease_ms(config, 5000), REDISLOCK_OK);
    assert_eq!(redislock_config_set_auto_renew(config, false), REDISLOCK_OK);
    assert_eq!(redislock_config_set_fencing(config, true), REDISLOCK_OK);
    assert_eq!(
        redislock_client_from_config(config, &mut client),
        REDISLOCK_OK
    );
    redislock_config_free(config);
    let mut options = redislock_lock_options {
        lease_ms: 0,
        auto_renew: true,
        fencing: false,
    };
    assert_eq!(
        redislock_client_default_lock_options(client, &mut options),
        REDISLOCK_OK
    );
    assert_eq!(
        options,
        redislock_lock_options {
            lease_ms: 5000,
            auto_renew: false,
            fencing: true,
        }
    );
    redislock_client_free(client);
}

#[test]
fn documented_defaults_are_the_defaults() {
    let mut client = ptr::null_mut();
    assert_eq!(
        redislock_client_new(c"redis://127.0.0.1:1/".as_ptr(), &mut client),
        REDISLOCK_OK
    );
    let mut options = redislock_lock_options {
        lease_ms: 0,
        auto_renew: false,
        fencing: true,
    };
    assert_eq!(
        redislock_client_default_lock_options(client, &mut options),
        REDISLOCK_OK
    );
    assert_eq!(
        options,
        redislock_lock_options {
            lease_ms: 30_000,
            auto_renew: true,
            fencing: false,
        }
    );
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
        redislock_lock_try_acquire(ptr::null(), c"x".as_ptr().cast(), 1, ptr::null(), &mut lock),
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
