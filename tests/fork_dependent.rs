//! Fork safety for a Rust program that depends on the crate, as a user's program does: a separate
//! crate, made here in `target/fork-dependent/`, that depends on this repository by path with no
//! `[patch]` of its own (so it gets exactly what `cargo` resolves for a dependent), forks many
//! times while its other threads hold, renew and contend for locks, and has every child use the
//! inherited client: acquire and release new locks from several threads (with renewal threads
//! and pool checkout waits of their own) and exit. The parent reaps each child within a bound,
//! and the program fails on any child that hangs (killed at the bound), crashes or fails.
//!
//! The race cannot be forced from outside (which parked thread a child's new thread replaces, and
//! which of the library's waits it lands next to, is the scheduler's and the allocator's), so the
//! program forces the state that makes it likely instead: at every fork, threads are parked in
//! the library's own waits (a pool checkout with one connection for six threads, renewal threads
//! between renewals, the renewal timer and I/O threads, idle renewal threads), and each child
//! starts new threads, which take over the stacks of those parked threads, and parks them in turn
//! many times. A process-wide table of parked threads (parking_lot's, which this crate used up to
//! 0.3 and fixed only with a `[patch]` that never reached dependents) then hangs or crashes a
//! share of the children.
//!
//! The first run builds the program and the library without TLS (a minute or two; fork safety
//! does not depend on it), offline when cargo's cache has every crate; later runs reuse the
//! build. `REDISLOCK_FORK_DEPENDENT_ON=<dir>` builds it against the library in another directory
//! (an older checkout, to see the test fail there), in `target/fork-dependent-<hash>/`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{RedisServer, spawn_anchored, wait_child};

/// Forks the program makes, one after another.
const FORKS: u32 = 30;

/// The longest the whole program may run: building is done before, and each child has a bound
/// of its own (`CHILD_BOUND` in the program) well inside this.
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(300);

/// The program: `fork-dependent URL FORKS`. Prints one line per child that did not exit 0
/// within its bound, and `forks N ok M` at the end; exits 0 only if every child did.
const MAIN: &str = r#"
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;

/// A child uses the client and exits well inside this; past it, it is killed and counted hung.
const CHILD_BOUND: Duration = Duration::from_secs(20);
/// Auto-renewed: renewed every third of it, with room for a loaded machine.
const LEASE: Duration = Duration::from_secs(1);
/// How long a child's thread holds each of its locks: past the 100 ms after which a lock gets a
/// renewal thread of its own.
const CHILD_HOLD: Duration = Duration::from_millis(200);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = &args[1];
    let forks: u32 = args[2].parse().unwrap();
    // One pooled connection for the threads that contend, so that all but one park on the
    // pool's checkout; auto-renewed leases, so that renewal threads park between renewals.
    let client = Arc::new(
        Client::builder(url)
            .pool_size(1)
            // Ten threads and the renewal I/O thread queue for it: room for a loaded machine.
            .checkout_timeout(Duration::from_secs(10))
            .lease(LEASE)
            .key_prefix(format!("fork-dependent-{}:", std::process::id()))
            .build()
            .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU32::new(0));
    let mut threads = Vec::new();
    for i in 0..6 {
        let (client, stop, errors) = (client.clone(), stop.clone(), errors.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Two names for six threads: waits for the lock and for the connection.
                match client.acquire(format!("contended-{}", i % 2), Duration::from_secs(10)) {
                    Ok(lock) => {
                        thread::sleep(Duration::from_millis(1));
                        if lock.release().is_err() {
                            parent_error(&errors);
                        }
                    }
                    Err(_) => parent_error(&errors),
                }
            }
        }));
    }
    for i in 0..4 {
        let (client, stop, errors) = (client.clone(), stop.clone(), errors.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Held across a renewal: its renewal thread sleeps on a condition
                // variable between them.
                match client.acquire(format!("held-{i}"), Duration::from_secs(10)) {
                    Ok(lock) => {
                        thread::sleep(Duration::from_millis(400));
                        if lock.release().is_err() {
                            parent_error(&errors);
                        }
                    }
                    Err(_) => parent_error(&errors),
                }
            }
        }));
    }
    thread::sleep(Duration::from_millis(500));

    let mut ok = 0;
    for n in 0..forks {
        thread::sleep(Duration::from_millis(20 + u64::from(n % 7) * 7));
        // SAFETY: the child only uses the library (fork safe by its contract), starts threads of
        // its own and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            child(&client, n);
        }
        match reap(pid, CHILD_BOUND) {
            Ok(0) => ok += 1,
            Ok(status) => println!("child {n} failed (exit status {status})"),
            Err(()) => println!("child {n} hung: killed after {} s", CHILD_BOUND.as_secs()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    // The parent's own errors (a machine too loaded for its bounds) only weaken the test; the
    // verdict is the children's.
    println!("parent errors {}", errors.load(Ordering::Relaxed));
    println!("forks {forks} ok {ok}");
    std::process::exit(if ok == forks { 0 } else { 1 });
}

/// Counts an error of the parent's threads. Not printed as it happens: a child forked meanwhile
/// would inherit stderr's lock held.
fn parent_error(errors: &AtomicU32) {
    errors.fetch_add(1, Ordering::Relaxed);
}

/// Three threads of the child, each taking and releasing new locks on the inherited client (one
/// connection: they also wait for it), each lock held across renewals.
fn child(client: &Arc<Client>, n: u32) -> ! {
    let mut threads = Vec::new();
    for t in 0..3 {
        let client = client.clone();
        threads.push(thread::spawn(move || -> Result<(), String> {
            for round in 0..2 {
                let name = format!("child-{}-{n}-{t}-{round}", std::process::id());
                let lock = client.acquire(&name, Duration::from_secs(5))
                    .map_err(|e| format!("acquire {name}: {e}"))?;
                thread::sleep(CHILD_HOLD);
                if !lock.is_held() {
                    return Err(format!("{name} lost while held"));
                }
                lock.release().map_err(|e| format!("release {name}: {e}"))?;
            }
            Ok(())
        }));
    }
    let mut code = 0;
    for t in threads {
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("child {n}: {e}");
                code = 2;
            }
            Err(_) => code = 3,
        }
    }
    // SAFETY: leaves the child without running the parent's exit handlers.
    unsafe { libc::_exit(code) }
}

