//! Release on every master, waking a waiter afterwards; the holder a majority names.

use redis::Value;

use super::keys::RedlockKeys;
use super::round::{Answer, Extra, OnceDecided, Part, reply, reply_value};
use super::{MARK_GRACE, Masters, TURN};
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::scripts;
use crate::base::token::Token;

/// What a release on some masters is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Release {
    /// A holder's release: the lock goes to the next waiter, also on a master where the key
    /// is free (a plain attempt took and cleared it, or it expired there), so that the waiter
    /// holds every master that answers and a master that stops next leaves it a majority.
    Handover,
    /// A waiter that leaves its wait: a lock handed over to it goes on to the next waiter.
    Leave,
    /// A failed attempt clears its keys: of a plain attempt, or of a waiter, which waits on.
    CleanUp,
    WaiterCleanUp,
}

/// What one master did with a release.
enum MasterRelease {
    /// The flags of `quorum_release.lua`: released (1), wanted (2), blocked here (4).
    Flags(i64),
    /// Handed over to the waiter `wid`, queued by its round `round`; `at`: the master it
    /// blocks on. `free`: the key was free there, not ours (a holder's release hands it on).
    Handed {
        wid: Vec<u8>,
        round: u64,
        at: usize,
        free: bool,
    },
}

/// A waiter a release handed the lock to somewhere: the oldest of its rounds that the masters
/// handed the lock over by, how many masters did, and the masters they said it blocks on.
struct Handed {
    wid: Vec<u8>,
    round: u64,
    masters: usize,
    blocks_on: Vec<usize>,
}

