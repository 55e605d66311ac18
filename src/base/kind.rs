//! The descriptor of each kind of lock: its name, its words in messages, its number in the C
//! ABI, its constant in the PHP package, its flag on the command line, and what it offers
//! (fencing, an owner token, `at_least`/`at_most`, downgrade, Redlock's masters).
//!
//! Every surface reads a kind from here: the API's marker types carry their descriptor
//! ([`Kind::DESCRIPTOR`](crate::kind::Kind::DESCRIPTOR)), the engine's rules of a kind name
//! theirs, the C setters check a request's options against it, the command-line tool picks and
//! checks its flags with it, and the drift tests hold the C headers and the PHP package to the
//! list [`ALL`]. The other lists of kinds are here too, so that a kind is named in this one
//! file of the base layer: [`KindLabel`], the kinds as the metrics' label names them
//! (re-exported by the metrics), and the kinds a look at a lock names ([`LockKind`], whose
//! waiters it counts, and [`HeldAs`], what it finds holding the name).
use crate::base::keys::LockKeys;

/// A kind of lock, as the metrics' `kind` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindLabel {
    /// An exclusive lock.
    Exclusive,
    /// The read side of a read/write lock.
    Read,
    /// The write side of a read/write lock.
    Write,
    /// Permits of a semaphore.
    Semaphore,
    /// A set of exclusive locks taken together.
    Set,
    /// Redisson's RLock, as Java services take it.
    Redisson,
    /// The leadership of an election.
    Leader,
    /// The recipe kind (cargo feature `recipe-kind`): no part of the API.
    #[cfg(feature = "recipe-kind")]
    #[doc(hidden)]
    Recipe,
}

/// How many kinds there are.
const KINDS: usize = 7 + cfg!(feature = "recipe-kind") as usize;

impl KindLabel {
    /// Every kind, in label order.
    pub const ALL: [KindLabel; KINDS] = [
        KindLabel::Exclusive,
        KindLabel::Read,
        KindLabel::Write,
        KindLabel::Semaphore,
        KindLabel::Set,
        KindLabel::Redisson,
        KindLabel::Leader,
        #[cfg(feature = "recipe-kind")]
        KindLabel::Recipe,
    ];

    /// The `kind` label's value: the kind's name in its descriptor.
    pub fn label(self) -> &'static str {
        Descriptor::of_label(self).name
    }
}

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
    /// Readers of a read/write lock: [`LockInfo::holders`](crate::LockInfo::holders) counts
    /// them.
    Readers,
    /// Permits of a semaphore: [`LockInfo::holders`](crate::LockInfo::holders) counts its
    /// grants, [`LockInfo::permits_held`](crate::LockInfo::permits_held) the permits they hold.
    Semaphore,
    /// Redisson's lock ([`Client::redisson_lock`](crate::Client::redisson_lock), or Redisson's
    /// own `RLock`): a hash whose fields, `<client id>:<thread id>`, are its holders, each with
    /// one or more holds. Its waiters wait on its channel, in no queue:
    /// [`LockInfo::waiters`](crate::LockInfo::waiters) does not count them.
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

/// Whether a kind's grants carry fencing tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fencing {
    /// When the request (or the client) asks for them: the `fencing` option applies.
    Optional,
    /// Always (a leadership's epoch): the option does not apply.
    Always,
    /// Never (permits of a semaphore, Redisson's lock): the option does not apply.
    Never,
}

