//! Semaphores: N permits per name, taken k at a time, each grant with its own lease.
//!
//! The semaphore named N keeps its holders in the key N, a sorted set of grants scored by their
//! expiry (with the number of permits recorded beside them), so a crashed holder's permits come
//! back when its lease runs out, and renewing a grant extends only its own lease. Waiting
//! requests are served strictly in arrival order: a request for k permits waits until k are
//! free, and later requests for fewer do not overtake it. The first user fixes N for as long as
//! anything is held or waiting; a request that says another N is refused. See the scripts
//! (`src/base/scripts/sem_*.lua`, `lib/sem.lua`).

use std::time::Duration;

use redis::RedisResult;

use super::{Acquiring, Fences, Rules, Signal, Waits, fence_of, other_kind};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::scripts::scripts;
use crate::base::token::Token;
use crate::engine::backend::Backend;
use crate::stores::extend::ExtendScript;
use crate::stores::wait::{Mode, Queue, Step};
use crate::stores::{Check, LockStore};

scripts! {
    // The design is described in `lib/sem.lua`.
    ["lib/clock.lua", "lib/signal.lua", "lib/queue.lua", "lib/sem.lua"] {
        /// SEM_ENQUEUE: take k permits if the queue lets us, else queue: `sem_enqueue.lua`.
        static SEM_ENQUEUE = ["sem_enqueue.lua"];
        /// SEM_LEAVE: a waiter whose wait ended leaves the queue: `sem_leave.lua`.
        static SEM_LEAVE = ["sem_leave.lua"];
        /// SEM_RELEASE: gives k permits back, grants the waiters that now fit: `sem_release.lua`.
        static SEM_RELEASE = ["sem_release.lua"];
    }

    [] {
        /// SEM_EXTEND: resets the lease of k permits held with a token: `sem_extend.lua`.
        static SEM_EXTEND = ["lib/clock.lua", "sem_extend.lua"];
    }
}

/// The most permits a semaphore may have. Every call of its scripts reads all its current
/// grants (at most one per permit), so a bound keeps each call short.
pub const MAX_PERMITS: u32 = 10_000;

/// Checks a request for `k` of a semaphore's `n` permits.
fn check(keys: &LockKeys, k: u32, n: u32) -> Result<(), Error> {
    if n == 0 || n > MAX_PERMITS {
        return Err(Error::invalid_argument(format!(
            "semaphore {} must have 1 to {MAX_PERMITS} permits, got {n}",
            keys.shown()
        )));
    }
    if k == 0 || k > n {
        return Err(Error::invalid_argument(format!(
            "a request for {k} permits of semaphore {}, which has {n}: ask for 1 to {n}",
            keys.shown()
        )));
    }
    Ok(())
}

/// `k` of the `n` permits of a semaphore.
#[derive(Debug)]
pub(crate) struct PermitsRules {
    pub k: u32,
    pub n: u32,
}

impl PermitsRules {
    /// A request for `k` of the `n` permits of the semaphore on `keys`, checked.
    pub(crate) fn new(keys: &LockKeys, k: u32, n: u32) -> Result<PermitsRules, Error> {
        check(keys, k, n)?;
        Ok(PermitsRules { k, n })
    }
}

impl Rules for PermitsRules {
    fn descriptor(&self) -> &'static Descriptor {
        &kind::SEMAPHORE
    }

    fn offered(&self, store: &dyn LockStore, keys: &LockKeys) -> Result<(), Error> {
        store.check(Check::Kind {
            what: "a semaphore",
            shown: &keys.shown(),
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        let wid = a.wid()?;
        Ok(Waits::Queue(Box::new(SemWaiter::new(
            a, &wid, self.k, self.n,
        ))))
    }

    fn signalled(&self, keys: &LockKeys, value: &[u8]) -> Signal {
        if value == b"mismatch" {
            return Signal::Refused(Error::invalid_argument(format!(
                "semaphore {} was set up again with another number of permits than {} while \
                 this request waited",
                keys.shown(),
                self.n
            )));
        }
        match fence_of(value) {
            Some(_) => Signal::Granted(0),
            None => Signal::Refused(Error::internal(format!(
                "unexpected value on the signal list of a waiter for {}",
                keys.shown()
            ))),
        }
    }

    fn explain(&self, e: Error, shown: &str) -> Error {
        mismatch(other_kind(e, shown, "a semaphore"), shown, self.n)
    }

    /// SEM_RELEASE: gives the permits back, granting the waiting requests that now fit, in
    /// order.
    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        super::done(&*b.store, keys, |c| {
            SEM_RELEASE
                .key(keys.lock())
                .key(kind::SEMAPHORE.keys.queue(keys))
                .arg(token.as_str())
                .arg(self.k)
                .invoke(c)
        })
    }

    fn fences(&self) -> Fences {
        Fences::None
    }
}

