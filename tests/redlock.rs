//! Locks over three independent masters (`redlock://`, started by the test kit): what a majority
//! means, and the faults: one master killed or stopped (SIGSTOP), two of three down, a master
//! restarted empty while a lock is held, scripts flushed, a waiter's home master down. The
//! behaviours shared with the other topologies run in `topologies.rs`.
//!
//! Timing bounds are generous (2 cores, noisy machine): they check that nothing hangs and that
//! outcomes arrive within the configured timeouts plus a margin, never raw speed.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{Client, ClientBuilder, ErrorKind, Lock};
use support::{RedisServer, RedlockMasters, eventually, exists, get, pttl, unique_name};

const READ_TIMEOUT: Duration = Duration::from_millis(250);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(250);
/// Leases of the fault tests' auto-renewed locks: renewed every 300 ms.
const LEASE: Duration = Duration::from_millis(900);
/// Far more than any outcome here should take on a loaded machine.
const MARGIN: Duration = Duration::from_secs(10);

/// A builder with short timeouts and lease.
fn fast(masters: &RedlockMasters) -> ClientBuilder {
    Client::builder(&masters.url())
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .write_timeout(READ_TIMEOUT)
        .checkout_timeout(Duration::from_millis(500))
        .lease(LEASE)
}

/// The token each running master holds for `name` (none for a master that is down).
fn tokens(masters: &RedlockMasters, name: &str) -> Vec<Option<String>> {
    masters
        .masters()
        .iter()
        .map(|m| m.try_conn().ok().and_then(|mut c| get(&mut c, name)))
        .collect()
}

/// A client whose waiters re-check only every 120 s: within a test, only a release (or a
/// waiter's own back-off) can get a waiter the lock.
fn rechecks_far_apart(masters: &RedlockMasters) -> Client {
    Client::builder(&masters.url())
        .recheck_interval(Duration::from_secs(120))
        .build()
        .unwrap()
}

/// How many masters hold `lock`'s token.
fn holding(masters: &RedlockMasters, lock: &Lock, name: &str) -> usize {
    tokens(masters, name)
        .iter()
        .filter(|t| t.as_deref() == Some(lock.owner_token()))
        .count()
}

/// `SET name token PX 60000` on one master: another owner's key.
fn foreign_key(server: &RedisServer, name: &str) {
    let () = redis::cmd("SET")
        .arg(name)
        .arg("another-owner-token")
        .arg("PX")
        .arg(60_000)
        .query(&mut server.conn())
        .unwrap();
}

