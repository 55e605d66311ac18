//! A request's value: what it takes, and the options its setters store, each checked against the
//! kind's descriptor. [`CRequest::run`], the one place where they become a call of the Rust API
//! of each kind, is with the kinds' C functions in `mod.rs`.

use std::time::Duration;

use crate::kind::{self, Descriptor, Fenced, RequestKind};
use crate::{Cancel, Client, Error, Request as ApiRequest};

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
    pub(super) client: Client,
    /// What it takes (set by its `_new` function; for one name, its side by
    /// `redislock_request_set_kind`).
    pub(super) kind: &'static Descriptor,
    /// The one name, or the names of a kind that takes several.
    pub(super) names: Vec<Vec<u8>>,
    /// The number of permits, for a kind that has them, as its `_new` function says.
    pub(super) permits: u32,
    /// How many permits each acquire takes (`redislock_request_set_permits`).
    pub(super) take: u32,
    pub(super) lease: Option<Duration>,
    pub(super) auto_renew: Option<bool>,
    pub(super) fencing: Option<bool>,
    pub(super) owner: Option<String>,
    pub(super) cancel: Option<Cancel>,
    /// `at_least` and `at_most`, for a kind with bounds.
    pub(super) at_least: Option<Duration>,
    pub(super) at_most: Option<Duration>,
    /// The identity, for a kind that campaigns, as given (checked when it campaigns).
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
            return Err(Error::invalid_argument(format!(
                "an owner token applies to exclusive locks only: {} take none",
                new.plural
            )));
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
    pub(super) fn with_options<'a, K: RequestKind>(
        &'a self,
        request: ApiRequest<'a, K>,
    ) -> ApiRequest<'a, K> {
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
    pub(super) fn with_fencing<'a, K: Fenced>(
        &'a self,
        request: ApiRequest<'a, K>,
    ) -> ApiRequest<'a, K> {
        let request = self.with_options(request);
        match self.fencing {
            Some(on) => request.fencing(on),
            None => request,
        }
    }
}