/// SEM_EXTEND: resets the lease of this grant alone.
impl ExtendScript for PermitsRules {
    fn script(&self) -> &'static redis::Script {
        &SEM_EXTEND
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        pipe.arg(1)
            .arg(keys.lock())
            .arg(token.as_str())
            .arg(self.k)
            .arg(lease_ms);
    }
}

/// The scripts' `PERMITS <n>` reply: the semaphore exists with another number of permits.
fn mismatch(e: Error, shown: &str, asked: u32) -> Error {
    if e.redis_code() != Some("PERMITS") {
        return e;
    }
    let msg = e.message();
    let has = msg
        .split_whitespace()
        .find_map(|w| w.parse::<u64>().ok())
        .map_or_else(|| "another number of".to_owned(), |n| n.to_string());
    Error::invalid_argument(format!(
        "semaphore {shown} has {has} permits, not {asked}: every user of a name must give the \
         same number"
    ))
}

/// One permit request's keys and queue entry.
struct SemWaiter<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    k: u32,
    n: u32,
    lease_ms: u64,
    /// `wid:k:n:lease:token`: what a release needs to grant it.
    entry: String,
    alive: Vec<u8>,
    signals: [Vec<u8>; 1],
}

impl<'a> SemWaiter<'a> {
    fn new(a: &Acquiring<'a>, wid: &str, k: u32, n: u32) -> SemWaiter<'a> {
        let lease_ms = a.lease_ms();
        SemWaiter {
            keys: a.keys,
            token: a.token,
            k,
            n,
            lease_ms,
            entry: format!("{wid}:{k}:{n}:{lease_ms}:{}", a.token.as_str()),
            alive: kind::SEMAPHORE.keys.alive(a.keys, wid),
            signals: [kind::SEMAPHORE.keys.signal(a.keys, wid)],
        }
    }
}

fn granted(reply: (i64, i64, i64)) -> Step {
    let (ok, _, left) = reply;
    if ok == 1 {
        Step::granted(0, left)
    } else {
        Step::Queued { pttl: left }
    }
}

impl SemWaiter<'_> {
    /// A call of `script` with the keys and first arguments both of the waiter's scripts take.
    fn call<'s>(&'s self, script: &'s redis::Script) -> redis::ScriptInvocation<'s> {
        let mut call = script.prepare_invoke();
        call.key(self.keys.lock())
            .key(kind::SEMAPHORE.keys.queue(self.keys))
            .key(&self.alive)
            .key(&self.signals[0])
            .arg(self.token.as_str())
            .arg(self.k);
        call
    }
}

impl Queue for SemWaiter<'_> {
    fn who(&self) -> (&LockKeys, &Token, &[Vec<u8>]) {
        (self.keys, self.token, &self.signals)
    }

    fn step(&self, c: &mut Connection, mode: Mode, entry_ttl: Duration) -> RedisResult<Step> {
        let mut call = self.call(&SEM_ENQUEUE);
        call.arg(self.n)
            .arg(self.lease_ms)
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64)
            .arg(mode.as_str());
        Ok(granted(call.invoke(c)?))
    }

    fn leave(&self, c: &mut Connection) -> RedisResult<Step> {
        let mut call = self.call(&SEM_LEAVE);
        call.arg(&self.entry);
        Ok(granted(call.invoke(c)?))
    }
}
