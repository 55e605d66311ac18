//! Redirections: what an error reply of a cluster node asks for (`MOVED`, `ASK`, `TRYAGAIN`,
//! `CLUSTERDOWN`), and the one decision, [`Cluster::follow`], of what a call that failed on a
//! slot's master does next. Its three callers: [`Cluster::run`] (lock calls),
//! [`Cluster::waiter_follows`] (waiters) and `extend.rs` (renewals of many locks).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Addr, Cluster};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::stores::Node;

/// Redirections (MOVED, ASK) one call follows before it gives up: a table that keeps changing
/// under it means a resharding in progress; the next call starts from the new table.
const MAX_REDIRECTS: u32 = 5;
/// The first and the longest pause before a call that got TRYAGAIN or CLUSTERDOWN is repeated.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// What an error reply asks of a cluster client.
pub(crate) enum Redirect {
    /// `MOVED slot host:port`: the slot lives there now.
    Moved(Addr),
    /// `ASK slot host:port`: this call goes there, preceded by `ASKING`.
    Ask(Addr),
    /// `TRYAGAIN` or `CLUSTERDOWN`: the slot is not served at the moment; repeat shortly.
    Busy,
}

impl Redirect {
    /// The redirection an error reply asks for, if any.
    pub(crate) fn of(e: &redis::RedisError) -> Option<Redirect> {
        use redis::ServerErrorKind as S;
        let redis::ErrorKind::Server(kind) = e.kind() else {
            return None;
        };
        match kind {
            S::Moved | S::Ask => {
                let (addr, _slot) = e.redirect_node()?;
                let (host, port) = addr.rsplit_once(':')?;
                let addr = (host.to_owned(), port.parse().ok()?);
                if addr.0.is_empty() {
                    // The node does not know the address of the slot's master ("?" or empty
                    // in some set-ups): the table, read again, will.
                    return Some(Redirect::Busy);
                }
                Some(if kind == S::Moved {
                    Redirect::Moved(addr)
                } else {
                    Redirect::Ask(addr)
                })
            }
            S::TryAgain | S::ClusterDown => Some(Redirect::Busy),
            _ => None,
        }
    }
}

/// What a call that failed on a slot's master met.
pub(super) enum Failure {
    /// A redirection, or a slot not served at the moment.
    Redirect(Redirect),
    /// No answer from the master: it may have died and its replica been promoted.
    Unreachable,
    /// Anything else: the call's own error.
    Other,
}

impl Failure {
    /// `redirect`, if the error asked for one; else whether the master did not answer.
    pub(super) fn new(redirect: Option<Redirect>, unreachable: bool) -> Failure {
        match redirect {
            Some(r) => Failure::Redirect(r),
            None if unreachable => Failure::Unreachable,
            None => Failure::Other,
        }
    }
}

/// What a caller of [`Cluster::follow`] lets a failure lead to.
pub(super) struct RedirectPolicy {
    /// Whether a MOVED is followed.
    pub(super) moved: bool,
    /// Whether an ASK is followed.
    pub(super) ask: bool,
    /// How long to pause before a busy slot (TRYAGAIN, CLUSTERDOWN) is tried again; `None`: it
    /// is not waited out.
    pub(super) pause: Option<Duration>,
    /// Whether a master that did not answer is looked for again in the table.
    pub(super) failover: bool,
}

/// What a failed call does next, as [`Cluster::follow`] decided.
pub(super) enum Step {
    /// MOVED, followed: the table names the slot's new master; the call goes there.
    Moved,
    /// ASK: the call goes to the node at this address, preceded by `ASKING`; the table is
    /// unchanged.
    Ask(Addr),
    /// The slot was busy: paused, and the table read again; the call goes to the slot's master
    /// as the table names it now.
    Paused,
    /// The master did not answer, and the table, read again, names another for the slot: the
    /// call goes there.
    FailedOver,
    /// The slot was busy, and the caller does not wait any longer.
    StillBusy,
    /// Nothing to follow: the error is the call's.
    GiveUp,
}

