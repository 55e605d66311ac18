//! Redlock: a lock held by a majority of independent masters (`redlock://h1:p1,h2:p2,h3:p3`).
//!
//! A lock is the same key on every master, holding the owner's token with a millisecond expiry;
//! it is ours while a majority of masters (N/2 + 1) hold our token. Every operation is one round
//! sent to all masters at once: the request is written to every master's connection first, then
//! the replies are read, so a round costs about one round trip to the slowest master that is
//! needed, not one per master (no threads: redis-rs' connections can send and receive apart).
//!
//! - **Acquire** is `SET key token NX PX lease` on every master. It succeeds when a majority
//!   granted it within the lock's validity: the lease less the time the round took and the
//!   clock-drift allowance of `lock.rs` (2 ms + 1% of the lease), counted from before the first
//!   write. Otherwise the key is deleted again wherever it may have been set (granted, or no
//!   answer), and the error says how many masters granted, which refused and which failed.
//! - **Release** deletes our key on every master, and wakes a waiter (`waiting.rs`).
//! - **Extend** and **renewal** reset the lease on every master (renewal: one pipeline per master
//!   for all the locks due). A lock stays ours while a majority extended it; when fewer did and
//!   the rest said the key was gone or held by another owner, it is lost; when the rest did not
//!   answer, the attempt failed and renewal tries again until the lock's validity runs out. A
//!   master that answers that our key is gone (restarted without persistence) while a majority
//!   still holds it gets the key set again (`SET NX`), so a lock keeps a majority through one
//!   master's restart after another.
//!
//! A master that fails for want of an answer (refused, timed out, dropped) rests: rounds skip it
//! (counting it as unreachable) for 250 ms, doubling with each failure in a row up to 4 s, so a
//! master that is down or stopped costs a round its connect or read timeout once, not every
//! time. Masters that failed recently are read last, and once a round's outcome is decided
//! without them they get only a short grace, so a master that stops answering slows no round
//! after the one that found it out.
//!
//! There are no fencing tokens with Redlock: counters on independent masters are not ordered
//! (the README says why), so `fencing(true)` is refused. `min_replicas` is refused as well: the
//! majority of masters replaces replica acknowledgement.

pub(crate) mod waiting;

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use redis::{FromRedisValue, Script, Value};

use crate::backend::{Backend, Node};
use crate::config::Config;
use crate::error::{Error, ErrorKind};
use crate::keys::LockKeys;
use crate::lock::drift;
use crate::ops::{Extension, Grant};
use crate::pool::{mark_broken, worth_retrying};
use crate::scripts;
use crate::token::Token;
use crate::topology::sentinel::node_addr;
use crate::topology::single::Single;
use crate::topology::{RedlockSpec, Topology};

/// How long a master that failed for want of an answer is skipped, at first.
const FIRST_REST: Duration = Duration::from_millis(250);
/// The longest rest (it doubles with each failure in a row).
const MAX_REST: Duration = Duration::from_secs(4);
/// How long a master's reply is waited for once the round's outcome is decided without it.
const STRAGGLER_GRACE: Duration = Duration::from_millis(20);

/// Checks settings that mean nothing or something unsafe with Redlock.
pub(crate) fn check_config(cfg: &Config) -> Result<(), Error> {
    if cfg.fencing {
        return Err(no_fencing());
    }
    if cfg.min_replicas > 0 {
        return Err(Error::invalid_argument(
            "min_replicas does not apply to a redlock:// URL: each lock is written to a majority \
             of independent masters instead of being acknowledged by replicas",
        ));
    }
    Ok(())
}

/// The error for fencing tokens asked of a Redlock client.
pub(crate) fn no_fencing() -> Error {
    Error::invalid_argument(
        "fencing tokens are not available with a redlock:// URL: counters kept on independent \
         masters are not ordered with each other, so a token could repeat or go backwards",
    )
}

/// One acquire attempt, the plain `SET NX PX` on every master. A refusal is an error that says
/// what every master answered: [`Error::is_held`] when another owner holds the key on some
/// master (a waiting acquire then waits), else a connection error.
pub(crate) fn acquire(
    masters: &Masters,
    keys: &LockKeys,
    token: &Token,
    lease: Duration,
    fencing: bool,
) -> Result<Option<Grant>, Error> {
    if fencing {
        return Err(no_fencing());
    }
    match masters.attempt(keys, token, lease, None)? {
        Attempt::Granted(grant) => Ok(Some(grant)),
        Attempt::Refused(tally) => Err(tally.error(&keys.shown(), None)),
    }
}