#[test]
fn a_lock_is_the_majority_of_masters() {
    let masters = RedlockMasters::start(3);
    let m = masters.masters();
    let c = Client::open(&masters.url()).unwrap();
    let name = unique_name("majority");

    // Granted by all three: the key holds the owner's token on every master.
    let lock = c.try_acquire(&name).unwrap();
    assert_eq!(holding(&masters, &lock, &name), 3);
    assert!(c.is_owned_by(&name, lock.owner_token()).unwrap());
    lock.release().unwrap();
    assert_eq!(tokens(&masters, &name), vec![None, None, None]);

    // Another owner's key on one master: two of three still grant it.
    foreign_key(&m[2], &name);
    let lock = c.try_acquire(&name).unwrap();
    assert_eq!(holding(&masters, &lock, &name), 2);
    lock.release().unwrap();
    assert_eq!(
        get(&mut m[2].conn(), &name).as_deref(),
        Some("another-owner-token")
    );

    // On two of three: held, and the error says who granted and who refused; the one master that
    // granted it is cleaned up again.
    foreign_key(&m[1], &name);
    let e = c.try_acquire(&name).unwrap_err();
    println!("try_acquire of a lock held on two of three masters: {e}");
    assert_eq!(e.kind(), ErrorKind::Held, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("1 of 3 masters granted it (2 needed)"),
        "{msg}"
    );
    assert!(
        msg.contains(&format!(
            "held by another owner on {}/0, {}/0",
            m[1].addr(),
            m[2].addr()
        )),
        "{msg}"
    );
    assert!(
        !exists(&mut m[0].conn(), &name),
        "the partial grant was left"
    );
    // A waiting acquire that times out says the same.
    let e = c.acquire(&name, Duration::from_millis(300)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    assert!(e.to_string().contains("(2 needed)"), "{e}");
    assert!(
        !exists(&mut m[0].conn(), &name),
        "the partial grant was left"
    );

    // force_release frees a lock that a majority holds with one token, and only that.
    let lock = {
        for s in &m[1..] {
            let _: i64 = redis::cmd("DEL").arg(&name).query(&mut s.conn()).unwrap();
        }
        c.lock(&name).auto_renew(false).try_acquire().unwrap()
    };
    assert!(c.force_release(&name).unwrap());
    assert!(!c.force_release(&name).unwrap());
    assert!(lock.release().unwrap_err().is_not_held());
}

#[test]
fn extend_and_renewal_reach_every_master() {
    let masters = RedlockMasters::start(3);
    let c = fast(&masters).build().unwrap();
    let name = unique_name("extend");
    let lock = c.lock(&name).auto_renew(false).try_acquire().unwrap();
    lock.extend(Duration::from_secs(20)).unwrap();
    for m in masters.masters() {
        let left = pttl(&mut m.conn(), &name);
        assert!(left > 10_000 && left <= 20_000, "pttl {left}");
    }
    // Gone from two masters: the lock is no longer the majority's.
    for m in &masters.masters()[..2] {
        let _: i64 = redis::cmd("DEL").arg(&name).query(&mut m.conn()).unwrap();
    }
    assert!(lock.extend(LEASE).unwrap_err().is_not_held());
    assert!(lock.is_lost());

    // Renewal keeps a lock on every master past many leases.
    let renewed = c.try_acquire(&name).unwrap();
    thread::sleep(LEASE * 3);
    assert!(renewed.is_held() && !renewed.is_lost());
    assert_eq!(holding(&masters, &renewed, &name), 3);
    renewed.release().unwrap();
}

#[test]
fn one_master_killed_acquires_and_renewals_go_on() {
    let masters = RedlockMasters::start(3);
    let c = fast(&masters).build().unwrap();
    let held_name = unique_name("killed-held");
    let held = c.try_acquire(&held_name).unwrap();
    masters.masters()[1].kill();
    // New locks are granted by the two that are left, again and again.
    for i in 0..20 {
        let name = unique_name("killed-new");
        let lock = c
            .try_acquire(&name)
            .unwrap_or_else(|e| panic!("acquire {i} with one master down: {e}"));
        lock.release().unwrap();
    }
    // The held lock is renewed by the two that are left, over several leases.
    thread::sleep(LEASE * 3);
    assert!(held.is_held() && !held.is_lost(), "renewal lost the lock");
    assert_eq!(holding(&masters, &held, &held_name), 2);
    // Back (empty): the next renewals set the lock there again.
    masters.masters()[1].restart();
    assert!(
        eventually(MARGIN, || holding(&masters, &held, &held_name) == 3),
        "the restarted master never got the held lock back"
    );
    held.release().unwrap();
    assert_eq!(tokens(&masters, &held_name), vec![None, None, None]);
}

#[test]
fn one_master_stopped_acquires_and_renewals_go_on() {
    let masters = RedlockMasters::start(3);
    let c = fast(&masters).build().unwrap();
    let held_name = unique_name("stopped-held");
    let held = c.try_acquire(&held_name).unwrap();
    let stopped = &masters.masters()[0];
    stopped.pause();
    for i in 0..20 {
        let name = unique_name("stopped-new");
        let started = Instant::now();
        let lock = c
            .try_acquire(&name)
            .unwrap_or_else(|e| panic!("acquire {i} with one master stopped: {e}"));
        // Nothing waits on the stopped master for longer than its timeouts.
        assert!(started.elapsed() < CONNECT_TIMEOUT + READ_TIMEOUT + MARGIN);
        lock.release().unwrap();
    }
    thread::sleep(LEASE * 3);
    assert!(held.is_held() && !held.is_lost(), "renewal lost the lock");
    stopped.resume();
    held.release().unwrap();
    // Acquires are granted by all three again (the resumed master answers once it rests no
    // more).
    let name = unique_name("resumed");
    assert!(eventually(MARGIN, || {
        let lock = c.try_acquire(&name).unwrap();
        let all = holding(&masters, &lock, &name) == 3;
        lock.release().unwrap();
        all
    }));
}

/// A round reads the masters' replies as they arrive: a master stopped while it had never failed
/// (so it is the first the round would read in turn) costs no read timeout when the other two
/// decide the outcome without it.
#[test]
fn a_stopped_master_is_not_waited_for_once_the_others_decide() {
    let masters = RedlockMasters::start(3);
    let read_timeout = Duration::from_secs(10);
    let c = fast(&masters)
        .read_timeout(read_timeout)
        .write_timeout(read_timeout)
        .build()
        .unwrap();
    // Connections to every master exist before the stop, so that nothing is refused.
    c.try_acquire(unique_name("warm"))
        .unwrap()
        .release()
        .unwrap();
    masters.masters()[0].pause();
    let name = unique_name("first-read-stopped");
    let (lock, took) = timed(|| c.try_acquire(&name));
    let lock = lock.unwrap_or_else(|e| panic!("acquire with master 0 stopped: {e}"));
    assert!(
        took < read_timeout / 2,
        "the acquire waited {took:?} for the stopped master"
    );
    let (released, took) = timed(|| lock.release());
    released.unwrap();
    assert!(
        took < read_timeout / 2,
        "the release waited {took:?} for the stopped master"
    );
    masters.masters()[0].resume();
}

#[test]
fn two_of_three_down_acquire_fails_with_every_masters_answer() {
    let masters = RedlockMasters::start(3);
    let m = masters.masters();
    let c = fast(&masters).build().unwrap();
    let held_name = unique_name("minority");
    let held = c.try_acquire(&held_name).unwrap();
    let lost = Arc::new(AtomicBool::new(false));
    let told = lost.clone();
    held.on_lost(move |_| told.store(true, Ordering::SeqCst));
    m[0].kill();
    m[2].pause();

    // A single attempt: a connection error naming both, and how many granted.
    let name = unique_name("down");
    let e = c.try_acquire(&name).unwrap_err();
    println!("try_acquire with two of three masters down: {e}");
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("1 of 3 masters granted it (2 needed)"),
        "{msg}"
    );
    assert!(msg.contains("unreachable"), "{msg}");
    for down in [&m[0], &m[2]] {
        assert!(msg.contains(&format!("{}/0", down.addr())), "{msg}");
    }
    assert!(
        !exists(&mut m[1].conn(), &name),
        "the partial grant was left"
    );

    // A waiting acquire of a free lock: nothing to wait for, the same error at once.
    let (r, took) = timed(|| c.acquire(&name, Duration::from_secs(1)));
    let e = r.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Connection, "{e}");
    assert!(took < Duration::from_secs(1) + MARGIN);

    // A waiting acquire of the held lock waits for its release, then times out within its
    // bound, saying who holds it and who is unreachable.
    let wait = Duration::from_millis(800);
    let (r, took) = timed(|| c.acquire(&held_name, wait));
    let e = r.unwrap_err();
    println!("acquire of a held lock with two of three masters down: {e}");
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    assert!(took >= wait && took < wait + MARGIN, "{took:?}");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("held by another owner on {}/0", m[1].addr())),
        "{msg}"
    );
    assert!(msg.contains(&format!("{}/0", m[0].addr())), "{msg}");

    // The held lock's renewal reaches only one master: it is lost once its validity runs out.
    assert!(
        eventually(MARGIN, || held.is_lost()),
        "a lock renewed by a minority was kept"
    );
    assert!(lost.load(Ordering::SeqCst), "on_lost was not called");

    // Back: locking works again.
    m[2].resume();
    m[0].restart();
    let name = unique_name("back");
    assert!(eventually(MARGIN, || c
        .try_acquire(&name)
        .is_ok_and(|l| l.release().is_ok())));
}

