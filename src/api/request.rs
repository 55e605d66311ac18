//! The requests: one type, [`Request`], for asking for a lock of every kind.
//!
//! A request names the lock and says how to take it (lease, auto-renewal, fencing, a cancel);
//! every setter takes and returns the request, and every acquire borrows it, so one request can
//! acquire again and again with the same settings. What one kind alone offers (an owner token,
//! the read or the write side, a number of permits) is on that kind's request only: each kind's
//! part, with its alias ([`LockRequest`](crate::LockRequest) for an exclusive lock), is in its
//! file of `kinds/`.

use std::marker::PhantomData;
use std::time::Duration;

use crate::api::client::Client;
use crate::api::kinds::{Fenced, RequestKind};
use crate::base::error::Error;
use crate::base::grant::{Grant, LockOptions};
use crate::base::keys::LockKeys;
use crate::base::token::Token;
use crate::engine::acquire;
use crate::engine::cancel::Cancel;
use crate::engine::held::Held;
use crate::engine::kinds::Rules;

/// A request for a lock of kind `K`: its name(s) and how to take it. Made by the client's method
/// of each kind ([`Client::lock`] and the others), with the client's defaults.
#[derive(Debug)]
#[must_use]
pub struct Request<'a, K: RequestKind> {
    pub(in crate::api) client: &'a Client,
    /// The names: one, or a set's.
    pub(in crate::api) names: Vec<&'a [u8]>,
    pub(in crate::api) opts: LockOptions,
    pub(in crate::api) cancel: Option<&'a Cancel>,
    /// The owner token, when the application names the owner (for the kinds that take one).
    pub(in crate::api) owner: Option<&'a str>,
    /// The number of permits (for the kinds that have them).
    pub(in crate::api) permits: u32,
    /// The identity shown to observers (for the kinds that campaign).
    pub(in crate::api) identity: Option<&'a str>,
    kind: PhantomData<K>,
}

// By hand: a derived `Clone` would ask the kind (an empty enum) to be `Clone`.
impl<K: RequestKind> Clone for Request<'_, K> {
    fn clone(&self) -> Self {
        Request {
            names: self.names.clone(),
            opts: self.opts.clone(),
            ..*self
        }
    }
}

impl<'a, K: RequestKind> Request<'a, K> {
    /// A request with the client's defaults (its kind's file turns fencing on or off where the
    /// kind's grants always or never carry tokens).
    pub(in crate::api) fn new(client: &'a Client, names: Vec<&'a [u8]>, permits: u32) -> Self {
        let cfg = client.config();
        Request {
            client,
            names,
            opts: LockOptions {
                lease: cfg.lease,
                auto_renew: cfg.auto_renew,
                fencing: cfg.fencing,
                at_least: None,
                at_most: None,
            },
            cancel: None,
            owner: None,
            permits,
            identity: None,
            kind: PhantomData,
        }
    }

    /// The request with fencing tokens, for a kind whose grants always carry them.
    pub(in crate::api) fn with_fencing(mut self) -> Self {
        self.opts.fencing = true;
        self
    }

    /// The request without fencing tokens, for a kind whose grants never carry them.
    pub(in crate::api) fn without_fencing(mut self) -> Self {
        self.opts.fencing = false;
        self
    }

    /// The lease of each grant (default: the client's `lease`).
    pub fn lease(mut self, lease: Duration) -> Self {
        self.opts.lease = lease;
        self
    }

    /// Whether a renewal thread keeps each grant alive (default: the client's `auto_renew`).
    pub fn auto_renew(mut self, on: bool) -> Self {
        self.opts.auto_renew = on;
        self
    }

    /// Lets `cancel` end a waiting acquire from another thread: it then fails with
    /// [`Error::is_cancelled`], leaving no queue entry and no lock behind (see [`Cancel`]).
    pub fn cancel_on(mut self, cancel: &'a Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// The keys of the first (or only) name.
    pub(in crate::api) fn keys(&self) -> Result<LockKeys, Error> {
        let name = self.names.first().copied().unwrap_or_default();
        self.client.keys(name)
    }

    /// Acquires a grant of `kind` on `keys` with this request's settings, held with `token` (the
    /// kind's own without one): the one acquire of every kind.
    pub(in crate::api) fn take_as(
        &self,
        kind: Box<dyn Rules>,
        keys: LockKeys,
        token: Option<Token>,
        wait: Option<Duration>,
    ) -> Result<(Held, Grant), Error> {
        let b = self.client.backend()?;
        acquire::acquire(&b, kind, keys, token, &self.opts, wait, self.cancel)
    }
}

impl<'a, K: Fenced> Request<'a, K> {
    /// Whether each grant gets a fencing token (default: the client's `fencing`): strictly
    /// larger than that of every earlier fenced grant of the name (on a Sentinel group or a
    /// Cluster ordered first by the failover epoch of the master that granted it). Readers and writers of a name
    /// share one counter (with the exclusive lock of that name): a writer's token is larger than
    /// that of every grant before it, and every reader's token is larger than that of the writer
    /// before it; readers holding at once are not ordered among themselves.
    pub fn fencing(mut self, on: bool) -> Self {
        self.opts.fencing = on;
        self
    }
}
