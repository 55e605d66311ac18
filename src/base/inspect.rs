//! A look at a lock without holding it ([`Client::inspect`](crate::Client::inspect)): what holds
//! it, for how long, and who waits. Never a token.

use std::time::Duration;

/// Which kind of lock [`Client::inspect`](crate::Client::inspect) looks at: its waiters are
/// that kind's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// The exclusive lock ([`Client::lock`](crate::Client::lock)).
    Exclusive,
    /// The read/write lock ([`Client::rw_lock`](crate::Client::rw_lock)).
    RwLock,
    /// The semaphore ([`Client::semaphore`](crate::Client::semaphore)).
    Semaphore,
    /// Every kind the name is used as: the waiters of all of them.
    Any,
}

impl LockKind {
    /// Every kind, in the order of their names.
    pub const ALL: [LockKind; 4] = [
        LockKind::Exclusive,
        LockKind::RwLock,
        LockKind::Semaphore,
        LockKind::Any,
    ];

    /// Its name, as the command-line tool and the PHP package write it: `exclusive`, `rwlock`,
    /// `semaphore`, `any`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Exclusive => "exclusive",
            LockKind::RwLock => "rwlock",
            LockKind::Semaphore => "semaphore",
            LockKind::Any => "any",
        }
    }

    /// The kind of that [`name`](LockKind::name).
    pub fn from_name(name: &str) -> Option<LockKind> {
        LockKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind that must not find the name used by another (its keys are of types of its
    /// own), as messages call it; `None` for the kinds that look at any key.
    pub(crate) fn what(self) -> Option<&'static str> {
        match self {
            LockKind::RwLock => Some("a read/write lock"),
            LockKind::Semaphore => Some("a semaphore"),
            LockKind::Exclusive | LockKind::Any => None,
        }
    }

    /// Its waiters among INSPECT's counts of the exclusive lock's, the read/write lock's and the
    /// semaphore's (`inspect.lua`).
    pub(crate) fn waiters(self, [exclusive, rw, semaphore]: [i64; 3]) -> i64 {
        match self {
            LockKind::Exclusive => exclusive,
            LockKind::RwLock => rw,
            LockKind::Semaphore => semaphore,
            LockKind::Any => exclusive + rw + semaphore,
        }
    }
}

/// What holds a lock now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeldAs {
    /// One owner: an exclusive lock, or the writer of a read/write lock (a plain
    /// `SET name token NX PX` client looks the same).
    Exclusive,
    /// Readers of a read/write lock.
    Readers,
    /// Permits of a semaphore.
    Semaphore,
    /// Redisson's lock ([`Client::redisson_lock`](crate::Client::redisson_lock), or Redisson's
    /// own `RLock`): a hash whose fields, `<client id>:<thread id>`, are its holders.
    Redisson,
    /// A key of another type than the locks use: the name is not free for any lock.
    Other,
}

impl HeldAs {
    /// Every value.
    pub const ALL: [HeldAs; 5] = [
        HeldAs::Exclusive,
        HeldAs::Readers,
        HeldAs::Semaphore,
        HeldAs::Redisson,
        HeldAs::Other,
    ];

    /// Its name, as the command-line tool and the PHP package write it: `exclusive`, `readers`,
    /// `semaphore`, `redisson`, `other`.
    pub fn name(self) -> &'static str {
        match self {
            HeldAs::Exclusive => "exclusive",
            HeldAs::Readers => "readers",
            HeldAs::Semaphore => "semaphore",
            HeldAs::Redisson => "redisson",
            HeldAs::Other => "other",
        }
    }

    /// Its number: INSPECT's first reply (`inspect.lua`; 0 is a free lock) and the C ABI's
    /// `redislock_held_as`.
    pub fn code(self) -> u32 {
        match self {
            HeldAs::Exclusive => 1,
            HeldAs::Readers => 2,
            HeldAs::Semaphore => 3,
            HeldAs::Other => 4,
            HeldAs::Redisson => 5,
        }
    }

    /// What INSPECT's first reply means: the value of that [`code`](HeldAs::code), or free.
    pub(crate) fn from_code(used: i64) -> Option<HeldAs> {
        HeldAs::ALL
            .into_iter()
            .find(|h| i64::from(h.code()) == used)
    }
}

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
    /// How many grants hold it: 1 for an exclusive lock or a writer, the readers, the grants of
    /// a semaphore's permits, the owners (client and thread) of Redisson's lock, each with one
    /// or more holds; 0 when free or held by a key of another type.
    pub holders: u32,
    /// A semaphore's permits held now (0 for the other kinds).
    pub permits_held: u32,
    /// A semaphore's number of permits, while something fixes it.
    pub permits: Option<u32>,
    /// How long until the lock frees itself if no holder renews it (for readers and permits, the
    /// latest holder's lease; with Redlock, the shortest among the majority that holds it).
    /// `None` when free, or when the key has no expiry (a foreign key).
    pub remaining: Option<Duration>,
    /// Waiters queued for the lock (of the kind asked for, or of every kind); `None` with
    /// Redlock, where each master keeps a queue of its own and no count is agreed on. Waiters
    /// for Redisson's lock wait on its channel, in no queue: they are not counted.
    pub waiters: Option<u32>,
    /// The name's fencing counter: the fencing token of the latest fenced grant (0 before the
    /// first); `None` with Redlock, which has no fencing tokens.
    pub fencing_counter: Option<u64>,
}
