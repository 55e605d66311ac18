//! Release on every master, waking a waiter afterwards; the holder a majority names.

use super::round::{Answer, Request, reply};
use super::{MARK_GRACE, Masters, TURN};
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::scripts;
use crate::base::token::Token;

impl Masters {
    /// Releases on every master, then wakes a waiter if any master says there are waiters
    /// (after every master's delete, so the waiter finds them done). Returns whether the lock
    /// was ours: `false` when a majority of masters did not hold our token.
    pub(crate) fn release(&self, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        self.release_on(keys, token, &self.all(), true)
    }

    /// Deletes our key on `targets`; with `wake`, wakes waiters afterwards if some wait: on the
    /// name's home master when it answered (waiters of every version block there), and on each
    /// master that says waiters block there (those that moved while the home master was away).
    pub(super) fn release_on(
        &self,
        keys: &LockKeys,
        token: &Token,
        targets: &[usize],
        wake: bool,
    ) -> Result<bool, Error> {
        let (mark, turn, blocked) = (keys.wanted(), keys.turn(), keys.blocked());
        // A failed attempt clearing its keys gives no turn: it wakes nobody.
        let turn_ms = if wake { TURN.as_millis() as u64 } else { 0 };
        let packed = {
            let mut c = redis::cmd("EVALSHA");
            c.arg(scripts::QUORUM_RELEASE.get_hash())
                .arg(4)
                .arg(keys.lock())
                .arg(&mark)
                .arg(&turn)
                .arg(&blocked)
                .arg(token.as_str())
                .arg(turn_ms);
            c.get_packed_command()
        };
        let build = |_: usize, _: bool| Request {
            packed: packed.clone(),
            replies: 1,
            script: Some(&*scripts::QUORUM_RELEASE),
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
        let answers = self.round(targets, &build, &decided);
        let (mut released, mut not_ours, mut wanted) = (0, 0, false);
        let mut failed = Vec::new();
        let home = self.home_index(keys);
        let mut to_wake = Vec::new();
        let mut home_answered = false;
        for (i, a) in answers.into_iter().enumerate() {
            let Some(a) = a else { continue };
            // What a master that did not answer may still hold, it owes: an attempt's keys
            // (`wake` false: a clean-up), a delete it was sent, and a lock whose acquire it did
            // not answer (the SET may come after any delete). One that answered pays at once
            // (what it was sent while stopped has run by then).
            let m = &self.masters[i];
            let answered = matches!(a, Answer::Replies(_));
            if !answered && (!wake || matches!(a, Answer::Failed { sent: true, .. })) {
                m.owe(keys, token, false);
            }
            if m.released(token) && answered {
                m.pay_owed();
            }
            match reply::<i64>(a, 0, self.server(i)) {
                Ok(r) => {
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
        if wake && wanted {
            if home_answered {
                to_wake.insert(0, home);
            }
            // Best effort: a waiter that is not woken re-checks on its own.
            self.wake_on(keys, &to_wake);
        }
        if not_ours >= self.quorum() {
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
        let build = |_: usize, _: bool| Request {
            packed: packed.clone(),
            replies: 1,
            script: Some(&*scripts::QUORUM_WAKE),
        };
        self.round(targets, &build, &|_| false);
    }

    /// GET on every master: the token a majority of them hold, if any.
    pub(crate) fn holder(&self, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error> {
        let packed = redis::cmd("GET").arg(keys.lock()).get_packed_command();
        let build = |_: usize, _: bool| Request {
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
