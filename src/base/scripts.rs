//! The Lua scripts the library runs: the files under `src/base/scripts/`, one `.lua` file each
//! with its KEYS, ARGV and replies in a comment at its top; the scripts that the kinds and the
//! stores share, declared here; each kind's own, declared in its file of `engine/kinds/` with the
//! [`scripts!`] macro of this file. The tests below check them all.
//!
//! Each script acts only while the lock key still holds the caller's token, so a program that
//! uses the classic `SET key token NX PX` + compare-and-delete pattern on the same key excludes,
//! and is excluded by, this library. Scripts are sent with EVALSHA; redis-rs loads a script and
//! retries when the server answers NOSCRIPT (after a restart or `SCRIPT FLUSH`).
//!
//! Waiting is a queue with direct handoff: a waiter that finds the lock held enqueues itself
//! (ENQUEUE) and blocks on its own signal list with BLPOP; RELEASE gives the lock straight to the
//! oldest live waiter (sets the key to that waiter's token) and pushes the grant onto its signal
//! list. Waiters are therefore served in arrival order and the releaser cannot barge back in.
//! A fenced grant increments the counter before it sets the key: a script that fails midway
//! keeps its earlier writes, and a failing INCR must not leave the key set with nobody holding it.
//!
//! The queue is a list of waiter entries `wid:lease:fence:token` in arrival order; what a handoff
//! needs (the waiter's lease, fencing flag and token) is in the entry itself. Each waiter also
//! has a liveness key with an expiry that the waiter refreshes on every re-check, so the entry of
//! a waiter that died is skipped once that key has expired: RELEASE's `DEL` of it both tells
//! whether the waiter is alive and cleans up, with no clock reading. The liveness key also tells
//! ENQUEUE whether the waiter's entry is still queued (it is created with the entry and deleted
//! when the entry is used up), so a re-check keeps its place. The queue's expiry is only ever
//! extended, to at least that of every liveness key. A handoff therefore costs RELEASE six server
//! calls (GET, LPOP, DEL, SET, RPUSH, PEXPIRE) and the waiter's ENQUEUE five (GET, SET NX,
//! RPUSH, PTTL, PTTL), plus an INCR with fencing.
//!
//! Every key a script touches is passed in KEYS, with one exception: RELEASE finds the waiter it
//! hands the lock to in the queue, so it makes that waiter's liveness key and signal list from
//! the entry (they cannot be known before the script runs without a round trip more per
//! handoff). They share the lock key's hash tag (`keys.rs`), so they live in the lock's Cluster
//! slot, on the node that runs the script: Redis 7 runs scripts without a `#!lua` flags line
//! in its compatible mode, which allows keys of the node's own slots not declared in KEYS
//! (measured on a Redis 7.0 cluster: the handoff works on every node). The scripts are called by
//! the stores (`stores/`) and by the kinds of lock (`engine/kinds/`).
//!
//! Lua has no include, so what several scripts share is written once, as a fragment under
//! `src/base/scripts/lib/` (`local function`s, and for a kind whose scripts begin alike that
//! common start; a script must not set a global), and a script is its
//! fragments and then its own file, concatenated at compile time. A kind's design is described
//! in its fragment or its first script, and Redlock's in `quorum_acquire.lua`. `scripts/test.sh` runs luacheck
//! (`.luacheckrc`) on the files and on each script as Redis receives it.

/// The text of a script: its files under `src/base/scripts/`, concatenated in that order (the
/// group's shared files first, then the script's own).
macro_rules! lua {
    ([$($shared:literal),*] $($file:literal),+) => {
        concat!(
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/base/scripts/", $shared)),)*
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/base/scripts/", $file))),+
        )
    };
}
pub(crate) use lua;