impl Cluster {
    /// The one place that decides what a call that failed on `node`, the master of `slot`, does
    /// next, and does what that takes: a MOVED points the slot at its new master (an error
    /// here is [`Cluster::moved`]'s); a busy slot is paused for and the table read again; a
    /// master that did not answer has the table read again. What `rules` does not allow is
    /// given up. The callers differ only in their `rules`, each saying why.
    pub(super) fn follow(
        &self,
        slot: u16,
        node: &Arc<Node>,
        failure: Failure,
        rules: &RedirectPolicy,
    ) -> Result<Step, Error> {
        match failure {
            Failure::Redirect(Redirect::Moved(addr)) if rules.moved => {
                self.metrics.cluster_moved.inc();
                self.moved(slot, &addr)?;
                Ok(Step::Moved)
            }
            Failure::Redirect(Redirect::Ask(addr)) if rules.ask => {
                self.metrics.cluster_ask.inc();
                Ok(Step::Ask(addr))
            }
            Failure::Redirect(Redirect::Busy) => match rules.pause {
                Some(pause) => {
                    std::thread::sleep(pause);
                    // CLUSTERDOWN "hash slot not served" and the like: the table may be out
                    // of date too. It is asked of the other masters first: a master that says
                    // the cluster is down may be the one cut off from it, whose table still
                    // names itself after its replica took over.
                    let _ = self.refresh(Instant::now(), None, Some(node));
                    Ok(Step::Paused)
                }
                None => Ok(Step::StillBusy),
            },
            Failure::Unreachable if rules.failover => {
                // The master may have failed over: the table, asked of the others first, may
                // name another.
                let _ = self.refresh(Instant::now(), None, Some(node));
                if self.table.read().names_another(slot, node) {
                    Ok(Step::FailedOver)
                } else {
                    Ok(Step::GiveUp)
                }
            }
            _ => Ok(Step::GiveUp),
        }
    }

