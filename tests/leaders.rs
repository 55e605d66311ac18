//! Leader election (docs/leaders.md) on real servers: campaign, epoch, resign, observers woken by
//! the election's channel, a killed leader replaced within its lease + 1 s with a larger epoch
//! that a fenced resource then enforces, a paused leader that knows it no longer leads, bad
//! input, and the same on a Sentinel group and a Cluster (Redlock refuses elections).

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Cancel, Client, LockKind, MAX_IDENTITY_LEN, MAX_LEASE};
use support::{
    ChildProcess, RedisServer, Shared, Topology, child_role, eventually, exists, get, unique_name,
};

redislock_testkit::shared_keeper!();

/// A bound for what must happen on a loaded machine; never a speed claim.
const SURELY: Duration = Duration::from_secs(20);
/// How soon a change published on the channel must have woken a waiter or an observer: far
/// shorter than the leases (60 s), so only the message can have woken it.
const WAKE_BOUND: Duration = Duration::from_secs(3);
const LONG: Duration = Duration::from_secs(60);

/// A client whose waiters re-check only after a minute: a waiter woken sooner was woken by the
/// channel.
fn client(url: &str) -> Client {
    Client::builder(url)
        .recheck_interval(LONG)
        .lease(LONG)
        .build()
        .unwrap()
}

/// The lock key of `name` with the client's default prefix.
fn key(name: &str) -> String {
    name.to_owned()
}

#[test]
fn bad_input_is_refused_clearly_and_nothing_is_held() {
    let srv = RedisServer::start();
    let c = client(&srv.url());
    let name = unique_name("elect-bad");
    let too_long = "x".repeat(MAX_IDENTITY_LEN + 1);
    let cases: Vec<(&str, redislock::Error)> = vec![
        ("no identity", c.leader(&name).try_campaign().unwrap_err()),
        (
            "empty identity",
            c.leader(&name).identity("").try_campaign().unwrap_err(),
        ),
        (
            "identity too long",
            c.leader(&name)
                .identity(&too_long)
                .try_campaign()
                .unwrap_err(),
        ),
        (
            "control character",
            c.leader(&name).identity("a\nb").try_campaign().unwrap_err(),
        ),
        (
            "zero lease",
            c.leader(&name)
                .identity("n1")
                .lease(Duration::ZERO)
                .try_campaign()
                .unwrap_err(),
        ),
        (
            "absurd lease",
            c.leader(&name)
                .identity("n1")
                .lease(MAX_LEASE + Duration::from_secs(1))
                .campaign(Duration::from_secs(1))
                .unwrap_err(),
        ),
        (
            "absurd observer timeout",
            c.wait_for_leader_change(&name, None, Duration::from_secs(10_000_000))
                .unwrap_err(),
        ),
    ];
    for (what, e) in cases {
        assert!(e.is_invalid_argument(), "{what}: {e}");
    }
    let mut con = srv.conn();
    assert!(!exists(&mut con, &key(&name)), "a refused campaign held");
    assert_eq!(c.leader_info(&name).unwrap(), None);
    // The identity is checked by length in bytes: the longest one is taken.
    let longest = "é".repeat(MAX_IDENTITY_LEN / 2);
    let l = c.leader(&name).identity(&longest).try_campaign().unwrap();
    assert_eq!(c.leader_info(&name).unwrap().unwrap().identity, longest);
    l.resign().unwrap();
}

#[test]
fn one_leads_observers_see_it_and_epochs_increase_on_one_server() {
    let srv = RedisServer::start();
    elect_observe_resign(&srv.url(), |name| get(&mut srv.conn(), &key(name)));
}

#[test]
fn on_a_sentinel_group() {
    let s = Shared::get(Topology::Sentinel);
    elect_observe_resign(s.url(), |name| get(&mut s.conn_for(name), name));
}

#[test]
fn on_a_cluster() {
    let s = Shared::get(Topology::Cluster);
    elect_observe_resign(s.url(), |name| get(&mut s.conn_for(name), name));
}

