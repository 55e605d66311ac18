//! The basics: one shared client, acquire and release, a single attempt, `with_lock`, extend.
//!
//! Run with `cargo run --example basic` against `$REDIS_URL` or `redis://127.0.0.1:6379/`.
//! Its keys are under a unique `redislock-example:<pid>-<random>:` prefix, deleted at the end.

use std::time::Duration;

use redislock::Client;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let tag = getrandom::u32()?;
    let prefix = format!("redislock-example:{}-{tag:08x}:", std::process::id());
    // One client per process, shared (or cloned) by every thread. Every lock key gets the prefix.
    let client = Client::builder(&url).key_prefix(&prefix).build()?;
    let result = run(&client);
    delete_lock_keys(&url, &format!("{prefix}report"))?;
    result
}

fn run(client: &Client) -> Res<()> {
    // Wait up to 5 s for the lock. Auto-renewal keeps it alive while we hold it.
    let lock = client.acquire("report", Duration::from_secs(5))?;
    println!("acquired; surely ours for {:?}", lock.remaining());

    // A single attempt fails at once while someone holds the lock.
    match client.try_acquire("report") {
        Err(e) if e.is_held() => println!("second try_acquire: {e}"),
        other => return Err(format!("expected Held, got {other:?}").into()),
    }

    // Need more time? Reset the lease (auto-renewal continues with the new one).
    lock.extend(Duration::from_secs(60))?;
    println!("extended: lease {:?}", lock.lease());

    // Release returns Err(NotHeld) if the lock was lost meanwhile (then the work may overlap).
    lock.release()?;
    println!("released");

    // with_lock: acquire, run the closure, release; the closure's value comes back.
    let total = client.with_lock("report", Duration::from_secs(5), |_lock| 40 + 2)?;
    println!("with_lock returned {total}");
    Ok(())
}

/// Deletes a lock key and its companions (fencing counter, waiter queue; a waiter's own keys
/// expire by themselves: src/base/keys.rs).
fn delete_lock_keys(url: &str, key: &str) -> Res<()> {
    let data = redis::Client::open(url)?;
    let mut conn = data.get_connection_with_timeout(Duration::from_secs(2))?;
    let keys = [":fence", ":q"].map(|suffix| format!("{{{key}}}{suffix}"));
    Ok(redis::cmd("DEL").arg(key).arg(&keys).exec(&mut conn)?)
}
