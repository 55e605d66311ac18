//! Redirections: what an error reply of a cluster node asks for (`MOVED`, `ASK`, `TRYAGAIN`,
//! `CLUSTERDOWN`), and how a call follows it: [`Cluster::run`] (lock calls) and
//! [`Cluster::waiter_follows`] (waiters).

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

impl Cluster {
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
            match redirect {
                Some(Redirect::Moved(addr)) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    self.cfg.metrics.cluster_moved.inc();
                    self.moved(slot, &addr)?;
                    continue;
                }
                Some(Redirect::Ask(addr)) if redirects < MAX_REDIRECTS => {
                    redirects += 1;
                    self.cfg.metrics.cluster_ask.inc();
                    ask = Some(self.node_at(&addr)?);
                    continue;
                }
                Some(Redirect::Busy) => {
                    if started.elapsed() + pause <= patience {
                        std::thread::sleep(pause);
                        pause = (pause * 2).min(MAX_PAUSE);
                        // An ASK that ends in TRYAGAIN comes round again after the pause: the
                        // pauses bound those rounds, the count bounds redirections between two.
                        redirects = 0;
                        // CLUSTERDOWN "hash slot not served" and the like: the table may be
                        // out of date too. It is asked of the other masters first: a master
                        // that says the cluster is down may be the one cut off from it, whose
                        // table still names itself after its replica took over.
                        let _ = self.refresh(Instant::now(), None, Some(&node));
                        continue;
                    }
                    return Err(self.unavailable(slot, started.elapsed(), &e));
                }
                _ => {}
            }
            if e.is_connection() && !refreshed && !asking {
                refreshed = true;
                maybe_applied = 1;
                // The master may have failed over: retry once if the table names another.
                let _ = self.refresh(Instant::now(), None, Some(&node));
                let moved_on = self
                    .table
                    .read()
                    .node(slot)
                    .is_some_and(|n| !Arc::ptr_eq(n, &node));
                if moved_on {
                    continue;
                }
            }
            return Err(e);
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
        match Redirect::of(e) {
            Some(Redirect::Moved(addr)) => {
                self.cfg.metrics.cluster_moved.inc();
                self.moved(slot, &addr).is_ok()
            }
            // A waiter needs the lock's keys on one node (its queue script uses several keys):
            // during a migration it waits, then queues where the slot lives.
            Some(Redirect::Ask(_)) | Some(Redirect::Busy) => {
                std::thread::sleep(MAX_PAUSE.min(limit));
                let _ = self.refresh(Instant::now(), None, Some(node));
                true
            }
            None if e.is_io_error() || e.is_connection_dropped() => {
                let _ = self.refresh(Instant::now(), None, Some(node));
                self.table
                    .read()
                    .node(slot)
                    .is_some_and(|n| !Arc::ptr_eq(n, node))
            }
            None => false,
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
