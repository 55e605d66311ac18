//! Read/write locks: any number of readers or one writer per name.
//!
//! The write lock of name N is the key N holding the writer's token, exactly like an exclusive
//! lock, so a plain `SET N token NX PX` client excludes and is excluded by a writer. While
//! readers hold N the key holds the marker `redislock readers` with the latest reader's expiry,
//! so such a client is kept out by readers too. Each reader has a lease of its own (its score in
//! `{N}:rw:r`), renewed on its own: one crashed reader holds the name only until its lease runs
//! out. Waiters queue in arrival order; a release wakes exactly the waiters that can proceed
//! (one writer, or every consecutive reader at the head of the queue), and a reader that arrives
//! after a waiting writer queues behind it, so writers are not starved. See the scripts
//! (`RW_*` in `scripts.rs`) for the details.

use std::time::{Duration, Instant};

use super::queue::{self, Mode, Queue, Signal, Step};
use super::{Kind, guard_methods, hold, other_kind};
use crate::backend::Backend;
use crate::cancel::Cancel;
use crate::client::{Client, LockOptions};
use crate::config::{check_lease, check_wait};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::{Lock, Phase};
use crate::ops;
use crate::replication;
use crate::scripts;
use crate::token::{Token, random_hex};

impl Client {
    /// The read/write lock `name`: many readers or one writer at a time, each holding its own
    /// lease (renewed like an exclusive lock's). Options (lease, auto-renewal, fencing, cancel)
    /// default to the client's, as for [`Client::lock`]; [`read`](RwLockRequest::read) and
    /// [`write`](RwLockRequest::write) then acquire, and the request can be used again.
    ///
    /// The write side is the exclusive lock of the same name: an exclusive lock or a plain
    /// `SET name token NX PX` client excludes, and is excluded by, both writers and readers.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let doc = client.rw_lock("doc:7");
    /// let r = doc.read(Duration::from_secs(5))?; // other readers may hold it too
    /// // ... read the document ...
    /// r.release()?;
    /// let w = doc.write(Duration::from_secs(5))?; // alone; waiting readers queue behind
    /// // ... rewrite it, then let readers in without a gap:
    /// let r = w.downgrade()?;
    /// r.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn rw_lock<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> RwLockRequest<'a> {
        let cfg = self.config();
        RwLockRequest {
            client: self,
            name: name.as_ref(),
            cancel: None,
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: cfg.fencing,
            },
        }
    }
}

/// A read/write lock with its lease, auto-renewal and fencing settings. Made by
/// [`Client::rw_lock`]; each [`read`](Self::read) or [`write`](Self::write) is a separate
/// acquire with these settings.
#[derive(Debug, Clone)]
#[must_use]
pub struct RwLockRequest<'a> {
    client: &'a Client,
    name: &'a [u8],
    cancel: Option<&'a Cancel>,
    opts: LockOptions,
}

impl<'a> RwLockRequest<'a> {
    /// The lease of each grant (default: the client's `lease`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.opts.lease = lease;
        self
    }
    /// Whether a renewal thread keeps each grant alive (default: the client's `auto_renew`).
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.opts.auto_renew = on;
        self
    }
    /// Whether each grant gets a fencing token (default: the client's `fencing`). Readers and
    /// writers of a name share one counter (with the exclusive lock of that name): a writer's
    /// token is larger than that of every grant before it, and every reader's token is larger
    /// than that of the writer before it; readers holding at once are not ordered among
    /// themselves.
    pub fn fencing(mut self, on: bool) -> Self {
        self.opts.fencing = on;
        self
    }
    /// Lets `cancel` end a waiting acquire from another thread ([`Error::is_cancelled`]).
    pub fn cancel_on(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Waits up to `wait` for a read lock (fails with [`Error::is_wait_timeout`]). Granted at
    /// once while readers hold the name and nobody waits; otherwise in arrival order.
    pub fn read(&self, wait: Duration) -> Result<ReadLock, Error> {
        self.acquire(false, Some(wait))
            .map(|lock| ReadLock { lock })
    }
    /// One attempt at a read lock: fails with [`Error::is_held`] when a writer holds the name
    /// or anyone waits for it.
    pub fn try_read(&self) -> Result<ReadLock, Error> {
        self.acquire(false, None).map(|lock| ReadLock { lock })
    }
    /// Waits up to `wait` for the write lock (fails with [`Error::is_wait_timeout`]).
    pub fn write(&self, wait: Duration) -> Result<WriteLock, Error> {
        self.acquire(true, Some(wait))
            .map(|lock| WriteLock { lock })
    }
    /// One attempt at the write lock: fails with [`Error::is_held`] when anyone holds the name
    /// or waits for it.
    pub fn try_write(&self) -> Result<WriteLock, Error> {
        self.acquire(true, None).map(|lock| WriteLock { lock })
    }

    fn acquire(&self, write: bool, wait: Option<Duration>) -> Result<Lock, Error> {
        let opts = &self.opts;
        check_lease(opts.lease, opts.auto_renew)?;
        if let Some(w) = wait {
            check_wait(w)?;
        }
        let keys = LockKeys::new(&self.client.config().key_prefix, self.name)?;
        let shown = keys.shown();
        if self.cancel.is_some_and(Cancel::is_cancelled) {
            return Err(Error::cancelled(&shown));
        }
        let what = if write { "a write lock" } else { "a read lock" };
        let owner = self.client.backend()?;
        let b = owner.backend();
        ops::check_kind_supported(b, what, &shown)?;
        let token = Token::new(owner.pid)?;
        let wid = random_hex::<8>(owner.pid)?;
        let waiter = RwWaiter::new(&keys, &token, &wid, write, opts);
        let kind = if write { Kind::Write } else { Kind::Read };
        let extend = || super::extend_parts(b, &kind, &keys, &token, opts.lease);
        let (grant, place) = queue::obtain(&owner, &waiter, &wid, opts, wait, self.cancel, &extend)
            .map_err(|e| other_kind(e, &shown, what))?;
        let fence = opts.fencing.then(|| grant.fences[0]);
        hold(
            &owner,
            keys,
            token,
            fence,
            place,
            opts,
            grant.lease_from,
            kind,
        )
    }
}

