//! The exclusive lock: the key N holds the owner's token.
//!
//! One attempt is the classic `SET N token NX PX lease` (the ACQUIRE script with fencing, or to
//! repeat an attempt whose outcome was lost with a dropped connection), so a plain `SET NX PX`
//! client on the same key excludes and is excluded by this one. A waiter queues with the ENQUEUE
//! script and blocks in BLPOP on its own signal list; the holder's release hands the lock to the
//! oldest live waiter and pushes the grant onto that list (the scripts' comments say how).

use std::time::Duration;

use redis::RedisResult;

use super::{Acquiring, Rules, Waits};
use crate::base::config::Config;
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::replication;
use crate::base::scripts;
use crate::base::token::Token;
use crate::engine::backend::Backend;
use crate::stores::LockStore;
use crate::stores::extend::{ExclusiveExtend, ExtendScript};
use crate::stores::wait::{Mode, Queue, Step};

/// The exclusive lock: one holder at a time.
#[derive(Debug)]
pub(crate) struct ExclusiveRules;

impl Rules for ExclusiveRules {
    fn descriptor(&self) -> &'static Descriptor {
        &kind::EXCLUSIVE
    }

    /// Every store offers it (Redlock's by majority).
    /// On Redlock's masters, their majority's own; on one server, [`set_nx`].
    fn try_once(
        &self,
        a: &Acquiring<'_>,
        store: &dyn LockStore,
        sent: &mut bool,
    ) -> Result<Option<Grant>, Error> {
        if let Some(m) = store.majority() {
            return m.try_acquire(a.keys, a.token, a.lease);
        }
        let cfg = store.cfg();
        store.attempt(a.keys, a.lease, sent, &mut |c, retry| {
            set_nx(a, c, retry, cfg)
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        let wid = a.wid()?;
        let lease_ms = a.lease_ms();
        Ok(Waits::Queue(Box::new(ExclusiveWaiter {
            keys: a.keys,
            token: a.token,
            lease_ms,
            fencing: a.fencing,
            signals: [a.keys.signal(&wid)],
            alive: a.keys.alive(&wid),
            entry: queue_entry(&wid, lease_ms, a.fencing, a.token.as_str()),
        })))
    }

    /// `SET NX` finds any key taken: a refused attempt of an acquire that does not wait reads
    /// the key (one more round trip; `GET`, which the least-privilege ACL has), which fails with
    /// WRONGTYPE for a name held by a kind whose lock key is of another type (`other_kind`).
    /// The fenced attempt's script fails so there already.
    fn refused(&self, b: &Backend, keys: &LockKeys) -> Result<(), Error> {
        let lock = keys.lock();
        b.store
            .run(keys, |c, _| {
                redis::cmd("GET").arg(lock).query::<redis::Value>(c)
            })
            .map(drop)
            .map_err(|e| self.explain(e, &keys.shown()))
    }

    /// RELEASE: frees the lock, or hands it to the oldest live waiter, if the key holds the
    /// token (on Redlock's masters, by majority).
    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        if let Some(m) = b.store.majority() {
            return m.release(keys, token);
        }
        super::done(&*b.store, keys, |c| {
            scripts::RELEASE
                .key(keys.lock())
                .key(keys.fence())
                .key(keys.queue())
                .arg(token.as_str())
                .invoke(c)
        })
    }

    fn extend(
        &self,
        b: &Backend,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
    ) -> Result<bool, Error> {
        if let Some(m) = b.store.majority() {
            return m.extend(keys, token, lease);
        }
        super::extend_on_one_server(&*b.store, self, keys, token, lease)
    }

    /// The EXTEND script (compare and PEXPIRE) with what is left of `at_least`: the key keeps
    /// our token until then and expires on its own; waiters find it free at their next re-check
    /// (on Redlock's masters, by majority, as an extend).
    fn keep(
        &self,
        b: &Backend,
        keys: &LockKeys,
        token: &Token,
        left: Duration,
    ) -> Result<bool, Error> {
        self.extend(b, keys, token, left)
    }
}

/// One attempt on one server: the classic `SET N token NX PX lease`, or the ACQUIRE script
/// with fencing or to repeat an attempt whose outcome was lost with a dropped connection.
fn set_nx(a: &Acquiring<'_>, c: &mut Connection, retry: bool, cfg: &Config) -> RedisResult<Step> {
    let ms = a.lease_ms();
    if a.fencing || retry {
        // The script also accepts the key holding our token already: a first SET whose
        // reply was lost may have been applied.
        let (ok, fence): (i64, i64) = scripts::ACQUIRE
            .key(a.keys.lock())
            .key(a.keys.fence())
            .arg(a.token.as_str())
            .arg(ms)
            .arg(if a.fencing { "1" } else { "0" })
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
    set.arg(a.keys.lock())
        .arg(a.token.as_str())
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

/// The token the lock key holds now, if any (`GET`; on Redlock's masters, a majority's).
pub(crate) fn holder(store: &dyn LockStore, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error> {
    if let Some(m) = store.majority() {
        return m.holder(keys);
    }
    store.run(keys, |c, _| redis::cmd("GET").arg(keys.lock()).query(c))
}

/// The exclusive lock's (and the write lock's) EXTEND: the lock key holds the token.
impl ExtendScript for ExclusiveRules {
    fn script(&self) -> &'static redis::Script {
        ExclusiveExtend.script()
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        ExclusiveExtend.add_args(pipe, keys, token, lease_ms)
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
