//! A request's value: what it takes, the options its setters store, and [`CRequest::run`], the
//! one place where they become a call of the Rust API.

use std::time::Duration;

use crate::kind::{self, Descriptor, Fenced, RequestKind};
use crate::metrics::KindLabel;
use crate::{AnyLock, Cancel, Client, Error, Request as ApiRequest};

/// An option a setter stores that applies to some kinds only: whether it applies is read from
/// the kind's [`Descriptor`], in [`applies`], the one check of every setter and of
/// `redislock_request_set_kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// `redislock_request_set_fencing`.
    Fencing,
    /// `redislock_request_set_owner_token`.
    OwnerToken,
    /// `redislock_request_set_at_least_ms`.
    AtLeast,
    /// `redislock_request_set_at_most_ms`.
    AtMost,
    /// `redislock_request_set_permits`.
    Permits,
    /// `redislock_request_set_kind`: which side of one lock name.
    Side,
}

impl Setting {
    /// The setting in messages.
    fn what(self) -> &'static str {
        match self {
            Setting::Fencing => "fencing",
            Setting::OwnerToken => "an owner token",
            Setting::AtLeast => "at_least",
            Setting::AtMost => "at_most",
            Setting::Permits => "a number of permits",
            Setting::Side => "a lock kind",
        }
    }
}

/// Whether `setting` applies to a request for the kind `kind` describes.
pub(crate) fn applies(kind: &Descriptor, setting: Setting) -> bool {
    match setting {
        Setting::Fencing => kind.fencing_option(),
        Setting::OwnerToken => kind.owner_token,
        Setting::AtLeast | Setting::AtMost => kind.bounds,
        Setting::Permits => kind.permits,
        Setting::Side => kind.c_kind.is_some(),
    }
}

/// The kind a `redislock_kind` number stands for, or the error that says it stands for none.
pub(crate) fn of_code(n: u32) -> Result<&'static Descriptor, Error> {
    Descriptor::of_c_kind(n).ok_or_else(|| {
        let known: Vec<String> = kind::ALL
            .iter()
            .filter_map(|d| d.c_kind)
            .map(|(name, n)| format!("{} {n}", name.trim_start_matches("REDISLOCK_KIND_")))
            .collect();
        Error::invalid_argument(format!(
            "{n} is not a redislock_kind ({})",
            known.join(", ")
        ))
    })
}

/// The Rust value behind a `redislock_request`: what it takes and the options its setters
/// stored. An option left `None` is the client's default. The setters only check that an
/// option applies to the kind and store it; the values themselves are checked by the Rust API
/// when [`CRequest::run`] acquires.
pub(crate) struct CRequest {
    client: Client,
    /// What it takes (set by its `_new` function; for one name, its side by
    /// `redislock_request_set_kind`).
    pub(super) kind: &'static Descriptor,
    /// The one name (of a lock or a semaphore), or a set's names.
    names: Vec<Vec<u8>>,
    /// A semaphore's number of permits, as its `_new` function says.
    permits: u32,
    /// How many permits of a semaphore each acquire takes (`redislock_request_set_permits`).
    pub(super) take: u32,
    pub(super) lease: Option<Duration>,
    pub(super) auto_renew: Option<bool>,
    pub(super) fencing: Option<bool>,
    pub(super) owner: Option<String>,
    pub(super) cancel: Option<Cancel>,
    /// An exclusive lock's `at_least` and `at_most`.
    pub(super) at_least: Option<Duration>,
    pub(super) at_most: Option<Duration>,
    /// A leader's identity, as given (checked when it campaigns).
    pub(crate) identity: Vec<u8>,
}

/// What a run of a request does: the three calls that take a lock with it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Call<'o> {
    /// One attempt (`redislock_request_try_acquire`).
    Try,
    /// An acquire that waits up to this long (`redislock_request_acquire`).
    Wait(Duration),
    /// A handle for the exclusive lock held with this owner token (`redislock_request_restore`).
    Restore(&'o str),
}

impl CRequest {
    /// A request of `client` for `kind` of `names`, with every option at the client's default.
    pub(crate) fn new(
        client: &Client,
        kind: &'static Descriptor,
        names: Vec<Vec<u8>>,
        permits: u32,
    ) -> CRequest {
        CRequest {
            client: client.clone(),
            kind,
            names,
            permits,
            take: 1,
            lease: None,
            auto_renew: None,
            fencing: None,
            owner: None,
            cancel: None,
            at_least: None,
            at_most: None,
            identity: Vec::new(),
        }
    }

    /// The error of a setter or call that does not apply to what this request takes.
    pub(super) fn does_not_apply(&self, what: &str) -> Error {
        Error::invalid_argument(format!(
            "{what} does not apply to a request for {}",
            self.kind.asked
        ))
    }

    /// Ok when `setting` applies to what this request takes, else the error that says it does
    /// not: the check of every setter.
    pub(super) fn check(&self, setting: Setting) -> Result<(), Error> {
        if applies(self.kind, setting) {
            Ok(())
        } else {
            Err(self.does_not_apply(setting.what()))
        }
    }