/// One read or write waiter's keys and queue entry.
struct RwWaiter<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    write: bool,
    fencing: bool,
    lease_ms: u64,
    /// `wid:kind:lease:fence:token`: what a release needs to grant it.
    entry: String,
    alive: Vec<u8>,
    signals: [Vec<u8>; 1],
}

impl<'a> RwWaiter<'a> {
    fn new(
        keys: &'a LockKeys,
        token: &'a Token,
        wid: &str,
        write: bool,
        opts: &LockOptions,
    ) -> RwWaiter<'a> {
        let lease_ms = opts.lease.as_millis() as u64;
        RwWaiter {
            keys,
            token,
            write,
            fencing: opts.fencing,
            lease_ms,
            entry: format!(
                "{wid}:{}:{lease_ms}:{}:{}",
                kind_arg(write),
                u8::from(opts.fencing),
                token.as_str()
            ),
            alive: keys.rw_alive(wid),
            signals: [keys.rw_signal(wid)],
        }
    }

    fn script_keys<'s>(
        &'s self,
        script: &'s redis::Script,
        readers: &'s [u8],
        queue: &'s [u8],
        fence: &'s [u8],
    ) -> redis::ScriptInvocation<'s> {
        let mut call = script.prepare_invoke();
        call.key(self.keys.lock())
            .key(fence)
            .key(readers)
            .key(queue)
            .key(&self.alive)
            .key(&self.signals[0]);
        call
    }
}

fn kind_arg(write: bool) -> &'static str {
    if write { "w" } else { "r" }
}

fn granted(reply: (i64, i64, i64)) -> Step {
    let (ok, fence, left) = reply;
    if ok == 1 {
        Step::Granted {
            fences: vec![fence.max(0) as u64],
            left_ms: left,
        }
    } else {
        Step::Queued { pttl: left }
    }
}

impl Queue for RwWaiter<'_> {
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn shown(&self) -> String {
        self.keys.shown()
    }

    fn signals(&self) -> &[Vec<u8>] {
        &self.signals
    }

    fn step(
        &self,
        c: &mut redis::Connection,
        mode: Mode,
        entry_ttl: Duration,
    ) -> redis::RedisResult<Step> {
        let (readers, queue, fence) = (
            self.keys.rw_readers(),
            self.keys.rw_queue(),
            self.keys.fence(),
        );
        let mut call = self.script_keys(&scripts::RW_ENQUEUE, &readers, &queue, &fence);
        call.arg(self.token.as_str())
            .arg(self.lease_ms)
            .arg(if self.fencing { "1" } else { "0" })
            .arg(kind_arg(self.write))
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64)
            .arg(mode.as_str());
        Ok(granted(call.invoke(c)?))
    }

    fn leave(&self, c: &mut redis::Connection) -> redis::RedisResult<Step> {
        let (readers, queue, fence) = (
            self.keys.rw_readers(),
            self.keys.rw_queue(),
            self.keys.fence(),
        );
        let mut call = self.script_keys(&scripts::RW_LEAVE, &readers, &queue, &fence);
        call.arg(self.token.as_str())
            .arg(&self.entry)
            .arg(kind_arg(self.write));
        Ok(granted(call.invoke(c)?))
    }

    fn signalled(&self, value: &[u8]) -> Signal {
        match queue::fence_of(value) {
            Some(fence) => Signal::Granted(fence),
            None => Signal::Refused(Error::internal(format!(
                "unexpected value on the signal list of a waiter for {}",
                self.keys.shown()
            ))),
        }
    }

    fn give_back(&self, b: &Backend) -> Result<(), Error> {
        release(b, self.keys, self.token, self.write).map(|_| ())
    }
}