/// The independent masters of a Redlock client.
pub(crate) struct Masters {
    masters: Vec<Master>,
}

/// One master: its pools, and whether it rests after failing.
pub(crate) struct Master {
    pub node: Node,
    health: Mutex<Health>,
}

#[derive(Default)]
struct Health {
    /// Rounds skip the master until then.
    resting_until: Option<Instant>,
    /// Failures for want of an answer in a row.
    failures: u32,
    /// The last such failure, reported while the master rests.
    last: Option<Error>,
}

/// One master's part of a round: commands packed into one write, how many replies they get,
/// and the script they run (loaded again if the master answers NOSCRIPT).
struct Request {
    packed: Vec<u8>,
    replies: usize,
    script: Option<&'static Script>,
}

/// What a master answered in a round.
enum Answer {
    /// One reply per command, error replies included.
    Replies(Vec<Value>),
    /// No complete answer. `sent`: the request may have reached the master.
    Failed { error: Error, sent: bool },
}

/// What one master said to an acquire attempt.
enum Vote {
    Granted,
    /// Another owner holds the key there; its remaining lifetime in ms (-1: no expiry, -2:
    /// not known).
    Refused(i64),
    Failed(Error),
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
    failed: Vec<(usize, Error)>,
    /// Granted by a majority, but only after the lock's validity had run out (the time taken).
    late: Option<Duration>,
    /// The validity the grant had to come within.
    validity: Duration,
    servers: Vec<String>,
}

