//! The C ABI is what the header says: the shared library exports exactly the functions that
//! `include/redislock.h` declares, and the Rust code that calls the C API through its symbols
//! (the fuzz target) declares each function as the header does.
//!
//! The C boundary is not part of the Rust API (`mod ffi` is private), so these checks read the
//! built library and the sources rather than the Rust items.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_file(path: &str) -> String {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

/// `<target>/<profile>/deps`, where `cargo test` builds the cdylib together with the library
/// this test links (see tests/ffi_c.rs).
fn cdylib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libredislock.so");
    assert!(lib.is_file(), "{} not built", lib.display());
    lib
}

/// A declaration: return type and parameter types, each without names or spaces
/// (`const redislock_config *config` -> `constredislock_config*`).
type Signature = (String, Vec<String>);

/// `const uint8_t *name` -> `constuint8_t*`.
fn c_type(param: &str) -> String {
    let param = param.trim();
    let without_name = param.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    let t = if without_name.trim().is_empty() || without_name.trim() == "const" {
        param // a type alone, such as `void`
    } else {
        without_name
    };
    t.split_whitespace().collect()
}

/// Every function the header declares, by name.
fn header_functions() -> BTreeMap<String, Signature> {
    let header = repo_file("include/redislock.h");
    // Comments and preprocessor lines out; what is left is C declarations.
    let mut code = String::new();
    let mut rest = header.as_str();
    while let Some(i) = rest.find("/*") {
        code.push_str(&rest[..i]);
        let end = rest[i..].find("*/").expect("unterminated comment");
        rest = &rest[i + end + 2..];
    }
    code.push_str(rest);
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.trim() != "extern \"C\" {")
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n");
    let mut functions = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(open) = statement.find('(') else {
            continue;
        };
        if statement.starts_with("typedef") || statement.contains('{') {
            continue;
        }
        let head = &statement[..open];
        let name_start = head
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        let name = &head[name_start..];
        assert!(
            name.starts_with("redislock_"),
            "unexpected declaration: {statement}"
        );
        let ret = c_type(&head[..name_start]);
        let params = statement[open + 1..statement.rfind(')').unwrap()].trim();
        let params = if params == "void" {
            Vec::new()
        } else {
            params.split(',').map(c_type).collect()
        };
        functions.insert(name.to_owned(), (ret, params));
    }
    assert!(
        functions.len() > 10,
        "too few functions found in the header"
    );
    functions
}

/// A Rust FFI type as the C type it stands for, without spaces (`*mut *mut redislock_lock` ->
/// `redislock_lock**`).
fn rust_as_c(t: &str) -> String {
    let t = t.trim();
    if let Some(inner) = t.strip_prefix("*const ") {
        return match rust_as_c(inner) {
            pointer if pointer.ends_with('*') => format!("{pointer}const*"),
            base => format!("const{base}*"),
        };
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{}*", rust_as_c(inner));
    }
    match t {
        "u8" => "uint8_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "usize" => "size_t",
        "f64" => "double",
        "c_char" => "char",
        "bool" | "redislock_result" | "redislock_kind" | "redislock_client"
        | "redislock_config" | "redislock_lock" | "redislock_request" => t,
        other => panic!("no C type known for the Rust type `{other}`"),
    }
    .to_owned()
}

#[test]
fn the_library_exports_exactly_the_functions_of_the_header() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(cdylib())
        .output()
        .expect("nm (binutils) is needed: apt-get install binutils");
    assert!(out.status.success(), "nm failed");
    let exported: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|s| s.starts_with("redislock_"))
        .map(str::to_owned)
        .collect();
    let declared: Vec<String> = header_functions().into_keys().collect();
    let mut exported_sorted = exported.clone();
    exported_sorted.sort();
    assert_eq!(exported_sorted, declared);
}

#[test]
fn fuzz_target_declares_the_functions_as_the_header_does() {
    let header = header_functions();
    let fuzz = repo_file("fuzz/fuzz_targets/c_api.rs");
    let start = fuzz
        .find("unsafe extern \"C\" {")
        .expect("no extern block in the fuzz target");
    let block = &fuzz[start..start + fuzz[start..].find("\n    }\n").unwrap()];
    let mut seen = 0;
    for decl in block.split(';') {
        let Some(fn_at) = decl.find("fn ") else {
            continue;
        };
        let decl = &decl[fn_at + 3..];
        let open = decl.find('(').unwrap();
        let close = decl.rfind(')').unwrap();
        let name = decl[..open].trim();
        let params: Vec<String> = decl[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| rust_as_c(p.split_once(':').expect(p).1))
            .collect();
        let ret = decl[close + 1..]
            .trim()
            .strip_prefix("->")
            .map_or("void".to_owned(), rust_as_c);
        let Some(expected) = header.get(name) else {
            panic!("the fuzz target declares {name}, which the header does not");
        };
        assert_eq!(&(ret, params), expected, "{name}");
        seen += 1;
    }
    assert!(seen > 10, "too few declarations found in the fuzz target");
}
