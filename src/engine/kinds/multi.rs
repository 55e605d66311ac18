//! Several exclusive locks taken at once: all or none.
//!
//! A set of names is a set of exclusive locks, every key holding the set's one token, so each
//! name interoperates with exclusive locks (and plain `SET NX PX` clients) of that name. On one
//! server the whole set is taken by one script in one round trip, whatever the names' cluster
//! slots. A set never holds some names while it waits for others: it queues as an ordinary
//! waiter of the first held name, and when a release hands it that name, its re-check takes the
//! whole set if the other names are free, or passes the name straight on and queues behind the
//! next held one. Sets therefore never deadlock; the price is that a set waiting for busy names
//! can be overtaken by single-name users of its other names.
//!
//! On a Redis Cluster a script runs on one master, so a set's names must share one hash slot
//! (one `{hash tag}`); a set across slots is refused before anything is sent. (It would have to
//! be taken one slot group at a time in a fixed global order, by slot then by key, atomic within
//! each slot group only.)

use std::collections::HashSet;
use std::time::Duration;

use redis::RedisResult;

use super::{Acquiring, Fences, Rules, Signal, Waits, other_kind};
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
    [] {
        /// SET_ACQUIRE: takes every name of a set, or queues behind a held one: `set_acquire.lua`.
        static SET_ACQUIRE = [
            "lib/fence.lua", "lib/signal.lua", "lib/queue.lua", "lib/handoff.lua", "set_acquire.lua"
        ];
        /// SET_RELEASE: releases (hands over) every name of a set still ours: `set_release.lua`.
        static SET_RELEASE = [
            "lib/fence.lua", "lib/signal.lua", "lib/handoff.lua", "set_release.lua"
        ];
        /// SET_EXTEND: resets the lease of every name of a set, if all are ours: `set_extend.lua`.
        static SET_EXTEND = ["set_extend.lua"];
    }
}

/// The most names one set may hold.
pub const MAX_SET_NAMES: usize = 256;

/// The keys of a set's names, checked: 1 to [`MAX_SET_NAMES`] names, none given twice.
pub(crate) fn keys(prefix: &[u8], names: &[&[u8]]) -> Result<Vec<LockKeys>, Error> {
    if names.is_empty() {
        return Err(Error::invalid_argument("the set of lock names is empty"));
    }
    if names.len() > MAX_SET_NAMES {
        return Err(Error::invalid_argument(format!(
            "a set holds at most {MAX_SET_NAMES} names, got {}",
            names.len()
        )));
    }
    let keys = names
        .iter()
        .map(|n| LockKeys::new(prefix, n))
        .collect::<Result<Vec<_>, _>>()?;
    let mut seen = HashSet::with_capacity(keys.len());
    for k in &keys {
        if !seen.insert(k.lock()) {
            return Err(Error::invalid_argument(format!(
                "lock name {} is given twice in one set",
                k.shown()
            )));
        }
    }
    Ok(keys)
}

/// A set of exclusive locks, taken all or none: every name's keys (the first name's are the
/// held lock's own, for messages).
#[derive(Debug)]
pub(crate) struct SetRules {
    pub names: Box<[LockKeys]>,
}