/// docs/topologies.md's advice for a master without persistence: restart it only after the longest
/// lease has passed. A lock held meanwhile keeps its majority on the other two masters, is set
/// again on the restarted one by its renewal, and no second client ever gets a majority: not
/// while the master is empty, nor after a second master is restarted empty in turn.
#[test]
fn a_master_restarted_empty_gives_no_second_holder() {
    let masters = RedlockMasters::start(3);
    let m = masters.masters();
    let holder = fast(&masters).build().unwrap();
    let other = fast(&masters).build().unwrap();
    let name = unique_name("restarted");
    let lock = holder.try_acquire(&name).unwrap();
    let attempts = AtomicU64::new(0);
    let second_holder = Mutex::new(None);
    let contend = |until: Instant| {
        while Instant::now() < until {
            attempts.fetch_add(1, Ordering::Relaxed);
            match other.try_acquire(&name) {
                Ok(l) => {
                    *second_holder.lock().unwrap() = Some(l.owner_token().to_owned());
                    let _ = l.release();
                }
                Err(e) => assert!(
                    e.is_held() || e.is_connection(),
                    "unexpected error from the second client: {e}"
                ),
            }
            thread::sleep(Duration::from_millis(20));
        }
    };
    for (round, restarted) in [&m[0], &m[1]].into_iter().enumerate() {
        restarted.kill();
        // Down for longer than the longest lease, the second client trying all along.
        contend(Instant::now() + LEASE + LEASE / 2);
        restarted.restart();
        assert!(
            !exists(&mut restarted.conn(), &name),
            "the restart was not empty"
        );
        // Empty and back: the second client keeps trying while the holder renews.
        contend(Instant::now() + LEASE * 2);
        assert!(
            eventually(MARGIN, || holding(&masters, &lock, &name) == 3),
            "round {round}: the holder's renewal did not set the lock on the restarted master"
        );
        assert!(
            lock.is_held() && !lock.is_lost(),
            "round {round}: lock lost"
        );
    }
    assert_eq!(
        *second_holder.lock().unwrap(),
        None,
        "a second client got a majority ({} attempts)",
        attempts.load(Ordering::Relaxed)
    );
    lock.release().unwrap();
    other.try_acquire(&name).unwrap().release().unwrap();
}