impl Masters {
    /// The pools of every master of `spec`; `info` is the first master's connection info (the
    /// others differ only in their address). Touches no network.
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        spec: &RedlockSpec,
    ) -> Result<Masters, Error> {
        let db = info.redis_settings().db();
        let mut masters = Vec::with_capacity(spec.masters.len());
        for addr in &spec.masters {
            let info = info.clone().set_addr(node_addr(info.addr(), addr));
            let mut cfg = cfg.clone();
            cfg.server = format!("{}:{}/{db}", addr.0, addr.1);
            let topology = Topology::Single(Single::new(&cfg, &info)?);
            masters.push(Master {
                node: Node::new(&cfg, Arc::new(topology)),
                health: Mutex::new(Health::default()),
            });
        }
        Ok(Masters { masters })
    }

    /// How many masters must agree.
    pub(crate) fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// The master whose wake list waiters of `keys`' lock block on: one per name, picked by a
    /// hash of the lock key, so that waiters of different names spread over the masters.
    pub(crate) fn home(&self, keys: &LockKeys) -> &Master {
        &self.masters[home_index(keys.lock(), self.masters.len())]
    }

    fn all(&self) -> Vec<usize> {
        (0..self.masters.len()).collect()
    }

    fn servers(&self) -> Vec<String> {
        self.masters
            .iter()
            .map(|m| m.node.main.server().to_owned())
            .collect()
    }

    /// Sends each master of `targets` its request (`build(master, retry)`) at once, then reads
    /// the answers, masters that failed recently last. Once `decided` says the answers so far
    /// settle the outcome, such masters not read yet get only [`STRAGGLER_GRACE`]. A connection the
    /// server had dropped (a restart) is replaced and the master asked again, with `retry` set:
    /// the request must then be safe to repeat. Indexed by master; `None` for non-targets.
    fn round(
        &self,
        targets: &[usize],
        build: &dyn Fn(usize, bool) -> Request,
        decided: &dyn Fn(&[Option<Answer>]) -> bool,
    ) -> Vec<Option<Answer>> {
        let mut answers: Vec<Option<Answer>> = self.masters.iter().map(|_| None).collect();
        let mut written = Vec::with_capacity(targets.len());
        let mut again = Vec::new();
        for &i in targets {
            let m = &self.masters[i];
            if let Some(error) = m.resting() {
                answers[i] = Some(Answer::Failed { error, sent: false });
                continue;
            }
            let mut conn = match m.node.main.get(None) {
                Ok(conn) => conn,
                Err(error) => {
                    m.failed(&error);
                    answers[i] = Some(Answer::Failed { error, sent: false });
                    continue;
                }
            };
            let request = build(i, false);
            match conn.redis.send_packed_command(&request.packed) {
                Ok(()) => written.push((i, conn, request)),
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
        written.sort_by_cached_key(|(i, _, _)| self.masters[*i].failures());
        for (i, mut conn, request) in written {
            let m = &self.masters[i];
            // Only a master that failed recently is cut short: a healthy one's reply is on its
            // way, and changing a socket's timeout costs two system calls.
            let straggler = m.failures() > 0 && decided(&answers);
            let read = if straggler {
                conn.redis.set_read_timeout(Some(STRAGGLER_GRACE))
            } else {
                Ok(())
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
                    m.answered();
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
                    m.answered();
                    Answer::Replies(values)
                }
                Err(error) => {
                    m.failed(&error);
                    Answer::Failed { error, sent: true }
                }
            });
        }
        answers
    }

    /// One acquire attempt on every master. `wanted`: a waiter's attempt, which also marks the
    /// lock as wanted on every master for that long (so that a release wakes a waiter) and
    /// learns how long the refusing masters' keys live; otherwise the plain `SET NX PX`.
    pub(crate) fn attempt(
        &self,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
        wanted: Option<Duration>,
    ) -> Result<Attempt, Error> {
        let ms = lease.as_millis() as u64;
        let mark = keys.wanted();
        let wanted_ms = wanted.map_or(0, |d| d.as_millis().max(1) as u64);
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
        let build = |_: usize, retry: bool| {
            if wanted.is_none() && !retry {
                return Request {
                    packed: set.clone(),
                    replies: 1,
                    script: None,
                };
            }
            let mut c = redis::cmd("EVALSHA");
            c.arg(scripts::QUORUM_ACQUIRE.get_hash())
                .arg(2)
                .arg(keys.lock())
                .arg(&mark)
                .arg(token.as_str())
                .arg(ms)
                .arg(wanted_ms);
            Request {
                packed: c.get_packed_command(),
                replies: 1,
                script: Some(&*scripts::QUORUM_ACQUIRE),
            }
        };
        let (n, q) = (self.masters.len(), self.quorum());
        let decided = |answers: &[Option<Answer>]| {
            let (mut granted, mut not) = (0, 0);
            for (i, a) in answers.iter().enumerate() {
                match a.as_ref().map(|a| vote(a, self.server(i))) {
                    Some(Vote::Granted) => granted += 1,
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
            failed: Vec::new(),
            late: None,
            validity,
            servers: Vec::new(),
        };
        // Where the key may be ours: granted, or the request went out but no answer came.
        let mut maybe_set = Vec::new();
        for (i, a) in answers.iter().enumerate() {
            let Some(a) = a else { continue };
            match vote(a, self.server(i)) {
                Vote::Granted => {
                    tally.granted += 1;
                    maybe_set.push(i);
                }
                Vote::Refused(pttl) => tally.refused.push((i, pttl)),
                Vote::Failed(e) => {
                    if matches!(a, Answer::Failed { sent: true, .. }) {
                        maybe_set.push(i);
                    }
                    tally.failed.push((i, e));
                }
            }
        }
        if tally.granted >= q {
            if elapsed < validity {
                return Ok(Attempt::Granted(Grant {
                    fence: 0,
                    lease_from: started,
                }));
            }
            tally.late = Some(elapsed);
        }
        if !maybe_set.is_empty() {
            // Best effort: a key left behind expires with its lease.
            let _ = self.release_on(keys, token, &maybe_set, None);
        }
        tally.servers = self.servers();
        Ok(Attempt::Refused(tally))
    }

    /// Releases on every master, then wakes one waiter if any master says there are waiters
    /// (after every master's delete, so the waiter finds them done). Returns whether the lock
    /// was ours: `false` when a majority of masters did not hold our token.
    pub(crate) fn release(
        &self,
        b: &Backend,
        keys: &LockKeys,
        token: &Token,
    ) -> Result<bool, Error> {
        self.release_on(keys, token, &self.all(), Some(b))
    }

    /// Deletes our key on `targets`; with `wake_from`, wakes a waiter afterwards if one waits.
    fn release_on(
        &self,
        keys: &LockKeys,
        token: &Token,
        targets: &[usize],
        wake_from: Option<&Backend>,
    ) -> Result<bool, Error> {
        let mark = keys.wanted();
        let packed = {
            let mut c = redis::cmd("EVALSHA");
            c.arg(scripts::QUORUM_RELEASE.get_hash())
                .arg(2)
                .arg(keys.lock())
                .arg(&mark)
                .arg(token.as_str());
            c.get_packed_command()
        };
        let build = |_: usize, _: bool| Request {
            packed: packed.clone(),
            replies: 1,
            script: Some(&*scripts::QUORUM_RELEASE),
        };
        let answers = self.round(targets, &build, &|_| false);
        let (mut released, mut not_ours, mut wanted) = (0, 0, false);
        let mut failed = Vec::new();
        for (i, a) in answers.into_iter().enumerate() {
            match a.map(|a| reply::<(i64, i64)>(a, 0, self.server(i))) {
                None => {}
                Some(Ok((r, w))) => {
                    if r == 1 {
                        released += 1;
                    } else {
                        not_ours += 1;
                    }
                    wanted |= w == 1;
                }
                Some(Err(e)) => failed.push((i, e)),
            }
        }
        if let Some(b) = wake_from
            && wanted
        {
            // Best effort: a waiter that is not woken re-checks on its own.
            let _ = self.wake(b, keys);
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

    /// Wakes one waiter of `keys`' lock: pushes a wake-up onto the wake list on its home master.
    pub(crate) fn wake(&self, b: &Backend, keys: &LockKeys) -> Result<(), Error> {
        let lifetime = b.cfg.recheck_interval + waiting::MARK_GRACE;
        self.home(keys).node.main.run(None, |c, _| {
            scripts::QUORUM_WAKE
                .key(keys.wake())
                .arg(lifetime.as_millis() as u64)
                .invoke::<i64>(c)
        })?;
        Ok(())
    }

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
            .extend_many(&[Extension { keys, token, lease }])
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
        let build = |_: usize, _: bool| Request {
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
            Request {
                packed: pipe.get_packed_pipeline(),
                replies: reset[i].len(),
                script: None,
            }
        };
        let _ = self.round(&targets, &build, &|_| false);
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

    fn server(&self, i: usize) -> &str {
        self.masters[i].node.main.server()
    }

    /// The error of an operation that too few masters answered: connection (or the masters'
    /// error reply, when none was unreachable), naming each master that failed.
    fn op_error(&self, what: &str, failed: &[(usize, Error)]) -> Error {
        let mut message = what.to_owned();
        failures_text(&mut message, failed);
        failure_error(message, failed)
    }
}

impl Master {
    /// The failure the master rests after, while it rests.
    fn resting(&self) -> Option<Error> {
        let h = self.health.lock();
        match (h.resting_until, &h.last) {
            (Some(until), Some(last)) if Instant::now() < until => Some(last.clone()),
            _ => None,
        }
    }

    fn failures(&self) -> u32 {
        self.health.lock().failures
    }

    /// The master answered: it rests no more.
    fn answered(&self) {
        let mut h = self.health.lock();
        if h.failures > 0 {
            log::info!("{} answers again", self.node.main.server());
            *h = Health::default();
        }
    }

    /// A call to the master failed. For want of an answer (not an error reply, and not because
    /// every pooled connection was busy), the master rests.
    fn failed(&self, e: &Error) {
        if e.kind() != ErrorKind::Connection || self.node.main.exhausted() {
            return;
        }
        let mut h = self.health.lock();
        h.failures = h.failures.saturating_add(1);
        let rest = FIRST_REST
            .saturating_mul(1 << (h.failures - 1).min(8))
            .min(MAX_REST);
        if h.failures == 1 {
            log::info!("{e}; skipping it for {} ms", rest.as_millis());
        }
        h.resting_until = Some(Instant::now() + rest);
        h.last = Some(e.clone());
    }

    fn failure(&self, e: &redis::RedisError, sent: bool) -> Answer {
        let error = Error::from_redis(self.node.main.server(), e);
        self.failed(&error);
        Answer::Failed { error, sent }
    }
}

impl Tally {
    /// Whether another owner holds the key on some master (so a release will come).
    pub(crate) fn held_somewhere(&self) -> bool {
        !self.refused.is_empty()
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

/// Appends, to a message, the masters that failed: unreachable ones, then error replies.
fn failures_text(m: &mut String, failed: &[(usize, Error)]) {
    let unreachable: Vec<&str> = failed
        .iter()
        .filter(|(_, e)| e.kind() != ErrorKind::Redis)
        .map(|(_, e)| e.message())
        .collect();
    let replied: Vec<&str> = failed
        .iter()
        .filter(|(_, e)| e.kind() == ErrorKind::Redis)
        .map(|(_, e)| e.message())
        .collect();
    if !unreachable.is_empty() {
        let _ = write!(m, "; unreachable: {}", unreachable.join("; "));
    }
    if !replied.is_empty() {
        let _ = write!(m, "; failed: {}", replied.join("; "));
    }
}

/// A connection error (a timeout if one master's was) when some master was unreachable, else
/// the first master's error reply.
fn failure_error(message: String, failed: &[(usize, Error)]) -> Error {
    let unreachable = failed.iter().any(|(_, e)| e.kind() != ErrorKind::Redis);
    if unreachable || failed.is_empty() {
        let timeout = failed.iter().any(|(_, e)| e.is_timeout());
        return Error::quorum(ErrorKind::Connection, message, timeout, None);
    }
    let code = failed.first().and_then(|(_, e)| e.redis_code());
    Error::quorum(ErrorKind::Redis, message, false, code)
}

/// What an answer of the master `server` to an acquire attempt means.
fn vote(a: &Answer, server: &str) -> Vote {
    let values = match a {
        Answer::Failed { error, .. } => return Vote::Failed(error.clone()),
        Answer::Replies(values) => values,
    };
    match values.first() {
        // SET NX: OK, or nil when the key exists.
        Some(Value::Okay) => Vote::Granted,
        Some(Value::SimpleString(s)) if s == "OK" => Vote::Granted,
        Some(Value::Nil) => Vote::Refused(-2),
        Some(v) => match reply_value::<(i64, i64)>(v) {
            Ok((1, _)) => Vote::Granted,
            Ok((_, pttl)) => Vote::Refused(pttl),
            Err(e) => Vote::Failed(Error::from_redis(server, &e)),
        },
        None => Vote::Failed(Error::internal("no reply to an acquire")),
    }
}

/// Reply `index` of the master `server`'s answer, converted; an error reply or a failed master
/// is an error.
fn reply<T: FromRedisValue>(a: Answer, index: usize, server: &str) -> Result<T, Error> {
    match a {
        Answer::Failed { error, .. } => Err(error),
        Answer::Replies(values) => values
            .get(index)
            .ok_or_else(|| Error::internal("a reply is missing"))
            .and_then(|v| reply_value(v).map_err(|e| Error::from_redis(server, &e))),
    }
}

fn reply_value<T: FromRedisValue>(v: &Value) -> redis::RedisResult<T> {
    if let Value::ServerError(e) = v {
        return Err(e.clone().into());
    }
    Ok(redis::from_redis_value_ref(v)?)
}

fn int(v: &Value) -> Option<i64> {
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

/// FNV-1a of the lock key, modulo the number of masters.
fn home_index(key: &[u8], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % n as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn homes_spread_over_the_masters() {
        let mut seen = [0usize; 3];
        for i in 0..300 {
            seen[home_index(format!("lock:{i}").as_bytes(), 3)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        assert_eq!(home_index(b"x", 3), home_index(b"x", 3));
    }

    #[test]
    fn votes() {
        let vote = |v: Value| vote(&Answer::Replies(vec![v]), "h:1/0");
        assert!(matches!(vote(Value::Okay), Vote::Granted));
        assert!(matches!(vote(Value::Nil), Vote::Refused(-2)));
        let held = Value::Array(vec![Value::Int(0), Value::Int(700)]);
        assert!(matches!(vote(held), Vote::Refused(700)));
        let mine = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert!(matches!(vote(mine), Vote::Granted));
    }
}
