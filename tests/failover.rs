//! Liveness through a failover, on a Sentinel group and on a Cluster (real servers, the master
//! killed with SIGKILL once its replicas have the lock): a release or a dropped lock caught in
//! the failover frees the name soon after the new master is promoted, not at the end of its
//! lease; queued waiters wait through the failover (with or without a bound) and keep their
//! order; renewal finds the new master; the Sentinel client keeps its connections to the
//! sentinels instead of opening one per question.

mod support;

use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{
    Client, Error, Lock, LockKind, MAX_WAIT, MultiLock, Permits, RedissonLock, WriteLock,
};
use support::{Cluster, RedisServer, SentinelGroup, eventually, unique_name};

/// How soon after the promotion a name freed by a release in flight must be granted again: the
/// release's back-off (at most 250 ms) plus a few round trips.
const FREED_WITHIN: Duration = Duration::from_secs(1);
/// How soon after the promotion a waiter queued at the kill must be granted.
const WAITER_WITHIN: Duration = Duration::from_secs(3);
/// How long a failover may take here (Sentinel: down after 1 s; Cluster: node timeout 2 s).
const FAILOVER_LIMIT: Duration = Duration::from_secs(30);

/// A deployment whose master can be killed and whose promotion can be awaited.
trait Deployment {
    fn url(&self) -> String;
    /// The master that holds `name` now.
    fn master_for(&self, name: &str) -> &RedisServer;
    /// How many replicas the master of `name` has.
    fn replicas(&self) -> u32;
    /// Waits until another node than the one on `old` serves `name` as a master; returns when
    /// that was seen.
    fn promoted(&self, name: &str, old: u16) -> Instant;
}

impl Deployment for SentinelGroup {
    fn url(&self) -> String {
        SentinelGroup::url(self)
    }
    fn master_for(&self, _: &str) -> &RedisServer {
        self.master()
    }
    fn replicas(&self) -> u32 {
        2
    }
    fn promoted(&self, _: &str, old: u16) -> Instant {
        self.wait_for_failover(old, FAILOVER_LIMIT)
            .expect("the sentinels promoted no replica");
        Instant::now()
    }
}

impl Deployment for Cluster {
    fn url(&self) -> String {
        Cluster::url(self)
    }
    fn master_for(&self, name: &str) -> &RedisServer {
        self.master_of(name)
    }
    fn replicas(&self) -> u32 {
        1
    }
    fn promoted(&self, name: &str, old: u16) -> Instant {
        let ok = eventually(FAILOVER_LIMIT, || {
            let alive: Vec<&RedisServer> =
                self.nodes().iter().filter(|n| n.port() != old).collect();
            alive.iter().any(|n| n.try_conn().is_ok())
                && std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    self.master_of(name).port()
                }))
                .is_ok_and(|p| p != old)
        });
        assert!(ok, "the cluster promoted no replica for {name}");
        Instant::now()
    }
}

fn client(d: &dyn Deployment) -> Client {
    Client::builder(&d.url())
        .connect_timeout(Duration::from_millis(500))
        .read_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Kills the master of `name` once its replicas have everything written so far (a write in the
/// name's slot, then WAIT: replicas apply the stream in order). Returns the killed node's port.
fn kill_master(d: &dyn Deployment, name: &str) -> u16 {
    let master = d.master_for(name);
    let mut con = master.conn();
    let _: () = redis::cmd("SET")
        .arg(format!("{{{name}}}:synced"))
        .arg(1)
        .arg("PX")
        .arg(60_000)
        .query(&mut con)
        .unwrap();
    let acked: u32 = redis::cmd("WAIT")
        .arg(d.replicas())
        .arg(5000)
        .query(&mut con)
        .unwrap();
    assert_eq!(acked, d.replicas(), "the replicas did not acknowledge");
    let port = master.port();
    master.kill();
    port
}

/// Tries `name` every 20 ms from `c` until granted (then releases it); when it was granted.
fn first_grant_of(c: &Client, take: Take, name: &str, limit: Duration) -> Option<Instant> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Ok(lock) = take(c, name) {
            let at = Instant::now();
            let _ = lock.release();
            return Some(at);
        }
        thread::sleep(Duration::from_millis(20));
    }
    None
}

/// A held grant of some kind, released or dropped as a whole.
trait Grant: Send {
    fn release(self: Box<Self>) -> Result<(), Error>;
}

