//! ARCHITECTURE.md, checked against the code: every path it names in backticks exists, and every
//! type, constant and C name it names in backticks is defined, where the page says it is.
//!
//! "Where it says": a row of a table says its file (the first column), so a type named in the
//! row is defined in that file or in another file the same row names (a method, `Type::method`,
//! may be added there by an `impl Type` block instead); in the text, a type
//! followed by "in `path`" (or "(`path`" , or ", `path`") is defined in that path; a module
//! path (`stores::wait::Queue`) says its module's file. Any other type is defined somewhere in
//! the repository's Rust. Lower-case names (methods, fields, labels, script names) are not
//! checked, but for the C ABI's (`redislock_…`). tests/layering.rs checks that the page names
//! every source file.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The page without its fenced code blocks.
fn page() -> String {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The repository's Rust sources: the library, its tests, the CLI, the test kit and the rest.
fn sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for dir in ["src", "tests", "cli", "testkit", "bench", "soak", "fuzz"] {
        rust_files(&root().join(dir), &mut files);
    }
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect()
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `text` has `word` right after `prefix`, as a whole word.
fn has_after(text: &str, prefix: &str, word: &str) -> bool {
    let needle = format!("{prefix}{word}");
    text.match_indices(&needle).any(|(i, _)| {
        let before_ok = i == 0 || !is_ident_char(text[..i].chars().next_back().unwrap());
        let after = text[i + needle.len()..].chars().next();
        before_ok && !after.is_some_and(is_ident_char)
    })
}

/// Whether `text` defines the type (or trait, alias, macro) `name`, or the constant, static or
/// enumerator `name` (ALL_CAPS).
fn defines(text: &str, name: &str) -> bool {
    let is_const = name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if is_const {
        return ["const ", "static "]
            .iter()
            .any(|p| has_after(text, p, name))
            || text.contains(&format!("\"{name}\""))
            || text.contains(&format!("{name} ="))
            || text.contains(&format!("{name}:"));
    }
    ["struct ", "enum ", "trait ", "type ", "union ", "macro_rules! ", "mod "]
        .iter()
        .any(|p| has_after(text, p, name))
        // A re-export under this name, or an enum's variant.
        || text.contains(&format!(" as {name};"))
        || text.lines().any(|l| {
            let l = l.trim();
            (l.starts_with(&format!("{name},")) || l.starts_with(&format!("{name}(")))
                || l.starts_with(&format!("{name} {{"))
                || l == name
        })
}

/// Whether a function `name` is defined in `text`.
fn defines_fn(text: &str, name: &str) -> bool {
    has_after(text, "fn ", name)
}

/// Whether `name` matches `pattern`, whose `*` stand for any text.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, rest)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len()).any(|i| {
                    name.is_char_boundary(head.len() + i) && matches(rest, &name[head.len() + i..])
                })
        }
    }
}

/// The existing path a span names (a placeholder such as `<kind>` stands for any text), tried
/// from the repository's root, from `src/`, and from each of `bases` (the directory of the
/// row, of the path named last) and its `src/`.
fn resolve(span: &str, bases: &[&Path]) -> Option<PathBuf> {
    let mut pattern = String::new();
    let mut rest = span;
    while let Some((head, tail)) = rest.split_once('<') {
        pattern.push_str(head);
        pattern.push('*');
        rest = tail.split_once('>').map_or("", |t| t.1);
    }
    pattern.push_str(rest);
    let mut candidates = vec![root().join(&pattern), root().join("src").join(&pattern)];
    for b in bases {
        candidates.push(b.join(&pattern));
        candidates.push(b.join("src").join(&pattern));
    }
    candidates.into_iter().find(|c| {
        if let Some((dir, last)) = c.to_str().and_then(|s| s.rsplit_once('/'))
            && last.contains('*')
        {
            return std::fs::read_dir(dir).is_ok_and(|mut entries| {
                entries.any(|e| matches(last, &e.unwrap().file_name().to_string_lossy()))
            });
        }
        c.exists()
    })
}

fn looks_like_path(span: &str) -> bool {
    !span.contains("::")
        && !span.contains("://")
        && !span.contains(' ')
        && (span.contains('/')
            || [".rs", ".lua", ".md", ".h", ".sh", ".toml", ".c", ".php"]
                .iter()
                .any(|e| span.ends_with(e)))
}

/// A name of code in a span: `Client::lock(name)` -> `Client::lock`; `Guard<K>` -> `Guard`.
fn code_name(span: &str) -> Option<&str> {
    if span.split('(').next().is_some_and(|s| s.contains(' ')) {
        return None; // a command (`SET key token NX PX lease`), not a name
    }
    let end = span.find(['(', '<', ' ', '{']).unwrap_or(span.len());
    let name = &span[..end];
    let ok = !name.is_empty()
        && name.chars().all(|c| is_ident_char(c) || c == ':')
        && !name.starts_with(':')
        && !name.ends_with(':');
    ok.then_some(name)
}