#[test]
fn fencing_and_min_replicas_are_refused() {
    let masters = RedlockMasters::start(3);
    let e = Client::builder(&masters.url())
        .fencing(true)
        .build()
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("fencing"), "{e}");
    let e = Client::builder(&masters.url())
        .min_replicas(1)
        .build()
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    let c = Client::open(&masters.url()).unwrap();
    let e = c.lock("fenced").fencing(true).try_acquire().unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("not ordered"), "{e}");
    let e = c
        .lock("fenced")
        .fencing(true)
        .acquire(Duration::from_secs(1))
        .unwrap_err();
    assert!(e.is_invalid_argument(), "{e}");
    // Nothing was written anywhere.
    for m in masters.masters() {
        let n: i64 = redis::cmd("DBSIZE").query(&mut m.conn()).unwrap();
        assert_eq!(n, 0);
    }
}

#[test]
fn redlock_urls_are_checked() {
    let bad = |url: &str, says: &str| {
        let e = Client::open(url).unwrap_err();
        assert!(e.is_invalid_argument(), "{url}: {e}");
        assert!(e.to_string().contains(says), "{url}: {e}");
        assert!(!e.to_string().contains("s3cret"), "{url}: {e}");
    };
    let odd = "an odd number of at least 3";
    bad("redlock://h1:1,h2:2", odd);
    bad("redlock://h1:1", odd);
    bad("redlock://h1:1,h2:2,h3:3,h4:4", odd);
    bad("redlock://u:s3cret@h1:1,h1:1,h2:2", "named twice");
    bad("redlock://h1:1,h2,h3:3", "host:port");
    bad("redlock://h1:1,:2,h3:3", "host:port");
    bad("redlock://h1:1,h2:0,h3:3", "host:port");
    bad("redlock://h1:1,h2:2,h3:3#x", "fragment");
    assert!(Client::open("redlock://u:s3cret@h1:1,h2:2,h3:3/2").is_ok());
    assert!(Client::open("redlock://h1:1,h2:2,h3:3,h4:4,h5:5").is_ok());
    let c = Client::open("redlock://u:s3cret@h1:1,h2:2,h3:3/2").unwrap();
    assert!(!format!("{c:?}").contains("s3cret"));
}

