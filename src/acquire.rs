//! The acquire algorithm: one attempt (`SET key token NX PX`, or the ACQUIRE script with
//! fencing), then, with a wait bound, the fair queue of `waiting.rs`; a place among the renewed
//! locks taken before the first round trip; replica acknowledgement with `min_replicas`; and the
//! handle of a lock restored by its owner token.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::{Backend, Owner};
use crate::cancel::Cancel;
use crate::client::{Client, LockOptions};
use crate::config::{check_lease, check_wait};
use crate::error::Error;
use crate::keys::LockKeys;
use crate::lock::{Lock, LockState, extend_key, release_key};
use crate::replication;
use crate::scripts;
use crate::token::Token;
use crate::waiting::{self, Grant};

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
        let mut slot = reserve()?;
        let token = match owner {
            Some(token) => token,
            None => Token::new(b.pid)?,
        };
        let started = Instant::now();
        let waits = wait.is_some_and(|w| !w.is_zero());
        // A name found held recently is queued for at once (the queueing script takes a free
        // lock too): no SET NX round trip that would most likely be refused.
        let first = if waits && waiting::recently_contended(keys.lock()) {
            None
        } else {
            try_once(&b, &keys, &token, opts)?
        };
        let grant = match first {
            Some(grant) => Some(grant),
            None => match wait {
                Some(w) if !w.is_zero() => {
                    drop(slot.take());
                    let grant =
                        waiting::wait(b.backend(), &keys, &token, opts, started + w, cancel)?;
                    if grant.is_some() {
                        slot = match reserve() {
                            Ok(slot) => slot,
                            Err(e) => {
                                let _ = release_key(&b.main, &keys, &token);
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
                None => Error::held(&keys.shown()),
            });
        };
        self.held(
            &b,
            keys,
            token,
            opts.fencing.then_some(grant.fence),
            slot,
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
        let slot = if opts.auto_renew {
            Some(b.renewer.reserve()?)
        } else {
            None
        };
        let sent = Instant::now();
        if !extend_key(&b.main, &b.cfg, &keys, &token, opts.lease)? {
            return Err(Error::not_held(
                &keys.shown(),
                "its key does not hold this owner token (released, expired or taken over)",
            ));
        }
        self.held(&b, keys, token, None, slot, opts, sent)
    }

    /// The handle of a lock just granted (or restored), its renewal started.
    #[allow(clippy::too_many_arguments)]
    fn held(
        &self,
        b: &Arc<Owner>,
        keys: LockKeys,
        token: Token,
        fence: Option<u64>,
        slot: Option<crate::renewal::Slot>,
        opts: &LockOptions,
        lease_from: Instant,
    ) -> Result<Lock, Error> {
        let state = Arc::new(LockState::new(
            b.backend().clone(),
            keys,
            token,
            fence,
            slot,
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

/// One attempt on the main pool: the classic `SET key token NX PX lease` (or the ACQUIRE script
/// with fencing). `Ok(None)`: held by another owner.
fn try_once(
    b: &Backend,
    keys: &LockKeys,
    token: &Token,
    opts: &LockOptions,
) -> Result<Option<Grant>, Error> {
    let ms = opts.lease.as_millis() as u64;
    let mut sent = false;
    let mut sent_at = Instant::now();
    // Set while a grant waits for its replicas' acknowledgement (min_replicas).
    let mut unacknowledged = false;
    let result = b.main.run(None, |c, attempt| {
        sent = true;
        sent_at = Instant::now();
        // A retry (after the connection dropped mid-call) uses the script, which also accepts
        // the key already holding our token: the first SET may have been applied.
        if !opts.fencing && attempt == 0 {
            let mut set = redis::cmd("SET");
            set.arg(keys.lock())
                .arg(token.as_str())
                .arg("NX")
                .arg("PX")
                .arg(ms);
            if b.cfg.min_replicas == 0 {
                let set: Option<String> = set.query(c)?;
                return Ok(set.map(|_| 0));
            }
            // With min_replicas the WAIT goes in the same round trip.
            let mut pipe = redis::pipe();
            replication::add_wait(pipe.add_command(set), &b.cfg);
            let (set, acks): (Option<String>, i64) = pipe.query(c)?;
            if set.is_some() {
                unacknowledged = true;
                replication::check(acks, &b.cfg)?;
                unacknowledged = false;
            }
            Ok(set.map(|_| 0))
        } else {
            let (ok, fence): (i64, i64) = scripts::ACQUIRE
                .key(keys.lock())
                .key(keys.fence())
                .arg(token.as_str())
                .arg(ms)
                .arg(if opts.fencing { "1" } else { "0" })
                .invoke(c)?;
            if ok == 1 {
                unacknowledged = true;
                replication::wait(c, &b.cfg)?;
                unacknowledged = false;
            }
            Ok((ok == 1).then_some(fence.max(0) as u64))
        }
    });
    match result {
        Ok(fence) => Ok(fence.map(|fence| Grant {
            fence,
            lease_from: sent_at,
        })),
        Err(e) => {
            if unacknowledged || (sent && e.is_timeout()) {
                // Not acknowledged by enough replicas: not a grant. Or the SET may have been
                // applied before the reply was lost: the lock may be held with our token.
                // Remove it if so; never assume either way.
                let _ = release_key(&b.main, keys, token);
            }
            Err(e)
        }
    }
}
