//! One round: a request written to every master's connection first, then every reply read,
//! so that a round costs about one round trip to the slowest master it needs.

use std::time::Duration;

use redis::{FromRedisValue, Script, Value};

use super::{Master, Masters};
use crate::base::error::Error;
use crate::base::pool::{mark_broken, worth_retrying};

/// How long a master's reply is waited for once the round's outcome is decided without it.
const STRAGGLER_GRACE: Duration = Duration::from_millis(20);
/// How long a master that has not failed lately is waited for once the round's outcome is
/// decided without it (at most the read timeout): a master that stops answering costs the
/// rounds in flight this, not the whole read timeout.
const DECIDED_GRACE: Duration = Duration::from_millis(200);

/// One master's part of a round: commands packed into one write, how many replies they get,
/// and the script they run (loaded again if the master answers NOSCRIPT).
pub(super) struct Request {
    pub(super) packed: Vec<u8>,
    pub(super) replies: usize,
    pub(super) script: Option<&'static Script>,
}

/// What a master answered in a round.
pub(super) enum Answer {
    /// One reply per command, error replies included.
    Replies(Vec<Value>),
    /// No complete answer. `sent`: the request may have reached the master.
    Failed { error: Error, sent: bool },
}

impl Masters {
    /// Sends each master of `targets` its request (`build(master, retry)`) at once, then reads
    /// the answers, masters that failed recently last. Once `decided` says the answers so far
    /// settle the outcome, such masters not read yet get only [`STRAGGLER_GRACE`], the others
    /// [`DECIDED_GRACE`]. A connection the
    /// server had dropped (a restart) is replaced and the master asked again, with `retry` set:
    /// the request must then be safe to repeat. Indexed by master; `None` for non-targets.
    pub(super) fn round(
        &self,
        targets: &[usize],
        build: &dyn Fn(usize, bool) -> Request,
        decided: &dyn Fn(&[Option<Answer>]) -> bool,
    ) -> Vec<Option<Answer>> {
        let mut answers: Vec<Option<Answer>> = self.masters.iter().map(|_| None).collect();
        let mut written = Vec::with_capacity(targets.len());
        let mut again = Vec::new();
        // Masters that answered and owe deletes (they are done after the round: a master back
        // from a stop has run what it was sent while stopped by then).
        let mut owing = Vec::new();
        let resting: Vec<Option<Error>> =
            targets.iter().map(|&i| self.masters[i].resting()).collect();
        // A round that cannot reach a majority without masters that rest asks them too, with
        // only a short grace for their answer: one of them may be back.
        let q = self.quorum();
        let ask_resting = targets.len() >= q && resting.iter().filter(|r| r.is_none()).count() < q;
        for (&i, rest) in targets.iter().zip(resting) {
            let m = &self.masters[i];
            let probe = rest.is_some();
            if let Some(error) = rest.filter(|_| !ask_resting) {
                answers[i] = Some(Answer::Failed { error, sent: false });
                continue;
            }
            // A probe connects within the grace too.
            let limit = probe.then_some(STRAGGLER_GRACE);
            let mut conn = match m.node.main.get(limit) {
                Ok(conn) => conn,
                Err(error) => {
                    m.failed(&error);
                    answers[i] = Some(Answer::Failed { error, sent: false });
                    continue;
                }
            };
            let request = build(i, false);
            match conn.redis.send_packed_command(&request.packed) {
                Ok(()) => written.push((i, conn, request, probe)),
                Err(e) => {
                    mark_broken(&mut conn);
                    if worth_retrying(&e) {
                        again.push(i);
                    } else {
                        answers[i] = Some(m.failure(&e, true));
                    }
                }
            }
        }
        written.sort_by_cached_key(|(i, ..)| self.masters[*i].failures());
        for (i, mut conn, request, probe) in written {
            let m = &self.masters[i];
            // Once the outcome is decided without it, a master gets a grace instead of the
            // read timeout: a short one if it failed lately, a longer one else (its reply is
            // most likely on its way; two system calls to change the socket's timeout).
            let is_decided = probe || decided(&answers);
            let grace = match (is_decided, m.failures() > 0 || probe) {
                (false, _) => None,
                (true, true) => Some(STRAGGLER_GRACE),
                (true, false) => Some(DECIDED_GRACE.min(m.node.main.read_timeout())),
            };
            let straggler = grace.is_some();
            let read = match grace {
                Some(grace) => conn.redis.set_read_timeout(Some(grace)),
                None => Ok(()),
            };
            let read = read.and_then(|()| read_replies(&mut conn.redis, request.replies));
            let read = read.and_then(|values| {
                if straggler {
                    conn.redis
                        .set_read_timeout(Some(m.node.main.read_timeout()))?;
                }
                match request.script {
                    Some(script) if has_noscript(&values) => {
                        // Restarted or SCRIPT FLUSH: none of the request's scripts ran.
                        script.load(&mut conn.redis)?;
                        exchange(&mut conn.redis, &request)
                    }
                    _ => Ok(values),
                }
            });
            match read {
                Ok(values) => {
                    if m.answered() {
                        owing.push(i);
                    }
                    answers[i] = Some(Answer::Replies(values));
                }
                Err(e) => {
                    mark_broken(&mut conn);
                    if worth_retrying(&e) && !straggler {
                        again.push(i);
                    } else {
                        answers[i] = Some(m.failure(&e, true));
                    }
                }
            }
        }
        for i in again {
            let m = &self.masters[i];
            let result = m.node.main.run(None, |c, _| exchange(c, &build(i, true)));
            answers[i] = Some(match result {
                Ok(values) => {
                    if m.answered() {
                        owing.push(i);
                    }
                    Answer::Replies(values)
                }
                Err(error) => {
                    m.failed(&error);
                    Answer::Failed { error, sent: true }
                }
            });
        }
        for i in owing {
            self.masters[i].pay_owed();
        }
        answers
    }
}