#[test]
fn redlock_refuses_elections() {
    let s = Shared::get(Topology::Redlock);
    let c = client(s.url());
    let name = unique_name("elect-redlock");
    let e = c.leader(&name).identity("n1").try_campaign().unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("leader election"), "{e}");
    let e = c.leader_info(&name).unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
}

/// Campaign, exclusion, what observers and a plain lock see, a waiting campaigner and an
/// observer woken by a resign, epochs strictly increasing, on the topology of `url`.
/// `lock_key` reads the lock key of a name.
fn elect_observe_resign(url: &str, lock_key: impl Fn(&str) -> Option<String>) {
    let c = client(url);
    let name = unique_name("elect");
    assert_eq!(c.leader_info(&name).unwrap(), None);

    // An observer waiting while nobody leads is woken by the election, not by a re-check.
    let (first, seen) = thread::scope(|s| {
        let observer = s.spawn(|| {
            let r = c.wait_for_leader_change(&name, None, LONG);
            (r, Instant::now())
        });
        thread::sleep(Duration::from_millis(300));
        assert!(
            !observer.is_finished(),
            "the observer waits while nobody leads"
        );
        let elected = Instant::now();
        let first = c.leader(&name).identity("node-a").try_campaign().unwrap();
        let (seen, at) = observer.join().unwrap();
        assert!(at - elected < WAKE_BOUND, "the observer was woken late");
        (first, seen.unwrap().expect("the observer sees a leader"))
    });
    assert!(first.is_leader());
    assert_eq!(first.identity(), "node-a");
    assert_eq!(seen.identity, "node-a");
    assert_eq!(seen.epoch, first.epoch());
    assert!(seen.remaining > Duration::from_secs(50));
    // The lock key holds the token, never the identity; a plain lock sees the name held.
    let held = lock_key(&name).expect("the lock key is set");
    assert_ne!(held, "node-a");
    assert!(c.inspect(&name, LockKind::Exclusive).unwrap().held);
    assert!(c.try_acquire(&name).unwrap_err().is_held());
    // A second campaigner is refused at once, or waits.
    let e = c
        .leader(&name)
        .identity("node-b")
        .try_campaign()
        .unwrap_err();
    assert!(e.is_held(), "{e}");

    // A waiting campaigner and an observer are both woken by the resign.
    let epoch = first.epoch();
    let (second, observed) = thread::scope(|s| {
        let campaigner = s.spawn(|| {
            let r = c.leader(&name).identity("node-b").campaign(LONG);
            (r, Instant::now())
        });
        let observer = s.spawn(|| {
            let r = c.wait_for_leader_change(&name, Some(epoch), LONG);
            (r, Instant::now())
        });
        thread::sleep(Duration::from_millis(500));
        assert!(!campaigner.is_finished() && !observer.is_finished());
        let resigned = Instant::now();
        first.resign().unwrap();
        let (second, at) = campaigner.join().unwrap();
        assert!(at - resigned < WAKE_BOUND, "the campaigner was woken late");
        let (observed, at) = observer.join().unwrap();
        assert!(at - resigned < WAKE_BOUND, "the observer was woken late");
        let second = second.unwrap();
        assert!(second.epoch() > epoch, "{} after {epoch}", second.epoch());
        (second, observed.unwrap())
    });
    // The observer saw a change: nobody (the resign) or the new leader already.
    if let Some(l) = observed {
        assert_eq!((l.identity.as_str(), l.epoch), ("node-b", second.epoch()));
    }
    let now = c.leader_info(&name).unwrap().unwrap();
    assert_eq!(
        (now.identity.as_str(), now.epoch),
        ("node-b", second.epoch())
    );
    // Nothing changes: the observer's wait runs out.
    let e = c
        .wait_for_leader_change(&name, Some(second.epoch()), Duration::from_millis(300))
        .unwrap_err();
    assert!(e.is_wait_timeout(), "{e}");
    second.resign().unwrap();
    assert_eq!(c.leader_info(&name).unwrap(), None);
    assert_eq!(lock_key(&name), None);
}

