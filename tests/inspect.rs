//! `Client::inspect`: a look at a lock without holding it, on every topology: held or not, as
//! what, by how many, the lease left, the waiters and the fencing counter; never a token.

mod support;

use std::thread;
use std::time::Duration;

use redislock::{Client, HeldAs, LockKind};
use support::{Shared, Topology, eventually, unique_name};

redislock_testkit::shared_keeper!();

/// A bound for what must happen on a loaded machine; never a speed claim.
const SURELY: Duration = Duration::from_secs(20);
const LEASE: Duration = Duration::from_secs(30);

fn client(t: Topology) -> Client {
    Client::builder(Shared::get(t).url())
        .lease(LEASE)
        .recheck_interval(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// Free, then held by one exclusive lock with a waiter queued behind it, then free again.
fn exclusive(t: Topology) {
    let c = client(t);
    let name = unique_name("inspect-ex");
    let free = c.inspect(&name, LockKind::Exclusive).unwrap();
    assert!(!free.held, "{free:?}");
    assert_eq!(
        (free.held_as, free.holders, free.remaining),
        (None, 0, None)
    );
    let redlock = t == Topology::Redlock;
    let lock = c.lock(&name).fencing(!redlock).acquire(SURELY).unwrap();
    let info = c.inspect(&name, LockKind::Any).unwrap();
    assert!(info.held, "{info:?}");
    assert_eq!((info.held_as, info.holders), (Some(HeldAs::Exclusive), 1));
    let left = info.remaining.expect("a lease");
    assert!(left <= LEASE && left > LEASE / 2, "{left:?}");
    assert!(!format!("{info:?}").contains(lock.owner_token()));
    if redlock {
        assert_eq!((info.waiters, info.fencing_counter), (None, None));
    } else {
        assert_eq!(info.fencing_counter, lock.fencing_token());
        assert_eq!(info.waiters, Some(0));
        let (c2, n2) = (c.clone(), name.clone());
        let waiter = thread::spawn(move || c2.acquire(&n2, SURELY).map(|l| l.release()));
        assert!(eventually(SURELY, || {
            c.inspect(&name, LockKind::Exclusive).unwrap().waiters == Some(1)
        }));
        // The other kinds' queues are empty.
        let rw = c.inspect(&name, LockKind::RwLock).unwrap();
        assert_eq!((rw.held, rw.waiters), (true, Some(0)));
        lock.release().unwrap();
        waiter.join().unwrap().unwrap().unwrap();
        assert_eq!(c.inspect(&name, LockKind::Any).unwrap().waiters, Some(0));
        return;
    }
    lock.release().unwrap();
    assert!(!c.inspect(&name, LockKind::Exclusive).unwrap().held);
}

/// Two readers, then the permits of a semaphore.
fn other_kinds(t: Topology) {
    let c = client(t);
    let name = unique_name("inspect-rw");
    let rw = c.rw_lock(&name);
    let (r1, r2) = (rw.read(SURELY).unwrap(), rw.read(SURELY).unwrap());
    let info = c.inspect(&name, LockKind::RwLock).unwrap();
    assert_eq!(
        (info.held, info.held_as, info.holders),
        (true, Some(HeldAs::Readers), 2)
    );
    assert!(info.remaining.is_some_and(|r| r <= LEASE), "{info:?}");
    r1.release().unwrap();
    assert_eq!(c.inspect(&name, LockKind::RwLock).unwrap().holders, 1);
    r2.release().unwrap();
    assert!(!c.inspect(&name, LockKind::RwLock).unwrap().held);

    let name = unique_name("inspect-sem");
    let sem = c.semaphore(&name, 5);
    let (a, b) = (
        sem.acquire(2, SURELY).unwrap(),
        sem.acquire(1, SURELY).unwrap(),
    );
    let info = c.inspect(&name, LockKind::Semaphore).unwrap();
    assert_eq!(info.held_as, Some(HeldAs::Semaphore), "{info:?}");
    assert_eq!(
        (info.holders, info.permits_held, info.permits),
        (2, 3, Some(5))
    );
    assert_eq!(info.waiters, Some(0));
    a.release().unwrap();
    b.release().unwrap();
    assert!(!c.inspect(&name, LockKind::Semaphore).unwrap().held);
}

/// Redisson's lock: a hash whose fields (`<client id>:<thread id>`, each with its holds) are
/// its holders; a hash of another layout is another key.
fn redisson(t: Topology) {
    let c = client(t);
    let name = unique_name("inspect-rsn");
    let lock = c.redisson_lock(&name).try_acquire().unwrap();
    let again = c.redisson_lock(&name).try_acquire().unwrap();
    let info = c.inspect(&name, LockKind::Any).unwrap();
    assert_eq!(
        (info.held, info.held_as, info.holders),
        (true, Some(HeldAs::Redisson), 1),
        "one thread's two holds are one holder: {info:?}"
    );
    let left = info.remaining.expect("a lease");
    assert!(left <= LEASE && left > LEASE / 2, "{left:?}");
    assert_eq!((info.permits_held, info.permits), (0, None));
    assert_eq!(info.waiters, Some(0));
    again.release().unwrap();
    lock.release().unwrap();
    assert!(!c.inspect(&name, LockKind::Any).unwrap().held);

    // As Redisson writes it; two owners' fields (as a hash may hold while one's hold is being
    // taken over) are two holders.
    let mut con = Shared::get(t).conn_for(&name);
    let hset = |con: &mut redis::Connection, field: &str, value: &str| {
        redis::cmd("HSET")
            .arg(&name)
            .arg(field)
            .arg(value)
            .exec(con)
            .unwrap();
    };
    hset(&mut con, "3f1c0e9a-6b1f-4d55-9a51-2b7b1f0c9d10:1", "1");
    redis::cmd("PEXPIRE")
        .arg(&name)
        .arg(30_000)
        .exec(&mut con)
        .unwrap();
    let info = c.inspect(&name, LockKind::Exclusive).unwrap();
    assert_eq!(
        (info.held_as, info.holders),
        (Some(HeldAs::Redisson), 1),
        "{info:?}"
    );
    assert!(info.remaining.is_some(), "{info:?}");
    hset(&mut con, "5d2e7a10-0c3b-4e8f-8a61-7c9d0b1e2f30:57", "3");
    let info = c.inspect(&name, LockKind::Any).unwrap();
    assert_eq!(
        (info.held_as, info.holders),
        (Some(HeldAs::Redisson), 2),
        "{info:?}"
    );
    // A field of another layout: not Redisson's lock.
    hset(&mut con, "mode", "read");
    let info = c.inspect(&name, LockKind::Any).unwrap();
    assert_eq!(
        (info.held, info.held_as, info.holders),
        (true, Some(HeldAs::Other), 0),
        "{info:?}"
    );
    redis::cmd("DEL").arg(&name).exec(&mut con).unwrap();
}

macro_rules! topology {
    ($module:ident, $t:expr) => {
        mod $module {
            use super::*;
            #[test]
            fn exclusive_lock() {
                exclusive($t);
            }
            #[test]
            fn read_write_lock_and_semaphore() {
                other_kinds($t);
            }
            #[test]
            fn redissons_lock() {
                redisson($t);
            }
        }
    };
}

topology!(single, Topology::Single);
topology!(sentinel, Topology::Sentinel);
topology!(cluster, Topology::Cluster);

mod redlock {
    use super::*;

    #[test]
    fn exclusive_lock() {
        exclusive(Topology::Redlock);
    }

    /// Held means held by one owner on a majority of masters; the lease left is the shortest
    /// among that majority. Other kinds are refused.
    #[test]
    fn held_on_a_majority_only() {
        let shared = Shared::get(Topology::Redlock);
        let c = client(Topology::Redlock);
        let name = unique_name("inspect-quorum");
        let mut conns = shared.conns_for(&name);
        assert_eq!(conns.len(), 3);
        let set = |c: &mut redis::Connection, v: &str, ms: u64| {
            redis::cmd("SET")
                .arg(&name)
                .arg(v)
                .arg("PX")
                .arg(ms)
                .exec(c)
                .unwrap();
        };
        set(&mut conns[0], "owner-a", 60_000);
        let info = c.inspect(&name, LockKind::Exclusive).unwrap();
        assert!(!info.held, "one master of three: {info:?}");
        set(&mut conns[1], "owner-b", 60_000);
        assert!(!c.inspect(&name, LockKind::Exclusive).unwrap().held);
        set(&mut conns[1], "owner-a", 20_000);
        let info = c.inspect(&name, LockKind::Exclusive).unwrap();
        assert!(info.held, "{info:?}");
        let left = info.remaining.unwrap();
        assert!(
            left <= Duration::from_secs(20) && left > Duration::from_secs(10),
            "{left:?}"
        );
        set(&mut conns[2], "owner-a", 40_000);
        let left = c.inspect(&name, LockKind::Any).unwrap().remaining.unwrap();
        assert!(left > Duration::from_secs(20), "the two longest: {left:?}");
        for conn in &mut conns {
            redis::cmd("DEL").arg(&name).exec(conn).unwrap();
        }
        for kind in [LockKind::RwLock, LockKind::Semaphore] {
            let e = c.inspect(&name, kind).unwrap_err();
            assert!(e.is_invalid_argument(), "{e}");
        }
    }
}
