//! Locks on a Redis Cluster (3 masters with a replica each, started by the test kit): each lock
//! on the master that serves its hash slot, names with and without their own `{hash tag}`,
//! MOVED and ASK followed, renewal on every master, a master's failure (with and without
//! `min_replicas`), the migration of a held lock's slot while waiters wait, and a set's names in
//! one slot. The behaviours of every kind shared with the other topologies run in
//! `tests/topologies.rs`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, Lock};
use support::{Cluster, RedisServer, eventually, exists, get, pttl, unique_name};

fn client(cluster: &Cluster) -> Client {
    Client::builder(&cluster.url())
        .read_timeout(Duration::from_millis(1000))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// The hash slot of `key` (CLUSTER KEYSLOT).
fn slot_of(cluster: &Cluster, key: &str) -> u16 {
    redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut cluster.masters()[0].conn())
        .unwrap()
}

fn node_id(node: &RedisServer) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node.conn())
        .unwrap()
}

/// How many error replies starting with `code` (MOVED, ASK, TRYAGAIN) `node` sent
/// (`INFO errorstats`).
fn error_replies(node: &RedisServer, code: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut node.conn())
        .unwrap();
    let prefix = format!("errorstat_{code}:count=");
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix(prefix.as_str()))
        .map_or(0, |n| n.parse().unwrap())
}

/// The waiter queue of lock `name` (`keys.rs`: the name's own hash tag, or the name in braces).
fn queue_key(name: &str) -> String {
    let tagged = name
        .find('{')
        .and_then(|open| name[open + 1..].find('}'))
        .is_some_and(|len| len > 0);
    if tagged {
        format!("{name}:q")
    } else {
        format!("{{{name}}}:q")
    }
}

/// A master other than `node`.
fn other_master<'c>(cluster: &'c Cluster, node: &RedisServer) -> &'c RedisServer {
    cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != node.port())
        .unwrap()
}

/// Lock names, one whose slot each master serves, made from `prefix`.
fn one_name_per_master<'c>(cluster: &'c Cluster, prefix: &str) -> Vec<(String, &'c RedisServer)> {
    let masters = cluster.masters();
    let mut found: Vec<(String, &RedisServer)> = Vec::new();
    while found.len() < masters.len() {
        let name = unique_name(prefix);
        let master = cluster.master_of(&name);
        if !found.iter().any(|(_, m)| m.port() == master.port()) {
            found.push((name, master));
        }
    }
    found
}

/// The migration of one slot from one master to another, in the steps `redis-cli --cluster
/// reshard` takes, so that a test can act between them.
struct Migration<'c> {
    cluster: &'c Cluster,
    slot: u16,
    from: &'c RedisServer,
    to: &'c RedisServer,
    to_id: String,
}

impl<'c> Migration<'c> {
    /// CLUSTER SETSLOT IMPORTING on the new master, MIGRATING on the old one.
    fn open(cluster: &'c Cluster, slot: u16, from: &'c RedisServer, to: &'c RedisServer) -> Self {
        let from_id = node_id(from);
        let to_id = node_id(to);
        let setslot = |node: &RedisServer, state: &str, id: &str| {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(slot)
                .arg(state)
                .arg(id)
                .exec(&mut node.conn())
                .unwrap()
        };
        setslot(to, "IMPORTING", &from_id);
        setslot(from, "MIGRATING", &to_id);
        Migration {
            cluster,
            slot,
            from,
            to,
            to_id,
        }
    }

    /// MIGRATE every key of the slot to the new master; returns how many there were.
    fn move_keys(&self) -> usize {
        let mut con = self.from.conn();
        let keys: Vec<Vec<u8>> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(self.slot)
            .arg(1000)
            .query(&mut con)
            .unwrap();
        if !keys.is_empty() {
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(self.to.port())
                .arg("")
                .arg(0)
                .arg(5000)
                .arg("KEYS")
                .arg(&keys)
                .exec(&mut con)
                .unwrap();
        }
        keys.len()
    }

    /// CLUSTER SETSLOT NODE on both masters, then on the others (as `redis-cli` does).
    fn finish(&self) {
        let mut masters = vec![self.to, self.from];
        for m in self.cluster.masters() {
            if m.port() != self.to.port() && m.port() != self.from.port() {
                masters.push(m);
            }
        }
        for m in masters {
            redis::cmd("CLUSTER")
                .arg("SETSLOT")
                .arg(self.slot)
                .arg("NODE")
                .arg(&self.to_id)
                .exec(&mut m.conn())
                .unwrap();
        }
    }
}

