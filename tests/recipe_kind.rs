//! The recipe kind (cargo feature `recipe-kind`): a kind added by ARCHITECTURE.md's "Adding a
//! kind", driven here through the public Rust API and through the C ABI (a C program built
//! against the `libredislock.so` of this build, which has the feature), on a real server. Run:
//! `cargo nextest run --features recipe-kind --test recipe_kind`.

mod support;

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redislock::kind::{self, Kind};
use redislock::{AnyLock, Client};
use support::{RedisServer, compile_c, lib_dir, pttl, wait_child};

#[test]
fn the_recipe_kind_is_acquired_waited_for_renewed_extended_and_released() {
    let srv = RedisServer::start();
    // Re-checks far apart: a waiter that gets the lock soon was woken by the release.
    let client = Client::builder(&srv.url())
        .recheck_interval(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut con = srv.conn();
    let key = "recipe";

    // Acquired and renewed: a lease of 600 ms outlived three times over.
    let renewed = client
        .recipe_lock(key)
        .lease(Duration::from_millis(600))
        .auto_renew(true)
        .try_acquire()
        .unwrap();
    thread::sleep(Duration::from_millis(1_800));
    assert!(renewed.is_held());
    assert!(pttl(&mut con, key) > 0, "renewal kept the key");
    renewed.release().unwrap();
    assert_eq!(pttl(&mut con, key), -2, "released: the key is gone");

    // Refused while held, by this kind and by an exclusive lock of the name (the same key).
    let request = client
        .recipe_lock(key)
        .lease(Duration::from_secs(10))
        .auto_renew(false);
    let first = request.try_acquire().unwrap();
    let e = request.try_acquire().unwrap_err();
    assert!(e.is_held(), "{e}");
    assert!(client.lock(key).try_acquire().unwrap_err().is_held());

    // A waiter listens on the channel and is woken by the release, long before its re-check.
    let waiter = thread::scope(|s| {
        let w = s.spawn(|| request.acquire(Duration::from_secs(8)));
        thread::sleep(Duration::from_millis(300));
        assert!(!w.is_finished(), "the waiter waits while the lock is held");
        let released = Instant::now();
        first.release().unwrap();
        let held = w.join().unwrap().unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(5),
            "woken by the release, not by its re-check 20 s later"
        );
        held
    });

    // Held as an `AnyLock` (as the C ABI holds it), its kind known by its descriptor.
    let any = AnyLock::from(waiter);
    assert_eq!(any.kind(), kind::Recipe::DESCRIPTOR);
    assert_eq!(any.kind().name(), "recipe");

    // Extended, then released: the key is gone, and a second release says not held.
    any.extend(Duration::from_secs(30)).unwrap();
    assert!(pttl(&mut con, key) > 20_000);
    any.release().unwrap();
    assert_eq!(pttl(&mut con, key), -2);
    let again = request.try_acquire().unwrap();
    again.release().unwrap();

    // Its own series in the metrics.
    let text = client.metrics().to_prometheus();
    assert!(
        text.contains("kind=\"recipe\""),
        "no series of the recipe kind:\n{text}"
    );
}

#[test]
fn the_recipe_kind_through_the_c_abi() {
    let srv = RedisServer::start();
    let lib = lib_dir();
    let exe = lib.join(format!("recipe-kind-c-{}", std::process::id()));
    let recipe = ["-D", "REDISLOCK_RECIPE_KIND"];
    compile_c("ffi-tests/recipe/recipe_kind.c", &exe, &recipe, &[]);
    // This library first: cargo's LD_LIBRARY_PATH names target/<profile> too, whose copy is
    // the last `cargo build`'s.
    let child = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &lib)
        .env("REDISLOCK_TEST_URL", srv.url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_child(child, Duration::from_secs(60));
    let _ = std::fs::remove_file(&exe);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Cargo keeps one libredislock.so per profile, whatever the features: a build of the
    // library without the feature after the last one with it leaves one without the kind.
    assert!(
        !stderr.contains("100 is not a redislock_kind"),
        "{} was built without the feature recipe-kind (the last build of the library had other \
         features, and this one was fresh): `touch src/lib.rs` and run again\n{stderr}",
        lib.join("libredislock.so").display()
    );
    assert!(
        out.status.success(),
        "the C test of the recipe kind failed ({})\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("recipe kind: ok"), "{stdout}");
}