#[test]
fn a_waiter_retries_soon_when_the_masters_are_split() {
    let masters = RedlockMasters::start(3);
    let m = masters.masters();
    let c = rechecks_far_apart(&masters);
    let name = unique_name("split");
    // Two other attempts split the masters (one key each, the third master free): nobody holds
    // a majority, and when they give up they clear their keys without waking anyone.
    for (server, token) in [(&m[0], "attempt-a"), (&m[1], "attempt-b")] {
        let () = redis::cmd("SET")
            .arg(&name)
            .arg(token)
            .arg("PX")
            .arg(60_000)
            .query(&mut server.conn())
            .unwrap();
    }
    let waiter = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || c.acquire(&name, Duration::from_secs(30)))
    };
    // The waiter has tried (its mark is there) and keeps retrying while the split lasts.
    let wanted = format!("{{{name}}}:wanted");
    assert!(eventually(MARGIN, || exists(&mut m[2].conn(), &wanted)));
    thread::sleep(Duration::from_millis(300));
    assert!(!waiter.is_finished());
    // Its attempts set the key on the free master for a moment and clear it at once when no
    // majority follows: at any instant one may be in flight, but none stays.
    assert!(
        eventually(Duration::from_secs(2), || !exists(&mut m[2].conn(), &name)),
        "the partial grant was left"
    );
    let cleared = Instant::now();
    for server in &m[..2] {
        let _: i64 = redis::cmd("DEL")
            .arg(&name)
            .query(&mut server.conn())
            .unwrap();
    }
    let got = waiter.join().unwrap().expect("the waiter got no lock");
    let took = cleared.elapsed();
    println!("a waiter took a split lock {took:?} after the keys were cleared");
    // Its back-off is at most 512 ms (it doubles while the split lasts); its re-check 120 s.
    assert!(took < MARGIN, "{took:?}");
    assert_eq!(holding(&masters, &got, &name), 3);
    got.release().unwrap();
}

#[test]
fn a_woken_waiter_has_its_turn_even_when_it_is_slow_to_take_it() {
    let masters = RedlockMasters::start(3);
    let c = rechecks_far_apart(&masters);
    let name = unique_name("turn");
    let lock = c.lock(&name).auto_renew(false).try_acquire().unwrap();
    // This process wants the lock too (its short wait runs out): the name counts as contended
    // here, so its next acquire goes straight to a waiter's attempt.
    let e = c.acquire(&name, Duration::from_millis(20)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    // A waiter that is woken but slow to try: it marks the lock wanted and takes the wake-up
    // off the wake list, then does nothing (a plain client in BLPOP on every master; the
    // release wakes the one on the name's home master).
    let (wanted, wake) = (format!("{{{name}}}:wanted"), format!("{{{name}}}:wake"));
    let slow: Vec<_> = masters
        .masters()
        .iter()
        .map(|m| {
            let mut con = m.conn();
            con.set_read_timeout(Some(MARGIN)).unwrap();
            let () = redis::cmd("SET")
                .arg(&wanted)
                .arg(1)
                .arg("PX")
                .arg(10_000)
                .query(&mut con)
                .unwrap();
            let wake = wake.clone();
            thread::spawn(move || {
                redis::cmd("BLPOP")
                    .arg(&wake)
                    .arg(3)
                    .query::<Option<(String, String)>>(&mut con)
                    .unwrap()
                    .is_some()
            })
        })
        .collect();
    assert!(eventually(MARGIN, || masters
        .masters()
        .iter()
        .all(blocked_in_blpop)));
    lock.release().unwrap();
    // The lock is free, but it is the woken waiter's turn: nobody else gets it meanwhile.
    let e = c.acquire(&name, Duration::from_millis(20)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WaitTimeout, "{e}");
    // A woken waiter that never comes holds the others up for its turn only (50 ms).
    let started = Instant::now();
    c.acquire(&name, MARGIN).unwrap().release().unwrap();
    println!("acquired {:?} later", started.elapsed());
    let woken = slow
        .into_iter()
        .map(|t| t.join().unwrap())
        .filter(|w| *w)
        .count();
    assert_eq!(woken, 1, "one wake-up, on the home master");
}

/// Whether a client of `server` is blocked in BLPOP now.
fn blocked_in_blpop(server: &RedisServer) -> bool {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut server.conn())
        .unwrap();
    list.lines().any(|l| l.contains("cmd=blpop"))
}

