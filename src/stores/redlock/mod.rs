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
//!   clock-drift allowance of `base/grant.rs` (2 ms + 1% of the lease), counted from before the first
//!   write. Otherwise the key is deleted again wherever it may have been set (granted, or no
//!   answer), and the error says how many masters granted, which refused and which failed.
//! - **Release** hands the lock over on every master to the first queued waiter, and tells it
//!   (`release.rs`, `wait.rs`), or deletes our key when nobody waits.
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
//! after the one that found it out. Nor does a round wait a master's whole read timeout once
//! another master has answered, decided or not: an attempt granted by one master of three while
//! another is stopped would hold that master meanwhile, refusing every other process there.
//!
//! There are no fencing tokens with Redlock: counters on independent masters are not ordered
//! (`docs/topologies.md` says why), so `fencing(true)` is refused. `min_replicas` is refused as well: the
//! majority of masters replaces replica acknowledgement.
//!
//! Here: the masters and their rests. `round.rs` sends a round; `acquire.rs`, `release.rs` and
//! `extend.rs` are the operations; `wait.rs` is how a waiter is woken.

mod acquire;
mod extend;
mod inspect;
mod keys;
mod release;
mod round;
pub(crate) mod wait;

pub(crate) use acquire::{Attempt, Tally};

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::sync::Mutex;
use keys::RedlockKeys;

use crate::base::config::Config;
use crate::base::error::{Error, ErrorKind};
use crate::base::grant::Grant;
use crate::base::inspect::LockInfo;
use crate::base::keys::LockKeys;
use crate::base::kind::LockKind;
use crate::base::metrics::Metrics;
use crate::base::scripts;
use crate::base::token::Token;
use crate::base::url::{MultiHost, after_scheme, invalid};
use crate::stores::extend::Extension;
use crate::stores::node_addr;
use crate::stores::single::FixedServer;
use crate::stores::wait::{Queue, Session};
use crate::stores::{Call, Check, LockStore, Majority, Node, NodeRef};

/// A Redlock URL's independent masters, in the URL's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedlockSpec {
    pub masters: Vec<(String, u16)>,
}

/// How long a master that failed for want of an answer is skipped, at first.
const FIRST_REST: Duration = Duration::from_millis(250);
/// The longest rest (it doubles with each failure in a row).
const MAX_REST: Duration = Duration::from_secs(4);

/// How much longer than a waiter's next block the "waiters exist" mark lives (and an
/// unclaimed wake-up stays): enough for the waiter to come back and refresh it.
pub(crate) const MARK_GRACE: Duration = Duration::from_millis(500);
/// How long a release leaves the lock to the waiter it wakes: other waiters' attempts are refused
/// meanwhile (a woken waiter that does not come, cancelled or gone, holds the others up that
/// long at most).
pub(crate) const TURN: Duration = Duration::from_millis(50);
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

/// The independent masters of a Redlock client.
pub(crate) struct Masters {
    cfg: Config,
    /// The backend's metrics (handoffs; each master counts its failures).
    metrics: Arc<Metrics>,
    masters: Vec<Master>,
}

/// One master: its pools, whether it rests after failing, and the deletes it still owes.
pub(crate) struct Master {
    pub node: Node,
    health: Mutex<Health>,
    /// Its place among the masters, for its failure counter in the metrics.
    index: usize,
    metrics: Arc<Metrics>,
    /// Our keys (and queue entries) this master may still hold though we gave them up: a release
    /// or an attempt's clean-up that it did not answer (it was stopped, say: a `SET` or a
    /// waiter's round already sent runs when it continues). They are released (if they still
    /// hold our token) and the entries dropped once it answers again, so that a master back from
    /// a stop neither refuses everyone for a whole lease nor hands the lock to a waiter gone.
    owed: Mutex<Vec<Owed>>,
}

/// A compare-and-delete a master owes: the lock key, our token, and until when it matters (the
/// key has expired by then). `held`: the key may appear there for a lock we hold (an acquire
/// granted by the others while this master did not answer); it is owed once the lock is released.
struct Owed {
    keys: LockKeys,
    token: Token,
    until: Instant,
    held: bool,
}

/// The most deletes one master is owed (the oldest are dropped first).
const MAX_OWED: usize = 4096;
/// How long a delete is owed at most: longer than any lease a lock is likely to have.
const OWED_FOR: Duration = Duration::from_secs(600);

#[derive(Default)]
struct Health {
    /// Rounds skip the master until then.
    resting_until: Option<Instant>,
    /// Failures for want of an answer in a row.
    failures: u32,
    /// The last such failure, reported while the master rests.
    last: Option<Error>,
}

