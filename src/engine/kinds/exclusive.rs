//! The exclusive lock: the key N holds the owner's token.
//!
//! One attempt is the classic `SET N token NX PX lease` (the ACQUIRE script with fencing, or to
//! repeat an attempt whose outcome was lost with a dropped connection), so a plain `SET NX PX`
//! client on the same key excludes and is excluded by this one. A waiter queues with the ENQUEUE
//! script and blocks in BLPOP on its own signal list; the holder's release hands the lock to the
//! oldest live waiter and pushes the grant onto that list (the scripts' comments say how).

use std::cell::OnceCell;
use std::sync::Arc;
use std::time::Duration;

use redis::RedisResult;

use crate::base::connection::Connection;

use super::{Holding, Kind, Signal, Waiter, Waits, fence_of, other_kind};
use crate::base::error::Error;
use crate::base::grant::LockOptions;
use crate::base::keys::LockKeys;
use crate::base::replication;
use crate::base::scripts;
use crate::base::token::{Token, random_hex};
use crate::engine::acquire;
use crate::engine::backend::{Backend, Owner};
use crate::engine::cancel::Cancel;
use crate::engine::lock::Held;
use crate::stores::LockStore;
use crate::stores::wait::{Mode, Queue, Step};

/// The exclusive lock on `keys`, held with `owner_token` or a new random token (see
/// [`acquire`](crate::engine::acquire::acquire)).
pub(crate) fn acquire(
    owner: &Arc<Owner>,
    keys: &LockKeys,
    owner_token: Option<Token>,
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
) -> Result<Held, Error> {
    acquire::check(opts, wait, cancel, || keys.shown())?;
    let token = match owner_token {
        Some(token) => token,
        None => Token::new(owner.pid)?,
    };
    let kind = Exclusive::new(keys, &token, opts.lease, opts.fencing, owner.pid);
    acquire::acquire(owner, &kind, opts, wait, cancel).map(|(held, _)| held)
}

/// An exclusive lock, as one acquire asks for it.
pub(crate) struct Exclusive<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    lease: Duration,
    fencing: bool,
    pid: u32,
    /// Made when the acquire first waits (an acquire that gets the lock at once needs none).
    waiter: OnceCell<ExclusiveWaiter<'a>>,
}

impl<'a> Exclusive<'a> {
    pub(crate) fn new(
        keys: &'a LockKeys,
        token: &'a Token,
        lease: Duration,
        fencing: bool,
        pid: u32,
    ) -> Exclusive<'a> {
        Exclusive {
            keys,
            token,
            lease,
            fencing,
            pid,
            waiter: OnceCell::new(),
        }
    }
}

impl Kind for Exclusive<'_> {
    fn keys(&self) -> &LockKeys {
        self.keys
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn try_once(
        &self,
        c: &mut Connection,
        retry: bool,
        store: &dyn LockStore,
    ) -> redis::RedisResult<Step> {
        let cfg = store.cfg();
        let ms = self.lease.as_millis() as u64;
        if self.fencing || retry {
            // The script also accepts the key holding our token already: a first SET whose
            // reply was lost may have been applied.
            let (ok, fence): (i64, i64) = scripts::ACQUIRE
                .key(self.keys.lock())
                .key(self.keys.fence())
                .arg(self.token.as_str())
                .arg(ms)
                .arg(if self.fencing { "1" } else { "0" })
                .invoke(c)?;
            if ok != 1 {
                return Ok(Step::Queued { pttl: -2 });
            }
            replication::wait(c, cfg)?;
            return Ok(Step::Granted {
                fence: fence.max(0) as u64,
                fences: Vec::new(),
                left_ms: ms as i64,
                acknowledged: true,
            });
        }
        let mut set = redis::cmd("SET");
        set.arg(self.keys.lock())
            .arg(self.token.as_str())
            .arg("NX")
            .arg("PX")
            .arg(ms);
        let taken = if cfg.min_replicas == 0 {
            let taken: Option<String> = set.query(c)?;
            taken.is_some()
        } else {
            // With min_replicas the WAIT goes in the same round trip.
            let mut pipe = redis::pipe();
            replication::add_wait(pipe.add_command(set), cfg);
            // Replies one by one: an error reply keeps its details (a MOVED's address).
            pipe.ignore_errors();
            let (taken, acks): (redis::RedisResult<Option<String>>, redis::RedisResult<i64>) =
                pipe.query(c)?;
            let taken = taken?.is_some();
            if taken {
                replication::check(acks?, cfg)?;
            }
            taken
        };
        Ok(if taken {
            Step::Granted {
                fence: 0,
                fences: Vec::new(),
                left_ms: ms as i64,
                acknowledged: true,
            }
        } else {
            Step::Queued { pttl: -2 }
        })
    }

    fn waiter(&self) -> Result<Waits<'_>, Error> {
        if let Some(w) = self.waiter.get() {
            return Ok(Waits::Queue(w));
        }
        let wid = random_hex::<8>(self.pid)?;
        let lease_ms = self.lease.as_millis() as u64;
        let w = ExclusiveWaiter {
            keys: self.keys,
            token: self.token,
            lease_ms,
            fencing: self.fencing,
            signals: [self.keys.signal(&wid)],
            alive: self.keys.alive(&wid),
            entry: queue_entry(&wid, lease_ms, self.fencing, self.token.as_str()),
        };
        Ok(Waits::Queue(self.waiter.get_or_init(|| w)))
    }

    fn holding(&self) -> Holding {
        Holding::Exclusive
    }

    /// A name held as a semaphore or as Redisson's lock (a key of another type) fails the
    /// waiter's script with WRONGTYPE: said in those words.
    fn explain(&self, e: Error) -> Error {
        other_kind(e, &self.keys.shown(), "an exclusive lock")
    }

    /// `SET NX` finds any key taken: a refused attempt of an acquire that does not wait reads
    /// the key (one more round trip; `GET`, which the least-privilege ACL has), which fails with
    /// WRONGTYPE for a name held as a semaphore or as Redisson's lock (a key of another type).
    /// The fenced attempt's script fails so there already.
    fn refused(&self, b: &Backend) -> Result<(), Error> {
        let lock = self.keys.lock();
        b.store
            .run(self.keys, |c, _| {
                redis::cmd("GET").arg(lock).query::<redis::Value>(c)
            })
            .map(drop)
            .map_err(|e| self.explain(e))
    }
}

