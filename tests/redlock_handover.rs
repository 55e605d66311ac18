//! Redlock's handover: a release writes the token of the first queued waiter into the key on
//! every master, so that the waiter holds the lock when the release returns and is only told;
//! waiters are served in the order they first queued, the same on every master. A waiter that
//! one master alone queued first, or that gave up, stalls nobody. A waiter is queued on every
//! master its round reaches, and a holder's release hands it a free key too.
//!
//! The clients here re-check only every 120 s: within a test, only a release can serve a waiter.

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ErrorKind};
use support::{RedlockMasters, eventually, get, unique_name};

/// Far more than any outcome here should take on a loaded machine.
const MARGIN: Duration = Duration::from_secs(10);
/// How soon a release must serve a blocked waiter (its re-check is 120 s away).
const SOON: Duration = Duration::from_secs(1);

fn client(masters: &RedlockMasters) -> Client {
    Client::builder(&masters.url())
        .recheck_interval(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// A thread that waits for `name` (60 s at most): its outcome, and when it came.
fn wait_for(
    c: &Client,
    name: &str,
) -> thread::JoinHandle<(Result<redislock::Lock, redislock::Error>, Instant)> {
    let (c, name) = (c.clone(), name.to_owned());
    thread::spawn(move || {
        let lock = c.acquire(&name, Duration::from_secs(60));
        (lock, Instant::now())
    })
}

/// How many waiters every master has queued for `name`.
fn queued(masters: &RedlockMasters, name: &str) -> Vec<usize> {
    masters
        .masters()
        .iter()
        .map(|m| {
            redis::cmd("ZCARD")
                .arg(format!("{{{name}}}:rq"))
                .query(&mut m.conn())
                .unwrap()
        })
        .collect()
}

/// The token every master holds for `name`.
fn tokens(masters: &RedlockMasters, name: &str) -> Vec<Option<String>> {
    masters
        .masters()
        .iter()
        .map(|m| get(&mut m.conn(), name))
        .collect()
}

#[test]
fn a_release_hands_the_lock_to_the_first_queued_waiter_on_every_master() {
    let masters = RedlockMasters::start(3);
    let c = client(&masters);
    let name = unique_name("handover");
    let holder = c.try_acquire(&name).unwrap();
    let (tx, grants) = mpsc::channel();
    let mut waiters = Vec::new();
    for k in 0..3 {
        let (c, n, tx) = (c.clone(), name.clone(), tx.clone());
        waiters.push(thread::spawn(move || {
            let lock = c.acquire(&n, Duration::from_secs(60)).unwrap();
            tx.send((k, lock.owner_token().to_owned(), Instant::now()))
                .unwrap();
            thread::sleep(Duration::from_millis(100));
            lock.release().unwrap();
        }));
        // One at a time, so that they queue in this order.
        assert!(eventually(MARGIN, || queued(&masters, &name) == vec![k + 1; 3]));
    }
    let held_with = holder.owner_token().to_owned();
    holder.release().unwrap();
    let released = Instant::now();
    // The lock went straight to a waiter: no master has it free, none has the holder's token.
    let after = tokens(&masters, &name);
    assert!(
        after
            .iter()
            .all(|t| t.is_some() && *t != Some(held_with.clone())),
        "{after:?}"
    );
    let mut last = released;
    for expected in 0..3 {
        let (k, token, at) = grants
            .recv_timeout(MARGIN)
            .expect("a waiter was not served");
        assert_eq!(k, expected, "served out of the order they queued in");
        if expected == 0 {
            assert_eq!(after, vec![Some(token); 3], "handed to another waiter");
        }
        // The previous holder held it 100 ms.
        let served = at.duration_since(last);
        assert!(served < SOON + Duration::from_millis(100), "{served:?}");
        last = at;
    }
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(tokens(&masters, &name), vec![None; 3], "a key left behind");
    assert_eq!(queued(&masters, &name), vec![0; 3], "an entry left behind");
}

#[test]
fn a_waiter_queued_first_on_one_master_only_stalls_nobody() {
    let masters = RedlockMasters::start(3);
    let c = client(&masters);
    let name = unique_name("ghost");
    let holder = c.try_acquire(&name).unwrap();
    let waiter = wait_for(&c, &name);
    assert!(eventually(MARGIN, || queued(&masters, &name) == vec![1; 3]));
    // A waiter that master 0 alone has, queued before everyone (its entry made by hand: it
    // never comes for the lock).
    let mut m0 = masters.masters()[0].conn();
    let () = redis::cmd("ZADD")
        .arg(format!("{{{name}}}:rq"))
        .arg(0)
        .arg("ghost-token")
        .query(&mut m0)
        .unwrap();
    let () = redis::cmd("SET")
        .arg(format!("{{{name}}}:e:ghost-token"))
        .arg("5000:1:0:ghost")
        .arg("PX")
        .arg(10_000)
        .query(&mut m0)
        .unwrap();
    holder.release().unwrap();
    let released = Instant::now();
    let (lock, at) = waiter.join().unwrap();
    let lock = lock.expect("the waiter was not served");
    let served = at.duration_since(released);
    assert!(served < SOON, "served {served:?} after the release");
    // Master 0 handed the key to the ghost; the other two to the waiter, which holds the
    // majority.
    let now = tokens(&masters, &name);
    assert_eq!(now[0].as_deref(), Some("ghost-token"), "{now:?}");
    assert_eq!(now[1].as_deref(), Some(lock.owner_token()), "{now:?}");
    assert_eq!(now[2].as_deref(), Some(lock.owner_token()), "{now:?}");
    assert!(lock.is_held());
    lock.release().unwrap();
}

#[test]
fn a_waiter_that_gave_up_is_not_handed_the_lock() {
    let masters = RedlockMasters::start(3);
    let c = client(&masters);
    let name = unique_name("gave-up");
    let holder = c.try_acquire(&name).unwrap();
    // The first waiter gives up after 300 ms; the second waits.
    let e = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || c.acquire(&name, Duration::from_millis(300)).unwrap_err())
    };
    assert!(eventually(MARGIN, || queued(&masters, &name) == vec![1; 3]));
    let waiter = wait_for(&c, &name);
    assert!(eventually(MARGIN, || queued(&masters, &name) == vec![2; 3]));
    let e = e.join().unwrap();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    // Its entries are gone at once: only the second waiter is queued.
    assert_eq!(queued(&masters, &name), vec![1; 3]);
    holder.release().unwrap();
    let released = Instant::now();
    let (lock, at) = waiter.join().unwrap();
    let lock = lock.expect("the waiter was not served");
    assert!(at.duration_since(released) < SOON);
    assert_eq!(
        tokens(&masters, &name),
        vec![Some(lock.owner_token().to_owned()); 3]
    );
    lock.release().unwrap();
}

