//! Acquire: `SET NX PX` on every master at once, a grant by a majority within the lock's
//! validity, and what every master answered when there was none.

use std::cell::Cell;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::Value;

use super::keys::RedlockKeys;
use super::release::Release;
use super::round::{Answer, Part, reply_value};
use super::{Masters, failure_error, failures_text};
use crate::base::error::{Error, ErrorKind};
use crate::base::grant::{Grant, drift};
use crate::base::keys::LockKeys;
use crate::base::scripts;
use crate::base::token::Token;

/// What one master said to an acquire attempt.
enum Vote {
    /// Ours there. `kept`: the key held our token already (a release handed the lock over to
    /// us there, or an earlier try of the round set it).
    Granted {
        kept: bool,
    },
    /// Another owner holds the key there; its remaining lifetime in ms (-1: no expiry, -2:
    /// not known), and its token when the master said it.
    Refused(i64, Option<Vec<u8>>),
    Failed(Error),
}

/// A queued waiter's attempt (`wait.rs`): it also queues the waiter on every master it is
/// refused by, and marks the lock as wanted for older versions' releasers.
pub(crate) struct Queued<'a> {
    /// How long the marks and the queue entry live at least.
    pub ttl: Duration,
    /// The master the waiter blocks on next.
    pub blocks_on: usize,
    /// The waiter's id and its entry key (`LockKeys::alive`).
    pub wid: &'a str,
    pub entry: &'a [u8],
    /// Its place in every master's queue: when it first queued, in µs of its clock.
    pub place: u64,
    /// The number of this round (a release says which round's entry it handed the lock to).
    pub round: u64,
    /// Until when the entry lives, in Unix ms of the waiter's clock.
    pub until: u64,
    /// A release's wake-up woke this waiter (an older version's release): it takes its turn.
    pub woken: bool,
    /// Filled in by the attempt, one bit per master: the masters it was sent to (where the
    /// waiter may be queued now), and those that answered.
    pub sent: Cell<u64>,
    pub answered: Cell<u64>,
}

/// What an acquire attempt got.
pub(crate) enum Attempt {
    Granted(Grant),
    Refused(Tally),
}

/// What the masters said to an acquire attempt that did not get the lock, for its error.
pub(crate) struct Tally {
    masters: usize,
    granted: usize,
    /// Masters where another owner holds the key, with its remaining lifetime in ms.
    refused: Vec<(usize, i64)>,
    /// The other owners' tokens the refusing masters named (a waiter's attempt asks for them).
    holders: Vec<Vec<u8>>,
    failed: Vec<(usize, Error)>,
    /// How many of `failed` rest (they failed lately and were not asked this time).
    resting: usize,
    /// Granted by a majority, but only after the lock's validity had run out (the time taken).
    late: Option<Duration>,
    /// The validity the grant had to come within.
    validity: Duration,
    servers: Vec<String>,
    /// The attempt cleared keys that may have held a handover to us (kept from before, or a
    /// master that did not answer): a grant pushed for this round or an earlier one is not to be
    /// trusted (`wait.rs`).
    pub(crate) cleared_handover: bool,
}