#[test]
fn locks_live_on_the_master_of_their_slot() {
    let cluster = Cluster::start();
    let c = Client::builder(&cluster.url())
        .fencing(true)
        .build()
        .unwrap();
    let tag = unique_name("user");
    let mut names: Vec<String> = one_name_per_master(&cluster, "plain")
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    // Names sharing their own hash tag live together; a `}` without a tag still works.
    names.push(format!("{{{tag}}}:cart"));
    names.push(format!("{{{tag}}}:payment"));
    names.push(format!("{}a{{}}b", unique_name("odd")));
    let moved_before: u64 = cluster
        .masters()
        .iter()
        .map(|m| error_replies(m, "MOVED"))
        .sum();
    for name in &names {
        let lock = c.try_acquire(name).unwrap();
        let master = cluster.master_of(name);
        let mut con = master.conn();
        assert_eq!(
            get(&mut con, name).as_deref(),
            Some(lock.owner_token()),
            "{name}: not on the master of its slot"
        );
        assert!(lock.fencing_token().unwrap() >= 1);
        if name.contains("{}") {
            // Its companion keys carry a computed tag (keys.rs).
            lock.release().unwrap();
            assert!(!exists(&mut con, name), "{name}: key left behind");
            continue;
        }
        // A waiter on the same master is handed the lock.
        thread::scope(|s| {
            let waiter = s.spawn(|| c.acquire(name, Duration::from_secs(10)));
            assert!(eventually(Duration::from_secs(10), || {
                redis::cmd("LLEN")
                    .arg(queue_key(name))
                    .query::<i64>(&mut con)
                    .unwrap()
                    == 1
            }));
            let first = lock.fencing_token().unwrap();
            lock.release().unwrap();
            let next = waiter.join().unwrap().unwrap();
            assert!(next.fencing_token().unwrap() > first);
            next.release().unwrap();
        });
        assert!(!exists(&mut con, name), "{name}: key left behind");
    }
    assert_eq!(
        cluster.master_of(&names[3]).port(),
        cluster.master_of(&names[4]).port(),
        "names with one hash tag share a master"
    );
    let moved_after: u64 = cluster
        .masters()
        .iter()
        .map(|m| error_replies(m, "MOVED"))
        .sum();
    assert_eq!(
        moved_after, moved_before,
        "every call went to the right master"
    );
}

#[test]
fn renewal_extends_locks_on_every_master() {
    let cluster = Cluster::start();
    let lease = Duration::from_millis(300);
    let c = Client::builder(&cluster.url())
        .lease(lease)
        .build()
        .unwrap();
    let names: Vec<String> = (0..4)
        .flat_map(|_| one_name_per_master(&cluster, "renew"))
        .map(|(n, _)| n)
        .collect();
    let locks: Vec<Lock> = names.iter().map(|n| c.try_acquire(n).unwrap()).collect();
    thread::sleep(lease * 4);
    for (lock, name) in locks.iter().zip(&names) {
        assert!(lock.is_held(), "{name} not kept by renewal");
        let left = pttl(&mut cluster.master_of(name).conn(), name);
        assert!(left > 0 && left <= 300, "{name}: lease {left} ms");
    }
    assert!(c.stats().renewals >= names.len() as u64);
    for m in cluster.masters() {
        assert_eq!(error_replies(m, "MOVED"), 0, "a renewal went astray");
    }
    for lock in locks {
        lock.release().unwrap();
    }
}

#[test]
fn moved_is_followed_to_the_slot_new_master() {
    let cluster = Cluster::start();
    let c = client(&cluster);
    let name = unique_name("moved");
    // The client learns the table while the slot is on its first master.
    c.try_acquire(&name).unwrap().release().unwrap();
    let from = cluster.master_of(&name);
    let to = other_master(&cluster, from);
    let m = Migration::open(&cluster, slot_of(&cluster, &name), from, to);
    assert_eq!(m.move_keys(), 0);
    m.finish();
    let moved = error_replies(from, "MOVED");
    let lock = c.try_acquire(&name).unwrap();
    assert!(
        error_replies(from, "MOVED") > moved,
        "the old master was not asked"
    );
    let mut con = to.conn();
    assert_eq!(get(&mut con, &name).as_deref(), Some(lock.owner_token()));
    lock.release().unwrap();
    assert!(!exists(&mut con, &name));
    // The table was read again: the next call goes straight to the new master.
    let moved = error_replies(from, "MOVED");
    c.try_acquire(&name).unwrap().release().unwrap();
    assert_eq!(error_replies(from, "MOVED"), moved);
}

