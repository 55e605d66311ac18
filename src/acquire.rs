//! The acquire algorithm: one attempt (`SET key token NX PX`, or the ACQUIRE script with
//! fencing), then, with a wait bound, the fair queue of `waiting.rs`; a place among the renewed
//! locks taken before the first round trip; replica acknowledgement with `min_replicas`; and the
//! handle of a lock restored by its owner token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::Owner;
use crate::cancel::Cancel;
use crate::client::{Client, LockOptions};
use crate::config::{check_lease, check_wait};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::{Lock, LockState};
use crate::ops;
use crate::token::Token;
use crate::waiting;

impl Client {
    pub(crate) fn acquire_with(
        &self,
        name: &[u8],
        owner: Option<&str>,
        cancel: Option<&Cancel>,
        opts: &LockOptions,
        wait: Option<Duration>,
    ) -> Result<Lock, Error> {
        check_lease(opts.lease, opts.auto_renew)?;
        if opts.fencing && self.config().redlock.is_some() {
            return Err(crate::quorum::no_fencing());
        }
        let owner = owner.map(Token::from_owner).transpose()?;
        if let Some(w) = wait {
            check_wait(w)?;
        }
        let keys = LockKeys::new(&self.config().key_prefix, name)?;
        if cancel.is_some_and(Cancel::is_cancelled) {
            return Err(Error::cancelled(&keys.shown()));
        }
        let b = self.backend()?;
        // A place among the renewed locks is taken before the first attempt, so that a refusal
        // costs no round trip; a waiter gives it back while it waits.
        let reserve = || {
            if opts.auto_renew {
                b.renewer.reserve().map(Some)
            } else {
                Ok(None)
            }
        };
        let mut reservation = reserve()?;
        let token = match owner {
            Some(token) => token,
            None => Token::new(b.pid)?,
        };
        let started = Instant::now();
        let waits = wait.is_some_and(|w| !w.is_zero());
        // A name found held recently is queued for at once (the queueing script takes a free
        // lock too): no SET NX round trip that would most likely be refused.
        // With Redlock a refusal is an error that says what every master answered: kept for
        // the error of a single attempt.
        let mut refusal = None;
        let first = if waits && waiting::recently_contended(keys.lock()) {
            None
        } else {
            match ops::acquire(&b, &keys, &token, opts.lease, opts.fencing) {
                Err(e) if e.is_held() => {
                    refusal = Some(e);
                    None
                }
                other => other?,
            }
        };
        let grant = match first {
            Some(grant) => Some(grant),
            None => match wait {
                Some(w) if !w.is_zero() => {
                    drop(reservation.take());
                    let grant =
                        waiting::wait(b.backend(), &keys, &token, opts, started + w, cancel)?;
                    if grant.is_some() {
                        reservation = match reserve() {
                            Ok(reservation) => reservation,
                            Err(e) => {
                                let _ = ops::release(&b, &keys, &token);
                                return Err(e);
                            }
                        };
                    }
                    grant
                }
                _ => None,
            },
        };
        let Some(grant) = grant else {
            return Err(match wait {
                Some(_) => Error::wait_timeout(&keys.shown(), started.elapsed()),
                None => refusal.unwrap_or_else(|| Error::held(&keys.shown())),
            });
        };
        self.held(
            &b,
            keys,
            token,
            opts.fencing.then_some(grant.fence),
            reservation,
            opts,
            grant.lease_from,
        )
    }

    /// A handle for a lock that the key holds with `token` now: the lease is reset (the one
    /// round trip), and auto-renewal starts if the options ask for it.
    pub(crate) fn restore_with(
        &self,
        name: &[u8],
        token: &str,
        opts: &LockOptions,
    ) -> Result<Lock, Error> {
        check_lease(opts.lease, opts.auto_renew)?;
        let token = Token::from_owner(token)?;
        let keys = LockKeys::new(&self.config().key_prefix, name)?;
        let b = self.backend()?;
        let reservation = if opts.auto_renew {
            Some(b.renewer.reserve()?)
        } else {
            None
        };
        let sent = Instant::now();
        if !ops::extend(&b, &keys, &token, opts.lease)? {
            return Err(Error::not_held(
                &keys.shown(),
                "its key does not hold this owner token (released, expired or taken over)",
            ));
        }
        self.held(&b, keys, token, None, reservation, opts, sent)
    }

    /// The handle of a lock just granted (or restored), its renewal started.
    #[allow(clippy::too_many_arguments)]
    fn held(
        &self,
        b: &Arc<Owner>,
        keys: LockKeys,
        token: Token,
        fence: Option<u64>,
        reservation: Option<crate::renewal::Reservation>,
        opts: &LockOptions,
        lease_from: Instant,
    ) -> Result<Lock, Error> {
        let state = Arc::new(LockState::new(
            b.backend().clone(),
            keys,
            token,
            fence,
            reservation,
            opts.lease,
            lease_from,
        ));
        let lock = Lock {
            state: state.clone(),
            _owner: b.clone(),
        };
        if state.auto_renew {
            b.renewer.watch(state)?;
        }
        Ok(lock)
    }
}
