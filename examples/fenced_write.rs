//! Fenced writes: a holder paused past its lease cannot overwrite a later holder's write.
//!
//! Holder A takes a fenced lock with a short lease and no renewal, then pauses past its lease (a
//! long GC pause, say). Holder B takes the lock and writes the resource through a
//! [`FencedResource`], which keeps the fence of the last write beside the key. When A wakes up
//! and writes with its older fence, the resource refuses the write as stale, in the same script
//! that would have written, and B's value stays.
//!
//! Run it with `cargo run --example fenced_write`. The server is chosen as the oversell demo
//! chooses it (`examples/oversell.rs`, whose functions this one calls): `$REDIS_URL` if set (a
//! plain, Sentinel or Cluster URL); else `127.0.0.1:6379` if it answers PING (skipped when
//! `REDISLOCK_DEMO_NO_DEFAULT=1`); else a private `redis-server` from `PATH`, stopped on exit.
//! Its keys are under a unique `redislock-demo:{<pid>-<random>}:` prefix (one Cluster slot),
//! deleted by name at the end. Exit code: 0 when A's stale write was refused, 1 when it was not
//! or the demo failed, 2 when no usable Redis server was found.

use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use redislock::{Client, FencedResource};

#[path = "oversell.rs"]
#[allow(dead_code)]
mod oversell;

use oversell::{Cleanup, Res, connect, demo_prefix, pick_server};

const LEASE: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let prefix = match demo_prefix() {
        Ok(prefix) => prefix,
        Err(code) => return code,
    };
    let (lock, key) = (format!("{prefix}lock"), format!("{prefix}balance"));
    // `_server`, a private redis-server if one was started, is stopped when main returns.
    let (url, data_url, _server) = match pick_server(&key) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("No usable Redis server: {e}.");
            return ExitCode::from(2);
        }
    };
    match run(&url, &data_url, &lock, &key) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// A, B and the resource: the lock `lock` through `url`, the resource `key` on its server (read
/// back through `data_url`).
fn run(url: &str, data_url: &str, lock: &str, key: &str) -> Res<()> {
    let data = redis::Client::open(data_url)?;
    // The resource, its fence, the lock and its companions (the prefix's hash tag makes each
    // companion the name and a suffix: src/base/keys.rs), deleted by name when run returns.
    let mut keys = vec![key.to_owned(), format!("{key}:fenced"), lock.to_owned()];
    keys.extend([":fence", ":q", ":rq"].map(|suffix| format!("{lock}{suffix}")));
    let _cleanup = Cleanup(data.clone(), keys);

    let client = Client::builder(url)
        .fencing(true)
        .lease(LEASE)
        .auto_renew(false)
        .build()?;
    let resource = FencedResource::with_client(&client, key)?;

    let a = client.acquire(lock, WAIT)?;
    let fence_a = a.fence().ok_or("A's lock has no fence")?;
    println!("A holds the lock ({fence_a}), then pauses past its {LEASE:?} lease");
    thread::sleep(LEASE + Duration::from_millis(200));

    let b = client.acquire(lock, WAIT)?;
    let fence_b = b.fence().ok_or("B's lock has no fence")?;
    resource.set(&fence_b, "written by B")?;
    println!("B holds the lock ({fence_b}) and writes: applied");
    b.release()?;

    let late = resource.set(&fence_a, "written by A");
    let value: Option<String> = redis::cmd("GET").arg(key).query(&mut connect(&data)?)?;
    match &late {
        Ok(()) => println!("A wakes up and writes with its older fence: applied"),
        Err(e) => println!("A wakes up and writes with its older fence: {e}"),
    }
    println!("The resource holds {value:?}");
    drop(a); // its lease ran out long ago: the release finds it gone
    match late {
        Err(e) if e.is_stale() && value.as_deref() == Some("written by B") => {
            println!("A's stale write was refused: B's write stays. Correct.");
            Ok(())
        }
        Err(e) => Err(format!("A's write failed, but not as stale: {e}").into()),
        Ok(()) => Err("A's stale write was applied".into()),
    }
}
