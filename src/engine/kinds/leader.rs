//! Leader election: one campaigner of many leads an election, with an epoch that fences out
//! every earlier leader, and observers see who leads without campaigning.
//!
//! The leadership is an exclusive lock on the election's name, always fenced: the lock key holds
//! the leader's token (so a plain lock client, `inspect` and `redislock status` see it held), and
//! the name's fencing counter, incremented by every election, is the epoch (as a fencing token:
//! above it the epoch of the master that granted it on a Sentinel group or a Cluster, so it
//! stays ordered across a failover). Beside it, in the same slot, the leader key (`<base>:leader`,
//! a hash) holds what observers read: the leader's identity (given by the caller, never the
//! token), its fence and its master's epoch, with the lock key's expiry. The campaign script
//! (LEADER_CAMPAIGN) writes both in one step, and the renewal script (LEADER_EXTEND) extends
//! both; a resign (LEADER_RESIGN) deletes both.
//!
//! Every change, a new leader and a resign, is published on the election's channel
//! (`<base>:leader:ch`; SPUBLISH on a Cluster). A campaigner waits on that channel, as every
//! kind whose release publishes (`Waits::Channel`, `stores/pubsub.rs`): no queue and no handoff, so a release never has
//! to write a waiter's identity it does not know; every campaigner tries again at a change and
//! at the leader's remaining lease (a killed leader's key expires and publishes nothing), and
//! the first one in is elected, writing its own identity. Observers listen on the same channel
//! ([`wait_change`]).

use std::thread;
use std::time::{Duration, Instant};

use redis::RedisResult;

use super::{Acquiring, Rules, Waits};
use crate::base::backoff::Backoff;
use crate::base::connection::Connection;
use crate::base::error::{Error, ErrorKind};
use crate::base::grant::{Grant, fencing_token};
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::scripts::scripts;
use crate::base::token::Token;
use crate::engine::backend::Backend;
use crate::stores::LockStore;
use crate::stores::extend::ExtendScript;
use crate::stores::pubsub::{ChannelWaiter, Subscription, publish_command, sharded};
use crate::stores::wait::Step;

scripts! {
    [] {
        /// LEADER_CAMPAIGN: take the leadership if nobody leads, write who leads, publish:
        /// `leader_campaign.lua`.
        static LEADER_CAMPAIGN = ["lib/fence.lua", "leader_campaign.lua"];
        /// LEADER_RESIGN: the leader steps down and publishes: `leader_resign.lua`.
        static LEADER_RESIGN = ["leader_resign.lua"];
        /// LEADER_EXTEND: reset the lease of a leadership and its leader key: `leader_extend.lua`.
        static LEADER_EXTEND = ["leader_extend.lua"];
        /// LEADER_INFO: who leads an election now; reads only: `leader_info.lua`.
        static LEADER_INFO = ["leader_info.lua"];
    }
}

/// The longest identity a leader may give, in bytes.
pub const MAX_IDENTITY_LEN: usize = 256;

/// The leadership of one election, campaigned for with an identity.
#[derive(Debug)]
pub(crate) struct LeaderRules {
    identity: Box<str>,
}

impl LeaderRules {
    /// A campaign with `identity`, checked: not empty, at most [`MAX_IDENTITY_LEN`] bytes, UTF-8
    /// without control characters (it is shown to observers and on terminals).
    pub(crate) fn new(identity: &[u8]) -> Result<LeaderRules, Error> {
        Ok(LeaderRules {
            identity: check_identity(identity)?.into(),
        })
    }
}

/// Checks a leader's identity (see [`Leader::new`]).
pub(crate) fn check_identity(identity: &[u8]) -> Result<&str, Error> {
    if identity.is_empty() {
        return Err(Error::invalid_argument("the leader's identity is empty"));
    }
    if identity.len() > MAX_IDENTITY_LEN {
        return Err(Error::invalid_argument(format!(
            "the leader's identity is {} bytes long, more than {MAX_IDENTITY_LEN}",
            identity.len()
        )));
    }
    let Ok(id) = std::str::from_utf8(identity) else {
        return Err(Error::invalid_argument(
            "the leader's identity is not UTF-8",
        ));
    };
    if id.chars().any(char::is_control) {
        return Err(Error::invalid_argument(
            "the leader's identity holds a control character",
        ));
    }
    Ok(id)
}

