//! Fencing tokens: the protected resource refuses a write from a holder whose lock expired.
//!
//! A takes the lock, then stalls past its lease (a long GC pause, say). B takes it with a larger
//! token and writes. When A wakes up and writes, the resource has seen a larger token and refuses
//! A's stale write, which would otherwise silently overwrite B's.
//!
//! Run with `cargo run --example fencing` against `$REDIS_URL` or `redis://127.0.0.1:6379/`.
//! Its keys are under a unique `redislock-example:<pid>-<random>:` prefix, deleted at the end.

use std::time::Duration;

use redislock::Client;

const LEASE: Duration = Duration::from_millis(200);
const WAIT: Duration = Duration::from_secs(1);

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let tag = getrandom::u32()?;
    let prefix = format!("redislock-example:{}-{tag:08x}:", std::process::id());
    // Locks of this client get fencing tokens and a short lease that is not renewed. Per lock:
    // `client.lock(name).fencing(true).lease(LEASE).auto_renew(false).acquire(WAIT)`.
    let client = Client::builder(&url)
        .key_prefix(&prefix)
        .fencing(true)
        .lease(LEASE)
        .auto_renew(false)
        .build()?;
    let result = run(&client);
    delete_lock_keys(&url, &format!("{prefix}invoice"))?;
    result
}

fn run(client: &Client) -> Res<()> {
    let a = client.acquire("invoice", WAIT)?;
    let token_a = a.fencing_token().ok_or("no fencing token")?;
    println!("A holds the lock with token {token_a}, then stalls past its lease");
    std::thread::sleep(LEASE + Duration::from_millis(100));

    let b = client.acquire("invoice", WAIT)?;
    let token_b = b.fencing_token().ok_or("no fencing token")?;
    // The resource accepts a write whose token is at least the largest it has seen, and keeps it.
    let highest_seen = token_b;
    println!("B holds the lock with token {token_b} and writes: accepted");
    b.release()?;

    assert!(token_a < highest_seen);
    println!("A wakes up and writes with token {token_a}: refused ({token_a} < {highest_seen})");
    // A's release tells it that the lock was no longer its own.
    let not_held = a.release().expect_err("A's lease ran out");
    println!("A releases: {not_held}");
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
