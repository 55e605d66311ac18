//! Locks through a Redis Sentinel group (1 master, 2 replicas, 3 sentinels, started by the test
//! kit): what a failover does. The contract every kind keeps on every topology, a Sentinel
//! group's included, is checked in `topologies.rs`.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;
use support::{SentinelGroup, eventually, unique_name};

fn client(group: &SentinelGroup) -> Client {
    Client::builder(&group.url())
        .lease(Duration::from_millis(600))
        .read_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

#[test]
fn a_killed_master_is_followed_to_the_promoted_replica() {
    let group = SentinelGroup::start();
    let c = client(&group);
    let old = group.master().port();
    c.try_acquire(unique_name("before"))
        .unwrap()
        .release()
        .unwrap();
    let killed = Instant::now();
    group.nodes()[0].kill();
    // Acquire until it works again: the first success comes after the promotion.
    let name = unique_name("after");
    let mut first_ok = None;
    let ok = eventually(Duration::from_secs(30), || match c.try_acquire(&name) {
        Ok(lock) => {
            first_ok = Some(killed.elapsed());
            lock.release().unwrap();
            true
        }
        Err(e) => {
            assert!(e.is_connection(), "during the failover: {e}");
            false
        }
    });
    assert!(ok, "no acquire succeeded after the failover");
    let (new, _) = group
        .wait_for_failover(old, Duration::from_secs(5))
        .expect("the sentinels report no new master");
    println!(
        "first acquire {:?} after the kill; new master 127.0.0.1:{new}",
        first_ok.unwrap()
    );
    let mut con = group.master().conn();
    let lock = c.try_acquire(&name).unwrap();
    let token: Option<String> = redis::cmd("GET").arg(&name).query(&mut con).unwrap();
    assert_eq!(
        token.as_deref(),
        Some(lock.owner_token()),
        "the lock is on the new master"
    );
}

#[test]
fn a_master_paused_past_the_failover_gets_no_write_when_it_comes_back() {
    let group = SentinelGroup::start();
    let c = client(&group);
    let old_port = group.master().port();
    let old = &group.nodes()[0];
    // Connections to the old master sit idle in the pool.
    for _ in 0..4 {
        c.try_acquire(unique_name("warm"))
            .unwrap()
            .release()
            .unwrap();
    }
    old.pause();
    let (new, took) = group
        .wait_for_failover(old_port, Duration::from_secs(30))
        .expect("no promotion");
    println!("promoted 127.0.0.1:{new} after {took:?}");
    old.resume();
    // Keep locking right after the old master comes back (it still believes itself master
    // until the sentinels demote it).
    let writes = AtomicU64::new(0);
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        match c.try_acquire(unique_name("after-resume")) {
            Ok(lock) => {
                lock.release().unwrap();
                writes.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => assert!(e.is_connection(), "{e}"),
        }
    }
    assert!(
        writes.load(Ordering::Relaxed) > 0,
        "no lock was taken after the resume"
    );
    // None of our connections to the old master was used after it came back.
    let mut con = old.conn();
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut con).unwrap();
    let used: Vec<&str> = list
        .lines()
        .filter(|l| !l.contains("cmd=client") && !l.contains("flags=M"))
        .filter(|l| {
            let idle = l
                .split(' ')
                .find_map(|f| f.strip_prefix("idle="))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(99);
            idle < 2 && (l.contains("cmd=set") || l.contains("cmd=evalsha"))
        })
        .collect();
    assert!(used.is_empty(), "writes went to the old master: {used:?}");
}

#[test]
fn locking_goes_on_while_every_sentinel_is_down() {
    let group = SentinelGroup::start();
    let c = client(&group);
    c.try_acquire(unique_name("first"))
        .unwrap()
        .release()
        .unwrap();
    for s in group.sentinels() {
        s.kill();
    }
    thread::sleep(Duration::from_millis(1200)); // past the re-check interval
    for _ in 0..10 {
        c.try_acquire(unique_name("no-sentinel"))
            .unwrap()
            .release()
            .unwrap();
    }
    // A client that never learned the master fails clearly.
    let fresh = client(&group);
    let e = fresh.try_acquire(unique_name("fresh")).unwrap_err();
    assert!(e.is_connection(), "{e}");
    assert!(e.to_string().contains("sentinel"), "{e}");
}