/// How a master goes away in the tests below.
#[derive(Clone, Copy, Debug)]
enum Away {
    /// SIGSTOP: connections stay open, nothing answers.
    Stopped,
    /// Killed: connections are refused.
    Killed,
}

fn go_away(server: &RedisServer, how: Away) {
    match how {
        Away::Stopped => server.pause(),
        Away::Killed => server.kill(),
    }
}

/// A waiter blocked on the lock's home master when that master goes away moves to another
/// master (within its read timeout), and the release wakes it there: its re-check is 120 s
/// away.
fn a_waiter_whose_home_master_goes_away_is_woken_elsewhere(how: Away) {
    let masters = RedlockMasters::start(3);
    let c = fast(&masters)
        .recheck_interval(Duration::from_secs(120))
        .build()
        .unwrap();
    let name = unique_name("homeless");
    let lock = c
        .lock(&name)
        .auto_renew(false)
        .lease(Duration::from_secs(60))
        .try_acquire()
        .unwrap();
    let waiter = {
        let (c, name) = (c.clone(), name.clone());
        thread::spawn(move || {
            let got = c.acquire(&name, Duration::from_secs(60));
            (got, Instant::now())
        })
    };
    // The waiter blocks on one master, its home.
    let mut home = None;
    assert!(eventually(MARGIN, || {
        home = masters.masters().iter().position(blocked_in_blpop);
        home.is_some()
    }));
    let home = home.unwrap();
    go_away(&masters.masters()[home], how);
    // It finds out within its read timeout (and a short slack), and blocks on another master.
    let moved = masters
        .masters()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != home)
        .map(|(_, m)| m);
    let moved: Vec<&RedisServer> = moved.collect();
    assert!(
        eventually(MARGIN, || moved.iter().any(|m| blocked_in_blpop(m))),
        "the waiter did not move to another master"
    );
    let released = Instant::now();
    lock.release().unwrap();
    let (got, at) = waiter.join().unwrap();
    let got = got.expect("the waiter never got the lock");
    let after = at.saturating_duration_since(released);
    println!("{how:?} home master: granted {after:?} after the release");
    assert!(
        after < Duration::from_secs(5),
        "granted {after:?} after the release"
    );
    assert!(got.is_held());
    assert_eq!(holding(&masters, &got, &name), 2);
    got.release().unwrap();
    if let Away::Stopped = how {
        masters.masters()[home].resume();
    }
}

#[test]
fn a_waiter_whose_home_master_is_stopped_is_woken_elsewhere() {
    a_waiter_whose_home_master_goes_away_is_woken_elsewhere(Away::Stopped);
}

#[test]
fn a_waiter_whose_home_master_is_killed_is_woken_elsewhere() {
    a_waiter_whose_home_master_goes_away_is_woken_elsewhere(Away::Killed);
}

