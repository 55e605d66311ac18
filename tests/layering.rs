//! The crate's layers, checked: no module imports from a layer above its own (ARCHITECTURE.md).
//!
//! Every `crate::…`, `super::…` and `self::…` path in `src/` is resolved to the module it names,
//! and each module has a layer (the table [`LAYERS`]): from the top, `ffi` (the C boundary, which
//! only the crate root's public items and `api` may serve), `api`, `engine`, `stores`, `base`. A
//! path into a higher layer fails the test, unless it is in [`ALLOWED`], the list of upward
//! imports that remain to be removed: it may only shrink, and an entry that no longer matches
//! anything fails the test too, so the list says exactly what is left.
//!
//! The check reads the source as text (no macro expansion): it sees every path written in the
//! code outside `#[cfg(test)] mod` blocks and comments.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers from the bottom; a module may use its own layer and those below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Layer {
    Base,
    Stores,
    Engine,
    Api,
    Ffi,
}

/// The layer of each module (the longest matching module path wins). A path to the crate root
/// itself (`crate::Client`, the public re-exports) counts as `api`.
const LAYERS: &[(&str, Layer)] = &[
    ("api", Layer::Api),
    ("engine", Layer::Engine),
    ("stores", Layer::Stores),
    ("base", Layer::Base),
    ("ffi", Layer::Ffi),
];

/// Upward imports that remain: `file -> module path` (the path as resolved, `::`-separated).
const ALLOWED: &[&str] = &[];

fn layer_of(path: &[String]) -> Option<Layer> {
    let joined = path.join("::");
    LAYERS
        .iter()
        .filter(|(m, _)| joined == *m || joined.starts_with(&format!("{m}::")))
        .max_by_key(|(m, _)| m.len())
        .map(|(_, l)| *l)
}

/// The module path of a source file: `src/a/b.rs` and `src/a/b/mod.rs` are `a::b`.
fn module_of(file: &Path, src: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The source without comments, string and character literals' contents, and
/// `#[cfg(test)] mod` blocks.
fn code_of(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && i + 2 < b.len() && (b[i + 2] == b'\'' || b[i + 1] == b'\\') {
            // A character literal ('{', '\n'); a lifetime has no closing quote.
            let end = text[i + 2..].find('\'').map_or(b.len(), |e| i + 2 + e + 1);
            i = end;
            out.push_str("' '");
        } else {
            // Multi-byte characters occur only in comments and strings, skipped above.
            out.push(b[i] as char);
            i += 1;
        }
    }
    without_test_modules(&out)
}

/// `code` without its `#[cfg(test)] mod name { ... }` blocks.
fn without_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        if !after.trim_start().starts_with("mod ") {
            rest = after;
            continue;
        }
        let Some(open) = after.find('{') else {
            return out;
        };
        let mut depth = 0;
        let mut end = after.len();
        for (j, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Every module path the code names: `crate::a::b::Item` gives `[a, b, Item]`; a braced
/// group gives one path per member; `super` and `self` are resolved against `module`.
fn paths_in(code: &str, module: &[String]) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(pos) = code[from..].find(start) {
            let at = from + pos;
            from = at + start.len();
            // Must start a path: not preceded by an identifier character or `::`.
            if at > 0 {
                let prev = bytes[at - 1];
                if prev.is_ascii_alphanumeric() || prev == b'_' || prev == b':' {
                    continue;
                }
            }
            let base: Vec<String> = match start {
                "crate::" => Vec::new(),
                "super::" => module[..module.len().saturating_sub(1)].to_vec(),
                _ => module.to_vec(),
            };
            collect(code, at + start.len(), base, &mut found);
        }
    }
    found
}

/// Reads a path's rest at `i` (after a `::`) onto `prefix`, expanding braced groups.
fn collect(code: &str, mut i: usize, mut prefix: Vec<String>, found: &mut Vec<Vec<String>>) {
    let b = code.as_bytes();
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            // A group: split its members at top-level commas.
            let mut depth = 0;
            let mut member_start = i + 1;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' | b',' if depth == 1 => {
                        let member = code[member_start..j].trim();
                        if !member.is_empty() {
                            let sub = format!("{member};");
                            collect(&sub, 0, prefix.clone(), found);
                        }
                        member_start = j + 1;
                        if b[j] == b'}' {
                            return;
                        }
                    }
                    b'}' => depth -= 1,
                    _ => {}
                }
                j += 1;
            }
            return;
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let segment = &code[start..i];
        match segment {
            "" => break,
            "self" => {}
            "super" => {
                prefix.pop();
            }
            _ => prefix.push(segment.to_owned()),
        }
        if code[i..].starts_with("::") {
            i += 2;
        } else {
            break;
        }
    }
    found.push(prefix);
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The upward imports of the crate, as `file -> module path` lines.
fn upward_imports(src: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut upward = BTreeSet::new();
    for file in files {
        let module = module_of(&file, src);
        let Some(own) = layer_of(&module) else {
            // The crate root (lib.rs) declares the layers; it belongs to none.
            assert!(
                module.is_empty(),
                "{}: module {} has no layer in LAYERS",
                file.display(),
                module.join("::")
            );
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for path in paths_in(&code, &module) {
            // A path to the crate root's own items (its public re-exports) is the API.
            let target = layer_of(&path).unwrap_or(Layer::Api);
            let rel = file.strip_prefix(src.parent().unwrap()).unwrap();
            let shown = format!("{} -> {}", rel.display(), path.join("::"));
            let up = if own == Layer::Ffi {
                false
            } else {
                target > own
            };
            // The C boundary forwards to the public API: nothing below `api` but the root.
            let ffi_reaches_in = own == Layer::Ffi && target < Layer::Api;
            if up || ffi_reaches_in {
                upward.insert(shown);
            }
        }
    }
    upward
}

/// Whether an allow-list entry covers a found import: the same file, and the found path is the
/// entry's module or inside it.
fn covers(entry: &str, found: &str) -> bool {
    let (ef, em) = entry.split_once(" -> ").unwrap();
    let (ff, fm) = found.split_once(" -> ").unwrap();
    ef == ff && (fm == em || fm.starts_with(&format!("{em}::")))
}

#[test]
fn no_module_imports_from_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let upward = upward_imports(&src);
    let not_allowed: Vec<&String> = upward
        .iter()
        .filter(|f| !ALLOWED.iter().any(|e| covers(e, f)))
        .collect();
    let stale: Vec<&&str> = ALLOWED
        .iter()
        .filter(|e| !upward.iter().any(|f| covers(e, f)))
        .collect();
    assert!(
        not_allowed.is_empty(),
        "imports from a layer above (see ARCHITECTURE.md; move the item down, or pass it in):\n  {}",
        not_allowed
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n  ")
    );
    assert!(
        stale.is_empty(),
        "ALLOWED lists imports that no longer exist: remove them:\n  {}",
        stale.iter().map(|s| **s).collect::<Vec<_>>().join("\n  ")
    );
}

