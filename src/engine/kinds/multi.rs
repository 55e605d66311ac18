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
use std::sync::Arc;
use std::time::Duration;

use redis::RedisResult;

use crate::base::connection::Connection;

use super::{Holding, QueueKind, Signal, Waiter, other_kind};
use crate::base::error::Error;
use crate::base::grant::LockOptions;
use crate::base::keys::LockKeys;
use crate::base::metrics::LockKind;
use crate::base::scripts;
use crate::base::token::{Token, random_hex};
use crate::engine::acquire;
use crate::engine::backend::{Backend, Owner};
use crate::engine::cancel::Cancel;
use crate::engine::lock::Held;
use crate::stores::Check;
use crate::stores::wait::{Mode, Queue, Step};

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

/// The set of locks on `keys`, all or none (see [`acquire`](crate::engine::acquire::acquire)):
/// the held set and, with fencing, each name's fencing token.
pub(crate) fn acquire(
    owner: &Arc<Owner>,
    keys: &[LockKeys],
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
) -> Result<(Held, Option<Vec<u64>>), Error> {
    let shown = shown_set(keys);
    acquire::check(opts, wait, cancel, || shown.clone())?;
    owner.store.check(Check::Kind {
        what: "a set of locks",
        shown: &shown,
    })?;
    owner.store.check(Check::OneServer {
        keys,
        shown: &shown,
    })?;
    let token = Token::new(owner.pid)?;
    let wid = random_hex::<8>(owner.pid)?;
    let waiter = SetWaiter::new(keys, &token, &wid, opts, shown);
    let (held, grant) = acquire::acquire(owner, &waiter, opts, wait, cancel)?;
    Ok((held, opts.fencing.then_some(grant.tokens())))
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
    shown: String,
}

impl<'a> SetWaiter<'a> {
    fn new(
        keys: &'a [LockKeys],
        token: &'a Token,
        wid: &str,
        opts: &LockOptions,
        shown: String,
    ) -> SetWaiter<'a> {
        let lease_ms = opts.lease.as_millis() as u64;
        SetWaiter {
            keys,
            token,
            fencing: opts.fencing,
            lease_ms,
            entry: format!("{wid}:{lease_ms}:0:{}", token.as_str()),
            alive: keys.iter().map(|k| k.alive(wid)).collect(),
            signals: keys.iter().map(|k| k.signal(wid)).collect(),
            shown,
        }
    }

    fn call(
        &self,
        c: &mut Connection,
        mode: &str,
        entry_ttl: Duration,
    ) -> redis::RedisResult<Step> {
        let mut call = scripts::SET_ACQUIRE.prepare_invoke();
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

impl QueueKind for SetWaiter<'_> {
    fn holding(&self) -> Holding {
        Holding::Set(self.keys.to_vec().into_boxed_slice())
    }

    fn metric(&self) -> LockKind {
        LockKind::Set
    }

    fn shown(&self) -> String {
        self.shown.clone()
    }

    fn explain(&self, e: Error) -> Error {
        other_kind(e, &self.shown, "a lock")
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

impl Waiter for SetWaiter<'_> {
    /// A release handed us one of the names: look again at once.
    fn signalled(&self, _value: &[u8]) -> Signal {
        Signal::Recheck
    }
}

/// Releases every name of the set that still holds `token` (each handed to its oldest waiter).
/// Returns whether all of them still did.
pub(super) fn release(b: &Backend, keys: &[LockKeys], token: &Token) -> Result<bool, Error> {
    let held: i64 = b.store.run(&keys[0], |c, _| {
        let mut call = scripts::SET_RELEASE.prepare_invoke();
        for k in keys {
            call.key(k.lock()).key(k.fence()).key(k.queue());
        }
        call.arg(token.as_str()).invoke(c)
    })?;
    Ok(held == keys.len() as i64)
}