#[test]
fn a_waiter_granted_where_the_key_was_free_is_queued_there_and_handed_the_key() {
    let masters = RedlockMasters::start(3);
    let c = client(&masters);
    let name = unique_name("free-key");
    let holder = c.try_acquire(&name).unwrap();
    // Master 1's key is gone (as a plain attempt that took it and cleared it leaves it): the
    // holder keeps masters 0 and 2, a majority.
    let () = redis::cmd("DEL")
        .arg(&name)
        .query(&mut masters.masters()[1].conn())
        .unwrap();
    let waiter = wait_for(&c, &name);
    // Its rounds are granted on master 1 (and give it back): it is queued there too, so that
    // masters 0 and 1 name the same first waiter should master 2 stop.
    assert!(
        eventually(MARGIN, || queued(&masters, &name) == vec![1; 3]),
        "{:?}",
        queued(&masters, &name)
    );
    // Past the round's clean-up of master 1: the waiter blocks (400 ms).
    thread::sleep(Duration::from_millis(50));
    holder.release().unwrap();
    let released = Instant::now();
    let (lock, at) = waiter.join().unwrap();
    let lock = lock.expect("the waiter was not served");
    let served = at.duration_since(released);
    assert!(served < SOON, "served {served:?} after the release");
    // The release handed master 1's free key on to the waiter too: it holds every master.
    let now = tokens(&masters, &name);
    assert_eq!(now, vec![Some(lock.owner_token().to_owned()); 3]);
    lock.release().unwrap();
    assert_eq!(tokens(&masters, &name), vec![None; 3], "a key left behind");
}