macro_rules! grants {
    ($($t:ty),*) => {$(
        impl Grant for $t {
            fn release(self: Box<Self>) -> Result<(), Error> {
                (*self).release()
            }
        }
    )*};
}
grants!(Lock, WriteLock, Permits, MultiLock, RedissonLock);

/// How a kind takes the grant of `name` (one attempt).
type Take = fn(&Client, &str) -> Result<Box<dyn Grant>, Error>;

fn exclusive(c: &Client, name: &str) -> Result<Box<dyn Grant>, Error> {
    Ok(Box::new(c.try_acquire(name)?))
}

fn write_lock(c: &Client, name: &str) -> Result<Box<dyn Grant>, Error> {
    Ok(Box::new(c.rw_lock(name).try_write()?))
}

fn permit(c: &Client, name: &str) -> Result<Box<dyn Grant>, Error> {
    Ok(Box::new(c.semaphore(name, 1).try_acquire(1)?))
}

fn set_of_two(c: &Client, name: &str) -> Result<Box<dyn Grant>, Error> {
    let names = [name.to_owned(), format!("{{{name}}}:second")];
    Ok(Box::new(c.lock_all(&names).try_acquire()?))
}

fn redisson(c: &Client, name: &str) -> Result<Box<dyn Grant>, Error> {
    Ok(Box::new(c.redisson_lock(name).try_acquire()?))
}

/// A holder whose release (or drop) comes 0.3 s after the kill, before the promotion: the
/// name is granted again within [`FREED_WITHIN`] of the promotion (lease 30 s).
fn release_in_the_failover_window(d: &dyn Deployment, drop_it: bool) {
    release_of_a_kind_in_the_failover_window(d, exclusive, drop_it);
}

fn release_of_a_kind_in_the_failover_window(d: &dyn Deployment, take: Take, drop_it: bool) {
    let c = client(d);
    let name = unique_name(if drop_it { "dropped" } else { "released" });
    let lock = take(&c, &name).unwrap();
    let old = kill_master(d, &name);
    thread::sleep(Duration::from_millis(300));
    let releaser = thread::spawn(move || {
        let t = Instant::now();
        let result = if drop_it {
            drop(lock);
            Ok(())
        } else {
            lock.release()
        };
        (result, t.elapsed())
    });
    let promoted = d.promoted(&name, old);
    let other = client(d);
    let granted = first_grant_of(&other, take, &name, Duration::from_secs(15))
        .expect("the name was not granted again within 15 s of the promotion");
    let after = granted.saturating_duration_since(promoted);
    let (result, took) = releaser.join().unwrap();
    println!("granted {after:?} after the promotion; the release took {took:?}");
    assert!(
        after <= FREED_WITHIN,
        "granted {after:?} after the promotion"
    );
    result.expect("the release rode out the failover");
    if drop_it {
        assert!(
            took < Duration::from_secs(1),
            "dropping the lock blocked for {took:?}"
        );
    }
}

#[test]
fn sentinel_a_release_in_the_failover_window_frees_the_name_soon_after_the_promotion() {
    release_in_the_failover_window(&SentinelGroup::start(), false);
}

#[test]
fn sentinel_a_lock_dropped_in_the_failover_window_is_released_by_the_library() {
    release_in_the_failover_window(&SentinelGroup::start(), true);
}

#[test]
fn cluster_a_release_in_the_failover_window_frees_the_name_soon_after_the_promotion() {
    release_in_the_failover_window(&Cluster::start(), false);
}

#[test]
fn sentinel_a_write_lock_released_in_the_failover_window_is_freed() {
    release_of_a_kind_in_the_failover_window(&SentinelGroup::start(), write_lock, false);
}

#[test]
fn sentinel_a_permit_released_in_the_failover_window_is_freed() {
    release_of_a_kind_in_the_failover_window(&SentinelGroup::start(), permit, false);
}

#[test]
fn sentinel_a_set_released_in_the_failover_window_is_freed() {
    release_of_a_kind_in_the_failover_window(&SentinelGroup::start(), set_of_two, false);
}

#[test]
fn cluster_a_redisson_lock_released_in_the_failover_window_is_freed() {
    release_of_a_kind_in_the_failover_window(&Cluster::start(), redisson, false);
}

