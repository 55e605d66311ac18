//! Redisson's RLock, shared with Java services, as the API offers it: its marker, the client's
//! [`redisson_lock`](Client::redisson_lock) and its request's acquire.

use std::time::Duration;

use super::{Kind, OneName, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::error::Error;
use crate::base::kind::{Descriptor, REDISSON};
use crate::engine::kinds::redisson::RedissonRules;

/// Redisson's RLock: reentrant per thread, shared with Java services that lock with Redisson
/// ([`RedissonLock`](crate::RedissonLock), [`RedissonLockRequest`](crate::RedissonLockRequest);
/// docs/redisson.md).
#[derive(Debug)]
pub enum Redisson {}

impl sealed::Sealed for Redisson {}
impl Kind for Redisson {
    const DESCRIPTOR: &'static Descriptor = &REDISSON;
    type Parts = ();
}
impl OneName for Redisson {}
impl RequestKind for Redisson {}

/// A request for Redisson's RLock.
pub type RedissonLockRequest<'a> = Request<'a, Redisson>;
/// A held Redisson lock (one hold of it: the same thread may hold it again; see
/// [`Client::redisson_lock`](crate::Client::redisson_lock)).
pub type RedissonLock = Guard<Redisson>;

/// Redisson's lock, as the client offers it.
impl Client {
    /// Redisson's RLock `name`, shared with Java services that lock it with Redisson (its
    /// `getLock(name)`): a hash at the name whose field is this client's id and the calling
    /// thread's id, reentrant per thread, released with Redisson's unlock message on its channel
    /// (docs/redisson.md). The lease is Redisson's watchdog timeout (30 s there); with
    /// auto-renewal the lock is renewed every lease/3, as Redisson renews it. Refused with a
    /// `redlock://` URL. Options (lease, auto-renewal, cancel) default to the client's; there
    /// are no fencing tokens.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), redislock::Error> {
    /// use std::time::Duration;
    /// let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let lock = client
    ///     .redisson_lock("orders")
    ///     .lease(Duration::from_secs(30))
    ///     .acquire(Duration::from_secs(5))?;
    /// // ... the Java services' RLock "orders" waits meanwhile ...
    /// lock.release()?;
    /// # Ok(()) }
    /// ```
    pub fn redisson_lock<'a, N: AsRef<[u8]> + ?Sized>(
        &'a self,
        name: &'a N,
    ) -> RedissonLockRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0).without_fencing()
    }
}

impl Request<'_, Redisson> {
    /// One attempt: fails with [`Error::is_held`] at once if another owner (another thread, or
    /// another client) holds the lock; taken again (one hold more) if this thread holds it.
    pub fn try_acquire(&self) -> Result<RedissonLock, Error> {
        self.take(None)
    }

    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]), woken by the
    /// holder's unlock message on the lock's channel, or trying again when the holder's lease
    /// runs out.
    pub fn acquire(&self, wait: Duration) -> Result<RedissonLock, Error> {
        self.take(Some(wait))
    }

    fn take(&self, wait: Option<Duration>) -> Result<RedissonLock, Error> {
        let keys = self.keys()?;
        let lease_ms = self.opts.lease.as_millis() as u64;
        let kind = RedissonRules::new(std::process::id(), lease_ms)?;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, ()))
    }
}
