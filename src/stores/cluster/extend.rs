//! [`LockStore::extend_many`](crate::stores::LockStore::extend_many) in a cluster: the renewals
//! of many locks, one pipeline to each master.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::redirect::{Failure, RedirectPolicy, Step};
use super::{Cluster, Redirect};
use crate::base::error::Error;
use crate::stores::Node;
use crate::stores::extend::{Extension, extend_pipeline, send_extends};

/// [`LockStore::extend_many`](crate::stores::LockStore::extend_many) in a cluster: the locks
/// grouped by the master of their slot, one pipeline to each. Locks whose slot moved (MOVED) are
/// sent again to their new master, and so are those of a master that stopped answering if the
/// table read again names another one: once, so that renewal is never held up for long (a lock
/// that fails here is retried by its renewal thread). A lock whose slot is being migrated (ASK)
/// is extended on its own.
pub(super) fn extend_many_in_cluster(
    c: &Cluster,
    locks: &[Extension<'_>],
) -> Vec<Result<bool, Error>> {
    let mut out: Vec<Option<Result<bool, Error>>> = locks.iter().map(|_| None).collect();
    let mut pending: Vec<usize> = (0..locks.len()).collect();
    // Masters that failed to answer, and how: their locks are not sent to them again.
    let mut failed: Vec<(Arc<Node>, Error)> = Vec::new();
    for round in 0..2 {
        let last_round = round == 1;
        let mut groups: Vec<(Arc<Node>, Vec<usize>)> = Vec::new();
        for i in pending.drain(..) {
            let node = match c.node_for(locks[i].keys.slot()) {
                Ok(node) => node,
                Err(e) => {
                    out[i] = Some(Err(e));
                    continue;
                }
            };
            if let Some((_, e)) = failed.iter().find(|(n, _)| Arc::ptr_eq(n, &node)) {
                out[i] = Some(Err(e.clone()));
                continue;
            }
            match groups.iter_mut().find(|(n, _)| Arc::ptr_eq(n, &node)) {
                Some((_, group)) => group.push(i),
                None => groups.push((node, vec![i])),
            }
        }
        let mut unreachable = false;
        for (node, group) in groups {
            match extend_pipeline(&c.cfg, &node.main, group.iter().map(|&i| &locks[i])) {
                Ok(replies) => {
                    for (i, reply) in group.into_iter().zip(replies) {
                        let e = match reply {
                            Ok(extended) => {
                                out[i] = Some(Ok(extended));
                                continue;
                            }
                            Err(e) => e,
                        };
                        // A reply of a master that answered: a redirection or the lock's
                        // own error, never a master that did not answer.
                        let failure = Failure::new(Redirect::of(&e), false);
                        // A busy slot is not waited out (renewal retries soon anyway).
                        let rules = RedirectPolicy {
                            moved: !last_round,
                            ask: true,
                            pause: None,
                            failover: false,
                        };
                        match c.follow(locks[i].keys.slot(), &node, failure, &rules) {
                            // A MOVED whose master could not be made a node is sent again all
                            // the same: on the last round it is the lock's error.
                            Ok(Step::Moved) | Err(_) => pending.push(i),
                            // A migration: this lock is extended on its own, through `run`.
                            Ok(Step::Ask(_)) => out[i] = Some(extend_routed(c, &locks[i])),
                            Ok(_) => out[i] = Some(Err(Error::from_redis(node.main.server(), &e))),
                        }
                    }
                }
                Err(e) if e.is_connection() && !last_round => {
                    unreachable = true;
                    pending.extend(group);
                    failed.push((node, e));
                }
                Err(e) => {
                    for i in group {
                        out[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        if unreachable {
            // A master may have failed over: its locks go to the new one, if the table says so.
            // Unlike `run` and waiters (through `Cluster::follow`), one call here may find
            // several masters unreachable: the table is read once for them all, after every
            // master has had its pipeline (the renewals of the others are not held up by the
            // reading), and without avoiding any one of them. Their locks are grouped again
            // above: those the table still gives to a failed master get its error.
            let _ = c.refresh(Instant::now(), None, None);
        }
        if pending.is_empty() {
            break;
        }
    }
    out.into_iter()
        .map(|o| o.unwrap_or_else(|| Err(Error::internal("a renewal got no outcome"))))
        .collect()
}

/// The EXTEND of one lock in a cluster (its kind's), following redirections, not waiting out a
/// migration (renewal retries soon anyway).
fn extend_routed(c: &Cluster, l: &Extension<'_>) -> Result<bool, Error> {
    c.run(l.keys.slot(), Duration::ZERO, |con, _| {
        let mut replies = send_extends(con, &c.cfg, std::iter::once(l))?;
        // Its error, a redirection among them, is the call's.
        replies.pop().unwrap_or(Ok(false))
    })
}