#[test]
fn renewal_keeps_the_leader_and_its_leader_key_and_a_loss_is_reported() {
    let srv = RedisServer::start();
    let c = client(&srv.url());
    let name = unique_name("elect-renew");
    let l = c
        .leader(&name)
        .identity("n1")
        .lease(Duration::from_millis(600))
        .try_campaign()
        .unwrap();
    let (lost_tx, lost_rx) = mpsc::channel();
    l.on_lost(move |e| {
        let _ = lost_tx.send(e.to_string());
    });
    thread::sleep(Duration::from_millis(1_800));
    assert!(l.is_leader());
    let info = c
        .leader_info(&name)
        .unwrap()
        .expect("renewed, the leader key too");
    assert_eq!(info.epoch, l.epoch());
    // The leadership deleted behind its back: renewal finds it lost.
    redis::cmd("DEL")
        .arg(key(&name))
        .exec(&mut srv.conn())
        .unwrap();
    let why = lost_rx.recv_timeout(SURELY).expect("on_lost was called");
    assert!(why.contains("not held"), "{why}");
    assert!(l.is_lost() && !l.is_leader());
    assert!(l.resign().unwrap_err().is_not_held());
}

#[test]
fn a_cancel_ends_a_campaign() {
    let srv = RedisServer::start();
    let c = client(&srv.url());
    let name = unique_name("elect-cancel");
    let leader = c.leader(&name).identity("n1").try_campaign().unwrap();
    let cancel = Cancel::new();
    thread::scope(|s| {
        let w = s.spawn(|| {
            c.leader(&name)
                .identity("n2")
                .cancel_on(&cancel)
                .campaign(LONG)
        });
        thread::sleep(Duration::from_millis(300));
        cancel.cancel();
        let e = w.join().unwrap().unwrap_err();
        assert!(e.is_cancelled(), "{e}");
    });
    assert_eq!(c.leader_info(&name).unwrap().unwrap().identity, "n1");
    leader.resign().unwrap();
}

#[test]
fn a_leader_paused_past_its_lease_no_longer_leads() {
    let srv = RedisServer::start();
    let c = client(&srv.url());
    let name = unique_name("elect-paused");
    let l = c
        .leader(&name)
        .identity("sleeper")
        .lease(Duration::from_millis(500))
        .auto_renew(false)
        .try_campaign()
        .unwrap();
    assert!(l.is_leader());
    thread::sleep(Duration::from_millis(600));
    assert!(!l.is_leader(), "a leader past its lease must know it");
    let next = c.leader(&name).identity("next").try_campaign().unwrap();
    assert!(next.epoch() > l.epoch());
    next.resign().unwrap();
}

/// Fenced writes to a resource: a Redis key keeps the largest epoch it accepted, and refuses a
/// write with a smaller one.
const FENCED_WRITE: &str = "local seen = tonumber(redis.call('GET', KEYS[1]) or '0') \
     if tonumber(ARGV[1]) < seen then return 0 end \
     redis.call('SET', KEYS[1], ARGV[1]) return 1";

fn fenced_write(con: &mut redis::Connection, resource: &str, epoch: u64) -> bool {
    let ok: i64 = redis::Script::new(FENCED_WRITE)
        .key(resource)
        .arg(epoch)
        .invoke(con)
        .unwrap();
    ok == 1
}