impl Masters {
    /// The pools of every master of `spec`; `info` is the first master's connection info (the
    /// others differ only in their address). Touches no network.
    pub(crate) fn new(
        cfg: &Config,
        info: &redis::ConnectionInfo,
        spec: &RedlockSpec,
        metrics: &Arc<Metrics>,
    ) -> Result<Masters, Error> {
        let db = info.redis_settings().db();
        let mut masters = Vec::with_capacity(spec.masters.len());
        metrics.redlock_masters(spec.masters.iter().map(|a| format!("{}:{}", a.0, a.1)));
        for (index, addr) in spec.masters.iter().enumerate() {
            let info = info.clone().set_addr(node_addr(info.addr(), addr));
            let mut cfg = cfg.clone();
            cfg.server = format!("{}:{}/{db}", addr.0, addr.1);
            let server = FixedServer::new(&cfg, &info)?;
            masters.push(Master {
                node: Node::new(&cfg, metrics, Arc::new(server)),
                health: Mutex::new(Health::default()),
                owed: Mutex::new(Vec::new()),
                index,
                metrics: metrics.clone(),
            });
        }
        Ok(Masters {
            cfg: cfg.clone(),
            metrics: metrics.clone(),
            masters,
        })
    }

    /// How many masters must agree.
    pub(crate) fn quorum(&self) -> usize {
        self.masters.len() / 2 + 1
    }

    /// The master whose wake list waiters of `keys`' lock block on: one per name, picked by a
    /// hash of the lock key, so that waiters of different names spread over the masters.
    pub(crate) fn home(&self, keys: &LockKeys) -> &Master {
        &self.masters[self.home_index(keys)]
    }

    fn home_index(&self, keys: &LockKeys) -> usize {
        home_index(keys.lock(), self.masters.len())
    }