#[test]
fn ask_is_followed_and_a_migration_waited_out() {
    let cluster = Cluster::start();
    // Its read timeout (2 s) bounds how long a call waits for the migration to end.
    let c = Client::open(&cluster.url()).unwrap();
    let name = unique_name("ask");
    let from = cluster.master_of(&name);
    let to = other_master(&cluster, from);
    // The client knows the table before the migration starts.
    c.try_acquire(unique_name("warm"))
        .unwrap()
        .release()
        .unwrap();
    let m = Migration::open(&cluster, slot_of(&cluster, &name), from, to);
    let asked = error_replies(from, "ASK");
    // The key is on neither master: the old one sends the SET to the new one.
    let lock = c
        .lock(&name)
        .auto_renew(false)
        .lease(Duration::from_secs(30))
        .try_acquire()
        .unwrap();
    assert!(error_replies(from, "ASK") > asked, "no ASK was followed");
    let mut con = to.conn();
    redis::cmd("ASKING").exec(&mut con).unwrap();
    assert_eq!(get(&mut con, &name).as_deref(), Some(lock.owner_token()));
    // The release script uses several keys, which the new master serves only once the
    // migration ends (TRYAGAIN until then): it waits, within its read timeout.
    let started = Instant::now();
    let release = thread::spawn(move || lock.release());
    thread::sleep(Duration::from_millis(300));
    m.finish();
    release.join().unwrap().unwrap();
    println!("release took {:?}", started.elapsed());
    assert!(!exists(&mut to.conn(), &name));
    assert!(
        error_replies(to, "TRYAGAIN") > 0,
        "the release never waited"
    );
}

/// A held, auto-renewed lock with three waiters; its slot is migrated to another master in
/// steps, the lock renewed at each; then it is released. The waiters, blocked on the old master,
/// follow the lock and are each granted it in turn, never two holders at once.
fn held_lock_and_waiters_follow_a_migration(name: &str) {
    let cluster = Cluster::start();
    let lease = Duration::from_millis(1500);
    let c = Client::builder(&cluster.url())
        .lease(lease)
        .recheck_interval(Duration::from_millis(500))
        .build()
        .unwrap();
    let from = cluster.master_of(name);
    let to = other_master(&cluster, from);
    let holder = c.try_acquire(name).unwrap();
    // Set while someone holds the lock: the holder now, each waiter in turn.
    let inside = Arc::new(AtomicBool::new(true));
    let overlaps = Arc::new(AtomicU64::new(0));
    let mut queue_con = from.conn();
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let (c, own_name) = (c.clone(), name.to_owned());
            let (inside, overlaps) = (inside.clone(), overlaps.clone());
            let w = thread::spawn(move || {
                let lock = c.acquire(&own_name, Duration::from_secs(60))?;
                if inside.swap(true, Ordering::SeqCst) {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_millis(20));
                inside.store(false, Ordering::SeqCst);
                lock.release()
            });
            assert!(eventually(Duration::from_secs(10), || {
                redis::cmd("LLEN")
                    .arg(queue_key(name))
                    .query::<i64>(&mut queue_con)
                    .unwrap()
                    == i + 1
            }));
            w
        })
        .collect();

    let renewals = |c: &Client| c.stats().renewals;
    let m = Migration::open(&cluster, slot_of(&cluster, name), from, to);
    let r = renewals(&c);
    assert!(
        eventually(lease, || renewals(&c) > r),
        "no renewal, slot open"
    );
    assert!(
        m.move_keys() >= 3,
        "the lock, its queue and its waiters' keys"
    );
    let r = renewals(&c);
    assert!(
        eventually(lease, || renewals(&c) > r),
        "no renewal, keys moved"
    );
    m.finish();
    let r = renewals(&c);
    assert!(
        eventually(lease, || renewals(&c) > r),
        "no renewal, slot moved"
    );
    assert!(
        holder.is_held(),
        "the holder lost its lock in the migration"
    );
    assert_eq!(
        get(&mut to.conn(), name).as_deref(),
        Some(holder.owner_token()),
        "the lock is on the new master"
    );
    inside.store(false, Ordering::SeqCst);
    holder.release().unwrap();
    for w in waiters {
        w.join()
            .unwrap()
            .expect("a waiter was not granted the lock");
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "two holders at once");
    let mut con = to.conn();
    assert!(!exists(&mut con, name), "lock key left behind");
    assert!(!exists(&mut con, &queue_key(name)), "queue left behind");
}

