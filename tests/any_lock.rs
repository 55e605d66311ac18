//! `AnyLock`: a held lock of any kind through one type, its kind known at run time, as the C ABI
//! and `redislock run` hold theirs. The calls of some kinds only check the kind's descriptor.

mod support;

use std::time::Duration;

use redislock::kind::{self, Exclusive, Fencing, Kind, Leader, Semaphore, Set, Write};
use redislock::{AnyLock, ErrorKind};
use support::{RedisServer, handoff_only, unique_name};

const WAIT: Duration = Duration::from_secs(5);

fn invalid<T: std::fmt::Debug>(r: Result<T, redislock::Error>) {
    assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn each_kind_held_as_any_lock_offers_what_its_descriptor_says() {
    let srv = RedisServer::start();
    let c = handoff_only(&srv.url());
    let name = unique_name("any");

    let lock: AnyLock = c.lock(&name).fencing(true).acquire(WAIT).unwrap().into();
    assert_eq!(lock.kind(), Exclusive::DESCRIPTOR);
    assert_eq!(lock.name(), name.as_bytes());
    assert!(lock.is_held() && !lock.is_lost() && lock.auto_renews());
    assert!(lock.fencing_token().unwrap().is_some());
    assert_eq!(
        lock.fencing_token_at(0).unwrap(),
        lock.fencing_token().unwrap()
    );
    invalid(lock.fencing_token_at(1));
    assert!(lock.owner_token().unwrap().len() >= 32);
    invalid(lock.downgrade());
    invalid(lock.epoch());
    lock.extend(Duration::from_secs(20)).unwrap();
    assert_eq!(lock.lease(), Duration::from_secs(20));
    lock.release().unwrap();
    assert!(!lock.is_held());
    assert_eq!(lock.release().unwrap_err().kind(), ErrorKind::NotHeld);
    drop(lock);

    let write: AnyLock = c.rw_lock(&name).write(WAIT).unwrap().into();
    assert_eq!(write.kind(), Write::DESCRIPTOR);
    invalid(write.owner_token());
    invalid(write.detach());
    let read = write.downgrade().unwrap();
    assert_eq!(read.kind(), kind::ALL[1]);
    assert_eq!(read.kind().name(), "read");
    assert!(!write.is_held() && read.is_held());
    read.release().unwrap();

    let permits: AnyLock = c.semaphore(&name, 3).acquire(2, WAIT).unwrap().into();
    assert_eq!(permits.kind(), Semaphore::DESCRIPTOR);
    assert_eq!(permits.kind().fencing, Fencing::Never);
    invalid(permits.fencing_token());
    invalid(permits.fencing_token_at(0));
    permits.release().unwrap();

    let other = unique_name("any-other");
    let names = [name.as_str(), other.as_str()];
    let set: AnyLock = c
        .lock_all(&names)
        .fencing(true)
        .acquire(WAIT)
        .unwrap()
        .into();
    assert_eq!(set.kind(), Set::DESCRIPTOR);
    invalid(set.fencing_token());
    assert!(set.fencing_token_at(1).unwrap().is_some());
    invalid(set.fencing_token_at(2));
    set.release().unwrap();

    let leader: AnyLock = c
        .leader(&name)
        .identity("me")
        .campaign(WAIT)
        .unwrap()
        .into();
    assert_eq!(leader.kind(), Leader::DESCRIPTOR);
    assert!(leader.epoch().unwrap() > 0);
    assert_eq!(
        leader.fencing_token().unwrap(),
        Some(leader.epoch().unwrap())
    );
    // Dropping it releases (resigns), as a guard's drop does.
    drop(leader);
    assert!(c.leader_info(&name).unwrap().is_none());
}

/// The descriptors list every kind once, and the markers carry theirs.
#[test]
fn the_markers_carry_the_descriptors() {
    assert_eq!(kind::ALL.len(), 7 + cfg!(feature = "recipe-kind") as usize);
    for d in kind::ALL {
        assert_eq!(kind::ALL.iter().filter(|e| e.name() == d.name()).count(), 1);
    }
    assert!(Exclusive::DESCRIPTOR.owner_token && Exclusive::DESCRIPTOR.bounds);
    assert!(Exclusive::DESCRIPTOR.redlock);
    assert!(Write::DESCRIPTOR.downgrade && !Write::DESCRIPTOR.redlock);
    assert_eq!(Leader::DESCRIPTOR.fencing, Fencing::Always);
    assert_eq!(Semaphore::DESCRIPTOR.php, "PERMITS");
    let permits: Vec<&str> = kind::ALL
        .iter()
        .filter(|d| d.permits)
        .map(|d| d.name())
        .collect();
    assert_eq!(permits, ["semaphore"]);
    assert_eq!(Write::DESCRIPTOR.c_kind, Some(("REDISLOCK_KIND_WRITE", 2)));
}