    /// Runs `op` on a connection to the master that serves `slot`, following MOVED and ASK,
    /// waiting out TRYAGAIN and CLUSTERDOWN for up to `patience`, and repeating it once on the
    /// slot's new master when its master stopped answering. `op` gets `attempt` ≥ 1 when an
    /// earlier run may have been applied (see [`crate::base::pool::ConnPool::run`]).
    pub(crate) fn run<T>(
        &self,
        slot: u16,
        patience: Duration,
        mut op: impl FnMut(&mut Connection, u32) -> redis::RedisResult<T>,
    ) -> Result<T, Error> {
        let started = Instant::now();
        let mut ask: Option<Arc<Node>> = None;
        let mut redirects = 0;
        let mut pause = FIRST_PAUSE;
        let mut refreshed = false;
        // Whether an earlier run may have been applied before its connection failed.
        let mut maybe_applied = 0;
        loop {
            let asking = ask.is_some();
            let node = match ask.take() {
                Some(node) => node,
                None => self.node_for(slot)?,
            };
            let mut redirect = None;
            let result = node.main.run(None, |c, attempt| {
                redirect = None;
                if asking {
                    redis::cmd("ASKING").exec(c)?;
                }
                let r = op(c, attempt + maybe_applied);
                if let Err(e) = &r {
                    redirect = Redirect::of(e);
                }
                r
            });
            let e = match result {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            let rules = RedirectPolicy {
                moved: redirects < MAX_REDIRECTS,
                ask: redirects < MAX_REDIRECTS,
                pause: Some(pause).filter(|&p| started.elapsed() + p <= patience),
                // The master may have failed over: the call is repeated once if the table read
                // again names another (not for a call sent to an ASK's node).
                failover: !refreshed && !asking,
            };
            match self.follow(
                slot,
                &node,
                Failure::new(redirect, e.is_connection()),
                &rules,
            )? {
                Step::Moved => redirects += 1,
                Step::Ask(addr) => {
                    redirects += 1;
                    ask = Some(self.node_at(&addr)?);
                }
                Step::Paused => {
                    pause = (pause * 2).min(MAX_PAUSE);
                    // An ASK that ends in TRYAGAIN comes round again after the pause: the
                    // pauses bound those rounds, the count bounds redirections between two.
                    redirects = 0;
                }
                Step::FailedOver => {
                    refreshed = true;
                    maybe_applied = 1;
                }
                Step::StillBusy => return Err(self.unavailable(slot, started.elapsed(), &e)),
                Step::GiveUp => return Err(e),
            }
        }
    }

    /// The error for a slot that stayed unavailable (TRYAGAIN, CLUSTERDOWN): a connection error,
    /// as for a server that cannot be reached, which callers retry.
    pub(crate) fn unavailable(&self, slot: u16, waited: Duration, e: &Error) -> Error {
        Error::connection(
            &self.cfg.server,
            format!(
                "hash slot {slot} was not served for {} ms ({})",
                waited.as_millis(),
                e.message()
            ),
            false,
        )
    }

    /// For a waiter whose call failed on `node`: whether it must go on at the slot's master as
    /// the table names it now (MOVED; a migration or a failover in progress, after a pause of at
    /// most `limit`; a connection error, if the table read again names another master).
    pub(crate) fn waiter_follows(
        &self,
        slot: u16,
        node: &Arc<Node>,
        e: &redis::RedisError,
        limit: Duration,
    ) -> bool {
        let failure = match Failure::new(
            Redirect::of(e),
            e.is_io_error() || e.is_connection_dropped(),
        ) {
            // A waiter needs the lock's keys on one node (its queue script uses several keys):
            // it does not follow an ASK, but waits the migration out as a busy slot, then
            // queues where the slot lives.
            Failure::Redirect(Redirect::Ask(_)) => Failure::Redirect(Redirect::Busy),
            failure => failure,
        };
        // Each round of a wait (`wait.rs`) is one call: a MOVED is always followed, a busy slot
        // paused for once (the wait's rounds bound the pauses), a master that did not answer
        // looked for every time (the wait rides it out).
        let rules = RedirectPolicy {
            moved: true,
            ask: false,
            pause: Some(MAX_PAUSE.min(limit)),
            failover: true,
        };
        match self.follow(slot, node, failure, &rules) {
            Ok(Step::Moved | Step::Paused | Step::FailedOver) => true,
            // A MOVED whose master could not be made a node: the waiter stays.
            Ok(Step::Ask(_) | Step::StillBusy | Step::GiveUp) | Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirections_are_recognised() {
        let err = |text: &[u8]| {
            redis::parse_redis_value(text)
                .unwrap()
                .extract_error()
                .unwrap_err()
        };
        match Redirect::of(&err(b"-MOVED 3999 127.0.0.1:6381\r\n")) {
            Some(Redirect::Moved(addr)) => assert_eq!(addr, ("127.0.0.1".to_owned(), 6381)),
            _ => panic!("MOVED not recognised"),
        }
        match Redirect::of(&err(b"-ASK 3999 ::1:6381\r\n")) {
            Some(Redirect::Ask(addr)) => assert_eq!(addr, ("::1".to_owned(), 6381)),
            _ => panic!("ASK not recognised"),
        }
        assert!(matches!(
            Redirect::of(&err(
                b"-TRYAGAIN Multiple keys request during rehashing of slot\r\n"
            )),
            Some(Redirect::Busy)
        ));
        assert!(matches!(
            Redirect::of(&err(b"-CLUSTERDOWN The cluster is down\r\n")),
            Some(Redirect::Busy)
        ));
        assert!(matches!(
            Redirect::of(&err(b"-MOVED 3999 :6381\r\n")),
            Some(Redirect::Busy)
        ));
        assert!(Redirect::of(&err(b"-ERR unknown command\r\n")).is_none());
    }
}
