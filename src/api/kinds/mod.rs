//! The kinds of lock, as the type parameter of the one guard type ([`Guard`](crate::Guard)) and
//! the one request type ([`Request`](crate::Request)).
//!
//! Every guard has the methods every held lock has (lease, extend, release, lost-lock reports);
//! what one kind alone offers is on that kind's guard only (`downgrade` on a write lock, the
//! names of a set). The names you use day to day are aliases: [`Lock`](crate::Lock) is
//! `Guard<Exclusive>`, [`LockRequest`](crate::LockRequest) is `Request<Exclusive>`, and so on.
//!
//! Each kind's public face is one file here, named as its rules in `engine/kinds/`: its marker
//! type, the client's method that makes its request, what its request and its guard alone
//! offer, and its aliases. This file holds what they share: the traits the markers implement.

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

/// `Fenced` for a request kind whose grants' descriptors make fencing an option: checked when
/// the crate compiles, so the type and the descriptor cannot disagree on it. Each kind's file
/// says it of its own request.
macro_rules! fenced {
    ($($request:ty: $($grant:ty),+;)+) => {
        $(
            impl $crate::api::kinds::Fenced for $request {}
            const _: () = {
                $(assert!(matches!(
                    <$grant as $crate::api::kinds::Kind>::DESCRIPTOR.fencing,
                    $crate::base::kind::Fencing::Optional
                ));)+
            };
        )+
    };
}

pub(crate) mod exclusive;
pub(crate) mod leader;
pub(crate) mod multi;
pub(crate) mod redisson;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

#[cfg(feature = "recipe-kind")]
pub(crate) mod recipe;

pub use exclusive::Exclusive;
pub use leader::Leader;
pub use multi::{Set, SetParts};
#[cfg(feature = "recipe-kind")]
pub use recipe::Recipe;
pub use redisson::Redisson;
pub use rwlock::{Read, ReadWrite, Write};
pub use semaphore::Semaphore;