    /// Ok when every option set so far applies to `new` too, else the error that says which
    /// does not: the check of `redislock_request_set_kind` (its side is checked by
    /// [`check`](Self::check)).
    pub(super) fn check_switch(&self, new: &Descriptor) -> Result<(), Error> {
        let bounds = self.at_least.is_some() || self.at_most.is_some();
        if bounds && !applies(new, Setting::AtLeast) {
            return Err(Error::invalid_argument(
                "at_least and at_most apply to exclusive locks only",
            ));
        }
        if self.owner.is_some() && !applies(new, Setting::OwnerToken) {
            return Err(Error::invalid_argument(
                "an owner token applies to exclusive locks only: read, write and Redisson locks \
                 take none",
            ));
        }
        if self.fencing.is_some() && !applies(new, Setting::Fencing) {
            return Err(Error::invalid_argument(format!(
                "fencing does not apply to {}: {} have no fencing tokens",
                new.what, new.plural
            )));
        }
        Ok(())
    }

    /// `request` with the options every kind has, where they were set.
    fn with_options<'a, K: RequestKind>(&'a self, request: ApiRequest<'a, K>) -> ApiRequest<'a, K> {
        let request = match self.lease {
            Some(lease) => request.lease(lease),
            None => request,
        };
        let request = match self.auto_renew {
            Some(on) => request.auto_renew(on),
            None => request,
        };
        match &self.cancel {
            Some(cancel) => request.cancel_on(cancel),
            None => request,
        }
    }

    /// `request` with the options every kind has, and fencing where it was set.
    fn with_fencing<'a, K: Fenced>(&'a self, request: ApiRequest<'a, K>) -> ApiRequest<'a, K> {
        let request = self.with_options(request);
        match self.fencing {
            Some(on) => request.fencing(on),
            None => request,
        }
    }

    /// Takes what the request takes, as `call` says: the one place where the stored options
    /// become a request of the Rust API, which checks them. The setters refuse what does not
    /// apply to the kind, so each kind uses all of its options here.
    pub(super) fn run(&self, call: Call<'_>) -> Result<AnyLock, Error> {
        let c = &self.client;
        let name: &[u8] = self.names.first().map_or(&[], Vec::as_slice);
        Ok(match (self.kind.label, call) {
            (KindLabel::Exclusive, call) => {
                let request = self.with_fencing(c.lock(name));
                let request = match &self.owner {
                    Some(owner) => request.owner_token(owner),
                    None => request,
                };
                let request = match self.at_least {
                    Some(d) => request.at_least(d),
                    None => request,
                };
                let request = match self.at_most {
                    Some(d) => request.at_most(d),
                    None => request,
                };
                match call {
                    Call::Try => request.try_acquire()?.into(),
                    Call::Wait(w) => request.acquire(w)?.into(),
                    Call::Restore(owner) => request.restore(owner)?.into(),
                }
            }
            (_, Call::Restore(_)) => return Err(self.does_not_apply("restore")),
            (KindLabel::Read, Call::Try) => self.with_fencing(c.rw_lock(name)).try_read()?.into(),
            (KindLabel::Read, Call::Wait(w)) => self.with_fencing(c.rw_lock(name)).read(w)?.into(),
            (KindLabel::Write, Call::Try) => self.with_fencing(c.rw_lock(name)).try_write()?.into(),
            (KindLabel::Write, Call::Wait(w)) => {
                self.with_fencing(c.rw_lock(name)).write(w)?.into()
            }
            (KindLabel::Redisson, Call::Try) => self
                .with_options(c.redisson_lock(name))
                .try_acquire()?
                .into(),
            (KindLabel::Redisson, Call::Wait(w)) => {
                self.with_options(c.redisson_lock(name)).acquire(w)?.into()
            }
            #[cfg(feature = "recipe-kind")]
            (KindLabel::Recipe, Call::Try) => {
                self.with_options(c.recipe_lock(name)).try_acquire()?.into()
            }
            #[cfg(feature = "recipe-kind")]
            (KindLabel::Recipe, Call::Wait(w)) => {
                self.with_options(c.recipe_lock(name)).acquire(w)?.into()
            }
            (KindLabel::Semaphore, Call::Try) => {
                let request = self.with_options(c.semaphore(name, self.permits));
                request.try_acquire(self.take)?.into()
            }
            (KindLabel::Semaphore, Call::Wait(w)) => {
                let request = self.with_options(c.semaphore(name, self.permits));
                request.acquire(self.take, w)?.into()
            }
            (KindLabel::Leader, call) => {
                // The Rust API checks the rest (empty, too long, control characters).
                let identity = std::str::from_utf8(&self.identity)
                    .map_err(|_| Error::invalid_argument("the leader's identity is not UTF-8"))?;
                let request = self.with_options(c.leader(name)).identity(identity);
                match call {
                    Call::Wait(w) => request.campaign(w)?.into(),
                    _ => request.try_campaign()?.into(),
                }
            }
            (KindLabel::Set, Call::Try) => self
                .with_fencing(c.lock_all(&self.names))
                .try_acquire()?
                .into(),
            (KindLabel::Set, Call::Wait(w)) => self
                .with_fencing(c.lock_all(&self.names))
                .acquire(w)?
                .into(),
        })
    }
}