impl Master {
    pub(super) fn failure(&self, e: &redis::RedisError, sent: bool) -> Answer {
        let error = Error::from_redis(self.node.main.server(), e);
        self.failed(&error);
        Answer::Failed { error, sent }
    }
}

/// Reply `index` of the master `server`'s answer, converted; an error reply or a failed master
/// is an error.
pub(super) fn reply<T: FromRedisValue>(a: Answer, index: usize, server: &str) -> Result<T, Error> {
    match a {
        Answer::Failed { error, .. } => Err(error),
        Answer::Replies(values) => values
            .get(index)
            .ok_or_else(|| Error::internal("a reply is missing"))
            .and_then(|v| reply_value(v).map_err(|e| Error::from_redis(server, &e))),
    }
}

pub(super) fn reply_value<T: FromRedisValue>(v: &Value) -> redis::RedisResult<T> {
    if let Value::ServerError(e) = v {
        return Err(e.clone().into());
    }
    Ok(redis::from_redis_value_ref(v)?)
}

pub(super) fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

fn has_noscript(values: &[Value]) -> bool {
    values
        .iter()
        .any(|v| matches!(v, Value::ServerError(e) if e.code() == "NOSCRIPT"))
}

/// Reads `n` replies (error replies are values, not errors).
fn read_replies(c: &mut redis::Connection, n: usize) -> redis::RedisResult<Vec<Value>> {
    (0..n).map(|_| c.recv_response()).collect()
}

/// Sends a request and reads its replies on one connection, loading its script first if the
/// server answers NOSCRIPT.
fn exchange(c: &mut redis::Connection, request: &Request) -> redis::RedisResult<Vec<Value>> {
    c.send_packed_command(&request.packed)?;
    let values = read_replies(c, request.replies)?;
    match request.script {
        Some(script) if has_noscript(&values) => {
            script.load(c)?;
            c.send_packed_command(&request.packed)?;
            read_replies(c, request.replies)
        }
        _ => Ok(values),
    }
}
