//! The semaphore, up to a number of permits held at once, as the API offers it: its marker, the
//! client's [`semaphore`](Client::semaphore), its request's acquire of `k` permits, and its
//! guard's count.

use std::time::Duration;

use super::{Kind, OneName, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::error::Error;
use crate::base::kind::{Descriptor, SEMAPHORE};
use crate::engine::kinds::semaphore::PermitsRules;

/// Permits of a semaphore ([`Permits`](crate::Permits),
/// [`SemaphoreRequest`](crate::SemaphoreRequest)).
#[derive(Debug)]
pub enum Semaphore {}

impl sealed::Sealed for Semaphore {}
impl Kind for Semaphore {
    const DESCRIPTOR: &'static Descriptor = &SEMAPHORE;
    /// How many permits the grant holds.
    type Parts = u32;
}
impl OneName for Semaphore {}
impl RequestKind for Semaphore {}

/// A request for permits of a semaphore.
pub type SemaphoreRequest<'a> = Request<'a, Semaphore>;
/// Permits of a semaphore held by one grant.
pub type Permits = Guard<Semaphore>;

/// The semaphore, as the client offers it.
impl Client {
    /// The semaphore `name` with `permits` permits: up to that many may be held at once, taken
    /// one or more at a time, each grant with its own lease and (by default) auto-renewal.
    /// The first user of a name fixes its number of permits while anything is held or waiting;
    /// a request that gives another number fails with [`Error::is_invalid_argument`], and so
    /// does a name in use as a lock.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let pdf = client.semaphore("pdf-renderers", 3);
    /// let permit = pdf.acquire(1, Duration::from_secs(10))?; // at most 3 renders at once
    /// // ... render ...
    /// permit.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn semaphore<'a, N: AsRef<[u8]> + ?Sized>(
        &'a self,
        name: &'a N,
        permits: u32,
    ) -> SemaphoreRequest<'a> {
        Request::new(self, vec![name.as_ref()], permits).without_fencing()
    }
}

impl Request<'_, Semaphore> {
    /// Waits up to `wait` for `k` permits (fails with [`Error::is_wait_timeout`]), served in
    /// arrival order.
    pub fn acquire(&self, k: u32, wait: Duration) -> Result<Permits, Error> {
        self.take(k, Some(wait))
    }

    /// One attempt at `k` permits: fails with [`Error::is_held`] when fewer are free, or when
    /// earlier requests wait.
    pub fn try_acquire(&self, k: u32) -> Result<Permits, Error> {
        self.take(k, None)
    }

    fn take(&self, k: u32, wait: Option<Duration>) -> Result<Permits, Error> {
        let keys = self.keys()?;
        let kind = PermitsRules::new(&keys, k, self.permits)?;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, k))
    }
}

impl Guard<Semaphore> {
    /// How many permits this grant holds.
    pub fn count(&self) -> u32 {
        self.parts
    }
}
