//! Waiting for a held lock: waiters block without polling Redis, and a release hands the lock
//! straight to the oldest waiter, so waiters are served in arrival order. A wait bound that runs
//! out fails with `is_wait_timeout()`.
//!
//! Run with `cargo run --example wait_and_handoff` against `$REDIS_URL` or the default
//! `redis://127.0.0.1:6379/`. Keys: under a unique `redislock-example:` prefix, deleted at the end.

use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;

const WAIT: Duration = Duration::from_secs(5);

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let tag = getrandom::u32()?;
    let prefix = format!("redislock-example:{}-{tag:08x}:", std::process::id());
    let client = Client::builder(&url).key_prefix(&prefix).build()?;
    let result = run(&client);
    delete_lock_keys(&url, &format!("{prefix}printer"))?;
    result
}

fn run(client: &Client) -> Res<()> {
    let start = Instant::now();
    let ms = || start.elapsed().as_millis();
    let holder = client.acquire("printer", WAIT)?;
    println!("{:>4} ms  main holds the lock for 300 ms", ms());
    Ok(thread::scope(|s| {
        // Four waiters arrive 20 ms apart; each holds the lock for 50 ms once it gets it.
        for i in 0..4 {
            thread::sleep(Duration::from_millis(20));
            s.spawn(move || {
                println!("{:>4} ms  waiter {i} starts waiting", ms());
                let lock = client.acquire("printer", WAIT).expect("acquire");
                println!("{:>4} ms  waiter {i} got the lock", ms());
                thread::sleep(Duration::from_millis(50));
                lock.release().expect("release");
            });
        }
        // An impatient one waits at most 100 ms.
        match client.acquire("printer", Duration::from_millis(100)) {
            Err(e) if e.is_wait_timeout() => println!("{:>4} ms  impatient: {e}", ms()),
            other => panic!("expected a wait timeout, got {other:?}"),
        }
        thread::sleep(Duration::from_millis(300).saturating_sub(start.elapsed()));
        println!("{:>4} ms  main releases; the oldest waiter gets it", ms());
        holder.release()
    })?)
}

/// Deletes a lock key and its companions (fencing counter, waiter queue; a waiter's own keys
/// expire by themselves: src/base/keys.rs).
fn delete_lock_keys(url: &str, key: &str) -> Res<()> {
    let data = redis::Client::open(url)?;
    let mut conn = data.get_connection_with_timeout(Duration::from_secs(2))?;
    let keys = [":fence", ":q"].map(|suffix| format!("{{{key}}}{suffix}"));
    Ok(redis::cmd("DEL").arg(key).arg(&keys).exec(&mut conn)?)
}