/// One campaign attempt on `c`: LEADER_CAMPAIGN (`sharded`: see [`sharded`]).
fn campaign(
    sharded: bool,
    c: &mut Connection,
    keys: &LockKeys,
    token: &Token,
    lease_ms: u64,
    identity: &str,
) -> RedisResult<Step> {
    let (ours, fence, pttl): (i64, i64, i64) = LEADER_CAMPAIGN
        .key(keys.lock())
        .key(keys.fence())
        .key(leader_key(keys))
        .key(channel(keys))
        .arg(token.as_str())
        .arg(lease_ms)
        .arg(identity)
        .arg(c.epoch())
        .arg(publish_command(sharded, c))
        .invoke(c)?;
    Ok(if ours == 1 {
        Step::granted(fence.max(0) as u64, pttl)
    } else {
        Step::Queued { pttl }
    })
}

impl Rules for LeaderRules {
    fn descriptor(&self) -> &'static Descriptor {
        &kind::LEADER
    }

    /// A refusal in an election's words: another candidate leads.
    fn explain(&self, e: Error, shown: &str) -> Error {
        let lock = format!("lock {shown}");
        match e.kind() {
            ErrorKind::Held => e.reworded(
                &format!("{lock} is held by another owner"),
                &format!("election {shown} has another leader"),
            ),
            ErrorKind::WaitTimeout => e
                .reworded(&lock, &format!("the leadership of election {shown}"))
                .with_note("another candidate leads"),
            _ => super::other_kind(e, shown, self.what()),
        }
    }

    fn try_once(
        &self,
        a: &Acquiring<'_>,
        store: &dyn LockStore,
        sent: &mut bool,
    ) -> Result<Option<Grant>, Error> {
        store.attempt(a.keys, a.lease, sent, &mut |c, _| {
            campaign(
                sharded(store),
                c,
                a.keys,
                a.token,
                a.lease_ms(),
                &self.identity,
            )
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        // A campaigner waits for the leadership on the election's channel.
        let (keys, token, lease_ms) = (a.keys, a.token, a.lease_ms());
        let identity = &*self.identity;
        Ok(Waits::Channel(Box::new(ChannelWaiter {
            keys,
            channel: channel(keys),
            seed: token.as_str().as_bytes(),
            attempt: move |c: &mut Connection, _retry: bool, sharded: bool| {
                campaign(sharded, c, keys, token, lease_ms, identity)
            },
        })))
    }

    /// LEADER_RESIGN: deletes the lock key and the leader key, publishes the change.
    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        super::done(&*b.store, keys, |c| {
            LEADER_RESIGN
                .key(keys.lock())
                .key(leader_key(keys))
                .key(channel(keys))
                .arg(token.as_str())
                .arg(publish_command(sharded(&*b.store), c))
                .invoke(c)
        })
    }
}

/// LEADER_EXTEND: the lock key and the leader key together.
impl ExtendScript for LeaderRules {
    fn script(&self) -> &'static redis::Script {
        &LEADER_EXTEND
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        pipe.arg(2)
            .arg(keys.lock())
            .arg(leader_key(keys))
            .arg(token.as_str())
            .arg(lease_ms);
    }
}

/// Who leads an election now, as observers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderInfo {
    /// The identity the leader campaigned with.
    pub identity: String,
    /// Its epoch: the fencing token of its leadership, larger than every earlier leader's.
    pub epoch: u64,
    /// What was left of its lease when it was read (the leader renews it while it leads).
    pub remaining: Duration,
}

/// Who leads the election of `keys` now (`None`: nobody). Fails with an invalid-argument error
/// when the name is held, but not by a leader (a plain lock of the same name).
pub(crate) fn read(store: &dyn LockStore, keys: &LockKeys) -> Result<Option<LeaderInfo>, Error> {
    let reply: Vec<redis::Value> = store.run(keys, |c, _| {
        LEADER_INFO.key(keys.lock()).key(leader_key(keys)).invoke(c)
    })?;
    let int = |v: Option<&redis::Value>| -> Result<i64, Error> {
        match v {
            Some(redis::Value::Int(n)) => Ok(*n),
            other => Err(Error::internal(format!("LEADER_INFO replied {other:?}"))),
        }
    };
    match int(reply.first())? {
        0 => Ok(None),
        2 => Err(Error::invalid_argument(format!(
            "{} is held as a lock, not by the leader of an election",
            keys.shown()
        ))),
        _ => {
            let identity = match reply.get(1) {
                Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
                other => return Err(Error::internal(format!("LEADER_INFO replied {other:?}"))),
            };
            let fence = int(reply.get(2))?.max(0) as u64;
            let epoch = int(reply.get(3))?.max(0) as u64;
            let pttl = int(reply.get(4))?;
            Ok(Some(LeaderInfo {
                identity,
                epoch: fencing_token(epoch, fence),
                remaining: Duration::from_millis(pttl.max(0) as u64),
            }))
        }
    }
}

