//! Extending many grants at once (renewal): each kind of grant's EXTEND script, sent in one
//! pipeline per server, loading the scripts again if the server lost them.

use std::time::Duration;

use crate::base::config::Config;
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::pool::ConnPool;
use crate::base::replication;
use crate::base::scripts;
use crate::base::token::Token;

/// One lock to extend in [`LockStore::extend_many`](super::LockStore::extend_many).
pub(crate) struct Extension<'a> {
    pub keys: &'a LockKeys,
    pub token: &'a Token,
    pub lease: Duration,
    /// The script that extends this kind of grant (the kind of lock knows it).
    pub script: &'a dyn ExtendScript,
}

/// How a kind of grant is extended: its script and that script's keys and arguments. The store
/// sends it, pipelined with others; a Redlock store extends exclusive locks only, with its own.
pub(crate) trait ExtendScript: Sync {
    /// The script: it resets the lease if the grant is still held with the token, and replies 1
    /// when it did, 0 when the grant is no longer ours.
    fn script(&self) -> &'static redis::Script;
    /// Appends the script's number of keys, its keys and its arguments to the last command of
    /// `pipe` (its EVALSHA).
    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64);
}

/// A reference to a kind of grant extends as the kind does (so that a kind can hand itself, as
/// `&dyn ExtendScript`, to one [`Extension`]).
impl<T: ExtendScript + ?Sized> ExtendScript for &T {
    fn script(&self) -> &'static redis::Script {
        (**self).script()
    }
    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        (**self).add_args(pipe, keys, token, lease_ms)
    }
}

/// The exclusive lock's (and the write lock's) EXTEND: the lock key holds the token.
pub(crate) struct ExclusiveExtend;

impl ExtendScript for ExclusiveExtend {
    fn script(&self) -> &'static redis::Script {
        &scripts::EXTEND
    }
    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        pipe.arg(1)
            .arg(keys.lock())
            .arg(token.as_str())
            .arg(lease_ms);
    }
}

/// One pipeline of EXTENDs on `pool`: each lock's outcome (`Ok(true)` extended), or the error
/// that failed them all.
pub(crate) fn extend_pipeline<'a>(
    cfg: &Config,
    pool: &ConnPool,
    locks: impl Iterator<Item = &'a Extension<'a>> + Clone,
) -> Result<Vec<redis::RedisResult<bool>>, Error> {
    pool.run(None, |c, _| send_extends(c, cfg, locks.clone()))
}

/// Sends the EXTENDs of `locks` on `c` in one pipeline (with WAIT for `min_replicas`), loading
/// the scripts first if the server lost them; each lock's outcome.
pub(crate) fn send_extends<'a>(
    c: &mut Connection,
    cfg: &Config,
    locks: impl Iterator<Item = &'a Extension<'a>> + Clone,
) -> redis::RedisResult<Vec<redis::RedisResult<bool>>> {
    let mut loaded = false;
    loop {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for l in locks.clone() {
            pipe.cmd("EVALSHA").arg(l.script.script().get_hash());
            l.script
                .add_args(&mut pipe, l.keys, l.token, l.lease.as_millis() as u64);
        }
        let waits = replication::add_wait(&mut pipe, cfg);
        let mut replies: Vec<redis::RedisResult<i64>> = pipe.query(c)?;
        let acks = if waits { replies.pop() } else { None };
        let noscript = replies.iter().any(|r| {
            r.as_ref().is_err_and(|e| {
                e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
            })
        });
        if noscript && !loaded {
            // The server lost its scripts (a restart, SCRIPT FLUSH, a promoted replica): load
            // each one sent.
            let mut seen: Vec<&str> = Vec::new();
            for l in locks.clone() {
                let script = l.script.script();
                if !seen.contains(&script.get_hash()) {
                    seen.push(script.get_hash());
                    script.load(c)?;
                }
            }
            loaded = true;
            continue;
        }
        // Extensions count only once enough replicas acknowledged them (min_replicas). Only
        // then: when nothing was extended, each reply says why (a redirection among them; a
        // demoted master refuses WAIT too).
        if let Some(acks) = acks
            && replies.iter().any(|r| matches!(r, Ok(1)))
        {
            replication::check(acks?, cfg)?;
        }
        return Ok(replies.into_iter().map(|r| r.map(|n| n == 1)).collect());
    }
}