/// The protected resource of the race: outside Redis, so a failover cannot touch it. It records
/// overlapping holders and refuses writes with a fencing token not larger than the last one.
#[derive(Default)]
struct Resource {
    value: u64,
    last_fence: u64,
    holders: u32,
    overlaps: u32,
    stale: u32,
}

/// 4 threads take the lock (retrying through the failover) and increment the resource until
/// `total` increments are done; the master is killed once a third are. Returns the resource.
fn race_through_a_failover(client: &Client, group: &SentinelGroup, total: u64) -> Resource {
    let resource = std::sync::Mutex::new(Resource::default());
    let done = AtomicU64::new(0);
    let name = unique_name("sentinel-race");
    let killed = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let deadline = Instant::now() + Duration::from_secs(60);
                while done.load(Ordering::SeqCst) < total && Instant::now() < deadline {
                    let lock = match client.acquire(&name, Duration::from_secs(10)) {
                        Ok(lock) => lock,
                        Err(e) if e.is_connection() || e.is_wait_timeout() => {
                            thread::sleep(Duration::from_millis(20));
                            continue;
                        }
                        Err(e) => panic!("{e}"),
                    };
                    let fence = lock.fencing_token();
                    {
                        let mut r = resource.lock().unwrap();
                        r.holders += 1;
                        if r.holders > 1 {
                            r.overlaps += 1;
                        }
                    }
                    thread::sleep(Duration::from_millis(1));
                    {
                        let mut r = resource.lock().unwrap();
                        match fence {
                            Some(f) if f <= r.last_fence => r.stale += 1,
                            _ => {
                                r.last_fence = fence.unwrap_or(0);
                                r.value += 1;
                                done.fetch_add(1, Ordering::SeqCst);
                            }
                        }
                        r.holders -= 1;
                    }
                    let _ = lock.release();
                }
            });
        }
        s.spawn(|| {
            while done.load(Ordering::SeqCst) < total / 3 {
                thread::sleep(Duration::from_millis(5));
            }
            group.nodes()[0].kill();
            killed.store(true, Ordering::SeqCst);
        });
    });
    assert!(killed.load(Ordering::SeqCst));
    resource.into_inner().unwrap()
}

#[test]
fn the_race_survives_a_killed_master_with_acknowledged_locks_and_fencing() {
    let group = SentinelGroup::start();
    let client = Client::builder(&group.url())
        .lease(Duration::from_secs(5))
        .fencing(true)
        .min_replicas(1)
        .replica_timeout(Duration::from_millis(300))
        .read_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let r = race_through_a_failover(&client, &group, 300);
    println!(
        "value {} overlaps {} stale-fence writes {} last fence {}",
        r.value, r.overlaps, r.stale, r.last_fence
    );
    assert!(r.value >= 300, "the race finished after the promotion");
    assert_eq!(r.overlaps, 0, "two holders at once");
    assert_eq!(
        r.stale, 0,
        "a fencing token went backwards across the failover"
    );
}

#[test]
fn the_race_goes_on_after_a_killed_master_without_acknowledgement() {
    // Without min_replicas a failover may lose a lock the old master had not replicated (the
    // docs/topologies.md says so): only that the race finishes on the new master is asserted.
    let group = SentinelGroup::start();
    let r = race_through_a_failover(&client(&group), &group, 300);
    println!("value {} overlaps {}", r.value, r.overlaps);
    assert!(r.value >= 300);
}

#[test]
fn min_replicas_refuses_a_lock_no_replica_acknowledged() {
    let server = support::RedisServer::start();
    let c = Client::builder(&server.url())
        .min_replicas(1)
        .replica_timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let name = unique_name("unacknowledged");
    let e = c.try_acquire(&name).unwrap_err();
    assert!(e.is_connection(), "{e}");
    assert!(e.to_string().contains("0 of the 1 replicas"), "{e}");
    let mut con = server.conn();
    assert!(
        !support::exists(&mut con, &name),
        "an unacknowledged lock was left behind"
    );
    // With a replica attached, it works.
    let port = server.port().to_string();
    let _replica = support::RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    assert!(eventually(Duration::from_secs(10), || c
        .try_acquire(&name)
        .map(|l| l.release())
        .is_ok()));
}