/// A holder and waiters queued before the kill (one without a bound, one with 10 s, and for
/// the order check three in a row): the holder releases after the promotion, once the waiters
/// are back; the waiters are granted in their queue order, the first within
/// [`WAITER_WITHIN`] of the promotion.
fn waiters_ride_out_the_failover(d: &dyn Deployment) {
    let c = client(d);
    let name = unique_name("waited");
    let holder = c.try_acquire(&name).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let queue = format!("{{{name}}}:q");
    let mut waiters = Vec::new();
    for (i, bound) in [MAX_WAIT, Duration::from_secs(10), MAX_WAIT]
        .into_iter()
        .enumerate()
    {
        let (c, mine, order) = (c.clone(), name.clone(), order.clone());
        waiters.push(thread::spawn(move || {
            let lock = c.lock(&mine).acquire(bound)?;
            order.lock().unwrap().push((i, Instant::now()));
            thread::sleep(Duration::from_millis(50));
            lock.release()
        }));
        let mut con = d.master_for(&name).conn();
        support::wait_for_len(&mut con, &queue, i as i64 + 1, Duration::from_secs(5));
    }
    let old = kill_master(d, &name);
    let promoted = d.promoted(&name, old);
    // The waiters' liveness keys ran out during the failover; they come back within their
    // back-off and keep their places.
    thread::sleep(Duration::from_millis(1500));
    holder
        .release()
        .expect("the holder's release after the promotion");
    for w in waiters {
        w.join().unwrap().expect("a waiter rode out the failover");
    }
    let order = order.lock().unwrap().clone();
    let ranks: Vec<usize> = order.iter().map(|(i, _)| *i).collect();
    let first = order[0].1.saturating_duration_since(promoted);
    println!("granted in order {ranks:?}, the first {first:?} after the promotion");
    assert_eq!(ranks, vec![0, 1, 2], "the queue order was not kept");
    assert!(
        first <= WAITER_WITHIN,
        "the first waiter was granted {first:?} after the promotion"
    );
}

#[test]
fn sentinel_queued_waiters_ride_out_the_failover_in_their_order() {
    waiters_ride_out_the_failover(&SentinelGroup::start());
}

#[test]
fn cluster_queued_waiters_ride_out_the_failover_in_their_order() {
    waiters_ride_out_the_failover(&Cluster::start());
}

/// A waiter queued at the kill whose holder's release falls in the failover window: granted
/// within [`WAITER_WITHIN`] of the promotion (the `redislock run` case of a cron load).
#[test]
fn sentinel_a_waiter_is_granted_soon_after_the_promotion_when_the_release_fell_in_the_window() {
    let d = SentinelGroup::start();
    let c = client(&d);
    let name = unique_name("window-waiter");
    let holder = c.try_acquire(&name).unwrap();
    let waiter = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || {
            let lock = c.lock(&name).acquire(MAX_WAIT)?;
            let at = Instant::now();
            lock.release()?;
            Ok::<_, redislock::Error>(at)
        })
    };
    let mut con = d.master().conn();
    support::wait_for_len(
        &mut con,
        &format!("{{{name}}}:q"),
        1,
        Duration::from_secs(5),
    );
    let old = kill_master(&d, &name);
    thread::sleep(Duration::from_millis(300));
    let releaser = thread::spawn(move || holder.release());
    let promoted = d.promoted(&name, old);
    let granted = waiter
        .join()
        .unwrap()
        .expect("the waiter rode out the failover");
    releaser
        .join()
        .unwrap()
        .expect("the release rode out the failover");
    let after = granted.saturating_duration_since(promoted);
    println!("the waiter was granted {after:?} after the promotion");
    assert!(
        after <= WAITER_WITHIN,
        "granted {after:?} after the promotion"
    );
}

/// Renewal through a failover: each retry finds the new master, so a lock with a 6 s lease
/// (renewed every 2 s) is still held on the new master a whole lease after the kill.
fn renewal_finds_the_new_master(d: &dyn Deployment) {
    let c = Client::builder(&d.url())
        .connect_timeout(Duration::from_millis(500))
        .read_timeout(Duration::from_millis(500))
        .lease(Duration::from_secs(6))
        .build()
        .unwrap();
    let name = unique_name("renewed");
    let lock = c.try_acquire(&name).unwrap();
    let old = kill_master(d, &name);
    let killed = Instant::now();
    d.promoted(&name, old);
    thread::sleep((killed + Duration::from_secs(7)).saturating_duration_since(Instant::now()));
    assert!(lock.is_held(), "lost through the failover");
    let mut con = d.master_for(&name).conn();
    let token = support::get(&mut con, &name);
    assert_eq!(token.as_deref(), Some(lock.owner_token()));
    let pttl = support::pttl(&mut con, &name);
    assert!(pttl > 2000, "not renewed on the new master: PTTL {pttl}");
    lock.release().unwrap();
}

