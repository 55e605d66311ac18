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
//! (`src/base/scripts/rw_*.lua`, `lib/rw.lua`) for the details.

use std::time::{Duration, Instant};

use redis::RedisResult;

use super::{Acquiring, Rules, Signal, Waits, fence_of};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::LockOptions;
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::replication;
use crate::base::scripts::scripts;
use crate::base::token::Token;
use crate::engine::acquire;
use crate::engine::backend::Backend;
use crate::engine::held::Held;
use crate::engine::renewable::Phase;
use crate::stores::extend::{ExclusiveExtend, ExtendScript};
use crate::stores::wait::{Mode, Queue, Step};

scripts! {
    // The design of read/write locks is described in `lib/rw.lua`.
    ["lib/clock.lua", "lib/fence.lua", "lib/signal.lua", "lib/queue.lua", "lib/rw.lua"] {
        /// RW_ENQUEUE: take the read or write lock if the queue lets us, else queue: `rw_enqueue.lua`.
        static RW_ENQUEUE = ["rw_enqueue.lua"];
        /// RW_LEAVE: a waiter whose wait ended leaves the queue: `rw_leave.lua`.
        static RW_LEAVE = ["rw_leave.lua"];
        /// RW_RELEASE: releases a read or write lock, grants what can proceed: `rw_release.lua`.
        static RW_RELEASE = ["rw_release.lua"];
        /// RW_DOWNGRADE: a held write lock becomes a read lock without a gap: `rw_downgrade.lua`.
        static RW_DOWNGRADE = ["rw_downgrade.lua"];
    }

    [] {
        /// RW_EXTEND_READ: resets one reader's lease: `rw_extend_read.lua`.
        static RW_EXTEND_READ = ["lib/clock.lua", "rw_extend_read.lua"];

    }
}

/// One side of a read/write lock: the write lock (one writer, no reader) or a read lock.
#[derive(Debug)]
pub(crate) struct RwRules {
    pub write: bool,
}

impl Rules for RwRules {
    fn descriptor(&self) -> &'static Descriptor {
        if self.write {
            &kind::WRITE
        } else {
            &kind::READ
        }
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        let wid = a.wid()?;
        Ok(Waits::Queue(Box::new(RwWaiter::new(a, &wid, self.write))))
    }

    fn signalled(&self, keys: &LockKeys, value: &[u8]) -> Signal {
        match fence_of(value) {
            Some(fence) => Signal::Granted(fence),
            None => Signal::Refused(Error::internal(format!(
                "unexpected value on the signal list of a waiter for {}",
                keys.shown()
            ))),
        }
    }

    /// RW_RELEASE: grants the waiters that can now proceed.
    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        super::done(&*b.store, keys, |c| {
            RW_RELEASE
                .key(keys.lock())
                .key(keys.fence())
                .key(kind::WRITE.keys.holders(keys))
                .key(kind::WRITE.keys.queue(keys))
                .arg(token.as_str())
                .arg(kind_arg(self.write))
                .invoke(c)
        })
    }
}

/// The write lock's EXTEND is the exclusive lock's; a reader's (RW_EXTEND_READ) resets its own
/// score in the readers' set.
impl ExtendScript for RwRules {
    fn script(&self) -> &'static redis::Script {
        if self.write {
            ExclusiveExtend.script()
        } else {
            &RW_EXTEND_READ
        }
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        if self.write {
            return ExclusiveExtend.add_args(pipe, keys, token, lease_ms);
        }
        pipe.arg(2)
            .arg(keys.lock())
            .arg(kind::WRITE.keys.holders(keys))
            .arg(token.as_str())
            .arg(lease_ms);
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
    fn new(a: &Acquiring<'a>, wid: &str, write: bool) -> RwWaiter<'a> {
        let lease_ms = a.lease_ms();
        RwWaiter {
            keys: a.keys,
            token: a.token,
            write,
            fencing: a.fencing,
            lease_ms,
            entry: format!(
                "{wid}:{}:{lease_ms}:{}:{}",
                kind_arg(write),
                u8::from(a.fencing),
                a.token.as_str()
            ),
            alive: kind::WRITE.keys.alive(a.keys, wid),
            signals: [kind::WRITE.keys.signal(a.keys, wid)],
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
        Step::granted(fence.max(0) as u64, left)
    } else {
        Step::Queued { pttl: left }
    }
}

impl Queue for RwWaiter<'_> {
    fn who(&self) -> (&LockKeys, &Token, &[Vec<u8>]) {
        (self.keys, self.token, &self.signals)
    }

    fn step(&self, c: &mut Connection, mode: Mode, entry_ttl: Duration) -> RedisResult<Step> {
        let (readers, queue, fence) = (
            kind::WRITE.keys.holders(self.keys),
            kind::WRITE.keys.queue(self.keys),
            self.keys.fence(),
        );
        let mut call = self.script_keys(&RW_ENQUEUE, &readers, &queue, &fence);
        call.arg(self.token.as_str())
            .arg(self.lease_ms)
            .arg(if self.fencing { "1" } else { "0" })
            .arg(kind_arg(self.write))
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64)
            .arg(mode.as_str());
        Ok(granted(call.invoke(c)?))
    }

    fn leave(&self, c: &mut Connection) -> RedisResult<Step> {
        let (readers, queue, fence) = (
            kind::WRITE.keys.holders(self.keys),
            kind::WRITE.keys.queue(self.keys),
            self.keys.fence(),
        );
        let mut call = self.script_keys(&RW_LEAVE, &readers, &queue, &fence);
        call.arg(self.token.as_str())
            .arg(&self.entry)
            .arg(kind_arg(self.write));
        Ok(granted(call.invoke(c)?))
    }
}

/// Turns a write lock into a read lock without a gap (the guards' `downgrade`). On success
/// `lock` is no longer held (its release reports it not held, and dropping it does nothing) and
/// the read lock is returned.
pub(crate) fn downgrade(lock: &Held) -> Result<Held, Error> {
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
    s.stop_renewal();
    let b = &s.backend;
    let sent = Instant::now();
    let downgraded: i64 = b.store.run(&s.keys, |c, _| {
        let done: i64 = RW_DOWNGRADE
            .key(s.keys.lock())
            .key(s.keys.fence())
            .key(kind::WRITE.keys.holders(&s.keys))
            .key(kind::WRITE.keys.queue(&s.keys))
            .arg(s.token.as_str())
            .arg(lease.as_millis() as u64)
            .invoke(c)?;
        if done == 1 {
            replication::wait(c, b.store.cfg())?;
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
        auto_renew: s.auto_renews(),
        fencing: s.fence.is_some(),
        at_least: None,
        at_most: None,
    };
    acquire::hold(
        &lock._owner,
        s.keys.clone(),
        s.token.clone(),
        s.fence,
        place,
        &opts,
        sent,
        Box::new(RwRules { write: false }),
    )
}