/// A master stopped while a lock is taken and given up: the key must not stay there once it
/// answers again, not a lease later (it would refuse everyone there for 30 s, and a second master
/// stopped meanwhile would leave no majority). Either the `SET` it was sent never runs (the
/// connection given up on was closed with a reset, which discards what the stopped server had
/// not read), or it runs when the master continues and the release it missed is done then.
#[test]
fn a_master_back_from_a_stop_forgets_a_lock_given_up_meanwhile() {
    let masters = RedlockMasters::start(3);
    let m = masters.masters();
    let c = fast(&masters).build().unwrap();
    let name = unique_name("owed");
    m[0].pause();
    let lock = c
        .lock(&name)
        .lease(Duration::from_secs(30))
        .auto_renew(false)
        .try_acquire()
        .expect("two of three masters grant it");
    lock.release().unwrap();
    m[0].resume();
    let resumed = Instant::now();
    // Nothing has asked it anything since: if the SET was still to be run, it is now.
    let ran = eventually(Duration::from_millis(500), || {
        exists(&mut m[0].conn(), &name)
    });
    println!(
        "the stopped master {} the SET it was sent",
        if ran { "ran" } else { "never ran" }
    );
    let other = unique_name("other");
    assert!(
        eventually(MARGIN, || {
            if let Ok(l) = c.try_acquire(&other) {
                let _ = l.release();
            }
            !exists(&mut m[0].conn(), &name)
        }),
        "the key given up stayed on the master that was stopped"
    );
    println!("deleted {:?} after the master continued", resumed.elapsed());
    assert!(resumed.elapsed() < Duration::from_secs(20));
}

/// A c8 race on one name while each master in turn is stopped (SIGSTOP) for a while: no two
/// holders ever overlap, and waiters are granted during every stop (their re-check is 120 s
/// away: only releases wake them).
#[test]
fn each_master_stopped_in_turn_under_a_race() {
    const THREADS: usize = 8;
    const STOP: Duration = Duration::from_millis(1500);
    let masters = RedlockMasters::start(3);
    let c = fast(&masters)
        .recheck_interval(Duration::from_secs(120))
        .build()
        .unwrap();
    let name = unique_name("stops");
    let inside = Arc::new(AtomicU64::new(0));
    let overlaps = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let grants = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let (c, name, inside, overlaps, stop, grants) = (
                c.clone(),
                name.clone(),
                inside.clone(),
                overlaps.clone(),
                stop.clone(),
                grants.clone(),
            );
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let Ok(lock) = c.acquire(&name, Duration::from_secs(30)) else {
                        continue;
                    };
                    if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    grants.lock().unwrap().push(Instant::now());
                    thread::sleep(Duration::from_millis(1));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    let _ = lock.release();
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let mut stops = Vec::new();
    for m in masters.masters() {
        let from = Instant::now();
        m.pause();
        thread::sleep(STOP);
        m.resume();
        stops.push((from, Instant::now()));
        thread::sleep(Duration::from_millis(500));
    }
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(overlaps.load(Ordering::SeqCst), 0, "holders overlapped");
    let grants = grants.lock().unwrap();
    for (i, (from, to)) in stops.iter().enumerate() {
        let during = grants.iter().filter(|g| *g >= from && *g <= to).count();
        println!("master {i} stopped {STOP:?}: {during} grants meanwhile");
        assert!(during > 0, "no grant while master {i} was stopped");
    }
}

#[test]
fn scripts_flushed_on_every_master_are_loaded_again() {
    let masters = RedlockMasters::start(3);
    let c = fast(&masters).build().unwrap();
    let name = unique_name("flushed");
    let lock = c.lock(&name).auto_renew(false).try_acquire().unwrap();
    lock.extend(LEASE).unwrap();
    for m in masters.masters() {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut m.conn())
            .unwrap();
    }
    lock.extend(LEASE).unwrap();
    for m in masters.masters() {
        let () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut m.conn())
            .unwrap();
    }
    lock.release().unwrap();
    assert_eq!(tokens(&masters, &name), vec![None, None, None]);
}

