//! A look at a lock without holding it ([`Client::inspect`](crate::Client::inspect)): what holds
//! it, for how long, and who waits. Never a token. The kinds it names, [`LockKind`] and
//! [`HeldAs`], are in `kind.rs` with the others.

use std::time::Duration;

use crate::base::kind::HeldAs;

/// What [`Client::inspect`](crate::Client::inspect) saw of a lock, at one moment: it may have
/// changed by the time it is read.
///
/// ```no_run
/// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
/// let info = client.inspect("report:daily", redislock::LockKind::Any)?;
/// if info.held {
///     println!("held by {} for {:?} more", info.holders, info.remaining);
/// }
/// # Ok::<(), redislock::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockInfo {
    /// Whether anything holds the name (with Redlock: the same owner on a majority of masters).
    pub held: bool,
    /// What holds it; `None` when free.
    pub held_as: Option<HeldAs>,
    /// How many grants hold it: 1 for one owner, else as [`HeldAs`] says of each kind; 0 when
    /// free or held by a key of another type.
    pub holders: u32,
    /// The permits held now, for a kind that has permits (0 for the others).
    pub permits_held: u32,
    /// The number of permits, for a kind that has permits, while something fixes it.
    pub permits: Option<u32>,
    /// How long until the lock frees itself if no holder renews it (for readers and permits, the
    /// latest holder's lease; with Redlock, the shortest among the majority that holds it).
    /// `None` when free, or when the key has no expiry (a foreign key).
    pub remaining: Option<Duration>,
    /// Waiters queued for the lock (of the kind asked for, or of every kind); `None` with
    /// Redlock, where each master keeps a queue of its own and no count is agreed on. Waiters
    /// on a lock's channel instead of a queue are not counted ([`HeldAs`] says which kind).
    pub waiters: Option<u32>,
    /// The name's fencing counter: the fencing token of the latest fenced grant (0 before the
    /// first); `None` with Redlock, which has no fencing tokens.
    pub fencing_counter: Option<u64>,
}