#[test]
fn a_held_lock_and_its_waiters_follow_the_migration_of_its_slot() {
    held_lock_and_waiters_follow_a_migration(&unique_name("migrate"));
}

#[test]
fn a_hash_tagged_lock_and_its_waiters_follow_the_migration_of_its_slot() {
    held_lock_and_waiters_follow_a_migration(&format!("{{{}}}:stock", unique_name("tag")));
}

/// Waits until the slot of `name` is served by a master other than the one on `old_port`.
fn wait_for_promotion<'c>(cluster: &'c Cluster, name: &str, old_port: u16) -> &'c RedisServer {
    let mut new = None;
    let promoted = eventually(Duration::from_secs(30), || {
        let m = cluster.master_of(name);
        if m.port() != old_port {
            new = Some(m);
        }
        new.is_some()
    });
    assert!(promoted, "no replica was promoted");
    new.unwrap()
}

#[test]
fn a_failed_master_leaves_locks_on_other_masters_alone() {
    let cluster = Cluster::start();
    let c = Client::builder(&cluster.url())
        .lease(Duration::from_secs(4))
        .read_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let names = one_name_per_master(&cluster, "shard");
    let locks: Vec<Lock> = names
        .iter()
        .map(|(n, _)| c.try_acquire(n).unwrap())
        .collect();
    // A waiter for a lock on another master: blocked there through the failover (whose
    // CLUSTERDOWN also reaches blocked clients), it is handed the lock at its release.
    let waiter = {
        let (c, name) = (c.clone(), names[1].0.clone());
        thread::spawn(move || -> Result<bool, redislock::Error> {
            let lock = c.acquire(&name, Duration::from_secs(60))?;
            let held = lock.is_held();
            lock.release()?;
            Ok(held)
        })
    };
    let mut queue_con = names[1].1.conn();
    assert!(eventually(Duration::from_secs(10), || {
        redis::cmd("LLEN")
            .arg(queue_key(&names[1].0))
            .query::<i64>(&mut queue_con)
            .unwrap()
            == 1
    }));
    let (victim_name, victim) = &names[0];
    let killed = Instant::now();
    victim.kill();
    let mut others_held = true;
    let new_master = {
        let mut new = None;
        let promoted = eventually(Duration::from_secs(30), || {
            others_held &= locks[1..].iter().all(Lock::is_held);
            let m = cluster.master_of(victim_name);
            if m.port() != victim.port() {
                new = Some(m);
            }
            new.is_some()
        });
        assert!(promoted, "no replica was promoted");
        new.unwrap()
    };
    println!("replica promoted {:?} after the kill", killed.elapsed());
    // Renewal on the other masters carried on through the failover (the 4 s lease alone would
    // not have lasted).
    let renewals = c.stats().renewals;
    thread::sleep(Duration::from_secs(2));
    others_held &= locks[1..].iter().all(Lock::is_held);
    assert!(others_held, "a lock on another master was lost");
    assert!(c.stats().renewals > renewals);

    // The failed master's lock: kept (its key reached the replica) or reported lost, never
    // held in name only.
    let victim_lock = &locks[0];
    assert!(
        eventually(Duration::from_secs(10), || victim_lock.is_lost()
            || c.is_owned_by(victim_name, victim_lock.owner_token())
                .unwrap_or(false)),
        "the failed master's lock is neither kept nor reported lost"
    );
    let mut locks = locks.into_iter();
    let victim_lock = locks.next().unwrap();
    let kept = !victim_lock.is_lost();
    println!(
        "the failed master's lock was {}",
        if kept { "kept" } else { "lost" }
    );
    if kept {
        assert_eq!(
            get(&mut new_master.conn(), victim_name).as_deref(),
            Some(victim_lock.owner_token())
        );
        victim_lock.release().unwrap();
    } else {
        assert!(victim_lock.release().unwrap_err().is_not_held());
    }
    for lock in locks {
        lock.extend(Duration::from_secs(4)).unwrap();
        lock.release().unwrap();
    }
    assert!(
        waiter.join().unwrap().unwrap(),
        "the waiter was not handed its lock"
    );
    // The promoted replica serves new locks. A lock reported lost (renewal could not reach its
    // master before its validity ran out) may still be on the replica until its lease runs out.
    c.acquire(victim_name, Duration::from_secs(10))
        .unwrap()
        .release()
        .unwrap();
}

