//! Unit tests of the C boundary that need no Redis server. The full C API is exercised from C
//! by `ffi-tests/c` (driven by `tests/ffi_c.rs`).

use std::ffi::{CStr, c_char};
use std::ptr;
use std::time::Duration;

use super::client::*;
use super::config::*;
use super::last_error::redislock_last_error_message;
use super::lock::*;
use super::redislock_version;
use super::request::*;
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

// ---- The hand-kept tables of result codes in other languages ---------------------------------
//
// The enum of the generated header is the reference (`scripts/gen-headers.sh --check` keeps it
// equal to `redislock_result`). A result code or error kind added in Rust without the PHP
// package, the C test harness, the soak workers and the fuzz target following fails here.

fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// The text between `start` (exclusive) and the first `end` after it.
fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text
        .find(start)
        .unwrap_or_else(|| panic!("{start:?} not found"))
        + start.len();
    let len = text[from..]
        .find(end)
        .unwrap_or_else(|| panic!("{end:?} not found after {start:?}"));
    &text[from..from + len]
}

/// The string literals ("..." or '...') in `text`, in order.
fn string_literals(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['"', '\'']) {
        let quote = &rest[i..i + 1];
        let after = &rest[i + 1..];
        let j = after.find(quote).expect("unterminated string literal");
        out.push(after[..j].to_owned());
        rest = &after[j + 1..];
    }
    out
}

/// `(name, number)` of every enumerator of `enum redislock_result` in a generated header.
fn header_codes(header: &str) -> Vec<(String, u32)> {
    let body = between(header, "enum redislock_result", "};");
    body.lines()
        .map(str::trim)
        .filter(|l| l.starts_with("REDISLOCK_"))
        .map(|l| {
            let (name, n) = l.trim_end_matches(',').split_once(" = ").expect(l);
            (name.to_owned(), n.parse().expect(l))
        })
        .collect()
}

/// The codes of the Rust enum, in numeric order, as `(REDISLOCK_NAME, number)`.
fn rust_codes() -> Vec<(String, u32)> {
    let mut v: Vec<_> = redislock_result::all()
        .map(|c| (format!("{c:?}"), c as u32))
        .collect();
    v.sort_by_key(|c| c.1);
    v
}

/// `REDISLOCK_WAIT_TIMEOUT` -> `WAIT_TIMEOUT`.
fn short(name: &str) -> &str {
    name.strip_prefix("REDISLOCK_").unwrap()
}

#[test]
fn generated_headers_have_every_code() {
    let codes = rust_codes();
    assert_eq!(header_codes(&repo_file("include/redislock.h")), codes);
    assert_eq!(header_codes(&repo_file("include/redislock_php.h")), codes);
}

#[test]
fn php_result_constants_are_the_codes() {
    let php = repo_file("bindings/php/src/Result.php");
    let mut constants = Vec::new();
    for line in php.lines().map(str::trim) {
        if let Some(decl) = line.strip_prefix("public const ")
            && let Some((name, value)) = decl.trim_end_matches(';').split_once(" = ")
            && let Ok(n) = value.parse::<u32>()
        {
            constants.push((format!("REDISLOCK_{name}"), n));
        }
    }
    assert_eq!(constants, rust_codes(), "the constants of Result.php");
    let names = between(&php, "public const NAMES = [", "];");
    let mut entries = Vec::new();
    for line in names.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = line.trim_end_matches(',').split_once(" => ").expect(line);
        entries.push((key.to_owned(), string_literals(value).concat()));
    }
    let expected: Vec<_> = rust_codes()
        .into_iter()
        .map(|(name, _)| (format!("self::{}", short(&name)), name))
        .collect();
    assert_eq!(entries, expected, "Result::NAMES");
}

#[test]
fn php_exception_classes_cover_every_failure_code() {
    let php = repo_file("bindings/php/src/Exception/LockException.php");
    let table = between(&php, "private const CLASSES = [", "];");
    let mut classes = std::collections::BTreeMap::new();
    for line in table.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, class) = line.trim_end_matches(',').split_once(" => ").expect(line);
        let code = key.strip_prefix("Result::").expect(line);
        let class = class.strip_suffix("::class").expect(line);
        assert!(
            classes
                .insert(format!("REDISLOCK_{code}"), class.to_owned())
                .is_none(),
            "{code} twice in LockException::CLASSES"
        );
    }
    let mut expected: Vec<String> = rust_codes().into_iter().map(|c| c.0).collect();
    expected.retain(|name| name != "REDISLOCK_OK");
    expected.sort();
    assert_eq!(
        classes.keys().cloned().collect::<Vec<_>>(),
        expected,
        "LockException::CLASSES must have every code but OK"
    );
    // Each error kind has its own class, whose constructor defaults to that kind's code.
    let mut seen = Vec::new();
    for &kind in ErrorKind::ALL {
        let code = format!("{:?}", redislock_result::from_kind(kind));
        let class = &classes[&code];
        assert!(!seen.contains(class), "{class} serves two kinds");
        seen.push(class.clone());
        let source = repo_file(&format!("bindings/php/src/Exception/{class}.php"));
        assert!(
            source.contains(&format!("class {class} extends LockException")),
            "{class} does not extend LockException"
        );
        assert!(
            source.contains(&format!("int $code = Result::{},", short(&code))),
            "{class}'s default code is not Result::{}",
            short(&code)
        );
    }
}