impl Masters {
    /// One acquire attempt on every master: a queued waiter's (`waiter`: it learns how long the
    /// refusing masters' keys live and who holds them, and is queued on each), otherwise the
    /// plain `SET NX PX`.
    pub(crate) fn attempt(
        &self,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
        waiter: Option<&Queued<'_>>,
    ) -> Result<Attempt, Error> {
        let ms = lease.as_millis() as u64;
        let (mark, turn, blocked, queue) = (
            keys.wanted(),
            keys.turn(),
            keys.blocked(),
            keys.redlock_queue(),
        );
        let set = {
            let mut c = redis::cmd("SET");
            c.arg(keys.lock())
                .arg(token.as_str())
                .arg("NX")
                .arg("PX")
                .arg(ms);
            c.get_packed_command()
        };
        // A retry (the connection had dropped) uses the script, which also accepts the key
        // holding our token already: the first SET may have been applied.
        let build = |i: usize, retry: bool| {
            let mut c = redis::cmd("EVALSHA");
            let Some(w) = waiter else {
                if !retry {
                    return Part {
                        packed: set.clone(),
                        replies: 1,
                        script: None,
                    };
                }
                // A plain attempt's retry takes a free lock whatever the turn, as SET NX does.
                c.arg(scripts::QUORUM_ACQUIRE.get_hash())
                    .arg(4)
                    .arg(keys.lock())
                    .arg(&mark)
                    .arg(&turn)
                    .arg(&blocked)
                    .arg(token.as_str())
                    .arg(ms)
                    .arg(0)
                    .arg("1")
                    .arg("0");
                return Part {
                    packed: c.get_packed_command(),
                    replies: 1,
                    script: Some(&*scripts::QUORUM_ACQUIRE),
                };
            };
            c.arg(scripts::QUORUM_ENQUEUE.get_hash())
                .arg(6)
                .arg(keys.lock())
                .arg(&mark)
                .arg(&turn)
                .arg(&blocked)
                .arg(&queue)
                .arg(w.entry)
                .arg(token.as_str())
                .arg(ms)
                .arg(w.ttl.as_millis().max(1) as u64)
                .arg(if w.woken { "1" } else { "0" })
                .arg(if w.blocks_on == i { "1" } else { "0" })
                .arg(w.wid)
                .arg(w.place)
                .arg(w.round)
                .arg(w.until)
                .arg(w.blocks_on);
            Part {
                packed: c.get_packed_command(),
                replies: 1,
                script: Some(&*scripts::QUORUM_ENQUEUE),
            }
        };
        let (n, q) = (self.masters.len(), self.quorum());
        let decided = |answers: &[Option<Answer>]| {
            let (mut granted, mut not) = (0, 0);
            for (i, a) in answers.iter().enumerate() {
                match a.as_ref().map(|a| vote(a, self.server(i))) {
                    Some(Vote::Granted { .. }) => granted += 1,
                    Some(_) => not += 1,
                    None => {}
                }
            }
            granted >= q || not > n - q
        };
        let validity = lease.saturating_sub(drift(lease));
        let started = Instant::now();
        let answers = self.round(&self.all(), &build, &decided);
        let elapsed = started.elapsed();
        let mut tally = Tally {
            masters: n,
            granted: 0,
            refused: Vec::new(),
            holders: Vec::new(),
            failed: Vec::new(),
            resting: 0,
            late: None,
            validity,
            servers: Vec::new(),
            cleared_handover: false,
        };
        // Where the key may be ours: granted, or the request went out but no answer came; and
        // where it held our token already.
        let (mut maybe_set, mut kept_here) = (Vec::new(), Vec::new());
        if let Some(w) = waiter {
            let bit = |i: usize| if i < 64 { 1u64 << i } else { 0 };
            let (mut sent, mut answered) = (0, 0);
            for (i, a) in answers.iter().enumerate() {
                match a {
                    Some(Answer::Replies(_)) => {
                        sent |= bit(i);
                        answered |= bit(i);
                    }
                    Some(Answer::Failed { sent: true, .. }) => sent |= bit(i),
                    _ => {}
                }
            }
            w.sent.set(sent);
            w.answered.set(answered);
        }
        for (i, a) in answers.iter().enumerate() {
            let Some(a) = a else { continue };
            match vote(a, self.server(i)) {
                Vote::Granted { kept } => {
                    tally.granted += 1;
                    if kept {
                        kept_here.push(i);
                    } else {
                        maybe_set.push(i);
                    }
                }
                Vote::Refused(pttl, holder) => {
                    tally.refused.push((i, pttl));
                    tally.holders.extend(holder);
                }
                Vote::Failed(e) => {
                    if matches!(a, Answer::Failed { sent: true, .. }) {
                        maybe_set.push(i);
                        tally.cleared_handover = true;
                    } else if matches!(a, Answer::Failed { .. })
                        && self.masters[i].resting().is_some()
                    {
                        tally.resting += 1;
                    }
                    tally.failed.push((i, e));
                }
            }
        }
        if tally.granted >= q {
            if elapsed < validity {
                // Masters that were sent the SET and did not answer may set it later: theirs
                // is deleted when the lock is released.
                for (i, a) in answers.iter().enumerate() {
                    if matches!(a, Some(Answer::Failed { sent: true, .. })) {
                        self.masters[i].owe(keys, token, true);
                    }
                }
                return Ok(Attempt::Granted(Grant {
                    fence: 0,
                    fences: Vec::new(),
                    epoch: 0,
                    lease_from: started,
                    acknowledged: true,
                }));
            }
            tally.late = Some(elapsed);
        }
        if !kept_here.is_empty() {
            // A key handed over to us on fewer masters than a majority is given back too: kept
            // while we wait, it could stand in the way of a waiter that holds the others the
            // same way (masters that named different first waiters), each waiting for the
            // other. A handover to us still under way, which this may undo, is checked by a new
            // attempt when its releaser tells us (`wait.rs`).
            maybe_set.extend(kept_here);
            tally.cleared_handover = true;
        }
        if !maybe_set.is_empty() {
            // Best effort: a key left behind expires with its lease.
            let how = match waiter {
                Some(_) => Release::WaiterCleanUp,
                None => Release::CleanUp,
            };
            let _ = self.release_on(keys, token, &maybe_set, how);
        }
        tally.servers = self.servers();
        Ok(Attempt::Refused(tally))
    }
}

