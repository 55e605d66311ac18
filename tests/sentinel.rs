//! Locks through a Redis Sentinel group (1 master, 2 replicas, 3 sentinels, started by the test
//! kit): the same contract as on one server, and what a failover does.

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
fn locks_live_on_the_master_and_exclude_each_other() {
    let group = SentinelGroup::start();
    let c = client(&group);
    let name = unique_name("sentinel-basic");
    let lock = c.try_acquire(&name).unwrap();
    let mut master = group.master().conn();
    let token: Option<String> = redis::cmd("GET").arg(&name).query(&mut master).unwrap();
    assert_eq!(token.as_deref(), Some(lock.owner_token()));
    assert!(c.try_acquire(&name).unwrap_err().is_held());
    // Waiting and handoff work as on one server.
    thread::scope(|s| {
        let waiter = s.spawn(|| c.acquire(&name, Duration::from_secs(5)));
        thread::sleep(Duration::from_millis(200));
        lock.release().unwrap();
        waiter.join().unwrap().unwrap().release().unwrap();
    });
    // 8 threads racing a read-modify-write counter through the lock.
    let counter = unique_name("sentinel-counter");
    thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let mut con = group.master().conn();
                for _ in 0..25 {
                    c.with_lock(&name, Duration::from_secs(10), |_| {
                        let v: Option<u64> =
                            redis::cmd("GET").arg(&counter).query(&mut con).unwrap();
                        let () = redis::cmd("SET")
                            .arg(&counter)
                            .arg(v.unwrap_or(0) + 1)
                            .query(&mut con)
                            .unwrap();
                    })
                    .unwrap();
                }
            });
        }
    });
    let v: u64 = redis::cmd("GET").arg(&counter).query(&mut master).unwrap();
    assert_eq!(v, 200);
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
