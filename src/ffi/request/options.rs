//! A request's value: what it takes, the options its setters store, and [`CRequest::run`], the
//! one place where they become a call of the Rust API.

use std::time::Duration;

use super::redislock_kind;
use crate::api::guard::AnyLock;
use crate::kind::{Fenced, RequestKind};
use crate::{Cancel, Client, Error, Request as ApiRequest};

/// What a request takes: fixed by its `_new` function, and for one name, its side by
/// `redislock_request_set_kind`. The setters ask it whether they apply; only the acquire, in
/// [`CRequest::run`], turns it into a call of the Rust API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The exclusive lock of one name.
    Exclusive,
    /// A read lock of one name's read/write lock.
    Read,
    /// The write lock of one name's read/write lock.
    Write,
    /// Redisson's RLock of one name.
    Redisson,
    /// Permits of a semaphore.
    Semaphore,
    /// The exclusive locks of a set of names, at once.
    Set,
    /// The leadership of one election (`redislock_request_new_leader`).
    Leader,
}

impl Kind {
    /// The kind a `redislock_kind` number stands for, if it stands for one.
    pub(super) fn of_code(n: u32) -> Option<Kind> {
        use redislock_kind::*;
        [
            (REDISLOCK_KIND_EXCLUSIVE, Kind::Exclusive),
            (REDISLOCK_KIND_READ, Kind::Read),
            (REDISLOCK_KIND_WRITE, Kind::Write),
            (REDISLOCK_KIND_REDISSON, Kind::Redisson),
        ]
        .into_iter()
        .find(|&(code, _)| code as u32 == n)
        .map(|(_, kind)| kind)
    }

    /// What it takes, for messages: "a read lock", "a semaphore"...
    fn what(self) -> &'static str {
        match self {
            Kind::Exclusive => "an exclusive lock",
            Kind::Read => "a read lock",
            Kind::Write => "a write lock",
            Kind::Redisson => "a Redisson lock",
            Kind::Semaphore => "a semaphore",
            Kind::Set => "a set of locks",
            Kind::Leader => "a leader election (its epoch is always fenced)",
        }
    }

    /// Whether it takes one lock name, whose side `redislock_request_set_kind` may choose.
    pub(super) fn is_one_name(self) -> bool {
        !matches!(self, Kind::Semaphore | Kind::Set | Kind::Leader)
    }

    /// Whether its grants may get fencing tokens: semaphores' and Redisson's have none.
    pub(super) fn has_fencing(self) -> bool {
        !matches!(self, Kind::Semaphore | Kind::Redisson | Kind::Leader)
    }
}

/// The Rust value behind a `redislock_request`: what it takes and the options its setters
/// stored. An option left `None` is the client's default. The setters only check that an
/// option applies to the kind and store it; the values themselves are checked by the Rust API
/// when [`CRequest::run`] acquires.
pub(crate) struct CRequest {
    client: Client,
    pub(super) kind: Kind,
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
    pub(crate) fn new(client: &Client, kind: Kind, names: Vec<Vec<u8>>, permits: u32) -> CRequest {
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
            self.kind.what()
        ))
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
        Ok(match (self.kind, call) {
            (Kind::Exclusive, call) => {
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
            (Kind::Read, Call::Try) => self.with_fencing(c.rw_lock(name)).try_read()?.into(),
            (Kind::Read, Call::Wait(w)) => self.with_fencing(c.rw_lock(name)).read(w)?.into(),
            (Kind::Write, Call::Try) => self.with_fencing(c.rw_lock(name)).try_write()?.into(),
            (Kind::Write, Call::Wait(w)) => self.with_fencing(c.rw_lock(name)).write(w)?.into(),
            (Kind::Redisson, Call::Try) => self
                .with_options(c.redisson_lock(name))
                .try_acquire()?
                .into(),
            (Kind::Redisson, Call::Wait(w)) => {
                self.with_options(c.redisson_lock(name)).acquire(w)?.into()
            }
            (Kind::Semaphore, Call::Try) => {
                let request = self.with_options(c.semaphore(name, self.permits));
                request.try_acquire(self.take)?.into()
            }
            (Kind::Semaphore, Call::Wait(w)) => {
                let request = self.with_options(c.semaphore(name, self.permits));
                request.acquire(self.take, w)?.into()
            }
            (Kind::Leader, call) => {
                // The Rust API checks the rest (empty, too long, control characters).
                let identity = std::str::from_utf8(&self.identity)
                    .map_err(|_| Error::invalid_argument("the leader's identity is not UTF-8"))?;
                let request = self.with_options(c.leader(name)).identity(identity);
                match call {
                    Call::Wait(w) => request.campaign(w)?.into(),
                    _ => request.try_campaign()?.into(),
                }
            }
            (Kind::Set, Call::Try) => self
                .with_fencing(c.lock_all(&self.names))
                .try_acquire()?
                .into(),
            (Kind::Set, Call::Wait(w)) => self
                .with_fencing(c.lock_all(&self.names))
                .acquire(w)?
                .into(),
        })
    }
}
