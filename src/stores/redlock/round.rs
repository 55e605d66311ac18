//! One round: a request written to every master's connection first, then the replies read in
//! the order they arrive, so that a round costs about one round trip to the slowest master it
//! needs, and a master that stops answering costs only a grace once the others have answered.

use std::io;
use std::time::{Duration, Instant};

use redis::{FromRedisValue, Script, Value};

use super::{Master, Masters};
use crate::base::connection::{Connection, first_readable};
use crate::base::error::Error;
use crate::base::pool::{PooledConn, mark_broken, worth_retrying};

/// How long a master that failed lately is waited for once the round's outcome is decided
/// without it.
const STRAGGLER_GRACE: Duration = Duration::from_millis(20);
/// How long a master that has not failed lately is waited for once the round's outcome is
/// decided without it, or once another master has answered (at most the read timeout): a
/// master that stops answering costs the rounds in flight this, not the whole read timeout.
const DECIDED_GRACE: Duration = Duration::from_millis(200);
/// The least a master that has not answered is waited for past another's answer while the
/// round's outcome is undecided.
const UNDECIDED_GRACE: Duration = Duration::from_millis(50);
/// Once the outcome is decided, a master that has not failed lately is waited for this many
/// times as long as the answers that decided it took (at least [`STRAGGLER_GRACE`], at most
/// [`DECIDED_GRACE`]): on a loaded machine the answers come slower and the straggler gets
/// longer, and a master that stopped costs little to each process that finds it out. (A release
/// round tells the waiter only once it ends: with many processes, each finding a stopped master
/// out by itself in the round that released the lock, a fixed 200 ms could be paid once per
/// process, up to 1.4 s without a grant with eight.)
const DECIDED_FACTOR: u32 = 20;

/// One master's part of a round: commands packed into one write, how many replies they get,
/// and the script they run (loaded again if the master answers NOSCRIPT).
pub(super) struct Part {
    pub(super) packed: Vec<u8>,
    pub(super) replies: usize,
    pub(super) script: Option<&'static Script>,
}

/// What a round does besides asking the masters that do not rest.
#[derive(Default)]
pub(super) struct Extra<'h> {
    /// Ask the targets that rest too (with the short grace a probe gets): a push to a waiter
    /// blocked on a master that this process rests (it failed here lately, and may answer the
    /// waiter's process again already).
    pub(super) resting_too: bool,
    /// Called once the outcome is decided and the masters still pending have had as long again
    /// as the deciding answers took (at least [`EARLY_AFTER`]), with the answers so far and
    /// the pending masters (one bit each), before their grace is waited out (not called when
    /// every master answered by then): a release tells the waiter it handed the lock to without
    /// paying a stopped master's grace first.
    pub(super) once_decided: Option<OnceDecided<'h>>,
}

/// What [`Extra::once_decided`] is given: the answers so far, and the masters pending.
pub(super) type OnceDecided<'h> = &'h mut dyn FnMut(&[Option<Answer>], u64);

/// The least time a decided round waits for the masters still pending before `once_decided`.
const EARLY_AFTER: Duration = Duration::from_micros(200);

/// A master whose reply a round waits for, and until when.
struct Pending<'a> {
    i: usize,
    conn: PooledConn<'a>,
    request: Part,
    deadline: Instant,
    probe: bool,
}