/// An exclusive lock's waiter: its signal list, liveness key and queue entry.
pub(crate) struct ExclusiveWaiter<'a> {
    keys: &'a LockKeys,
    token: &'a Token,
    lease_ms: u64,
    fencing: bool,
    /// The list a release pushes the grant onto (and a cancel its mark).
    signals: [Vec<u8>; 1],
    /// Exists while the queue entry is valid; the waiter refreshes it on every re-check.
    alive: Vec<u8>,
    /// The queue entry: `wid:lease:fence:token`, what a release needs to hand the lock over.
    entry: String,
}

impl Queue for ExclusiveWaiter<'_> {
    fn who(&self) -> (&LockKeys, &Token, &[Vec<u8>]) {
        (self.keys, self.token, &self.signals)
    }

    /// ENQUEUE: take the lock if it is free, else queue the waiter (or refresh its entry,
    /// keeping its place).
    fn step(&self, c: &mut Connection, mode: Mode, entry_ttl: Duration) -> RedisResult<Step> {
        let (granted, fence, pttl): (i64, i64, i64) = scripts::ENQUEUE
            .key(self.keys.lock())
            .key(self.keys.fence())
            .key(self.keys.queue())
            .key(&self.alive)
            .key(&self.signals[0])
            .arg(self.token.as_str())
            .arg(self.lease_ms)
            .arg(if self.fencing { "1" } else { "0" })
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64)
            .arg(if mode == Mode::First { "0" } else { "1" })
            .invoke(c)?;
        Ok(if granted == 1 {
            Step::granted(fence.max(0) as u64, pttl)
        } else {
            Step::Queued { pttl }
        })
    }

    /// CANCEL: the waiter leaves the queue; the lock is ours if a release had handed it over.
    fn leave(&self, c: &mut Connection) -> RedisResult<Step> {
        let (ours, fence, pttl): (i64, i64, i64) = scripts::CANCEL
            .key(self.keys.lock())
            .key(self.keys.queue())
            .key(&self.alive)
            .key(&self.signals[0])
            .key(self.keys.fence())
            .arg(self.token.as_str())
            .arg(&self.entry)
            .invoke(c)?;
        Ok(if ours == 1 {
            Step::granted(fence.max(0) as u64, pttl)
        } else {
            Step::Queued { pttl }
        })
    }
}

impl Waiter for ExclusiveWaiter<'_> {
    /// A release pushes the grant's fencing token (0 without fencing).
    fn signalled(&self, value: &[u8]) -> Signal {
        Signal::Granted(fence_of(value).unwrap_or(0))
    }
}

/// A waiter's queue entry, `wid:lease:fence:token` (put together by hand: `format!` costs a few
/// thousand instructions per wait).
fn queue_entry(wid: &str, lease_ms: u64, fencing: bool, token: &str) -> String {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = lease_ms;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut e = String::with_capacity(wid.len() + token.len() + 26);
    e.push_str(wid);
    e.push(':');
    e.extend(digits[i..].iter().map(|&d| d as char));
    e.push_str(if fencing { ":1:" } else { ":0:" });
    e.push_str(token);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_entries() {
        assert_eq!(
            queue_entry("ab12", 30_000, false, "tok"),
            "ab12:30000:0:tok"
        );
        assert_eq!(queue_entry("ab12", 0, true, "t:k"), "ab12:0:1:t:k");
        assert_eq!(
            queue_entry("f", u64::MAX, true, ""),
            format!("f:{}:1:", u64::MAX)
        );
    }
}