#[test]
fn a_killed_leader_is_replaced_within_its_lease_and_its_epoch_is_fenced_out() {
    let srv = RedisServer::start();
    let name = unique_name("elect-killed");
    let resource = format!("{name}:resource");
    let lease = Duration::from_secs(1);
    let mut child = ChildProcess::start(
        "child_leader",
        "leader",
        &[
            ("URL", srv.url()),
            ("NAME", name.clone()),
            ("LEASE_MS", lease.as_millis().to_string()),
        ],
    );
    let old: u64 = child.wait_ready(SURELY).parse().unwrap();
    let mut con = srv.conn();
    assert!(
        fenced_write(&mut con, &resource, old),
        "the old leader writes"
    );
    let c = client(&srv.url());
    assert_eq!(c.leader_info(&name).unwrap().unwrap().identity, "child");
    thread::scope(|s| {
        let campaigner = s.spawn(|| {
            let r = c.leader(&name).identity("successor").campaign(SURELY);
            (r, Instant::now())
        });
        let observer = s.spawn(|| {
            let r = c.wait_for_leader_change(&name, Some(old), SURELY);
            (r, Instant::now())
        });
        // The leader renews every lease/3: well past a lease, it still leads.
        thread::sleep(2 * lease);
        assert!(!campaigner.is_finished(), "elected while the leader lived");
        let killed = child.kill9();
        let (new, at) = campaigner.join().unwrap();
        let new = new.unwrap();
        assert!(
            at - killed < lease + Duration::from_secs(1),
            "elected {:?} after the kill",
            at - killed
        );
        assert!(new.epoch() > old);
        let (seen, seen_at) = observer.join().unwrap();
        assert!(seen_at - killed < lease + Duration::from_secs(1));
        if let Some(l) = seen.unwrap() {
            assert_eq!(l.epoch, new.epoch());
        }
        assert!(
            fenced_write(&mut con, &resource, new.epoch()),
            "the new leader writes"
        );
        assert!(
            !fenced_write(&mut con, &resource, old),
            "the resource took the old leader's epoch"
        );
        new.resign().unwrap();
    });
}

#[test]
fn a_stopped_leader_process_sees_it_no_longer_leads_when_continued() {
    let srv = RedisServer::start();
    let name = unique_name("elect-stopped");
    let mut child = ChildProcess::start(
        "child_leader",
        "leader",
        &[
            ("URL", srv.url()),
            ("NAME", name.clone()),
            ("LEASE_MS", "1000".to_owned()),
        ],
    );
    let old: u64 = child.wait_ready(SURELY).parse().unwrap();
    child.stop();
    let c = client(&srv.url());
    let new = c
        .leader(&name)
        .identity("successor")
        .campaign(SURELY)
        .unwrap();
    assert!(new.epoch() > old);
    child.cont();
    child.go();
    assert!(
        eventually(SURELY, || child.reported("is_leader").is_some()),
        "the continued leader did not report"
    );
    assert_eq!(child.reported("is_leader").as_deref(), Some("false"));
    new.resign().unwrap();
}

/// The leader of the tests above: campaigns with its lease (auto-renewed), says its epoch,
/// then, once told to go, reports whether it still leads (and keeps running until killed).
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_leader() {
    let Some(role) = child_role("leader") else {
        return;
    };
    let c = Client::open(&role.var("URL")).unwrap();
    let name = role.var("NAME");
    let lease = Duration::from_millis(role.var("LEASE_MS").parse().unwrap());
    let l = c
        .leader(&name)
        .identity("child")
        .lease(lease)
        .try_campaign()
        .unwrap();
    role.ready(&l.epoch().to_string());
    role.wait_go(Duration::from_secs(600));
    role.report("is_leader", &l.is_leader().to_string());
    role.hold();
}

#[test]
fn an_observer_rides_out_a_restarted_server() {
    let srv = RedisServer::start();
    let c = client(&srv.url());
    let name = unique_name("elect-restart");
    thread::scope(|s| {
        let observer = s.spawn(|| c.wait_for_leader_change(&name, None, SURELY));
        thread::sleep(Duration::from_millis(300));
        srv.kill();
        thread::sleep(Duration::from_secs(1));
        assert!(
            !observer.is_finished(),
            "the observer gave up while the server was down"
        );
        srv.restart();
        let mut leader = None;
        assert!(
            eventually(SURELY, || {
                leader = c.leader(&name).identity("after").try_campaign().ok();
                leader.is_some()
            }),
            "no campaign succeeded after the restart"
        );
        let seen = observer.join().unwrap().unwrap().expect("a leader");
        assert_eq!(seen.identity, "after");
        assert_eq!(seen.epoch, leader.unwrap().epoch());
    });
}