impl Tally {
    /// Whether another owner holds the key on some master (so a release will come).
    pub(crate) fn held_somewhere(&self) -> bool {
        !self.refused.is_empty()
    }

    /// Whether the masters split between attempts: every refusing master named its owner, and
    /// no owner holds a majority of the masters, even counting every master asked that did not
    /// answer as its. Then no holder's release is coming (the attempts that split them all failed
    /// and cleared their keys, without waking anyone). A master that rests (it failed lately, and
    /// was not asked) is not counted: it has been stopped or down since, so an owner's key there
    /// dates from before, and that owner holds the answering masters too. Were it counted, two
    /// attempts splitting the two answering masters of three while the third is stopped would
    /// leave every waiter blocked until its re-check, with the lock free.
    pub(crate) fn split(&self) -> bool {
        let q = self.masters / 2 + 1;
        let most = self
            .holders
            .iter()
            .map(|t| self.holders.iter().filter(|u| *u == t).count())
            .max()
            .unwrap_or(0);
        self.held_somewhere()
            && self.holders.len() == self.refused.len()
            && most + self.failed.len() - self.resting < q
    }

    /// The soonest a refusing master's key expires, if any key has an expiry.
    pub(crate) fn soonest_expiry(&self) -> Option<Duration> {
        self.refused
            .iter()
            .filter(|(_, pttl)| *pttl >= 0)
            .map(|(_, pttl)| Duration::from_millis(*pttl as u64))
            .min()
    }

    /// The error of an acquire that ended with this attempt: `Held` when another owner holds the
    /// key on some master, `WaitTimeout` for a waiting acquire whose bound ran out (`waited`),
    /// else a connection error (or the masters' error reply), with what every master said.
    pub(crate) fn error(&self, name: &str, waited: Option<Duration>) -> Error {
        let q = self.masters / 2 + 1;
        let mut m = match waited {
            Some(w) => format!("lock {name} was not granted within {} ms", w.as_millis()),
            None if self.late.is_none() && self.held_somewhere() => {
                format!("lock {name} is held by another owner")
            }
            None => format!("lock {name} could not be acquired"),
        };
        let _ = write!(
            m,
            ": {} of {} masters granted it ({q} needed)",
            self.granted, self.masters
        );
        if let Some(late) = self.late {
            let _ = write!(
                m,
                ", but only after {} ms, past its validity of {} ms (lease less clock drift)",
                late.as_millis(),
                self.validity.as_millis()
            );
        }
        if self.held_somewhere() {
            let held: Vec<&str> = self
                .refused
                .iter()
                .map(|(i, _)| self.servers[*i].as_str())
                .collect();
            let _ = write!(m, "; held by another owner on {}", held.join(", "));
        }
        failures_text(&mut m, &self.failed);
        if waited.is_some() {
            return Error::quorum(ErrorKind::WaitTimeout, m, false, None);
        }
        if self.late.is_some() {
            return Error::quorum(ErrorKind::Connection, m, true, None);
        }
        if self.held_somewhere() {
            return Error::quorum(ErrorKind::Held, m, false, None);
        }
        failure_error(m, &self.failed)
    }
}

