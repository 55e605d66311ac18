//! A set of exclusive locks taken all or none, as the API offers it: its marker, the client's
//! [`lock_all`](Client::lock_all), and its guard's names and fencing tokens.

use std::time::Duration;

use super::{Kind, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::error::Error;
use crate::base::kind::{Descriptor, SET};
use crate::engine::held::Held;
use crate::engine::kinds::multi::{self, SetRules};

/// A set of exclusive locks taken all or none ([`MultiLock`](crate::MultiLock),
/// [`MultiLockRequest`](crate::MultiLockRequest)).
#[derive(Debug)]
pub enum Set {}

/// What a guard of a set keeps: its names and their fencing tokens.
#[doc(hidden)]
#[derive(Debug)]
pub struct SetParts {
    pub(crate) names: Vec<Vec<u8>>,
    pub(crate) fences: Option<Vec<u64>>,
}

impl sealed::Sealed for Set {}
impl Kind for Set {
    const DESCRIPTOR: &'static Descriptor = &SET;
    type Parts = SetParts;

    fn set_fences(parts: SetParts) -> Option<Vec<u64>> {
        parts.fences
    }
}
impl RequestKind for Set {}
fenced! { Set: Set; }

/// A request for a set of exclusive locks, taken all or none.
pub type MultiLockRequest<'a> = Request<'a, Set>;
/// A set of exclusive locks held together. If renewal finds any name lost, the whole set counts
/// as lost.
pub type MultiLock = Guard<Set>;

/// The set of locks, as the client offers it.
impl Client {
    /// A request for the exclusive locks of all `names` at once: granted all together or not
    /// at all, released together. Each name is an ordinary exclusive lock of that name while
    /// the set holds it. An empty set and a name given twice are
    /// [invalid](Error::is_invalid_argument).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// // Move stock between two warehouses: both counters locked, or neither.
    /// let both = client.lock_all(&["stock:berlin:42", "stock:paris:42"]);
    /// let locks = both.acquire(Duration::from_secs(5))?;
    /// // ... move the stock ...
    /// locks.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn lock_all<'a, N: AsRef<[u8]>>(&'a self, names: &'a [N]) -> MultiLockRequest<'a> {
        Request::new(self, names.iter().map(AsRef::as_ref).collect(), 0)
    }
}

impl Request<'_, Set> {
    /// Waits up to `wait` for every lock of the set (fails with [`Error::is_wait_timeout`]).
    pub fn acquire(&self, wait: Duration) -> Result<MultiLock, Error> {
        self.take(Some(wait))
    }

    /// One attempt: fails with [`Error::is_held`] when any name of the set is held.
    pub fn try_acquire(&self) -> Result<MultiLock, Error> {
        self.take(None)
    }

    fn take(&self, wait: Option<Duration>) -> Result<MultiLock, Error> {
        let keys = multi::keys(&self.client.config().key_prefix, &self.names)?;
        let names = keys.iter().map(|k| k.name().to_vec()).collect();
        let first = keys[0].clone();
        let kind = SetRules {
            names: keys.into_boxed_slice(),
        };
        let (held, grant) = self.take_as(Box::new(kind), first, None, wait)?;
        let fences = self.opts.fencing.then(|| grant.tokens());
        Ok(Guard::set(held, names, fences))
    }
}
impl Guard<Set> {
    pub(crate) fn set(held: Held, names: Vec<Vec<u8>>, fences: Option<Vec<u64>>) -> MultiLock {
        Guard::new(held, SetParts { names, fences })
    }

    /// The names of the set, in the order they were given (without the client's key prefix).
    pub fn names(&self) -> impl Iterator<Item = &[u8]> {
        self.parts.names.iter().map(Vec::as_slice)
    }

    /// The fencing token of each name, in the order of [`names`](Self::names), when acquired
    /// with fencing; each from its name's own counter.
    pub fn fencing_tokens(&self) -> Option<&[u64]> {
        self.parts.fences.as_deref()
    }

    /// The fencing token of one name of the set, when acquired with fencing.
    pub fn fencing_token(&self, name: impl AsRef<[u8]>) -> Option<u64> {
        let i = self.parts.names.iter().position(|n| n == name.as_ref())?;
        self.parts.fences.as_ref().map(|f| f[i])
    }
}
