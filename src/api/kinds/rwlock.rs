//! The read/write lock, many readers or one writer, as the API offers it: its markers (the
//! request's and each side's), the client's [`rw_lock`](Client::rw_lock), its request's read
//! and write, and its guards' fencing tokens and downgrade.

use std::time::Duration;

use super::{Kind, OneName, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::fence::Fence;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::error::Error;
use crate::base::kind::{Descriptor, READ, WRITE};
use crate::engine::held::Held;
use crate::engine::kinds::rwlock::{self, RwRules};

/// A read lock of a read/write lock: any number of readers at once
/// ([`ReadLock`](crate::ReadLock)).
#[derive(Debug)]
pub enum Read {}

/// The write lock of a read/write lock: one writer, no reader ([`WriteLock`](crate::WriteLock)).
#[derive(Debug)]
pub enum Write {}

/// A read/write lock, as it is asked for: [`RwLockRequest`](crate::RwLockRequest) acquires
/// either side.
#[derive(Debug)]
pub enum ReadWrite {}

impl sealed::Sealed for Read {}
impl sealed::Sealed for Write {}
impl sealed::Sealed for ReadWrite {}
impl Kind for Read {
    const DESCRIPTOR: &'static Descriptor = &READ;
    type Parts = ();
}
impl Kind for Write {
    const DESCRIPTOR: &'static Descriptor = &WRITE;
    type Parts = ();
}
impl OneName for Read {}
impl OneName for Write {}
impl RequestKind for ReadWrite {}
fenced! { ReadWrite: Read, Write; }

/// A request for a read/write lock: [`read`](Request::read) or [`write`](Request::write).
pub type RwLockRequest<'a> = Request<'a, ReadWrite>;
/// A held read lock.
pub type ReadLock = Guard<Read>;
/// A held write lock.
pub type WriteLock = Guard<Write>;

/// The read/write lock, as the client offers it.
impl Client {
    /// The read/write lock `name`: many readers or one writer at a time, each holding its own
    /// lease (renewed like an exclusive lock's). Options (lease, auto-renewal, fencing, cancel)
    /// default to the client's, as for [`Client::lock`]; [`read`](RwLockRequest::read) and
    /// [`write`](RwLockRequest::write) then acquire, and the request can be used again.
    ///
    /// The write side is the exclusive lock of the same name: an exclusive lock or a plain
    /// `SET name token NX PX` client excludes, and is excluded by, both writers and readers.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let doc = client.rw_lock("doc:7");
    /// let r = doc.read(Duration::from_secs(5))?; // other readers may hold it too
    /// // ... read the document ...
    /// r.release()?;
    /// let w = doc.write(Duration::from_secs(5))?; // alone; waiting readers queue behind
    /// // ... rewrite it, then let readers in without a gap:
    /// let r = w.downgrade()?;
    /// r.release()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn rw_lock<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> RwLockRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0)
    }
}

impl Request<'_, ReadWrite> {
    /// Waits up to `wait` for a read lock (fails with [`Error::is_wait_timeout`]). Granted at
    /// once while readers hold the name and nobody waits; otherwise in arrival order.
    pub fn read(&self, wait: Duration) -> Result<ReadLock, Error> {
        self.take(false, Some(wait))
            .map(|held| Guard::new(held, ()))
    }

    /// One attempt at a read lock: fails with [`Error::is_held`] when a writer holds the name
    /// or anyone waits for it.
    pub fn try_read(&self) -> Result<ReadLock, Error> {
        self.take(false, None).map(|held| Guard::new(held, ()))
    }

    /// Waits up to `wait` for the write lock (fails with [`Error::is_wait_timeout`]).
    pub fn write(&self, wait: Duration) -> Result<WriteLock, Error> {
        self.take(true, Some(wait)).map(|held| Guard::new(held, ()))
    }

    /// One attempt at the write lock: fails with [`Error::is_held`] when anyone holds the name
    /// or waits for it.
    pub fn try_write(&self) -> Result<WriteLock, Error> {
        self.take(true, None).map(|held| Guard::new(held, ()))
    }

    fn take(&self, write: bool, wait: Option<Duration>) -> Result<Held, Error> {
        let keys = self.keys()?;
        let (held, _) = self.take_as(Box::new(RwRules { write }), keys, None, wait)?;
        Ok(held)
    }
}

impl Guard<Read> {
    /// The fencing token of this grant, when acquired with fencing: larger than that of the
    /// writer before it, smaller than that of the writer after it.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token()
    }

    /// The fence of this grant, when acquired with fencing: its name, fencing token and, on a
    /// Sentinel group or a Cluster, epoch, to hand to the resources it protects (a
    /// [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Option<Fence> {
        Fence::of(&self.held)
    }
}

impl Guard<Write> {
    /// The fencing token of this grant, when acquired with fencing: larger than that of every
    /// earlier grant of the name.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token()
    }

    /// The fence of this grant, when acquired with fencing: its name, fencing token and, on a
    /// Sentinel group or a Cluster, epoch, to hand to the resources it protects (a
    /// [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Option<Fence> {
        Fence::of(&self.held)
    }

    /// Turns the write lock into a read lock without a gap (one round trip): no writer can come
    /// in between, and the readers waiting at the head of the queue are let in at once. The read
    /// lock keeps the lease, auto-renewal and fencing token of the write lock.
    ///
    /// Fails with [`Error::is_not_held`] when the write lock was lost meanwhile. When the call
    /// fails for want of an answer, the lock (write or read) is left to its lease.
    pub fn downgrade(self) -> Result<ReadLock, Error> {
        rwlock::downgrade(&self.held).map(|held| Guard::new(held, ()))
    }
}