impl Rules for SetRules {
    fn descriptor(&self) -> &'static Descriptor {
        &kind::SET
    }

    fn shown(&self, _keys: &LockKeys) -> String {
        shown_set(&self.names)
    }

    /// A set also needs one server to hold all its names.
    fn offered(&self, store: &dyn LockStore, _keys: &LockKeys) -> Result<(), Error> {
        let shown = &shown_set(&self.names);
        store.check(Check::Kind {
            what: self.what(),
            shown,
        })?;
        store.check(Check::OneServer {
            keys: &self.names,
            shown,
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        let wid = a.wid()?;
        Ok(Waits::Queue(Box::new(SetWaiter::new(a, &self.names, &wid))))
    }

    /// A release handed us one of the names: look again at once.
    fn signalled(&self, _keys: &LockKeys, _value: &[u8]) -> Signal {
        Signal::Recheck
    }

    fn explain(&self, e: Error, shown: &str) -> Error {
        other_kind(e, shown, "a lock")
    }

    /// SET_RELEASE: releases every name that still holds the token (each handed to its oldest
    /// waiter); still ours when all of them did.
    fn release(&self, b: &Backend, _keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        let keys = &self.names;
        let held: i64 = b.store.run(&keys[0], |c, _| {
            let mut call = SET_RELEASE.prepare_invoke();
            for k in keys.iter() {
                call.key(k.lock()).key(k.fence()).key(k.queue());
            }
            call.arg(token.as_str()).invoke(c)
        })?;
        Ok(held == keys.len() as i64)
    }

    fn fences(&self) -> Fences {
        Fences::Set(self.names.len())
    }
}

/// SET_EXTEND: every name's lease, if every key still holds the token.
impl ExtendScript for SetRules {
    fn script(&self) -> &'static redis::Script {
        &SET_EXTEND
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, _keys: &LockKeys, token: &Token, lease_ms: u64) {
        pipe.arg(self.names.len());
        for k in self.names.iter() {
            pipe.arg(k.lock());
        }
        pipe.arg(token.as_str()).arg(lease_ms);
    }
}

/// The set's names as shown in messages: the first, and how many more.
fn shown_set(keys: &[LockKeys]) -> String {
    match keys.len() {
        1 => keys[0].shown(),
        n => format!("{} (and {} more)", keys[0].shown(), n - 1),
    }
}

/// A set waiter's keys (its liveness key and signal list in every name's slot) and its queue
/// entry, which has the form of an exclusive waiter's.
struct SetWaiter<'a> {
    keys: &'a [LockKeys],
    token: &'a Token,
    fencing: bool,
    lease_ms: u64,
    /// `wid:lease:0:token`: an exclusive waiter's entry, never fenced by the handoff (the set
    /// takes its fencing tokens when it takes the whole set).
    entry: String,
    alive: Vec<Vec<u8>>,
    signals: Vec<Vec<u8>>,
}

impl<'a> SetWaiter<'a> {
    fn new(a: &Acquiring<'a>, keys: &'a [LockKeys], wid: &str) -> SetWaiter<'a> {
        let lease_ms = a.lease_ms();
        SetWaiter {
            keys,
            token: a.token,
            fencing: a.fencing,
            lease_ms,
            entry: format!("{wid}:{lease_ms}:0:{}", a.token.as_str()),
            alive: keys.iter().map(|k| k.alive(wid)).collect(),
            signals: keys.iter().map(|k| k.signal(wid)).collect(),
        }
    }

    fn call(
        &self,
        c: &mut Connection,
        mode: &str,
        entry_ttl: Duration,
    ) -> redis::RedisResult<Step> {
        let mut call = SET_ACQUIRE.prepare_invoke();
        for (i, k) in self.keys.iter().enumerate() {
            call.key(k.lock())
                .key(k.fence())
                .key(k.queue())
                .key(&self.alive[i])
                .key(&self.signals[i]);
        }
        call.arg(self.token.as_str())
            .arg(self.lease_ms)
            .arg(if self.fencing { "1" } else { "0" })
            .arg(mode)
            .arg(&self.entry)
            .arg(entry_ttl.as_millis() as u64);
        let reply: Vec<i64> = call.invoke(c)?;
        Ok(match reply.split_first() {
            Some((1, fences)) => Step::Granted {
                fence: fences.first().map_or(0, |&f| f.max(0) as u64),
                fences: fences.iter().map(|&f| f.max(0) as u64).collect(),
                left_ms: self.lease_ms as i64,
                acknowledged: false,
            },
            _ => Step::Queued {
                pttl: reply.get(1).copied().unwrap_or(0),
            },
        })
    }
}

impl Queue for SetWaiter<'_> {
    fn who(&self) -> (&LockKeys, &Token, &[Vec<u8>]) {
        (&self.keys[0], self.token, &self.signals)
    }

    fn step(&self, c: &mut Connection, mode: Mode, entry_ttl: Duration) -> RedisResult<Step> {
        self.call(c, mode.as_str(), entry_ttl)
    }

    fn leave(&self, c: &mut Connection) -> RedisResult<Step> {
        self.call(c, "leave", Duration::ZERO)
    }
}