/// The masters that were sent a round's request and did not answer, one bit each.
fn sent_unanswered(answers: &[Option<Answer>]) -> u64 {
    answers
        .iter()
        .enumerate()
        .take(64)
        .filter(|(_, a)| matches!(a, Some(Answer::Failed { sent: true, .. })))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// What master `i`'s answer to a release says.
fn said(a: &Answer, i: usize, masters: &Masters) -> Result<MasterRelease, Error> {
    match a {
        Answer::Failed { error, .. } => Err(error.clone()),
        Answer::Replies(values) => values
            .first()
            .ok_or_else(|| Error::internal("a reply is missing"))
            .and_then(|v| outcome(v).map_err(|e| Error::from_redis(masters.server(i), &e))),
    }
}

/// What a master's reply to a release says.
fn outcome(v: &Value) -> redis::RedisResult<MasterRelease> {
    if let Value::BulkString(b) = v {
        let (free, b) = match b.strip_prefix(b"+") {
            Some(rest) => (true, rest),
            None => (false, b.as_slice()),
        };
        let mut parts = b.rsplitn(3, |&c| c == b':');
        let (at, round, wid) = (parts.next(), parts.next(), parts.next());
        let number = |n: Option<&[u8]>| n.and_then(|n| std::str::from_utf8(n).ok()?.parse().ok());
        return match (number(at), number(round), wid) {
            (Some(at), Some(round), Some(wid)) => Ok(MasterRelease::Handed {
                wid: wid.to_vec(),
                round,
                at: at as usize,
                free,
            }),
            _ => Err(redis::RedisError::from((
                redis::ErrorKind::UnexpectedReturnType,
                "a handover reply without its round",
            ))),
        };
    }
    reply_value::<i64>(v).map(MasterRelease::Flags)
}

impl Masters {
    /// Releases on every master, handing the lock over to the first queued waiter, then tells
    /// that waiter, or wakes a waiter of an older version if any master says some wait. Returns
    /// whether the lock was ours: `false` when a majority of masters did not hold our token.
    pub(crate) fn release(&self, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        self.release_on(keys, token, &self.all(), Release::Handover)
    }

    /// A waiter leaves: out of every master's queue, and a lock handed over to it meanwhile goes
    /// on to the next waiter.
    pub(super) fn leave(&self, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        self.release_on(keys, token, &self.all(), Release::Leave)
    }

    /// Releases our key on `targets`. A release, or a waiter that leaves ([`Release::Handover`],
    /// [`Release::Leave`]): where the key holds our token (or, for a release, is free), it goes
    /// to the first waiter queued there (`quorum_handover.lua`), else it is deleted; afterwards
    /// the waiter is told as soon as the round is decided; the waiter a majority handed the
    /// lock to is told (pushed the grant, on the master it blocks on), a waiter that fewer handed
    /// it to is nudged to try again, and waiters of older versions are woken if some wait (on the
    /// name's home master when it answered, where waiters of every version block, and on each
    /// master that says waiters block there). A failed attempt clearing its keys only deletes.
    pub(super) fn release_on(
        &self,
        keys: &LockKeys,
        token: &Token,
        targets: &[usize],
        how: Release,
    ) -> Result<bool, Error> {
        let wake = matches!(how, Release::Handover | Release::Leave);
        let (mark, turn, blocked, queue) = (
            keys.wanted(),
            keys.turn(),
            keys.blocked(),
            keys.redlock_queue(),
        );
        let script = if wake {
            &*scripts::QUORUM_HANDOVER
        } else {
            &*scripts::QUORUM_RELEASE
        };
        let packed = {
            let mut c = redis::cmd("EVALSHA");
            c.arg(script.get_hash());
            if wake {
                c.arg(5);
            } else {
                c.arg(4);
            }
            c.arg(keys.lock()).arg(&mark).arg(&turn).arg(&blocked);
            if wake {
                c.arg(&queue);
            }
            c.arg(token.as_str());
            if wake {
                c.arg(TURN.as_millis() as u64)
                    .arg("1")
                    .arg(self.away())
                    .arg(if how == Release::Handover { "1" } else { "0" });
            } else {
                // A failed attempt clearing its keys gives no turn: it wakes nobody.
                c.arg(0);
            }
            c.get_packed_command()
        };
        let build = |_: usize, _: bool| Part {
            packed: packed.clone(),
            replies: 1,
            script: Some(script),
        };
        // Once a majority of the targets answered, a master that failed lately gets only a
        // short grace: a stopped master slows no release after the one that found it out.
        let needed = self.quorum().min(targets.len());
        let decided = |answers: &[Option<Answer>]| {
            answers
                .iter()
                .filter(|a| matches!(a, Some(Answer::Replies(_))))
                .count()
                >= needed
        };
        // The waiter a majority handed the lock to is told as soon as the round is decided
        // (once the others had a moment more), not after a stopped master's grace: with masters
        // still pending, where the lock may have been handed to it too (it owes their keys).
        let q = self.quorum();
        let mut told = false;
        let mut tell_early = |answers: &[Option<Answer>], pending: u64| {
            let handed = self.handed(&self.outcomes(answers));
            let pending = pending | sent_unanswered(answers);
            let majority = handed.iter().find(|h| h.masters >= q);
            // Not while the master it blocks on is pending: its reply is awaited on our
            // connection there, and a push there would wait as long.
            let waited = |at: usize| at < 64 && pending & (1 << at) != 0;
            if majority.is_some_and(|h| !h.blocks_on.iter().any(|&at| waited(at))) {
                self.tell(keys, &handed, pending);
                told = true;
            }
        };
        let extra = Extra {
            resting_too: false,
            once_decided: wake.then_some(&mut tell_early as OnceDecided<'_>),
        };
        let answers = self.round_with(targets, &build, &decided, extra);
        // What each master said, read once.
        let said = self.outcomes(&answers);
        let handed = self.handed(&said);
        let (mut released, mut not_ours, mut wanted) = (0, 0, false);
        let mut failed = Vec::new();
        let home = self.home_index(keys);
        let mut to_wake = Vec::new();
        let mut home_answered = false;
        // The masters that were sent the release and did not answer (each may have handed the
        // lock over before it stopped answering).
        let unanswered = sent_unanswered(&answers);
        // Masters that answered and owe deletes now that the lock is released: paid once the
        // waiter is told.
        let mut pay = Vec::new();
        for (i, (a, said)) in answers.iter().zip(said).enumerate() {
            let (Some(a), Some(said)) = (a, said) else {
                continue;
            };
            // What a master that did not answer may still hold, it owes: an attempt's keys
            // (`wake` false: a clean-up), a delete it was sent, and a lock whose acquire it did
            // not answer (the SET may come after any delete). One that answered pays at once
            // (what it was sent while stopped has run by then).
            let m = &self.masters[i];
            let answered = matches!(a, Answer::Replies(_));
            if !answered && (!wake || matches!(a, Answer::Failed { sent: true, .. })) {
                // A waiter's key there may be a handover to it by then: owed once its wait ends.
                m.owe(keys, token, how == Release::WaiterCleanUp);
            }
            if m.released(token) && answered {
                pay.push(i);
            }
            match said {
                Ok(MasterRelease::Handed { free, .. }) => {
                    released += usize::from(!free);
                    home_answered |= i == home;
                }
                Ok(MasterRelease::Flags(r)) => {
                    if r & 1 == 1 {
                        released += 1;
                    } else {
                        not_ours += 1;
                    }
                    wanted |= r & 2 == 2;
                    home_answered |= i == home;
                    if r & 4 == 4 && i != home {
                        to_wake.push(i);
                    }
                }
                Err(e) => failed.push((i, e)),
            }
        }
        let handed_over = handed.iter().any(|h| h.masters >= q);
        // Best effort: a waiter that is not told re-checks on its own, and finds the lock
        // handed over to it where it was. Told early, the others handed it on fewer masters
        // are still nudged.
        let to_tell: Vec<&Handed> = handed.iter().filter(|h| !told || h.masters < q).collect();
        if !to_tell.is_empty() {
            self.tell(keys, &to_tell, unanswered);
        }
        for i in pay {
            self.masters[i].pay_owed();
        }
        // Waiters of older versions are woken when the lock was ours and is not handed over
        // (they would find it held).
        if wake && wanted && released > 0 && !handed_over {
            if home_answered {
                to_wake.insert(0, home);
            }
            // Best effort: a waiter that is not woken re-checks on its own.
            self.wake_on(keys, &to_wake);
        }
        if not_ours >= q {
            return Ok(false);
        }
        if released > 0 || failed.is_empty() {
            return Ok(released > 0);
        }
        Err(self.op_error(
            &format!(
                "release of lock {} reached no master that held it ({} of {} did not hold it)",
                keys.shown(),
                not_ours,
                self.masters.len()
            ),
            &failed,
        ))
    }

    /// The masters this process rests (they failed lately), as `,i,j,` (empty when none): a
    /// release hands the lock to a waiter blocked elsewhere where it can
    /// (`quorum_handover.lua`).
    fn away(&self) -> String {
        let mut away = String::new();
        for (i, m) in self.masters.iter().enumerate() {
            if m.resting().is_some() {
                if away.is_empty() {
                    away.push(',');
                }
                away += &format!("{i},");
            }
        }
        away
    }

    /// What each master's answer to a release says (`None` for a master not asked).
    fn outcomes(&self, answers: &[Option<Answer>]) -> Vec<Option<Result<MasterRelease, Error>>> {
        answers
            .iter()
            .enumerate()
            .map(|(i, a)| a.as_ref().map(|a| said(a, i, self)))
            .collect()
    }

    /// The waiters the masters' outcomes of a release say they handed the lock to.
    fn handed(&self, outcomes: &[Option<Result<MasterRelease, Error>>]) -> Vec<Handed> {
        let mut handed: Vec<Handed> = Vec::new();
        for o in outcomes {
            let Some(Ok(MasterRelease::Handed { wid, round, at, .. })) = o else {
                continue;
            };
            let (round, at) = (*round, *at);
            let k = match handed.iter().position(|h| h.wid == *wid) {
                Some(k) => k,
                None => {
                    handed.push(Handed {
                        wid: wid.clone(),
                        round,
                        masters: 0,
                        blocks_on: Vec::new(),
                    });
                    handed.len() - 1
                }
            };
            let h = &mut handed[k];
            h.round = h.round.min(round);
            h.masters += 1;
            if at < self.masters.len() && !h.blocks_on.contains(&at) {
                h.blocks_on.push(at);
            }
        }
        handed
    }

    /// Tells each waiter a release handed the lock to, on the master it blocks on, as the
    /// masters that handed it over say (its queue entry names it), asked even if it rests in
    /// this process's view: another process's waiter may block there since it answers again
    /// (every master when no entry named one): the one a majority handed it to gets the grant
    /// (`g<round>:<unanswered>`: the oldest round it was handed over by, from which it counts the
    /// lease, and the masters that were sent the release and did not answer, where the lock may
    /// have been handed to it too, one bit each), the others a nudge (`n`) to try again.
    fn tell<H: std::borrow::Borrow<Handed>>(&self, keys: &LockKeys, handed: &[H], unanswered: u64) {
        let lifetime = (self.cfg.recheck_interval + MARK_GRACE).as_millis() as u64;
        let q = self.quorum();
        for h in handed {
            let h = h.borrow();
            let value = if h.masters >= q {
                format!("g{}:{unanswered}", h.round)
            } else {
                "n".to_owned()
            };
            let packed = {
                let mut c = redis::cmd("EVALSHA");
                c.arg(scripts::SIGNAL_CANCEL.get_hash())
                    .arg(1)
                    .arg(keys.signal(&String::from_utf8_lossy(&h.wid)))
                    .arg(value)
                    .arg(lifetime);
                c.get_packed_command()
            };
            let build = |_: usize, _: bool| Part {
                packed: packed.clone(),
                replies: 1,
                script: Some(&*scripts::SIGNAL_CANCEL),
            };
            if h.blocks_on.is_empty() {
                self.round(&self.all(), &build, &|_| false);
            } else {
                let extra = Extra {
                    resting_too: true,
                    once_decided: None,
                };
                self.round_with(&h.blocks_on, &build, &|_| false, extra);
            }
        }
    }

    /// Wakes one waiter of `keys`' lock on each master of `targets`: pushes a wake-up onto the
    /// lock's wake list there (best effort: a master that fails is skipped).
    pub(super) fn wake_on(&self, keys: &LockKeys, targets: &[usize]) {
        if targets.is_empty() {
            return;
        }
        let lifetime = self.cfg.recheck_interval + MARK_GRACE;
        let packed = {
            let mut c = redis::cmd("EVALSHA");
            c.arg(scripts::QUORUM_WAKE.get_hash())
                .arg(1)
                .arg(keys.wake())
                .arg(lifetime.as_millis() as u64);
            c.get_packed_command()
        };
        let build = |_: usize, _: bool| Part {
            packed: packed.clone(),
            replies: 1,
            script: Some(&*scripts::QUORUM_WAKE),
        };
        self.round(targets, &build, &|_| false);
    }

    /// GET on every master: the token a majority of them hold, if any.
    pub(crate) fn holder(&self, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error> {
        let packed = redis::cmd("GET").arg(keys.lock()).get_packed_command();
        let build = |_: usize, _: bool| Part {
            packed: packed.clone(),
            replies: 1,
            script: None,
        };
        let answers = self.round(&self.all(), &build, &|_| false);
        let mut tokens: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut failed = Vec::new();
        for (i, a) in answers.into_iter().enumerate() {
            match a.map(|a| reply::<Option<Vec<u8>>>(a, 0, self.server(i))) {
                Some(Ok(Some(t))) => match tokens.iter_mut().find(|(k, _)| *k == t) {
                    Some((_, n)) => *n += 1,
                    None => tokens.push((t, 1)),
                },
                Some(Err(e)) => failed.push((i, e)),
                _ => {}
            }
        }
        let q = self.quorum();
        let best = tokens.into_iter().max_by_key(|(_, n)| *n);
        match best {
            Some((t, n)) if n >= q => Ok(Some(t)),
            Some((_, n)) if n + failed.len() >= q => Err(self.op_error(
                &format!(
                    "the holder of lock {} is not known: {n} of {} masters name the same one",
                    keys.shown(),
                    self.masters.len()
                ),
                &failed,
            )),
            _ => Ok(None),
        }
    }
}