/// Declares each script as a `redis::Script` made from its files (`lua!`) on first use (a
/// [`Lazy`](crate::base::sync::Lazy): fork-safe), and, for the tests below, lists them in `SCRIPTS`. The scripts come in
/// groups, each with the files its scripts share (`[]` for none), written once, before them.
/// Used here for the scripts every kind or store shares, and by each kind's file of
/// `engine/kinds/` for its own.
macro_rules! scripts {
    ($($shared:tt {
        $($(#[$doc:meta])* $vis:vis static $name:ident = [$($file:literal),+];)+
    })+) => {
        $($(
            $(#[$doc])*
            $vis static $name: $crate::base::sync::Lazy<::redis::Script> =
                $crate::base::sync::Lazy::new(|| {
                    ::redis::Script::new($crate::base::scripts::lua!($shared $($file),+))
                });
        )+)+

        /// These scripts: each one's name, its files in order, and its text as Redis receives
        /// it (for the tests of `base/scripts.rs`).
        #[cfg(test)]
        pub(crate) const SCRIPTS: &[(&str, &[&str], &str)] = &[$($((
            stringify!($name),
            $crate::base::scripts::files!($shared $($file),+),
            $crate::base::scripts::lua!($shared $($file),+),
        )),+),+];
    };
}
pub(crate) use scripts;

/// A script's files in order: the group's shared ones, then its own (for the tests).
#[cfg(test)]
macro_rules! files {
    ([$($shared:literal),*] $($file:literal),+) => {
        &[$($shared,)* $($file),+]
    };
}
#[cfg(test)]
pub(crate) use files;

scripts! {
    [] {
        // ---- Exclusive locks ----

        /// ACQUIRE: take the lock if it is free, with an optional fencing token: `acquire.lua`.
        pub(crate) static ACQUIRE = ["lib/fence.lua", "acquire.lua"];
        /// ENQUEUE: a waiter takes the lock if it is free, else queues: `enqueue.lua`.
        pub(crate) static ENQUEUE = [
            "lib/fence.lua", "lib/signal.lua", "lib/queue.lua", "enqueue.lua"
        ];
        /// RELEASE: hand the lock to the oldest live waiter, or delete it: `release.lua`.
        pub(crate) static RELEASE = [
            "lib/fence.lua", "lib/signal.lua", "lib/handoff.lua", "release.lua"
        ];
        /// CANCEL: a waiter whose wait bound ran out leaves the queue: `cancel.lua`.
        pub(crate) static CANCEL = ["lib/fence.lua", "lib/signal.lua", "cancel.lua"];
        /// SIGNAL_CANCEL: wakes a waiter that is being cancelled: `signal_cancel.lua`.
        pub(crate) static SIGNAL_CANCEL = ["lib/signal.lua", "signal_cancel.lua"];
        /// EXTEND: reset the lease of a lock we still hold: `extend.lua`.
        pub(crate) static EXTEND = ["extend.lua"];

        // ---- A look at a lock ----

        /// INSPECT: what holds a lock and who waits, for every kind; reads only: `inspect.lua`.
        pub(crate) static INSPECT = ["lib/clock.lua", "inspect.lua"];

        // ---- Redlock, one master at a time (`quorum_acquire.lua`) ----

        /// QUORUM_ACQUIRE: a Redlock attempt on one master: `quorum_acquire.lua`.
        pub(crate) static QUORUM_ACQUIRE = ["quorum_acquire.lua"];
        /// QUORUM_ENQUEUE: a Redlock waiter's attempt on one master, queued there if refused:
        /// `quorum_enqueue.lua`.
        pub(crate) static QUORUM_ENQUEUE = ["quorum_enqueue.lua"];
        /// QUORUM_HANDOVER: a Redlock release on one master, handing the lock to the first queued
        /// waiter: `quorum_handover.lua`.
        pub(crate) static QUORUM_HANDOVER = ["lib/wanted.lua", "quorum_handover.lua"];
        /// QUORUM_RELEASE: delete our key on one master, tell if it is wanted: `quorum_release.lua`.
        pub(crate) static QUORUM_RELEASE = ["lib/wanted.lua", "quorum_release.lua"];
        /// QUORUM_EXTEND: reset the lease of our key on one master: `quorum_extend.lua`.
        pub(crate) static QUORUM_EXTEND = ["quorum_extend.lua"];
        /// QUORUM_WAKE: wake one waiter blocked on the lock's wake list: `quorum_wake.lua`.
        pub(crate) static QUORUM_WAKE = ["quorum_wake.lua"];
    }

    // ---- Fenced writes to a resource (`api/fenced.rs`) ----
    ["lib/fenced.lua"] {
        /// FENCED_SET: set the resource if the writer's fence is not older: `fenced_set.lua`.
        pub(crate) static FENCED_SET = ["fenced_set.lua"];
        /// FENCED_INCR: INCRBY the resource if the writer's fence is not older: `fenced_incr.lua`.
        pub(crate) static FENCED_INCR = ["fenced_incr.lua"];
    }
}

/// What a caller's script of a fenced write (`api/fenced.rs`) is wrapped in: the check of
/// `lib/fenced.lua` first, the caller's script as a function, the fence advanced after it. The
/// caller's KEYS and ARGV come first; the resource's fence key and the token are taken off their
/// ends. Returns {1, the caller's reply} when run, or {0, fence} when stale (the caller's script
/// not run).
pub(crate) fn fenced_eval(script: &str) -> String {
    const HEAD: &str = "local fence_key = table.remove(KEYS)\n\
                        local token = table.remove(ARGV)\n\
                        local stored = stale_fence(fence_key, token)\n\
                        if stored then return {0, stored} end\n\
                        local reply = (function()\n";
    const TAIL: &str = "\nend)()\n\
                        redis.call('SET', fence_key, token)\n\
                        return {1, reply}\n";
    let mut text = String::with_capacity(FENCED_LIB.len() + HEAD.len() + script.len() + 40);
    text.push_str(FENCED_LIB);
    text.push_str(HEAD);
    text.push_str(script);
    text.push_str(TAIL);
    text
}

/// `lib/fenced.lua`, for [`fenced_eval`].
const FENCED_LIB: &str = lua!([] "lib/fenced.lua");

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// Every script: the ones declared here and each kind's own.
    fn all() -> Vec<(&'static str, &'static [&'static str], &'static str)> {
        crate::engine::kinds::all_scripts()
    }

    fn scripts_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/base/scripts")
    }

    /// A file under `src/base/scripts/`, as it is on disk.
    fn read(file: &str) -> String {
        std::fs::read_to_string(scripts_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// The `.lua` files under `src/base/scripts/`, as paths relative to it (`lib/handoff.lua`).
    fn lua_files() -> BTreeSet<String> {
        fn walk(dir: &Path, prefix: &str, out: &mut BTreeSet<String>) {
            for entry in std::fs::read_dir(dir).expect("src/base/scripts/") {
                let path = entry.expect("src/base/scripts/ entry").path();
                let name = path.file_name().unwrap().to_str().expect("a UTF-8 name");
                if path.is_dir() {
                    walk(&path, &format!("{prefix}{name}/"), out);
                } else if name.ends_with(".lua") {
                    out.insert(format!("{prefix}{name}"));
                }
            }
        }
        let mut files = BTreeSet::new();
        walk(&scripts_dir(), "", &mut files);
        files
    }

    fn is_fragment(file: &str) -> bool {
        file.starts_with("lib/")
    }

    /// The functions the fragments define (`local function name(` at a line's start), with the
    /// fragment that defines each.
    fn fragment_functions() -> BTreeSet<(String, String)> {
        let mut functions = BTreeSet::new();
        for file in lua_files().iter().filter(|f| is_fragment(f)) {
            for line in read(file).lines() {
                if let Some(rest) = line.strip_prefix("local function ") {
                    let name = rest.split('(').next().unwrap();
                    functions.insert((name.to_string(), file.clone()));
                }
            }
        }
        functions
    }

    /// A script's lines without their comments (no string in the scripts holds `--`).
    fn code_lines(text: &str) -> Vec<&str> {
        text.lines()
            .map(|l| l.split("--").next().unwrap())
            .collect()
    }

    /// Whether `line` calls or defines the function `name` (not a longer name, nor a field such
    /// as `string.name`).
    fn calls(line: &str, name: &str) -> bool {
        line.match_indices(&format!("{name}(")).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
    }

    /// Each script is fragments (`lib/`) and then one file of its own, named after it; every
    /// `.lua` file is used, and a script's own file by that script only.
    #[test]
    fn every_file_is_used_and_each_script_has_a_file_of_its_own() {
        let mut used = BTreeSet::new();
        for (name, files, _) in all() {
            let (own, fragments) = files.split_last().unwrap();
            assert_eq!(
                *own,
                format!("{}.lua", name.to_lowercase()),
                "{name}'s own file"
            );
            for fragment in fragments {
                assert!(
                    is_fragment(fragment),
                    "{name}: {fragment} is not in lib/, or not last"
                );
                used.insert(fragment.to_string());
            }
            let distinct: BTreeSet<_> = files.iter().collect();
            assert_eq!(distinct.len(), files.len(), "{name} names a file twice");
            assert!(
                used.insert(own.to_string()),
                "{own} is the own file of two scripts"
            );
        }
        if !cfg!(feature = "recipe-kind") {
            // The recipe kind's script is declared only when its feature is on.
            used.insert("recipe_release.lua".to_string());
        }
        let on_disk = lua_files();
        let orphans: Vec<_> = on_disk.difference(&used).collect();
        assert!(
            orphans.is_empty(),
            "files in src/base/scripts/ that no script uses: {orphans:?}"
        );
        let missing: Vec<_> = used.difference(&on_disk).collect();
        assert!(
            missing.is_empty(),
            "files named in scripts.rs, not found: {missing:?}"
        );
    }

    /// A script's own file starts with its contract: `-- NAME: what it does`, then its KEYS, its
    /// ARGV and its reply, in one comment block.
    #[test]
    fn each_script_starts_with_its_contract() {
        for (name, files, _) in all() {
            let own = files.last().unwrap();
            let text = read(own);
            let head = format!("-- {name}: ");
            assert!(text.starts_with(&head), "{own} must start with `{head}`");
            let contract: Vec<_> = text.lines().take_while(|l| l.starts_with("--")).collect();
            for part in ["KEYS", "ARGV", "Returns"] {
                let named = contract.iter().any(|l| l.contains(part));
                assert!(named, "{own}: the contract at its top names no {part}");
            }
        }
    }

    /// The files concatenate safely and stay within what Redis allows: each ends with one line
    /// break (else its last line would run into the next file's first), defines no global
    /// function (Redis 7 refuses globals), and has no tab, carriage return or trailing blank.
    #[test]
    fn files_are_plain_and_define_no_global_function() {
        for file in lua_files() {
            let text = read(&file);
            let one_break = text.ends_with('\n') && !text.ends_with("\n\n");
            assert!(one_break, "{file}: must end with one line break");
            for (i, line) in text.lines().enumerate() {
                let at = format!("{file}:{}", i + 1);
                assert!(
                    !line.contains(['\t', '\r']),
                    "{at}: a tab or carriage return"
                );
                assert_eq!(line, line.trim_end(), "{at}: trailing blanks");
                let global = line.trim_start().starts_with("function ");
                assert!(
                    !global,
                    "{at}: a global function (make it `local function`)"
                );
            }
        }
    }

    /// A script calls a fragment's function only after the fragment defined it: the fragments a
    /// script needs are all in its list, in an order that works. And every fragment function is
    /// called by some script (directly, or through another fragment's function).
    #[test]
    fn fragment_functions_are_defined_before_use_and_all_used() {
        let functions = fragment_functions();
        assert!(
            functions.len() >= 5,
            "too few fragment functions found: {functions:?}"
        );
        for (function, fragment) in &functions {
            let mut called = false;
            for (name, _, text) in all() {
                let lines = code_lines(text);
                let Some(first) = lines.iter().position(|l| calls(l, function)) else {
                    continue;
                };
                assert!(
                    lines[first].starts_with(&format!("local function {function}(")),
                    "{name} calls {function} before it is defined (`{}`): is {fragment} \
                     missing from its list, or after a fragment that needs it?",
                    lines[first].trim()
                );
                called |= lines[first + 1..].iter().any(|l| calls(l, function));
            }
            assert!(called, "{function} (in {fragment}) is called by no script");
        }
    }

    /// Writes each script as Redis receives it to `$LUACHECK_DIR/<name>.lua`, for luacheck
    /// (`scripts/test.sh`).
    #[test]
    #[ignore = "run by scripts/test.sh, which lints what it writes"]
    fn write_for_luacheck() {
        let dir = std::env::var("LUACHECK_DIR").expect("LUACHECK_DIR: where to write the scripts");
        std::fs::create_dir_all(&dir).unwrap();
        for (name, _, text) in all() {
            let path = Path::new(&dir).join(format!("{}.lua", name.to_lowercase()));
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        // A caller's script of a fenced write, wrapped as `fenced_eval` wraps it.
        let wrapped = super::fenced_eval("return redis.call('INCR', KEYS[1])");
        std::fs::write(Path::new(&dir).join("fenced_eval.lua"), wrapped).unwrap();
    }
}
