//! Drift checks: the repository's hand-kept copies of the C boundary's numbers (the generated
//! headers, the PHP package's result codes and exception classes, the C test harness, the soak
//! workers, the fuzz target, the crate's and the C API's docs) read as files and compared with
//! the code. A result code, error kind or lock kind added in Rust without them following fails
//! here. The C boundary's behaviour is tested in `tests.rs`.

use super::enums::redislock_result;
use crate::ErrorKind;

// ---- The hand-kept tables of result codes in other languages ---------------------------------
//
// The enum of the generated header is the reference (`scripts/ci/gen-headers.sh --check` keeps it
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
    header_enum(header, "redislock_result")
}

/// `(name, number)` of every enumerator of `enum <name>` in a generated header, in order; those
/// of the hidden cargo feature `recipe-kind` (`#if defined(REDISLOCK_RECIPE_KIND)`) only when
/// this build has it.
fn header_enum(header: &str, name: &str) -> Vec<(String, u32)> {
    let body = between(header, &format!("enum {name}\n"), "};");
    let mut hidden = false;
    let mut out = Vec::new();
    for l in body.lines().map(str::trim) {
        match l {
            "#if defined(REDISLOCK_RECIPE_KIND)" => hidden = true,
            "#endif" => hidden = false,
            _ if l.starts_with("REDISLOCK_") && (!hidden || cfg!(feature = "recipe-kind")) => {
                let (name, n) = l.trim_end_matches(',').split_once(" = ").expect(l);
                out.push((name.to_owned(), n.parse().expect(l)));
            }
            _ => {}
        }
    }
    out
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

/// `(REDISLOCK_KIND_NAME, number)` of every kind a request may choose with
/// `redislock_request_set_kind`, from the kinds' descriptors.
fn descriptor_kinds() -> Vec<(String, u32)> {
    crate::kind::ALL
        .iter()
        .filter_map(|d| d.c_kind)
        .map(|(name, n)| (name.to_owned(), n))
        .collect()
}

#[test]
fn headers_have_every_lock_kind() {
    let kinds = descriptor_kinds();
    assert!(kinds.len() >= 4, "{kinds:?}");
    for header in ["include/redislock.h", "include/redislock_php.h"] {
        let text = repo_file(header);
        // The PHP header has no items of the hidden feature `recipe-kind` (gen-headers.sh).
        let kinds: Vec<_> = kinds
            .iter()
            .filter(|(name, _)| header == "include/redislock.h" || name != "REDISLOCK_KIND_RECIPE")
            .cloned()
            .collect();
        assert_eq!(
            header_enum(&text, "redislock_kind"),
            kinds,
            "{header}: enum redislock_kind against the kinds' descriptors (src/base/kind.rs)"
        );
        assert!(text.contains("redislock_kind kind)"), "{header}");
    }
}

/// `Lock`'s kind constants are the descriptors' PHP constants, and each kind a request may
/// choose is named in the C headers after it: the PHP package reads a kind's `redislock_kind`
/// as the header's constant `REDISLOCK_KIND_` + the constant's value in upper case, and keeps
/// no table of the numbers.
#[test]
fn php_kind_constants_name_the_headers_kinds() {
    let lock = repo_file("bindings/php/src/Lock.php");
    let header = header_enum(&repo_file("include/redislock_php.h"), "redislock_kind");
    let mut named = 0;
    // A kind the PHP package does not offer (the hidden feature `recipe-kind`'s) has no constant.
    for d in crate::kind::ALL.iter().filter(|d| !d.php.is_empty()) {
        let value = d.php.to_lowercase();
        assert!(
            lock.contains(&format!("public const {} = '{value}';", d.php)),
            "Lock.php lacks `public const {} = '{value}';` ({})",
            d.php,
            d.name()
        );
        if let Some((name, n)) = d.c_kind {
            assert_eq!(
                name,
                format!("REDISLOCK_KIND_{}", value.to_uppercase()),
                "the C name of Lock::{}",
                d.php
            );
            assert!(
                header.contains(&(name.to_owned(), n)),
                "include/redislock_php.h: {name} = {n}"
            );
            named += 1;
        }
    }
    assert_eq!(
        named,
        header.len(),
        "every REDISLOCK_KIND_* of the PHP header is a Lock constant's"
    );
}