/// Every import between two files of the library, as `(file, file)` (their module paths), but
/// a module's of its own submodules: a path resolves to the file of the longest module it
/// starts with.
fn file_imports(src: &Path) -> BTreeSet<(String, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(f, src)).collect();
    let mut edges = BTreeSet::new();
    for file in &files {
        let module = module_of(file, src);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for path in paths_in(&code, &module) {
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|m| modules.contains(m));
            // A module's own file may use its submodules (it declares them and re-exports
            // from them); they may use it.
            if let Some(target) = target
                && !target.starts_with(&module)
            {
                edges.insert((module.join("::"), target.join("::")));
            }
        }
    }
    edges
}

/// A circle among `edges`, if there is one: its files in order.
fn circle(edges: &BTreeSet<(String, String)>) -> Option<Vec<String>> {
    fn visit<'a>(
        at: &'a str,
        edges: &'a BTreeSet<(String, String)>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| *p == at) {
            return Some(path[i..].iter().map(|s| s.to_string()).collect());
        }
        if !done.insert(at) {
            return None;
        }
        path.push(at);
        for (_, to) in edges.iter().filter(|(from, _)| from == at) {
            if let Some(c) = visit(to, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .iter()
        .find_map(|(from, _)| visit(from, edges, &mut Vec::new(), &mut done))
}

/// No file of the library imports, through others, from itself (`a` uses `b`, which uses `a`):
/// each import points one way, so a file can be read, changed and tested after those it uses.
#[test]
fn no_import_circle_among_the_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = file_imports(&src);
    assert!(
        edges.len() > 100,
        "{} imports: the check sees too few",
        edges.len()
    );
    if let Some(c) = circle(&edges) {
        panic!("an import circle: {} -> {}", c.join(" -> "), c[0]);
    }
    let shown: BTreeSet<(String, String)> = [("a", "b"), ("b", "c"), ("c", "a")]
        .iter()
        .map(|(x, y)| (x.to_string(), y.to_string()))
        .collect();
    assert_eq!(
        circle(&shown).map(|c| c.len()),
        Some(3),
        "the check finds a circle"
    );
}

/// ARCHITECTURE.md names every source file of the library, and every `src/…` path it names
/// exists: a file added, moved or removed without the page following fails here.
#[test]
fn architecture_md_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    let mut missing: Vec<String> = files
        .iter()
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .filter(|f| !page.contains(&format!("`{f}`")))
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name these files (as `src/…`):\n  {}",
        missing.join("\n  ")
    );
    let named = page.split('`').skip(1).step_by(2);
    let gone: Vec<&str> = named
        .filter(|n| n.starts_with("src/") && !n.contains('*') && !root.join(n).exists())
        .collect();
    assert!(
        gone.is_empty(),
        "ARCHITECTURE.md names files that do not exist: {gone:?}"
    );
}

#[test]
fn the_check_sees_paths_in_all_their_forms() {
    let module: Vec<String> = vec!["engine".into(), "wait".into()];
    let code = code_of(
        "use crate::base::{error::Error, keys::{self, LockKeys}};\n\
         use super::acquire;\n\
         // crate::api::Client in a comment is not code\n\
         let s = \"crate::api::Client\";\n\
         fn f() -> crate::api::Client { self::g() }\n\
         #[cfg(test)]\nmod tests { use crate::api::Lock; fn f() { let c = '{'; } }\n\
         use crate::base::token;\n",
    );
    let mut paths: Vec<String> = paths_in(&code, &module)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "api::Client",
            "base::error::Error",
            "base::keys",
            "base::keys::LockKeys",
            "base::token",
            "engine::acquire",
            "engine::wait::g",
        ]
    );
    assert_eq!(layer_of(&["api".into(), "Client".into()]), Some(Layer::Api));
    assert_eq!(layer_of(&["Client".into()]), None);
    assert!(covers(
        "src/stores/x.rs -> engine::cancel",
        "src/stores/x.rs -> engine::cancel::Cancel"
    ));
    assert!(!covers(
        "src/stores/x.rs -> engine::cancel",
        "src/stores/y.rs -> engine::cancel::Cancel"
    ));
}