/// What an answer of the master `server` to an acquire attempt means.
fn vote(a: &Answer, server: &str) -> Vote {
    let values = match a {
        Answer::Failed { error, .. } => return Vote::Failed(error.clone()),
        Answer::Replies(values) => values,
    };
    match values.first() {
        // SET NX: OK, or nil when the key exists.
        Some(Value::Okay) => Vote::Granted { kept: false },
        Some(Value::SimpleString(s)) if s == "OK" => Vote::Granted { kept: false },
        Some(Value::Nil) => Vote::Refused(-2, None),
        Some(v) => match reply_value::<Vec<Value>>(v).as_deref() {
            Ok([Value::Int(1), Value::Int(kept)]) => Vote::Granted { kept: *kept == 1 },
            Ok([Value::Int(0), Value::Int(pttl), holder @ ..]) => Vote::Refused(
                *pttl,
                match holder {
                    [Value::BulkString(t)] => Some(t.clone()),
                    _ => None,
                },
            ),
            Ok(_) => Vote::Failed(Error::internal(format!(
                "unexpected reply from {server} to an acquire: {v:?}"
            ))),
            Err(e) => Vote::Failed(Error::from_redis(server, e)),
        },
        None => Vote::Failed(Error::internal("no reply to an acquire")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn votes() {
        let vote = |v: Value| vote(&Answer::Replies(vec![v]), "h:1/0");
        assert!(matches!(vote(Value::Okay), Vote::Granted { kept: false }));
        assert!(matches!(vote(Value::Nil), Vote::Refused(-2, None)));
        let held = Value::Array(vec![
            Value::Int(0),
            Value::Int(700),
            Value::BulkString(b"t1".to_vec()),
        ]);
        assert!(matches!(vote(held), Vote::Refused(700, Some(t)) if t == b"t1"));
        let set = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert!(matches!(vote(set), Vote::Granted { kept: false }));
        let kept = Value::Array(vec![Value::Int(1), Value::Int(1)]);
        assert!(matches!(vote(kept), Vote::Granted { kept: true }));
        assert!(matches!(vote(Value::Int(3)), Vote::Failed(_)));
    }

    fn tally(refused: &[(usize, Option<&[u8]>)]) -> Tally {
        Tally {
            masters: 3,
            granted: 0,
            refused: refused.iter().map(|(i, _)| (*i, 1000)).collect(),
            holders: refused
                .iter()
                .filter_map(|(_, t)| t.map(<[u8]>::to_vec))
                .collect(),
            failed: Vec::new(),
            resting: 0,
            late: None,
            validity: Duration::from_secs(1),
            servers: Vec::new(),
            cleared_handover: false,
        }
    }

    #[test]
    fn split_means_no_owner_holds_a_majority() {
        // One owner on two of three masters: its release will come.
        assert!(!tally(&[(0, Some(b"a")), (1, Some(b"a"))]).split());
        // Two owners, one master each (the third granted to us, or down): nobody holds it.
        assert!(tally(&[(0, Some(b"a")), (1, Some(b"b"))]).split());
        assert!(tally(&[(0, Some(b"a"))]).split());
        // A master that did not name its owner (a plain SET NX): not known.
        assert!(!tally(&[(0, Some(b"a")), (1, None)]).split());
        assert!(!tally(&[]).split());
        // One owner named by the only master that answered: the others may hold it too.
        let mut one_answered = tally(&[(0, Some(b"a"))]);
        one_answered.failed = vec![(1, Error::internal("down")), (2, Error::internal("down"))];
        assert!(!one_answered.split());
        // Two attempts, one answering master each, the third master resting (not asked): no
        // owner can hold a majority.
        let mut one_resting = tally(&[(0, Some(b"a"))]);
        one_resting.failed = vec![(2, Error::internal("stopped"))];
        assert!(!one_resting.split());
        one_resting.resting = 1;
        assert!(one_resting.split());
    }
}