/// The election's hash of who leads (its identity, fence and master's epoch), with the lock
/// key's expiry: what observers read.
fn leader_key(keys: &LockKeys) -> Vec<u8> {
    keys.companion(b":leader", b"")
}

/// The channel a new leader and a resign publish on (a key of the lock's slot, as sharded
/// pub/sub on a Cluster needs).
fn channel(keys: &LockKeys) -> Vec<u8> {
    keys.companion(b":leader:ch", b"")
}

/// How long an observer without a subscription (none could be made) waits between reads.
const UNSUBSCRIBED_READS: Duration = Duration::from_millis(250);

/// Waits up to `timeout` until the election of `keys` is led by another epoch than `since`
/// (`None`: nobody led), and returns who leads then. Subscribed to the election's channel
/// before it reads (again after a subscription failed), so that no change after a read goes
/// unheard; woken by the channel, and
/// at the leader's remaining lease (a killed leader's key expires without a message), when it
/// reads again. A server that cannot serve (down, a failover) is ridden out with back-off until
/// the bound, whose end then returns its error. Fails with [`Error::is_wait_timeout`] when
/// nothing changed within `timeout`.
pub(crate) fn wait_change(
    store: &dyn LockStore,
    keys: &LockKeys,
    since: Option<u64>,
    timeout: Duration,
) -> Result<Option<LeaderInfo>, Error> {
    let started = Instant::now();
    let deadline = started + timeout;
    let left = || deadline.saturating_duration_since(Instant::now());
    let channel = channel(keys);
    let mut sub: Option<Subscription<'_>> = None;
    let mut backoff = Backoff::new(&channel);
    loop {
        if sub.is_none() {
            match Subscription::open(store, keys, &channel, sharded(store), left()) {
                Ok(s) => sub = Some(s),
                Err(e) => log::debug!("{}: observing without a subscription: {e}", keys.shown()),
            }
        }
        let now = match read(store, keys) {
            Ok(now) => now,
            Err(e) if e.is_transient() && !left().is_zero() => {
                log::debug!(
                    "{}: its server cannot serve ({e}); reading again",
                    keys.shown()
                );
                sub = None;
                thread::sleep(backoff.pause().min(left()));
                continue;
            }
            Err(e) => return Err(e),
        };
        if now.as_ref().map(|l| l.epoch) != since {
            return Ok(now);
        }
        if left().is_zero() {
            return Err(Error::nothing_within(format!(
                "the leader of election {} did not change within {} ms",
                keys.shown(),
                started.elapsed().as_millis()
            )));
        }
        let mut block = left();
        if let Some(l) = &now {
            // Read again when its lease runs out (soon, for a key without expiry: not at once).
            block = block.min(match l.remaining {
                Duration::ZERO => UNSUBSCRIBED_READS,
                r => r + Duration::from_millis(1),
            });
        }
        match sub.as_mut() {
            Some(s) => {
                if let Err(e) = s.next(block) {
                    log::debug!("{}: the subscription failed: {e}", keys.shown());
                    sub = None;
                }
            }
            None => thread::sleep(block.min(UNSUBSCRIBED_READS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_checked() {
        assert_eq!(check_identity(b"node-1").unwrap(), "node-1");
        assert_eq!(check_identity("hôte-ü".as_bytes()).unwrap(), "hôte-ü");
        let too_long = vec![b'a'; MAX_IDENTITY_LEN + 1];
        for bad in [&b""[..], &too_long, b"\xff\xfe", b"a\nb"] {
            let e = check_identity(bad).unwrap_err();
            assert!(e.is_invalid_argument(), "{e}");
        }
        assert!(check_identity(&too_long[1..]).is_ok());
    }
}