#[test]
fn c_harness_names_every_code() {
    let c = repo_file("ffi-tests/c/harness.c");
    let table = between(&c, "static const char *const names[] = {", "};");
    let names: Vec<_> = rust_codes().into_iter().map(|c| c.0).collect();
    assert_eq!(string_literals(table), names, "h_code_name() in harness.c");
}

#[test]
fn soak_workers_name_every_code() {
    let names: Vec<String> = rust_codes()
        .into_iter()
        .map(|c| short(&c.0).to_owned())
        .collect();
    let c = repo_file("soak/worker.c");
    let table = between(&c, "static const char *const CODE_NAMES[] = {", "};");
    assert_eq!(string_literals(table), names, "CODE_NAMES in soak/worker.c");
    // The Rust worker names each error kind as the C worker names its code.
    let rust = repo_file("soak/src/main.rs");
    let class = between(&rust, "fn class(kind: ErrorKind) -> &'static str {", "\n}");
    for &kind in ErrorKind::ALL {
        let code = format!("{:?}", redislock_result::from_kind(kind));
        let arm = format!("ErrorKind::{kind:?} => \"{}\",", short(&code));
        assert!(
            class.contains(&arm),
            "soak/src/main.rs class() lacks `{arm}`"
        );
    }
}

#[test]
fn fuzz_target_knows_every_code() {
    let fuzz = repo_file("fuzz/fuzz_targets/c_api.rs");
    let codes = rust_codes();
    let mut checked = 0;
    for line in fuzz.lines().map(str::trim) {
        let Some(decl) = line.strip_prefix("const ") else {
            continue;
        };
        let Some((name, value)) = decl.trim_end_matches(';').split_once(": u32 = ") else {
            continue;
        };
        if name == "CODES" {
            assert_eq!(
                value.parse::<usize>(),
                Ok(codes.len()),
                "CODES in the fuzz target"
            );
            checked += 1;
        } else if let Some((_, n)) = codes.iter().find(|c| short(&c.0) == name) {
            assert_eq!(value.parse::<u32>(), Ok(*n), "{name} in the fuzz target");
            checked += 1;
        }
    }
    assert!(
        checked > 1,
        "no result code constants found in the fuzz target"
    );
}

#[test]
fn crate_docs_list_every_code() {
    // The error reference is the crate documentation's "Errors" section: the `//!` block at the
    // top of src/lib.rs.
    let docs: String = repo_file("src/lib.rs")
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let c_api = repo_file("docs/c-api.md");
    for (name, n) in rust_codes().into_iter().filter(|c| c.1 != 0) {
        let listed = format!("`{name}` ({n})");
        assert!(
            docs.contains(&listed),
            "the crate docs (src/lib.rs) do not list {listed}"
        );
        assert!(
            c_api.contains(&listed),
            "docs/c-api.md does not list {listed}"
        );
    }
    for &kind in ErrorKind::ALL {
        let code = redislock_result::from_kind(kind);
        assert!(
            docs.contains(&format!("| `{kind:?}` | `{code:?}` ({}) |", code as u32)),
            "the crate docs' error table (src/lib.rs) lacks {kind:?}"
        );
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
            "an auto-renewed lease must be between 100 ms and 30 days, got 99ms",
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

#[test]
fn headers_have_every_lock_kind() {
    use redislock_kind::*;
    for header in ["include/redislock.h", "include/redislock_php.h"] {
        let text = repo_file(header);
        for (name, n) in [
            ("REDISLOCK_KIND_EXCLUSIVE", REDISLOCK_KIND_EXCLUSIVE as u32),
            ("REDISLOCK_KIND_READ", REDISLOCK_KIND_READ as u32),
            ("REDISLOCK_KIND_WRITE", REDISLOCK_KIND_WRITE as u32),
            ("REDISLOCK_KIND_REDISSON", REDISLOCK_KIND_REDISSON as u32),
        ] {
            assert!(text.contains(&format!("{name} = {n},")), "{header}: {name}");
        }
        assert!(text.contains("redislock_kind kind)"), "{header}");
    }
}