/// Which of `pending` to read next: the first whose reply can be read now (or that cannot be
/// polled), waiting for one until the earliest deadline (or `until`); `None` when that passed
/// first.
fn next_reply(pending: &[Pending<'_>], until: Option<Instant>) -> Option<usize> {
    let mut fds = Vec::with_capacity(pending.len());
    for (k, p) in pending.iter().enumerate() {
        match p.conn.redis.poll_fd() {
            Some(fd) => fds.push(fd),
            None => return Some(k),
        }
    }
    let earliest = pending.iter().map(|p| p.deadline).chain(until).min()?;
    let left = earliest.saturating_duration_since(Instant::now());
    // A failed poll (it cannot fail with valid descriptors) reads the first in turn.
    first_readable(&fds, left).unwrap_or(Some(0))
}

/// The error of a master that did not answer in time.
fn timed_out() -> redis::RedisError {
    io::Error::new(io::ErrorKind::TimedOut, "no reply in time").into()
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
    /// settle the outcome, such masters not read yet get only [`STRAGGLER_GRACE`] from then, the
    /// others a grace in proportion to the time the round took ([`DECIDED_FACTOR`]); and after
    /// each answer, decided or not, every master not read yet gets at most a grace in proportion
    /// to the time that answer took ([`UNDECIDED_GRACE`] to [`DECIDED_GRACE`]) from then. A
    /// connection the server had dropped (a restart) is replaced and the master asked again, with
    /// `retry` set: the request must then be safe to repeat. Indexed by master; `None` for
    /// non-targets.
    pub(super) fn round(
        &self,
        targets: &[usize],
        build: &dyn Fn(usize, bool) -> Part,
        decided: &dyn Fn(&[Option<Answer>]) -> bool,
    ) -> Vec<Option<Answer>> {
        self.round_with(targets, build, decided, Extra::default())
    }

    /// [`Masters::round`], with what [`Extra`] asks.
    pub(super) fn round_with(
        &self,
        targets: &[usize],
        build: &dyn Fn(usize, bool) -> Part,
        decided: &dyn Fn(&[Option<Answer>]) -> bool,
        extra: Extra<'_>,
    ) -> Vec<Option<Answer>> {
        let Extra {
            resting_too,
            mut once_decided,
        } = extra;
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
        let ask_resting = resting_too
            || (targets.len() >= q && resting.iter().filter(|r| r.is_none()).count() < q);
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
        // Replies are read as they arrive; masters that failed lately are read last of those
        // that can be read at once (TLS connections, which cannot be polled, are read in turn).
        written.sort_by_cached_key(|(i, ..)| self.masters[*i].failures());
        let sent = Instant::now();
        let mut pending: Vec<Pending<'_>> = written
            .into_iter()
            .map(|(i, conn, request, probe)| Pending {
                i,
                conn,
                request,
                // A probe gets a short grace from the start.
                deadline: sent
                    + if probe {
                        STRAGGLER_GRACE
                    } else {
                        self.masters[i].node.main.read_timeout()
                    },
                probe,
            })
            .collect();
        let mut straggler = false;
        // Whether some master has answered: from then on, a master that has not is waited for
        // at most a grace past the latest answer (see below).
        let mut answered = false;
        // When `once_decided` is called, if the round is decided and masters are pending.
        let mut early: Option<Instant> = None;
        while !pending.is_empty() {
            if !straggler && decided(&answers) {
                // Once the outcome is decided without them, masters get a grace instead of the
                // read timeout: a short one if they failed lately, a longer one else (their
                // replies are most likely on their way).
                straggler = true;
                let now = Instant::now();
                let took = now.saturating_duration_since(sent);
                for p in &mut pending {
                    p.deadline = p.deadline.min(now + self.masters[p.i].grace(p.probe, took));
                }
                if once_decided.is_some() {
                    early = Some(now + took.max(EARLY_AFTER));
                }
            }
            if early.is_some_and(|at| Instant::now() >= at) {
                early = None;
                if let Some(f) = once_decided.take() {
                    let waited = pending
                        .iter()
                        .filter(|p| p.i < 64)
                        .fold(0u64, |bits, p| bits | 1 << p.i);
                    f(&answers, waited);
                }
            }
            let Some(k) = next_reply(&pending, early) else {
                // Nothing came in time: the masters whose time is up failed.
                let now = Instant::now();
                pending.retain_mut(|p| {
                    if p.deadline > now {
                        return true;
                    }
                    mark_broken(&mut p.conn);
                    answers[p.i] = Some(self.masters[p.i].failure(&timed_out(), true));
                    false
                });
                continue;
            };
            let Pending {
                i,
                mut conn,
                request,
                deadline,
                probe,
            } = pending.remove(k);
            let m = &self.masters[i];
            // A connection that cannot be polled is read with the time it has left, as its
            // read timeout while it is read (two system calls, only for TLS stragglers).
            let limit = (conn.redis.poll_fd().is_none() && (straggler || probe || answered))
                .then(|| deadline.saturating_duration_since(Instant::now()));
            let read = match limit {
                Some(limit) => conn
                    .redis
                    .set_read_timeout(Some(limit.max(Duration::from_millis(1)))),
                None => Ok(()),
            };
            let read = read.and_then(|()| read_replies(&mut conn.redis, request.replies));
            let read = read.and_then(|values| {
                if limit.is_some() {
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
                    // A master that has not answered by now gets a grace past this answer, not
                    // its whole read timeout, even while the outcome is undecided: a round
                    // blocks the others with what it was granted until it ends (an attempt
                    // granted on one master of three, with another stopped, held that one for
                    // the whole read timeout, and every process that came meanwhile was refused
                    // there), and a master that its peers' answers have overtaken by that much
                    // is stopped or overloaded, not on its way. The grace is in proportion to
                    // the time this answer took, as a decided round's ([`UNDECIDED_GRACE`] at
                    // least, [`DECIDED_GRACE`] at most): with many processes each finds a
                    // stopped master out by itself, and a fixed 200 ms held the lock up that
                    // long for each whose round had been granted somewhere. (The decided
                    // round's shorter grace for a master that failed lately is not applied
                    // here: a round that still needs it should not drop a master that is merely
                    // slow.)
                    answered = true;
                    let now = Instant::now();
                    let grace = (now.saturating_duration_since(sent) * DECIDED_FACTOR)
                        .clamp(UNDECIDED_GRACE, DECIDED_GRACE)
                        .min(m.node.main.read_timeout());
                    for p in &mut pending {
                        p.deadline = p.deadline.min(now + grace);
                    }
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
    /// How long the master's reply is waited for once the round no longer needs it, the answers
    /// that decided it having taken `took`: a short grace if it failed lately (or rests and is
    /// only probed), else one in proportion (its reply is most likely on its way).
    fn grace(&self, probe: bool, took: Duration) -> Duration {
        if self.failures() > 0 || probe {
            STRAGGLER_GRACE
        } else {
            (took * DECIDED_FACTOR)
                .clamp(STRAGGLER_GRACE, DECIDED_GRACE)
                .min(self.node.main.read_timeout())
        }
    }

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
fn read_replies(c: &mut Connection, n: usize) -> redis::RedisResult<Vec<Value>> {
    (0..n).map(|_| c.recv_response()).collect()
}

/// Sends a request and reads its replies on one connection, loading its script first if the
/// server answers NOSCRIPT.
fn exchange(c: &mut Connection, request: &Part) -> redis::RedisResult<Vec<Value>> {
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