    /// The master a waiter of `keys`' lock blocks on next: the lock's home master, or while it
    /// rests (it failed lately), the next master after it that does not; the home master when
    /// all rest.
    pub(crate) fn waiting_master(&self, keys: &LockKeys) -> usize {
        let (home, n) = (self.home_index(keys), self.masters.len());
        (0..n)
            .map(|k| (home + k) % n)
            .find(|&i| self.masters[i].resting().is_none())
            .unwrap_or(home)
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

    /// The master answered: it rests no more. Returns whether it owes deletes.
    fn answered(&self) -> bool {
        let mut h = self.health.lock();
        if h.failures > 0 {
            log::info!("{} answers again", self.node.main.server());
            *h = Health::default();
        }
        drop(h);
        self.owed.lock().iter().any(|o| !o.held)
    }

    /// The master did not answer a delete of `keys`' lock held with `token` (or an attempt's
    /// clean-up): it is done once the master answers again. With `held`, the lock is ours, or a
    /// waiter's whose key there may be a handover to it by then: the delete is owed once it is
    /// released, or the wait ends without it ([`released`](Self::released)).
    fn owe(&self, keys: &LockKeys, token: &Token, held: bool) {
        let mut owed = self.owed.lock();
        if owed.len() >= MAX_OWED {
            owed.remove(0);
        }
        owed.push(Owed {
            keys: keys.clone(),
            token: token.clone(),
            until: Instant::now() + OWED_FOR,
            held,
        });
    }

    /// The lock held with `token` is released: a delete kept for it (see [`owe`](Self::owe)) is
    /// owed now. Returns whether there was one.
    fn released(&self, token: &Token) -> bool {
        let mut owed = self.owed.lock();
        let mut found = false;
        for o in owed.iter_mut().filter(|o| o.held && o.token == *token) {
            o.held = false;
            found = true;
        }
        found
    }

    /// Deletes what the master owes, where our token is still there (one pipeline; what fails is
    /// owed again).
    fn pay_owed(&self) {
        let now = Instant::now();
        let owed: Vec<Owed> = {
            let mut all = self.owed.lock();
            all.retain(|o| o.until > now);
            let (held, due) = std::mem::take(&mut *all).into_iter().partition(|o| o.held);
            *all = held;
            due
        };
        if owed.is_empty() {
            return;
        }
        // The release of each (a key of ours there goes on to the first waiter queued there),
        // which also takes our entry out of the queue: a waiter's round that ran late (the
        // master was stopped) queued us after we were served or gave up.
        let mut pipe = redis::pipe();
        for o in &owed {
            pipe.cmd("EVALSHA")
                .arg(scripts::QUORUM_HANDOVER.get_hash())
                .arg(5)
                .arg(o.keys.lock())
                .arg(o.keys.wanted())
                .arg(o.keys.turn())
                .arg(o.keys.blocked())
                .arg(o.keys.redlock_queue())
                .arg(o.token.as_str())
                .arg(0)
                .arg("1")
                .ignore();
        }
        let paid = self.node.main.run(None, |c, _| {
            scripts::QUORUM_HANDOVER.load(c)?;
            pipe.query::<()>(c)
        });
        match paid {
            Ok(()) => log::debug!(
                "{}: {} lock keys left by unanswered calls deleted",
                self.node.main.server(),
                owed.len()
            ),
            Err(e) => {
                log::debug!("{}: owed deletes not done: {e}", self.node.main.server());
                self.owed.lock().extend(owed);
            }
        }
    }

    /// A call to the master failed. For want of an answer (not an error reply, and not because
    /// every pooled connection was busy), the master rests.
    fn failed(&self, e: &Error) {
        self.metrics.redlock_failure(self.index);
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
}

/// Redlock's masters as a store: every operation on every master at once, counted by majority.
/// Only the exclusive lock, without fencing tokens.
impl LockStore for Masters {
    fn cfg(&self) -> &Config {
        &self.cfg
    }

    /// A call on one server goes to the lock's home master; every lock operation, a waiter's
    /// rounds and a cancel go to every master through the methods below.
    fn run_dyn(&self, keys: &LockKeys, op: &mut Call<'_>) -> Result<(), Error> {
        self.home(keys).node.main.run(None, op)
    }

    fn majority(&self) -> Option<&dyn Majority> {
        Some(self)
    }

    fn inspect(&self, keys: &LockKeys, _kind: LockKind) -> Result<LockInfo, Error> {
        Masters::inspect(self, keys)
    }

    fn extend_many(&self, locks: &[Extension<'_>]) -> Vec<Result<bool, Error>> {
        Masters::extend_many(self, locks)
    }

    fn session<'a>(&'a self, q: &'a dyn Queue, lease: Duration) -> Box<dyn Session + 'a> {
        Box::new(wait::RedlockSession::new(
            self,
            q.keys(),
            q.token(),
            lease,
            &q.signals()[0],
        ))
    }

    fn waiter_node(&self, keys: &LockKeys) -> Result<NodeRef<'_>, Error> {
        Ok(NodeRef::Fixed(&self.home(keys).node))
    }

    /// On every master: a waiter blocks on the lock's home master or, while that is away, on
    /// another (`wait.rs`).
    fn signal_cancel(
        &self,
        _keys: &LockKeys,
        signal: &[u8],
        mark: &[u8],
        lifetime: Duration,
    ) -> Result<(), Error> {
        let packed = {
            let mut c = redis::cmd("EVALSHA");
            c.arg(scripts::SIGNAL_CANCEL.get_hash())
                .arg(1)
                .arg(signal)
                .arg(mark)
                .arg(lifetime.as_millis() as u64);
            c.get_packed_command()
        };
        let build = |_: usize, _: bool| round::Part {
            packed: packed.clone(),
            replies: 1,
            script: Some(&*scripts::SIGNAL_CANCEL),
        };
        self.round(&self.all(), &build, &|_| false);
        Ok(())
    }

    /// Fencing tokens and the other kinds of lock are refused.
    fn check(&self, what: Check<'_>) -> Result<(), Error> {
        match what {
            Check::Fencing => Err(no_fencing()),
            Check::Kind { what, shown } => Err(Error::invalid_argument(format!(
                "{what} ({shown}) is not supported on Redlock: only exclusive locks are; use a \
                 redis://, redis-sentinel:// or redis-cluster:// URL for the other kinds"
            ))),
            Check::OneServer { .. } => Ok(()),
        }
    }
}

impl Majority for Masters {
    fn try_acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        lease: Duration,
    ) -> Result<Option<Grant>, Error> {
        match self.attempt(keys, token, lease, None)? {
            Attempt::Granted(grant) => Ok(Some(grant)),
            Attempt::Refused(tally) => Err(tally.error(&keys.shown(), None)),
        }
    }

    fn release(&self, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        Masters::release(self, keys, token)
    }

    fn extend(&self, keys: &LockKeys, token: &Token, lease: Duration) -> Result<bool, Error> {
        Masters::extend(self, keys, token, lease)
    }

    fn holder(&self, keys: &LockKeys) -> Result<Option<Vec<u8>>, Error> {
        Masters::holder(self, keys)
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

/// FNV-1a of the lock key, modulo the number of masters.
fn home_index(key: &[u8], n: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % n as u64) as usize
}

/// Parses a `redlock://` or `rediss-redlock://` URL: the plain URL of the first master and the
/// masters. An odd number of at least three distinct masters is required: with an even number a
/// majority buys no more fault tolerance than with one master fewer, and a master named twice
/// would count twice towards the majority. `None` for other URLs.
pub(crate) fn parse_url(url: &str) -> Option<Result<(String, RedlockSpec), Error>> {
    let (tls, rest) = after_scheme(url, "redlock", "rediss-redlock")?;
    let bad = |what: String| Some(Err(invalid("Redlock", url, &what)));
    if rest.contains('#') {
        return bad("a fragment (#...) has no meaning here".into());
    }
    let parts = MultiHost::split(rest, tls);
    let mut masters: Vec<(String, u16)> = Vec::new();
    for host in parts.hosts.split(',') {
        let addr = host
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok().filter(|p| *p > 0)?)))
            .filter(|(h, _)| !h.is_empty());
        let Some((h, p)) = addr else {
            return bad(format!(
                "{host:?} is not host:port (every master needs its host and a port from 1 to \
                 65535)"
            ));
        };
        let addr = (h.to_owned(), p);
        if masters.contains(&addr) {
            return bad(format!(
                "the master {}:{} is named twice (it would count twice towards the majority)",
                addr.0, addr.1
            ));
        }
        masters.push(addr);
    }
    if masters.len() < 3 || masters.len().is_multiple_of(2) {
        return bad(format!(
            "Redlock needs an odd number of at least 3 independent masters, got {}",
            masters.len()
        ));
    }
    Some(Ok((parts.plain(&masters[0]), RedlockSpec { masters })))
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
}
