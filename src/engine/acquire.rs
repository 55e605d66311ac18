//! The one acquire, for every kind of lock: one attempt, then, with a wait bound, the wait loop
//! (`wait.rs`); a place among the renewed locks taken before the first round trip; replica
//! acknowledgement with `min_replicas`; and the held lock's state, its renewal started. Also the
//! handle of an exclusive lock restored by its owner token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::config::{check_bounds, check_lease, check_wait};
use crate::base::error::{Error, ErrorKind};
use crate::base::grant::{Grant, LockOptions};
use crate::base::keys::LockKeys;
use crate::base::metrics::{KindLabel, Outcome};
use crate::base::token::Token;
use crate::engine::backend::{Backend, Owner};
use crate::engine::bounds::Bounds;
use crate::engine::cancel::Cancel;
use crate::engine::contended;
use crate::engine::held::Held;
use crate::engine::kinds::exclusive::ExclusiveRules;
use crate::engine::kinds::{Acquiring, Rules};
use crate::engine::lock::LockState;
use crate::engine::renewable::Reservation;
use crate::engine::trace;
use crate::engine::wait;
use crate::stores::Check;

/// Checks an acquire's lease and wait bound, and whether it was cancelled already.
pub(crate) fn check(
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
    shown: impl FnOnce() -> String,
) -> Result<(), Error> {
    check_lease(opts.lease, opts.auto_renew)?;
    check_bounds(opts.lease, opts.auto_renew, opts.at_least, opts.at_most)?;
    if let Some(w) = wait {
        check_wait(w)?;
    }
    if cancel.is_some_and(Cancel::is_cancelled) {
        return Err(Error::cancelled(&shown()));
    }
    Ok(())
}

/// Takes a grant of `kind` on `keys` (a set's: its first name's), held with `token` or, without
/// one, the kind's own ([`Rules::token`]): one attempt when `wait` is `None` (fails with
/// [`Error::is_held`]), else waits up to `wait` (fails with [`Error::is_wait_timeout`]; with
/// `cancel`, a cancel ends the wait with [`Error::is_cancelled`]). Returns the held lock and the
/// grant it was made from (a set's fencing tokens are there).
///
/// A place among the renewed locks is taken before the first round trip (so a refusal costs
/// none) and given back while waiting. An acquire that may wait skips the attempt for a name
/// found held lately in this process: its first wait round takes a free lock too. With
/// `min_replicas` a grant counts once the replicas have it: a handoff lost before they had it
/// (a failover) means waiting again, within the same bound.
///
/// Every acquire is counted in the backend's metrics once it ends: its outcome, and the time it
/// spent when it waited.
pub(crate) fn acquire(
    owner: &Arc<Owner>,
    kind: Box<dyn Rules>,
    keys: LockKeys,
    token: Option<Token>,
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
) -> Result<(Held, Grant), Error> {
    check(opts, wait, cancel, || kind.shown(&keys))?;
    kind.offered(&*owner.store, &keys)?;
    // A lease longer than `at_most` is cut to it: the first lease is then the last.
    let cut;
    let opts = match opts.at_most {
        Some(most) if most < opts.lease => {
            cut = LockOptions {
                lease: most,
                ..opts.clone()
            };
            &cut
        }
        _ => opts,
    };
    let token = match token {
        Some(token) => token,
        None => kind.token(owner)?,
    };
    let started = Instant::now();
    let (place, grant) = {
        let a = Acquiring::new(&*kind, &keys, &token, opts.lease, opts.fencing, owner.pid);
        let span = trace::Acquire::start(|| trace::Subject {
            kind: a.kind.label(),
            name: a.keys.name(),
            metrics: &owner.metrics,
        });
        let mut waited = false;
        let result = take(owner, &a, opts, wait, cancel, started, &mut waited);
        span.end(&result, waited, started);
        let error = result.as_ref().err().map(Error::kind);
        owner.metrics.acquired(
            kind.label(),
            keys.name(),
            Outcome::of(&result, waited),
            error,
            waited.then(|| started.elapsed()),
        );
        result?
    };
    let fence = opts.fencing.then_some(grant.token());
    let lock = hold(
        owner,
        keys,
        token,
        fence,
        place,
        opts,
        grant.lease_from,
        kind,
    )?;
    Ok((lock, grant))
}

/// [`acquire`] itself, up to the grant and its place among the renewed locks; `waited` is set
/// when it enters the wait loop.
fn take(
    owner: &Arc<Owner>,
    a: &Acquiring<'_>,
    opts: &LockOptions,
    wait: Option<Duration>,
    cancel: Option<&Cancel>,
    started: Instant,
    waited: &mut bool,
) -> Result<(Option<Reservation>, Grant), Error> {
    let b = owner.backend();
    if opts.fencing {
        b.store.check(Check::Fencing)?;
    }
    let mut place = reserve(owner, opts)?;
    let waits = wait.is_some_and(|w| !w.is_zero());
    // A Redlock refusal is an error that says what every master answered: kept for the error of
    // a single attempt.
    let mut refusal = None;
    let first = if waits && contended::recently(a.keys.lock()) {
        None
    } else {
        match try_once(b, a) {
            Ok(Some(grant)) => acknowledge(b, a, grant)?,
            Ok(None) => None,
            Err(e) if e.is_held() => {
                refusal = Some(e);
                None
            }
            Err(e) => return Err(e),
        }
    };
    let grant = match first {
        Some(grant) => grant,
        None if waits => {
            drop(place.take());
            let deadline = started + wait.unwrap_or_default();
            *waited = true;
            let _waiting = Waiting::enter(b, a.kind.label());
            let grant = loop {
                let grant =
                    wait::wait(b, a, started, deadline, cancel).map_err(|e| a.explain(e))?;
                match acknowledge(b, a, grant)? {
                    Some(grant) => break grant,
                    None => log::info!(
                        "{} was handed over but lost before its replicas had it; waiting again",
                        a.shown()
                    ),
                }
            };
            place = match reserve(owner, opts) {
                Ok(place) => place,
                Err(e) => {
                    let _ = a.kind.release(b, a.keys, a.token);
                    return Err(e);
                }
            };
            grant
        }
        None => {
            // A one-server store's refusal says only that the name is taken (a Redlock refusal
            // says what every master answered): by another owner, or as another kind of lock.
            if refusal.is_none() {
                a.kind.refused(b, a.keys)?;
            }
            return Err(match wait {
                Some(_) => a.explain(Error::wait_timeout(&a.shown(), started.elapsed())),
                None => refusal.unwrap_or_else(|| a.explain(Error::held(&a.shown()))),
            });
        }
    };
    Ok((place, grant))
}