fn is_type_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_uppercase()) && s.chars().any(|c| c.is_ascii_lowercase())
}

fn is_const_name(s: &str) -> bool {
    s.len() >= 3
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && s.contains(|c: char| c.is_ascii_uppercase())
}

/// The file of a module path of the library (`stores::wait` -> `src/stores/wait.rs`), if it is
/// one.
fn module_file(segments: &[&str]) -> Option<PathBuf> {
    let rel = segments.join("/");
    [format!("src/{rel}.rs"), format!("src/{rel}/mod.rs")]
        .into_iter()
        .map(|p| root().join(p))
        .find(|p| p.exists())
}

/// What one check found wrong, if anything.
struct Checker {
    sources: Vec<(PathBuf, String)>,
    wrong: Vec<String>,
}

impl Checker {
    fn text_of(&self, file: &Path) -> Option<&str> {
        self.sources
            .iter()
            .find(|(f, _)| f == file)
            .map(|(_, t)| t.as_str())
    }

    fn defined_anywhere(&self, name: &str) -> bool {
        self.sources.iter().any(|(_, t)| defines(t, name))
    }

    fn fn_anywhere(&self, name: &str) -> bool {
        self.sources.iter().any(|(_, t)| defines_fn(t, name))
    }

    /// Checks the name of code `name` (from `where_`: the line), defined in one of `homes`
    /// when the page says where.
    fn check_name(&mut self, name: &str, homes: &[PathBuf], where_: &str) {
        let segments: Vec<&str> = name.split("::").collect();
        let first = segments[0];
        if segments.len() > 1 && first.starts_with(|c: char| c.is_ascii_lowercase()) {
            // A module path: its item is in its module's file, when the module is one.
            let last = *segments.last().unwrap();
            if let Some(file) = module_file(&segments[..segments.len() - 1]) {
                let text = self.text_of(&file).unwrap_or_default();
                if !(defines(text, last) || defines_fn(text, last)) {
                    self.wrong.push(format!(
                        "`{name}`: {last} is not defined in {} ({where_})",
                        file.strip_prefix(root()).unwrap().display()
                    ));
                }
            } else if (is_type_name(last) || is_const_name(last)) && !self.defined_anywhere(last) {
                self.wrong
                    .push(format!("`{name}`: {last} is defined nowhere ({where_})"));
            }
            return;
        }
        if is_type_name(first) || is_const_name(first) {
            let here = homes.iter().any(|h| {
                let text = self.text_of(h).unwrap_or_default();
                // Or, for `Type::method`, a file that adds the method to the type in an `impl`
                // block of its own (a kind's file adds its request method to `Client`).
                let adds = |member: &&str| {
                    text.contains(&format!("impl {first} {{")) && defines_fn(text, member)
                };
                defines(text, first) || segments.get(1).is_some_and(adds)
            });
            if !homes.is_empty() && !here {
                let shown: Vec<String> = homes
                    .iter()
                    .map(|h| h.strip_prefix(root()).unwrap().display().to_string())
                    .collect();
                self.wrong.push(format!(
                    "`{name}`: {first} is not defined in {} ({where_})",
                    shown.join(" or ")
                ));
                return;
            }
            if homes.is_empty() && !self.defined_anywhere(first) {
                self.wrong
                    .push(format!("`{name}`: {first} is defined nowhere ({where_})"));
                return;
            }
            // `Type::method`: a function of that name exists.
            if let Some(member) = segments.get(1)
                && member.starts_with(|c: char| c.is_ascii_lowercase())
                && !self.fn_anywhere(member)
            {
                self.wrong
                    .push(format!("`{name}`: no fn {member} ({where_})"));
            }
        } else if first.starts_with("redislock_")
            && segments.len() == 1
            && !self.sources.iter().any(|(f, t)| {
                f.starts_with(root().join("src/ffi"))
                    && ["fn ", "struct ", "enum ", "type "]
                        .iter()
                        .any(|p| has_after(t, p, first))
            })
        {
            self.wrong
                .push(format!("`{name}`: no C item {first} in src/ffi ({where_})"));
        }
    }
}

/// The spans of a line in backticks, each with the text before it (since the previous span).
fn spans(line: &str) -> Vec<(&str, &str)> {
    let parts: Vec<&str> = line.split('`').collect();
    (1..parts.len())
        .step_by(2)
        .map(|i| (parts[i - 1], parts[i]))
        .collect()
}