#[test]
fn with_min_replicas_a_lock_survives_its_masters_failover() {
    let cluster = Cluster::start();
    // The lease outlasts the promotion and the old master's return as a replica (without a
    // replica, no write of this shard is acknowledged: renewals fail meanwhile).
    let lease = Duration::from_secs(30);
    // A replica that has just synchronised can be slow to acknowledge on a loaded machine (once
    // 0 of 1 within 500 ms, right after an acknowledged extend): a generous replica timeout.
    let c = Client::builder(&cluster.url())
        .lease(lease)
        .min_replicas(1)
        .replica_timeout(Duration::from_secs(3))
        .read_timeout(Duration::from_secs(4))
        .connect_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let other = client(&cluster);
    let name = unique_name("acked");
    let lock = c.lock(&name).fencing(true).try_acquire().unwrap();
    let fence = lock.fencing_token().unwrap();
    let victim = cluster.master_of(&name);
    let killed = Instant::now();
    victim.kill();
    let new_master = wait_for_promotion(&cluster, &name, victim.port());
    println!("replica promoted {:?} after the kill", killed.elapsed());
    // The acknowledged lock is on the promoted replica: nobody else gets it.
    assert_eq!(
        get(&mut new_master.conn(), &name).as_deref(),
        Some(lock.owner_token())
    );
    assert!(other.try_acquire(&name).unwrap_err().is_held());
    // The old master comes back as the new one's replica; writes are acknowledged again.
    victim.restart();
    assert!(
        eventually(Duration::from_secs(20), || lock.extend(lease).is_ok()),
        "no extend was acknowledged after the old master came back"
    );
    println!("extend acknowledged {:?} after the kill", killed.elapsed());
    assert!(lock.is_held());
    lock.release().unwrap();
    // The fencing counter survived too.
    let next = c.lock(&name).fencing(true).try_acquire().unwrap();
    assert!(next.fencing_token().unwrap() > fence);
    next.release().unwrap();
}

#[test]
fn a_cluster_url_for_a_server_without_cluster_support_is_a_clear_error() {
    let server = RedisServer::start();
    let c = Client::open(&format!("redis-cluster://127.0.0.1:{}", server.port())).unwrap();
    let e = c.try_acquire("x").unwrap_err();
    assert!(e.is_connection(), "{e}");
    assert!(e.to_string().contains("cluster support disabled"), "{e}");
    assert!(
        Client::open("redis-cluster://127.0.0.1:7000/2")
            .unwrap_err()
            .is_invalid_argument()
    );
}

/// A set whose names share a hash tag lives on the master of their slot; one across slots is
/// refused before anything is sent (CROSSSLOT). (Every kind on a Cluster: `topologies.rs`.)
#[test]
fn a_set_lives_on_one_slot_and_one_across_slots_is_refused() {
    let cluster = Cluster::start();
    let c = Client::open(&cluster.url()).unwrap();
    let names = one_name_per_master(&cluster, "kinds");
    let tag = unique_name("order");
    let tagged = [format!("{{{tag}}}:stock"), format!("{{{tag}}}:payment")];
    let set = c.lock_all(&tagged).try_acquire().unwrap();
    let mut con = cluster.master_of(&tagged[0]).conn();
    for name in &tagged {
        assert!(
            exists(&mut con, name),
            "{name} not on the master of its slot"
        );
    }
    set.release().unwrap();
    let across = [names[0].0.clone(), names[2].0.clone()];
    let e = c.lock_all(&across).try_acquire().unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("hash tag"), "{e}");
    for (name, master) in &names {
        assert!(!exists(&mut master.conn(), name), "{name} was taken");
    }
}