/// One attempt. When it failed after it went out for want of an answer, it may have been
/// applied: the grant is given back before the error is returned.
fn try_once(b: &Backend, a: &Acquiring<'_>) -> Result<Option<Grant>, Error> {
    let mut sent = false;
    let attempt = a.kind.try_once(a, &*b.store, &mut sent);
    attempt.map_err(|e| {
        if sent && e.kind() != ErrorKind::Redis {
            let _ = a.kind.release(b, a.keys, a.token);
        }
        a.explain(e)
    })
}

/// With `min_replicas`, a grant counts once the replicas have it: the grant (or the handoff,
/// written by the releaser's connection) is followed by a write of ours (the lease reset) and
/// WAIT, which cover it as replicas apply the stream in order. `None`: the grant was gone by
/// then (lost in a failover). On an error the grant is given back.
fn acknowledge(b: &Backend, a: &Acquiring<'_>, grant: Grant) -> Result<Option<Grant>, Error> {
    if b.store.cfg().min_replicas == 0 || grant.acknowledged {
        return Ok(Some(grant));
    }
    let sent = Instant::now();
    match a.kind.extend(b, a.keys, a.token, a.lease) {
        Ok(true) => Ok(Some(Grant {
            lease_from: sent,
            acknowledged: true,
            ..grant
        })),
        Ok(false) => Ok(None),
        Err(e) => {
            let _ = a.kind.release(b, a.keys, a.token);
            Err(e)
        }
    }
}

/// A handle for the exclusive lock that the key holds with `token` now: the lease is reset (the
/// one round trip), and auto-renewal starts if the options ask for it. Fails with
/// [`Error::is_not_held`] when the key does not hold that token.
pub(crate) fn restore(
    owner: &Arc<Owner>,
    keys: LockKeys,
    token: Token,
    opts: &LockOptions,
) -> Result<Held, Error> {
    check_lease(opts.lease, opts.auto_renew)?;
    if opts.at_least.is_some() || opts.at_most.is_some() {
        return Err(Error::invalid_argument(format!(
            "at_least and at_most count from the grant, which a restore of lock {} does not \
             make: restore it without them",
            keys.shown()
        )));
    }
    let place = reserve(owner, opts)?;
    let sent = Instant::now();
    if !ExclusiveRules.extend(owner, &keys, &token, opts.lease)? {
        return Err(Error::not_held(
            &keys.shown(),
            "its key does not hold this owner token (released, expired or taken over)",
        ));
    }
    hold(
        owner,
        keys,
        token,
        None,
        place,
        opts,
        sent,
        Box::new(ExclusiveRules),
    )
}

/// Counts a waiter in the backend's waiters until dropped.
struct Waiting<'a>(&'a Backend, KindLabel);

impl Waiting<'_> {
    fn enter(b: &Backend, kind: KindLabel) -> Waiting<'_> {
        b.metrics.waiting(kind, 1);
        Waiting(b, kind)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.metrics.waiting(self.1, -1);
    }
}

/// Takes a place among the renewed locks when the options ask for auto-renewal.
fn reserve(owner: &Owner, opts: &LockOptions) -> Result<Option<Reservation>, Error> {
    if opts.auto_renew {
        owner.renewer.reserve().map(Some)
    } else {
        Ok(None)
    }
}

/// The handle of a grant just made (or restored), its renewal started (`place`: its place among
/// the renewed locks, `None` without auto-renewal).
#[allow(clippy::too_many_arguments)]
pub(crate) fn hold(
    owner: &Arc<Owner>,
    keys: LockKeys,
    token: Token,
    fence: Option<u64>,
    place: Option<Reservation>,
    opts: &LockOptions,
    lease_from: Instant,
    kind: Box<dyn Rules>,
) -> Result<Held, Error> {
    // `at_least` counts from the grant's answer (the later estimate: the key is kept at least
    // that long), `at_most` from before its request was sent (the earlier one).
    let bounds = Bounds {
        keep_until: opts.at_least.map(|d| Instant::now() + d),
        until: opts.at_most.map(|d| lease_from + d),
    };
    let state = Arc::new(LockState::new(
        owner.backend().clone(),
        keys,
        token,
        fence,
        place,
        opts.lease,
        lease_from,
        kind,
        bounds,
    ));
    let lock = Held {
        state: state.clone(),
        _owner: owner.clone(),
    };
    if let Some(id) = state.renew_id {
        owner.renewer.watch(id, state)?;
    }
    Ok(lock)
}