#[test]
fn architecture_md_names_only_what_exists_where_it_says() {
    let mut c = Checker {
        sources: sources(),
        wrong: Vec::new(),
    };
    for unit in units(&page()) {
        let line = unit.as_str();
        let spans = spans(line);
        let row_file = line
            .starts_with("| `")
            .then(|| spans.first().map(|s| s.1))
            .flatten();
        // Every file the line names: a row's types are defined in one of them.
        let mut named = Vec::new();
        let row_dir = row_file
            .filter(|f| f.ends_with('/'))
            .map(|f| root().join(f));
        let mut base: Option<PathBuf> = None;
        for &(_, span) in &spans {
            if looks_like_path(span) {
                let bases: Vec<&Path> = row_dir.iter().chain(&base).map(PathBuf::as_path).collect();
                match resolve(span, &bases) {
                    Some(p) => {
                        base = Some(if p.is_dir() {
                            p.clone()
                        } else {
                            p.parent().unwrap().to_path_buf()
                        });
                        named.push(p);
                    }
                    None => c
                        .wrong
                        .push(format!("`{span}` does not exist ({})", line_start(line))),
                }
            }
        }
        let named: Vec<PathBuf> = named.into_iter().filter(|p| p.is_file()).collect();
        for (i, &(_, span)) in spans.iter().enumerate() {
            if looks_like_path(span) {
                continue;
            }
            let Some(name) = code_name(span) else {
                continue;
            };
            // "`Type` in `path`", "`Type` (`path`", "`Type`, `path`": the path says where.
            let said = spans.get(i + 1).and_then(|&(between, next)| {
                let between = between.trim();
                (matches!(between, "in" | "(" | "," | "of")
                    && looks_like_path(next)
                    && next.ends_with(".rs"))
                .then(|| resolve(next, &[]))
                .flatten()
            });
            let homes: Vec<PathBuf> = match (said, row_file) {
                (Some(p), _) => vec![p],
                (None, Some(_)) => named.clone(),
                (None, None) => Vec::new(),
            };
            c.check_name(name, &homes, line_start(line));
        }
    }
    assert!(
        c.wrong.is_empty(),
        "ARCHITECTURE.md is not true:\n  {}",
        c.wrong.join("\n  ")
    );
}

/// The page's units of text: each row of a table, and each paragraph (its lines joined), so
/// that "`Type` in `path`" is read also across a line break.
fn units(page: &str) -> Vec<String> {
    let mut units = Vec::new();
    let mut paragraph = String::new();
    for line in page.lines() {
        let starts_item = line.starts_with(|c: char| c.is_ascii_digit()) || line.starts_with("- ");
        if line.starts_with('|') || line.trim().is_empty() || starts_item {
            if !paragraph.is_empty() {
                units.push(std::mem::take(&mut paragraph));
            }
            if line.starts_with('|') {
                units.push(line.to_owned());
                continue;
            }
        }
        if !line.trim().is_empty() {
            if !paragraph.is_empty() {
                paragraph.push(' ');
            }
            paragraph.push_str(line.trim());
        }
    }
    if !paragraph.is_empty() {
        units.push(paragraph);
    }
    units
}

fn line_start(line: &str) -> &str {
    let end = line.char_indices().nth(60).map_or(line.len(), |(i, _)| i);
    &line[..end]
}

#[test]
fn the_checks_see_what_they_should() {
    assert!(defines("pub(crate) struct LockState {", "LockState"));
    assert!(!defines("pub(crate) struct LockStates {", "LockState"));
    assert!(defines("pub type Lock = Guard<Exclusive>;", "Lock"));
    assert!(defines("    pub(crate) static ACQUIRE = [", "ACQUIRE"));
    assert!(defines(
        "    REDISLOCK_KIND_READ = 1,",
        "REDISLOCK_KIND_READ"
    ));
    assert_eq!(code_name("Client::lock(name)"), Some("Client::lock"));
    assert_eq!(code_name("Guard<K>"), Some("Guard"));
    assert!(looks_like_path("engine/renewal/"));
    assert!(looks_like_path("src/base/scripts/*.lua"));
    assert!(!looks_like_path("stores::wait::Queue"));
    assert!(resolve("src/base/scripts/*.lua", &[]).is_some());
    assert!(resolve("src/base/scripts/<kind>_*.lua", &[]).is_some());
    assert!(resolve("api/client.rs", &[]).is_some());
    assert!(resolve("args.rs", &[&root().join("cli")]).is_some());
    assert!(resolve("src/nowhere.rs", &[]).is_none());
    assert!(matches("*_*.lua", "rw_enqueue.lua"));
    assert!(!matches("*_*.lua", "enqueue.lua"));
    assert_eq!(code_name("SET key token NX PX lease"), None);
    assert!(!looks_like_path("redis-cluster://"));
    assert_eq!(
        spans("a `X` in `y.rs`."),
        vec![("a ", "X"), (" in ", "y.rs")]
    );
}