/// The child's exit status (a signal counts as 128 + its number), or `Err` when it was still
/// running at the bound (it is then killed and reaped).
fn reap(pid: libc::pid_t, bound: Duration) -> Result<i32, ()> {
    let deadline = Instant::now() + bound;
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(r >= 0, "waitpid failed");
        if r == pid {
            return Ok(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        if Instant::now() >= deadline {
            // SAFETY: kills and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(());
        }
        thread::sleep(Duration::from_millis(5));
    }
}
"#;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a cargo command to its end; `Err` with its output on failure.
fn cargo(args: &[&str], manifest: &Path, target: &Path) -> Result<(), String> {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .arg("--manifest-path")
        .arg(manifest)
        .arg("--target-dir")
        .arg(target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_TARGET_DIR")
        .stdin(Stdio::null())
        .output()
        .expect("cannot run cargo");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Makes and builds the program; its path.
fn program() -> PathBuf {
    let other = std::env::var_os("REDISLOCK_FORK_DEPENDENT_ON").map(PathBuf::from);
    // Another library builds in a directory of its own: cargo does not copy a binary it finds
    // up to date back to `target/debug/`, so a target directory shared by two libraries could
    // run the program built against the other one.
    let (library, work) = match other {
        None => (repo(), repo().join("target/fork-dependent")),
        Some(dir) => {
            let mut hash = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(&dir, &mut hash);
            let name = format!(
                "target/fork-dependent-{:016x}",
                std::hash::Hasher::finish(&hash)
            );
            (dir, repo().join(name))
        }
    };
    let app = work.join("app");
    std::fs::create_dir_all(app.join("src")).unwrap();
    // The library's package name: redislock-sync, or redislock before 0.4.
    let package = std::fs::read_to_string(library.join("Cargo.toml"))
        .ok()
        .and_then(|m| {
            m.lines().find_map(|l| {
                l.strip_prefix("name = \"")?
                    .strip_suffix('"')
                    .map(str::to_owned)
            })
        })
        .unwrap_or_else(|| "redislock-sync".to_owned());
    let manifest = format!(
        "[package]\nname = \"fork-dependent\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
         publish = false\n\n[dependencies]\nlibc = \"0.2\"\n\
         redislock = {{ package = \"{package}\", path = \"{}\", default-features = false }}\n\n\
         [workspace]\n",
        library.display()
    );
    // Rewritten only when changed, so that a later run rebuilds nothing.
    for (path, text) in [
        (app.join("Cargo.toml"), manifest.as_str()),
        (app.join("src/main.rs"), MAIN),
    ] {
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            std::fs::write(&path, text).unwrap();
        }
    }
    let manifest = app.join("Cargo.toml");
    // Resolved afresh for each library, as for a new user's project.
    let _ = std::fs::remove_file(app.join("Cargo.lock"));
    let target = work.join("target");
    let started = Instant::now();
    if let Err(offline) = cargo(&["build", "--quiet", "--offline"], &manifest, &target) {
        // A crate missing from cargo's cache: fetch it.
        cargo(&["build", "--quiet"], &manifest, &target).unwrap_or_else(|online| {
            panic!(
                "building {} failed\n{offline}\n{online}",
                manifest.display()
            )
        });
    }
    println!(
        "built {} against {} in {:.1} s",
        manifest.display(),
        library.display(),
        started.elapsed().as_secs_f64()
    );
    target.join("debug/fork-dependent")
}

#[test]
fn a_dependent_program_forks_while_threads_park_and_every_child_exits() {
    let program = program();
    let server = RedisServer::start();
    let mut cmd = Command::new(&program);
    cmd.arg(server.url())
        .arg(FORKS.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let child = spawn_anchored(cmd).expect("cannot start the program");
    let out = wait_child(child, PROGRAM_TIMEOUT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("ran in {:.1} s\n{stdout}", started.elapsed().as_secs_f64());
    assert!(
        out.status.success() && stdout.contains(&format!("forks {FORKS} ok {FORKS}")),
        "a child of a dependent program hung, crashed or failed ({})\n--- stdout ---\n{stdout}\
         \n--- stderr ---\n{stderr}",
        out.status
    );
}