/// docs/operations.md's least-privilege ACL rule, with the three commands it adds for Redlock,
/// serves Redlock masters: acquire, wait, handover, extend, renewal and release with a user
/// limited to the `app:` prefix.
#[test]
fn the_readme_acl_rule_is_enough() {
    let masters = RedlockMasters::start(3);
    for m in masters.masters() {
        let () = redis::cmd("ACL")
            .arg(&[
                "SETUSER",
                "locker",
                "on",
                ">change-me",
                "resetkeys",
                "~app:*",
                "~{app:*",
                "resetchannels",
                "-@all",
                "+set",
                "+evalsha",
                "+script|load",
                "+blpop",
                "+get",
                "+pexpire",
                "+pttl",
                "+incr",
                "+del",
                "+rpush",
                "+lpop",
                "+lrem",
                "+lpos",
                "+zadd",
                "+zrem",
                "+zrange",
            ])
            .query(&mut m.conn())
            .unwrap();
    }
    let addrs: Vec<String> = masters.masters().iter().map(RedisServer::addr).collect();
    let url = format!("redlock://locker:change-me@{}", addrs.join(","));
    let c = Client::builder(&url)
        .key_prefix("app:")
        .lease(Duration::from_millis(600))
        .build()
        .unwrap();
    let lock = c.try_acquire("acl").unwrap();
    let waiter = {
        let c = c.clone();
        thread::spawn(move || c.acquire("acl", Duration::from_secs(20)))
    };
    thread::sleep(Duration::from_millis(900));
    lock.extend(Duration::from_millis(600)).unwrap();
    assert!(lock.is_held(), "renewal failed under the ACL rule");
    lock.release().unwrap();
    let got = waiter.join().unwrap().unwrap();
    got.release().unwrap();
}

/// Runs `f`, returning its result and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// A release tells the waiter it hands the lock to on the master the waiter blocks on, even when
/// the releasing process rests that master (it failed there during a stop that has just ended,
/// and its rest outlasts the stop), while the waiter's process, which did not see the stop,
/// blocks there: the push must not be skipped, or the waiter learns of its grant only when its
/// block ends (up to 400 ms), and every process waits that long for each such handover.
#[test]
fn a_release_reaches_a_waiter_blocked_on_a_master_the_releaser_rests() {
    let masters = RedlockMasters::start(3);
    let m = masters.masters();
    let name = unique_name("rested");
    let releaser = fast(&masters).build().unwrap();
    let lock = releaser
        .lock(&name)
        .auto_renew(false)
        .lease(Duration::from_secs(60))
        .try_acquire()
        .unwrap();
    // The name's home master: where a waiter blocks.
    let home = {
        let c = fast(&masters).build().unwrap();
        let name = name.clone();
        let probe = thread::spawn(move || c.acquire(&name, Duration::from_millis(600)));
        let mut home = None;
        assert!(eventually(MARGIN, || {
            home = m.iter().position(blocked_in_blpop);
            home.is_some()
        }));
        assert!(probe.join().unwrap().is_err());
        home.unwrap()
    };
    // The home master stops; the releasing client fails there again and again, so that it
    // rests it for a while after the stop (250 ms, doubling with each failure in a row).
    m[home].pause();
    let stopped = Instant::now();
    while stopped.elapsed() < Duration::from_millis(1300) {
        let _ = releaser.try_acquire(unique_name("rest"));
        thread::sleep(Duration::from_millis(20));
    }
    m[home].resume();
    // A client that saw no stop waits, and blocks on the home master.
    let waiter = {
        let c = fast(&masters)
            .recheck_interval(Duration::from_secs(120))
            .build()
            .unwrap();
        let name = name.clone();
        thread::spawn(move || {
            let got = c.acquire(&name, Duration::from_secs(30));
            (got, Instant::now())
        })
    };
    assert!(eventually(MARGIN, || blocked_in_blpop(&m[home])));
    let released = Instant::now();
    lock.release().unwrap();
    let (got, at) = waiter.join().unwrap();
    assert!(got.expect("the waiter never got the lock").is_held());
    let after = at.saturating_duration_since(released);
    println!("granted {after:?} after the release");
    assert!(
        after < Duration::from_millis(150),
        "the waiter was granted {after:?} after the release"
    );
}