/// What a kind of lock is and offers, as every surface shows it (the list of all: [`ALL`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Descriptor {
    /// The kind as the metrics' and traces' `kind` label says it.
    pub label: KindLabel,
    /// Its name: the value of that label ("exclusive", "semaphore", ...).
    pub name: &'static str,
    /// A held grant of the kind in messages: "an exclusive lock", "permits of a semaphore".
    pub what: &'static str,
    /// A request for the kind in the C ABI's messages: "a semaphore".
    pub asked: &'static str,
    /// Grants of the kind, in the plural: "semaphores".
    pub plural: &'static str,
    /// Its `redislock_kind` enumerator and number in the C ABI
    /// (`redislock_request_set_kind`), for the kinds of one lock name a request may choose.
    pub c_kind: Option<(&'static str, u32)>,
    /// Its constant of the PHP package's `Lock` class (`Lock::PERMITS`), whose value is the
    /// name in lower case; empty for a kind the PHP package does not offer.
    pub php: &'static str,
    /// The flag of `redislock run` that takes it (the exclusive lock is the default).
    pub cli_flag: Option<&'static str>,
    /// Whether its grants carry fencing tokens.
    pub fencing: Fencing,
    /// Whether the application may name the owner token (and restore, detach).
    pub owner_token: bool,
    /// Whether `at_least` and `at_most` apply.
    pub bounds: bool,
    /// Whether a request takes a number of permits (`redislock_request_set_permits`).
    pub permits: bool,
    /// Whether a grant can be downgraded (a write lock to a read lock).
    pub downgrade: bool,
    /// Whether Redlock's masters offer it (every other topology offers every kind).
    pub redlock: bool,
    /// The suffixes of its own companion keys (empty for the kinds that use the lock's shared
    /// waiter queue).
    pub(crate) keys: &'static KindKeys,
}

/// The suffixes of a kind's own companion keys, beside the lock key in its hash slot
/// ([`LockKeys::companion`]): each kind that has them has suffixes of its own, so that one
/// kind's queue never holds another kind's entries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct KindKeys {
    /// A sorted set of holder token → expiry (server time, ms), beside the lock key.
    holders: &'static [u8],
    /// The queue of waiters, in arrival order. The scripts make a waiter's signal list and
    /// liveness key from the queue key (the queue key less its last byte, then `s:` or `e:`):
    /// keep `signal` and `alive` in step with it.
    queue: &'static [u8],
    signal: &'static [u8],
    alive: &'static [u8],
}

impl KindKeys {
    /// The holders' sorted set.
    pub(crate) fn holders(&self, keys: &LockKeys) -> Vec<u8> {
        keys.companion(self.holders, b"")
    }

    /// The queue of waiters, in arrival order.
    pub(crate) fn queue(&self, keys: &LockKeys) -> Vec<u8> {
        keys.companion(self.queue, b"")
    }

    /// The signal list of one waiter.
    pub(crate) fn signal(&self, keys: &LockKeys, waiter_id: &str) -> Vec<u8> {
        keys.companion(self.signal, waiter_id.as_bytes())
    }

    /// The liveness key of one waiter.
    pub(crate) fn alive(&self, keys: &LockKeys, waiter_id: &str) -> Vec<u8> {
        keys.companion(self.alive, waiter_id.as_bytes())
    }
}

/// No companion keys of the kind's own.
const NO_KEYS: KindKeys = KindKeys {
    holders: b"",
    queue: b"",
    signal: b"",
    alive: b"",
};

/// The read/write lock's: its write side is the lock key itself (a plain string holding the
/// writer's token), its readers a sorted set.
const RW_KEYS: KindKeys = KindKeys {
    holders: b":rw:r",
    queue: b":rw:q",
    signal: b":rw:s:",
    alive: b":rw:e:",
};

/// The semaphore's: it keeps its holders in the lock key as a sorted set, so a name used as a
/// semaphore and as a lock at once meets a key of the wrong type and fails clearly.
const SEM_KEYS: KindKeys = KindKeys {
    holders: b"",
    queue: b":sem:q",
    signal: b":sem:s:",
    alive: b":sem:e:",
};

/// The kinds' own companion keys that INSPECT reads, in its order of keys after the lock's
/// fence and queue: the read/write lock's readers and queue, the semaphore's queue.
pub(crate) fn inspect_keys(keys: &LockKeys) -> [Vec<u8>; 3] {
    [
        READ.keys.holders(keys),
        READ.keys.queue(keys),
        SEMAPHORE.keys.queue(keys),
    ]
}

