//! Extend and renewal on every master: a lock stays ours while a majority extends it, and a
//! master that lost its key (restarted empty) gets it set again.

use std::time::{Duration, Instant};

use super::Masters;
use super::round::{Answer, Part, int, reply_value};
use crate::base::error::Error;
use crate::base::grant::drift;
use crate::base::keys::LockKeys;
use crate::base::scripts;
use crate::base::token::Token;
use crate::stores::extend::{ExclusiveExtend, Extension};

impl Masters {
    /// Resets the lease on every master. `Ok(true)`: a majority extended it within its validity;
    /// `Ok(false)`: it is lost (a majority no longer holds our token); an error when too few
    /// masters answered to tell, or the majority answered only after the new lease's validity.
    pub(crate) fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
    ) -> Result<bool, Error> {
        let started = Instant::now();
        let outcome = self
            .extend_many(&[Extension {
                keys,
                token,
                lease,
                script: &ExclusiveExtend,
            }])
            .pop()
            .unwrap_or_else(|| Err(Error::internal("an extend of one lock had no outcome")))?;
        let elapsed = started.elapsed();
        let validity = lease.saturating_sub(drift(lease));
        if outcome && elapsed >= validity {
            return Err(Error::connection(
                &format!("redlock masters of lock {}", keys.shown()),
                format!(
                    "a majority extended the lock only after {} ms, past the new lease's \
                     validity of {} ms",
                    elapsed.as_millis(),
                    validity.as_millis()
                ),
                true,
            ));
        }
        Ok(outcome)
    }

    /// EXTEND of many locks: one pipeline per master, sent to all at once; one outcome per lock,
    /// in order, as [`extend`](Self::extend) has it (without the validity check: renewal counts
    /// the new lease from when it sent the request). Keys found gone on a master while a majority
    /// extended them are set there again.
    pub(crate) fn extend_many(&self, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
        if locks.is_empty() {
            return Vec::new();
        }
        let packed = {
            let mut pipe = redis::pipe();
            for l in locks {
                pipe.cmd("EVALSHA")
                    .arg(scripts::QUORUM_EXTEND.get_hash())
                    .arg(1)
                    .arg(l.keys.lock())
                    .arg(l.token.as_str())
                    .arg(l.lease.as_millis() as u64);
            }
            pipe.get_packed_pipeline()
        };
        let build = |_: usize, _: bool| Part {
            packed: packed.clone(),
            replies: locks.len(),
            script: Some(&*scripts::QUORUM_EXTEND),
        };
        let q = self.quorum();
        // Decided once every lock was extended by a majority.
        let decided = |answers: &[Option<Answer>]| {
            (0..locks.len()).all(|l| {
                let extended = answers
                    .iter()
                    .flatten()
                    .filter(|a| matches!(a, Answer::Replies(v) if int(&v[l]) == Some(1)))
                    .count();
                extended >= q
            })
        };
        let answers = self.round(&self.all(), &build, &decided);
        let mut outcomes = Vec::with_capacity(locks.len());
        // Per master, the locks whose key is gone there but that a majority still holds.
        let mut reset: Vec<Vec<usize>> = self.masters.iter().map(|_| Vec::new()).collect();
        for (l, lock) in locks.iter().enumerate() {
            let (mut extended, mut gone) = (0, Vec::new());
            let mut failed = Vec::new();
            for (i, a) in answers.iter().enumerate() {
                let Some(a) = a else { continue };
                match a {
                    Answer::Replies(values) => match reply_value::<i64>(&values[l]) {
                        Ok(1) => extended += 1,
                        Ok(0) => gone.push(i),
                        Ok(_) => {}
                        Err(e) => failed.push((i, Error::from_redis(self.server(i), &e))),
                    },
                    Answer::Failed { error, .. } => failed.push((i, error.clone())),
                }
            }
            outcomes.push(if extended >= q {
                for i in gone {
                    reset[i].push(l);
                }
                Ok(true)
            } else if extended + failed.len() >= q {
                Err(self.op_error(
                    &format!(
                        "lock {} was extended by {extended} of {} masters ({q} needed)",
                        lock.keys.shown(),
                        self.masters.len()
                    ),
                    &failed,
                ))
            } else {
                Ok(false)
            });
        }
        if reset.iter().any(|r| !r.is_empty()) {
            self.set_again(locks, &reset);
        }
        outcomes
    }

    /// `SET NX PX` of locks on the masters that lost their keys (`reset[master]`: indexes into
    /// `locks`). Best effort: a master that fails is tried again at the next renewal.
    fn set_again(&self, locks: &[Extension<'_>], reset: &[Vec<usize>]) {
        let targets: Vec<usize> = (0..reset.len()).filter(|&i| !reset[i].is_empty()).collect();
        for &i in &targets {
            log::info!(
                "{} lost {} held lock(s) (restarted?): setting them there again",
                self.server(i),
                reset[i].len()
            );
        }
        let build = |i: usize, _: bool| {
            let mut pipe = redis::pipe();
            for &l in &reset[i] {
                pipe.cmd("SET")
                    .arg(locks[l].keys.lock())
                    .arg(locks[l].token.as_str())
                    .arg("NX")
                    .arg("PX")
                    .arg(locks[l].lease.as_millis() as u64);
            }
            Part {
                packed: pipe.get_packed_pipeline(),
                replies: reset[i].len(),
                script: None,
            }
        };
        let _ = self.round(&targets, &build, &|_| false);
    }
}