#[test]
fn sentinel_renewal_finds_the_new_master() {
    renewal_finds_the_new_master(&SentinelGroup::start());
}

#[test]
fn cluster_renewal_finds_the_new_master() {
    renewal_finds_the_new_master(&Cluster::start());
}

/// Connections the sentinels have accepted so far (`INFO stats`), less the one this look
/// opens.
fn sentinel_connections(d: &SentinelGroup) -> Vec<u64> {
    d.sentinels()
        .iter()
        .map(|s| {
            let mut con = s.conn();
            let info: String = redis::cmd("INFO").arg("stats").query(&mut con).unwrap();
            let total: u64 = info
                .lines()
                .find_map(|l| l.strip_prefix("total_connections_received:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap();
            total - 1
        })
        .collect()
}

/// Four threads racing on one name for `d`, counting grants.
fn race(c: &Client, for_: Duration) -> u64 {
    let name = unique_name("race");
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (c, name) = (c.clone(), name.clone());
            thread::spawn(move || {
                let end = Instant::now() + for_;
                let mut n = 0;
                while Instant::now() < end {
                    match c.lock(&name).acquire(Duration::from_millis(200)) {
                        Ok(lock) => {
                            n += 1;
                            let _ = lock.release();
                        }
                        Err(_) => thread::sleep(Duration::from_millis(5)),
                    }
                }
                n
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

#[test]
fn sentinel_connections_are_kept_and_questions_paced_through_a_failover() {
    let d = SentinelGroup::start();
    let c = client(&d);
    let idle = sentinel_connections(&d);
    thread::sleep(Duration::from_secs(3));
    let before = sentinel_connections(&d);
    // The sentinels' own connections (to each other, the kit's looks) over 3 s, counted out.
    let noise: Vec<u64> = before.iter().zip(&idle).map(|(a, b)| a - b).collect();
    let grants = race(&c, Duration::from_secs(3));
    let steady = sentinel_connections(&d);
    let opened: Vec<u64> = steady
        .iter()
        .zip(&before)
        .zip(&noise)
        .map(|((a, b), n)| (a - b).saturating_sub(*n))
        .collect();
    println!(
        "steady race: {grants} grants, connections to each sentinel {opened:?} (less {noise:?} \
         when idle)"
    );
    assert!(grants > 100, "the race made only {grants} grants");
    assert!(
        opened.iter().all(|&n| n <= 1),
        "more than one connection to a sentinel in a steady race: {opened:?}"
    );
    let old = d.master().port();
    d.nodes()[0].kill();
    let during = race(&c, Duration::from_secs(6));
    d.wait_for_failover(old, FAILOVER_LIMIT)
        .expect("the sentinels promoted no replica");
    let after = sentinel_connections(&d);
    let opened: Vec<u64> = after.iter().zip(&steady).map(|(a, b)| a - b).collect();
    println!("6 s of racing through a failover: {during} grants, connections {opened:?}");
    assert!(
        opened.iter().sum::<u64>() <= 30,
        "a failover opened {opened:?} connections to the sentinels"
    );
    assert!(during > 0, "nothing was granted after the failover");
}

/// A waiter whose bound runs out while the master is down says that its server could not be
/// reached (a failover may have been under way), and is back within its bound.
#[test]
fn sentinel_a_waiter_timed_out_in_a_failover_says_so() {
    let d = SentinelGroup::start();
    let c = client(&d);
    let name = unique_name("timed-out");
    let holder = c.try_acquire(&name).unwrap();
    let waiter = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || {
            let t = Instant::now();
            let r = c.lock(&name).acquire(Duration::from_millis(1500)).map(drop);
            (r, t.elapsed())
        })
    };
    let mut con = d.master().conn();
    support::wait_for_len(
        &mut con,
        &format!("{{{name}}}:q"),
        1,
        Duration::from_secs(5),
    );
    d.nodes()[0].kill();
    let (r, took) = waiter.join().unwrap();
    let e = r.expect_err("granted while the master was down");
    println!("{e} (after {took:?})");
    assert!(e.is_wait_timeout(), "{e}");
    assert!(e.to_string().contains("could not be reached"), "{e}");
    assert!(
        took < Duration::from_millis(1500) + Duration::from_secs(1),
        "{took:?}"
    );
    drop(holder);
}

/// An extend sent in the failover window rides it out and lands on the new master.
#[test]
fn sentinel_an_extend_in_the_failover_window_lands_on_the_new_master() {
    let d = SentinelGroup::start();
    let c = Client::builder(&d.url())
        .connect_timeout(Duration::from_millis(500))
        .read_timeout(Duration::from_millis(500))
        .auto_renew(false)
        .lease(Duration::from_secs(20))
        .build()
        .unwrap();
    let name = unique_name("extended");
    let lock = c.try_acquire(&name).unwrap();
    let old = kill_master(&d, &name);
    thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    lock.extend(Duration::from_secs(60))
        .expect("the extend rode out the failover");
    println!("the extend took {:?}", t.elapsed());
    d.wait_for_failover(old, FAILOVER_LIMIT)
        .expect("the sentinels promoted no replica");
    let mut con = d.master().conn();
    let pttl = support::pttl(&mut con, &name);
    assert!(pttl > 30_000, "not extended on the new master: PTTL {pttl}");
    lock.release().unwrap();
}

/// The sentinels' configuration epoch of `group`'s master, as its first sentinel tells it.
fn config_epoch(group: &SentinelGroup) -> u64 {
    let mut con = group.sentinels()[0].conn();
    let fields: Vec<String> = redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg("mymaster")
        .query(&mut con)
        .unwrap();
    let at = fields.iter().position(|f| f == "config-epoch").unwrap();
    fields[at + 1].parse().unwrap()
}

/// Fencing tokens carry the epoch of the master that granted them: after a failover they sort
/// above every token of the old master, however far its counter had gone (a master cut off from
/// its sentinels keeps granting; `tests/network_faults.rs`, the split brain, shows it under a
/// partition). Before any failover the token is the name's counter, as on one server.
#[test]
fn sentinel_fencing_tokens_after_a_failover_carry_the_new_epoch() {
    let d = SentinelGroup::start();
    let c = Client::builder(&d.url())
        .connect_timeout(Duration::from_millis(500))
        .read_timeout(Duration::from_millis(500))
        .fencing(true)
        .build()
        .unwrap();
    let name = unique_name("epoch");
    assert_eq!(config_epoch(&d), 0);
    let first = c.try_acquire(&name).unwrap();
    assert_eq!(
        first.fencing_token(),
        Some(1),
        "epoch 0: the counter itself"
    );
    first.release().unwrap();
    // The old master's counter runs far ahead, as an isolated master's would.
    let mut con = d.master().conn();
    let _: () = redis::cmd("SET")
        .arg(format!("{{{name}}}:fence"))
        .arg(1_000_000)
        .query(&mut con)
        .unwrap();
    let before = c.try_acquire(&name).unwrap();
    let old_token = before.fencing_token().unwrap();
    assert_eq!(old_token, 1_000_001);
    before.release().unwrap();
    let old = kill_master(&d, &name);
    d.wait_for_failover(old, FAILOVER_LIMIT)
        .expect("the sentinels promoted no replica");
    let epoch = config_epoch(&d);
    assert!(epoch >= 1, "a failover raises the epoch: {epoch}");
    let mut after = None;
    let ok = eventually(Duration::from_secs(10), || {
        after = c.try_acquire(&name).ok();
        after.is_some()
    });
    assert!(ok, "no grant on the new master");
    let after = after.unwrap();
    let token = after.fencing_token().unwrap();
    println!("before the failover {old_token}, after it {token} (epoch {epoch})");
    assert_eq!(token, (epoch << 48) + 1_000_002);
    assert!(token > old_token);
    // A look at the lock reports the same token as its fencing counter.
    assert_eq!(
        c.inspect(&name, LockKind::Exclusive)
            .unwrap()
            .fencing_counter,
        Some(token)
    );
    after.release().unwrap();
}