impl Descriptor {
    /// Its name: the value of the metrics' `kind` label ("exclusive", "semaphore", ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the `fencing` option of a request applies.
    pub fn fencing_option(&self) -> bool {
        self.fencing == Fencing::Optional
    }

    /// The descriptor of the kind a `redislock_kind` number stands for, if it stands for one.
    pub fn of_c_kind(n: u32) -> Option<&'static Descriptor> {
        ALL.into_iter()
            .find(|d| d.c_kind.is_some_and(|(_, v)| v == n))
    }

    /// The descriptor of the kind `label` names.
    pub fn of_label(label: KindLabel) -> &'static Descriptor {
        // `ALL` is in the order of `KindLabel::ALL` (a unit test checks it).
        ALL[label as usize]
    }
}

/// An exclusive lock: one holder at a time.
pub const EXCLUSIVE: Descriptor = Descriptor {
    label: KindLabel::Exclusive,
    name: "exclusive",
    what: "an exclusive lock",
    asked: "an exclusive lock",
    plural: "exclusive locks",
    c_kind: Some(("REDISLOCK_KIND_EXCLUSIVE", 0)),
    php: "EXCLUSIVE",
    cli_flag: None,
    fencing: Fencing::Optional,
    owner_token: true,
    bounds: true,
    permits: false,
    downgrade: false,
    redlock: true,
    keys: &NO_KEYS,
};

/// A read lock of a read/write lock.
pub const READ: Descriptor = Descriptor {
    label: KindLabel::Read,
    name: "read",
    what: "a read lock",
    asked: "a read lock",
    plural: "read locks",
    c_kind: Some(("REDISLOCK_KIND_READ", 1)),
    php: "READ",
    cli_flag: Some("--read"),
    keys: &RW_KEYS,
    ..ONE_OF_MANY
};

/// The write lock of a read/write lock.
pub const WRITE: Descriptor = Descriptor {
    label: KindLabel::Write,
    name: "write",
    what: "a write lock",
    asked: "a write lock",
    plural: "write locks",
    c_kind: Some(("REDISLOCK_KIND_WRITE", 2)),
    php: "WRITE",
    cli_flag: Some("--write"),
    downgrade: true,
    keys: &RW_KEYS,
    ..ONE_OF_MANY
};

/// Permits of a semaphore.
pub const SEMAPHORE: Descriptor = Descriptor {
    label: KindLabel::Semaphore,
    name: "semaphore",
    what: "permits of a semaphore",
    asked: "a semaphore",
    plural: "semaphores",
    php: "PERMITS",
    cli_flag: Some("--permits"),
    fencing: Fencing::Never,
    permits: true,
    keys: &SEM_KEYS,
    ..ONE_OF_MANY
};

/// A set of exclusive locks taken all or none.
pub const SET: Descriptor = Descriptor {
    label: KindLabel::Set,
    name: "set",
    what: "a set of locks",
    asked: "a set of locks",
    plural: "sets of locks",
    php: "SET",
    ..ONE_OF_MANY
};

/// Redisson's RLock.
pub const REDISSON: Descriptor = Descriptor {
    label: KindLabel::Redisson,
    name: "redisson",
    what: "a Redisson lock",
    asked: "a Redisson lock",
    plural: "Redisson's locks",
    c_kind: Some(("REDISLOCK_KIND_REDISSON", 3)),
    php: "REDISSON",
    cli_flag: Some("--redisson"),
    fencing: Fencing::Never,
    ..ONE_OF_MANY
};

/// The leadership of an election (`redislock elect` on the command line).
pub const LEADER: Descriptor = Descriptor {
    label: KindLabel::Leader,
    name: "leader",
    what: "a leader election",
    asked: "a leader election (its epoch is always fenced)",
    plural: "leader elections",
    php: "LEADER",
    fencing: Fencing::Always,
    ..ONE_OF_MANY
};