/// Releases a read or write lock held with `token`, granting the waiters that can now proceed.
/// Returns whether it was still ours.
pub(super) fn release(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    write: bool,
) -> Result<bool, Error> {
    let released: i64 = ops::run(b, keys, |c, _| {
        scripts::RW_RELEASE
            .key(keys.lock())
            .key(keys.fence())
            .key(keys.rw_readers())
            .key(keys.rw_queue())
            .arg(token.as_str())
            .arg(kind_arg(write))
            .invoke(c)
    })?;
    Ok(released == 1)
}

/// A held read lock. Dropping it releases it (best effort); [`release`](Self::release) tells
/// whether it was still held.
#[derive(Debug)]
#[must_use = "dropping the guard releases the read lock at once"]
#[clippy::has_significant_drop]
pub struct ReadLock {
    lock: Lock,
}

impl ReadLock {
    guard_methods!();

    /// The name (without the client's key prefix).
    pub fn name(&self) -> &[u8] {
        self.lock.name()
    }

    /// The fencing token of this grant, when acquired with fencing: larger than that of the
    /// writer before it, smaller than that of the writer after it.
    pub fn fencing_token(&self) -> Option<u64> {
        self.lock.fencing_token()
    }

    /// The read lock as a plain [`Lock`] (of kind [`Kind::Read`]), as the C boundary holds
    /// every grant.
    pub(crate) fn into_lock(self) -> Lock {
        self.lock
    }
}

/// A held write lock. Dropping it releases it (best effort); [`release`](Self::release) tells
/// whether it was still held.
#[derive(Debug)]
#[must_use = "dropping the guard releases the write lock at once"]
#[clippy::has_significant_drop]
pub struct WriteLock {
    lock: Lock,
}

impl WriteLock {
    guard_methods!();

    /// The name (without the client's key prefix).
    pub fn name(&self) -> &[u8] {
        self.lock.name()
    }

    /// The fencing token of this grant, when acquired with fencing: larger than that of every
    /// earlier grant of the name.
    pub fn fencing_token(&self) -> Option<u64> {
        self.lock.fencing_token()
    }

    /// Turns the write lock into a read lock without a gap (one round trip): no writer can come
    /// in between, and the readers waiting at the head of the queue are let in at once. The read
    /// lock keeps the lease, auto-renewal and fencing token of the write lock.
    ///
    /// Fails with [`Error::is_not_held`] when the write lock was lost meanwhile. When the call
    /// fails for want of an answer, the lock (write or read) is left to its lease.
    pub fn downgrade(self) -> Result<ReadLock, Error> {
        downgrade(&self.lock).map(|lock| ReadLock { lock })
    }

    /// The write lock as a plain [`Lock`] (of kind [`Kind::Write`]), as the C boundary holds
    /// every grant.
    pub(crate) fn into_lock(self) -> Lock {
        self.lock
    }
}

/// [`WriteLock::downgrade`] of a write lock held as a plain [`Lock`] (the C boundary holds every
/// grant so; it checks the kind first). On success `lock` is no longer held (its release reports
/// it not held, and dropping it does nothing) and the read lock is returned.
pub(crate) fn downgrade(lock: &Lock) -> Result<Lock, Error> {
    let s = &lock.state;
    let shown = s.keys.shown();
    if s.pid != std::process::id() {
        return Err(Error::forked(&shown));
    }
    let (lease, place) = {
        let mut st = s.status.lock();
        if st.phase != Phase::Held {
            return Err(Error::not_held(
                &shown,
                "it was released, detached or lost already",
            ));
        }
        // From here the write lock's renewal stops, and dropping its handle does nothing.
        st.phase = Phase::Detached;
        (st.lease, st.reservation.take())
    };
    if s.auto_renew {
        s.backend.renewer.forget(s.renew_id);
        s.wake.notify_all();
    }
    let b = &s.backend;
    let sent = Instant::now();
    let downgraded: i64 = ops::run(b, &s.keys, |c, _| {
        let done: i64 = scripts::RW_DOWNGRADE
            .key(s.keys.lock())
            .key(s.keys.fence())
            .key(s.keys.rw_readers())
            .key(s.keys.rw_queue())
            .arg(s.token.as_str())
            .arg(lease.as_millis() as u64)
            .invoke(c)?;
        if done == 1 {
            replication::wait(c, &b.cfg)?;
        }
        Ok(done)
    })?;
    if downgraded != 1 {
        const GONE: &str = "its lease ran out or another owner took it over";
        s.status.lock().phase = Phase::Lost(GONE);
        return Err(Error::not_held(&shown, GONE));
    }
    s.status.lock().phase = Phase::Released;
    let opts = LockOptions {
        lease,
        auto_renew: s.auto_renew,
        fencing: s.fence.is_some(),
    };
    hold(
        &lock._owner,
        s.keys.clone(),
        s.token.clone(),
        s.fence,
        place,
        &opts,
        sent,
        Kind::Read,
    )
}
