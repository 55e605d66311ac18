//! The kinds of lock, as the type parameter of the one guard type ([`Guard`](crate::Guard)) and
//! the one request type ([`Request`](crate::Request)).
//!
//! Every guard has the methods every held lock has (lease, extend, release, lost-lock reports);
//! what one kind alone offers is on that kind's guard only (`downgrade` on a write lock, the
//! names of a set). The names you use day to day are aliases: [`Lock`](crate::Lock) is
//! `Guard<Exclusive>`, [`LockRequest`](crate::LockRequest) is `Request<Exclusive>`, and so on.

use std::fmt;

pub use crate::base::kind::{ALL, Descriptor, Fencing};

mod sealed {
    pub trait Sealed {}
}

/// A kind of held lock: the type parameter of [`Guard`](crate::Guard). Sealed.
pub trait Kind: sealed::Sealed + Send + Sync + 'static {
    /// What the kind is and offers, as every surface (the C ABI, the PHP package, the
    /// command-line tool) shows it.
    const DESCRIPTOR: &'static Descriptor;

    /// What a guard of this kind keeps besides the grant.
    #[doc(hidden)]
    type Parts: fmt::Debug + Send + Sync;

    /// A set's fencing tokens, from its parts.
    #[doc(hidden)]
    fn set_fences(_parts: Self::Parts) -> Option<Vec<u64>> {
        None
    }
}

/// A kind of lock on one name (every kind but a set): its guard has `name()`. Sealed.
pub trait OneName: Kind {}

/// A kind of request: the type parameter of [`Request`](crate::Request). Sealed.
pub trait RequestKind: sealed::Sealed + 'static {}

/// A kind whose grants can carry fencing tokens.
pub trait Fenced: RequestKind {}

/// An exclusive lock: one holder at a time ([`Lock`](crate::Lock),
/// [`LockRequest`](crate::LockRequest)).
#[derive(Debug)]
pub enum Exclusive {}

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

/// Permits of a semaphore ([`Permits`](crate::Permits),
/// [`SemaphoreRequest`](crate::SemaphoreRequest)).
#[derive(Debug)]
pub enum Semaphore {}

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

/// Redisson's RLock: reentrant per thread, shared with Java services that lock with Redisson
/// ([`RedissonLock`](crate::RedissonLock), [`RedissonLockRequest`](crate::RedissonLockRequest);
/// docs/redisson.md).
#[derive(Debug)]
pub enum Redisson {}

/// The leadership of an election: one leader at a time, with an epoch
/// ([`Leadership`](crate::Leadership), [`LeaderRequest`](crate::LeaderRequest);
/// docs/leaders.md).
#[derive(Debug)]
pub enum Leader {}

/// The recipe kind (cargo feature `recipe-kind`): a kind added by ARCHITECTURE.md's "Adding a
/// kind", for its tests; no part of the API.
#[cfg(feature = "recipe-kind")]
#[doc(hidden)]
#[derive(Debug)]
pub enum Recipe {}

#[cfg(feature = "recipe-kind")]
impl sealed::Sealed for Recipe {}
#[cfg(feature = "recipe-kind")]
impl Kind for Recipe {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::RECIPE;
    type Parts = ();
}
#[cfg(feature = "recipe-kind")]
impl OneName for Recipe {}
#[cfg(feature = "recipe-kind")]
impl RequestKind for Recipe {}

impl sealed::Sealed for Exclusive {}
impl sealed::Sealed for Leader {}
impl sealed::Sealed for Redisson {}
impl sealed::Sealed for Read {}
impl sealed::Sealed for Write {}
impl sealed::Sealed for ReadWrite {}
impl sealed::Sealed for Semaphore {}
impl sealed::Sealed for Set {}

impl Kind for Exclusive {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::EXCLUSIVE;
    type Parts = ();
}
impl Kind for Redisson {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::REDISSON;
    type Parts = ();
}
impl Kind for Leader {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::LEADER;
    /// The identity the leader campaigned with.
    type Parts = Box<str>;
}
impl Kind for Read {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::READ;
    type Parts = ();
}
impl Kind for Write {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::WRITE;
    type Parts = ();
}
impl Kind for Semaphore {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::SEMAPHORE;
    /// How many permits the grant holds.
    type Parts = u32;
}
impl Kind for Set {
    const DESCRIPTOR: &'static Descriptor = &crate::base::kind::SET;
    type Parts = SetParts;

    fn set_fences(parts: SetParts) -> Option<Vec<u64>> {
        parts.fences
    }
}

impl OneName for Exclusive {}
impl OneName for Read {}
impl OneName for Write {}
impl OneName for Semaphore {}
impl OneName for Redisson {}
impl OneName for Leader {}

impl RequestKind for Exclusive {}
impl RequestKind for ReadWrite {}
impl RequestKind for Semaphore {}
impl RequestKind for Set {}
impl RequestKind for Redisson {}
impl RequestKind for Leader {}

/// `Fenced` for a request kind whose grants' descriptors make fencing an option: checked when
/// the crate compiles, so the type and the descriptor cannot disagree on it.
macro_rules! fenced {
    ($($request:ty: $($grant:ty),+;)+) => {
        $(
            impl Fenced for $request {}
            const _: () = {
                $(assert!(matches!(<$grant as Kind>::DESCRIPTOR.fencing, Fencing::Optional));)+
            };
        )+
    };
}

fenced! {
    Exclusive: Exclusive;
    ReadWrite: Read, Write;
    Set: Set;
}