/// The recipe kind (cargo feature `recipe-kind`): a kind added by ARCHITECTURE.md's "Adding a
/// kind", for its tests; no part of the API.
#[cfg(feature = "recipe-kind")]
#[doc(hidden)]
pub const RECIPE: Descriptor = Descriptor {
    label: KindLabel::Recipe,
    name: "recipe",
    what: "a recipe lock",
    asked: "a recipe lock",
    plural: "recipe locks",
    c_kind: Some(("REDISLOCK_KIND_RECIPE", 100)),
    fencing: Fencing::Never,
    ..ONE_OF_MANY
};

/// What the kinds but the exclusive lock have in common: the defaults of the others above.
const ONE_OF_MANY: Descriptor = Descriptor {
    label: KindLabel::Exclusive,
    name: "",
    what: "",
    asked: "",
    plural: "",
    c_kind: None,
    php: "",
    cli_flag: None,
    fencing: Fencing::Optional,
    owner_token: false,
    bounds: false,
    permits: false,
    downgrade: false,
    redlock: false,
    keys: &NO_KEYS,
};

/// Every kind, in the order of [`KindLabel::ALL`].
pub const ALL: [&Descriptor; KINDS] = [
    &EXCLUSIVE,
    &READ,
    &WRITE,
    &SEMAPHORE,
    &SET,
    &REDISSON,
    &LEADER,
    #[cfg(feature = "recipe-kind")]
    &RECIPE,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_descriptor_per_label_in_label_order() {
        let labels: Vec<KindLabel> = ALL.iter().map(|d| d.label).collect();
        assert_eq!(labels, KindLabel::ALL);
        for d in ALL {
            assert_eq!(Descriptor::of_label(d.label), d);
            assert_eq!(d.label.label(), d.name);
            assert!(!d.what.is_empty() && !d.asked.is_empty() && !d.plural.is_empty());
            assert!(d.php.chars().all(|c| c.is_ascii_uppercase()), "{}", d.php);
        }
    }

    #[test]
    fn c_numbers_are_distinct_and_found() {
        let mut seen = Vec::new();
        for d in ALL {
            if let Some((name, n)) = d.c_kind {
                assert!(name.starts_with("REDISLOCK_KIND_"), "{name}");
                assert!(!seen.contains(&n), "{name}: {n} twice");
                seen.push(n);
                assert_eq!(Descriptor::of_c_kind(n), Some(d));
            }
        }
        assert_eq!(Descriptor::of_c_kind(99), None);
    }
}

#[cfg(test)]
mod kind_key_tests {
    use super::*;
    use crate::base::keys::slot;

    #[test]
    fn kind_companions_share_the_lock_slot_and_differ() {
        for name in [&b"orders:7"[..], b"{orders}:7", b"a{}b"] {
            let k = LockKeys::new(b"app:", name).unwrap();
            let s = slot(k.lock());
            let all = [
                k.fence(),
                k.queue(),
                READ.keys.holders(&k),
                READ.keys.queue(&k),
                READ.keys.signal(&k, "ab"),
                READ.keys.alive(&k, "ab"),
                SEMAPHORE.keys.queue(&k),
                SEMAPHORE.keys.signal(&k, "ab"),
                SEMAPHORE.keys.alive(&k, "ab"),
            ];
            for c in &all {
                assert_eq!(slot(c), s, "{:?}", String::from_utf8_lossy(c));
            }
            let distinct: std::collections::HashSet<_> = all.iter().collect();
            assert_eq!(distinct.len(), all.len());
        }
        let k = LockKeys::new(b"", b"doc").unwrap();
        assert_eq!(READ.keys.holders(&k), b"{doc}:rw:r");
        assert_eq!(READ.keys.queue(&k), b"{doc}:rw:q");
        assert_eq!(READ.keys.signal(&k, "ab"), b"{doc}:rw:s:ab");
        assert_eq!(SEMAPHORE.keys.queue(&k), b"{doc}:sem:q");
        assert_eq!(SEMAPHORE.keys.alive(&k, "ab"), b"{doc}:sem:e:ab");
    }
}
