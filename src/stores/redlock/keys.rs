//! Redlock's companion keys of a lock: beside it in its hash slot (`LockKeys::companion`), on
//! each master, for its waiters (`wait.rs`) and its releases (`release.rs`).

use crate::base::keys::LockKeys;

/// Their suffixes: a marker that waiters exist, a marker that some block on this master, the
/// list they block on, the woken waiter's turn, and the queue of waiters.
const WANTED: &[u8] = b":wanted";
const BLOCKED: &[u8] = b":blocked";
const WAKE: &[u8] = b":wake";
const TURN: &[u8] = b":turn";
const REDLOCK_QUEUE: &[u8] = b":rq";

/// Redlock's companion keys of a lock.
pub(crate) trait RedlockKeys {
    /// With Redlock: exists (with an expiry) while waiters of the lock may be blocked, so that a
    /// release knows to wake one.
    fn wanted(&self) -> Vec<u8>;

    /// With Redlock: exists (with an expiry) on the masters where waiters of the lock may be
    /// blocked, so that a release wakes one there too when the lock's home master is away.
    fn blocked(&self) -> Vec<u8>;

    /// With Redlock: the list waiters of the lock block on; a release pushes one element.
    fn wake(&self) -> Vec<u8>;

    /// With Redlock: exists (briefly) after a release that wakes a waiter, so that only the woken
    /// waiter takes the lock then.
    fn turn(&self) -> Vec<u8>;

    /// With Redlock: the queue of this version's waiters on one master, a sorted set of waiter ids
    /// ordered by when each first queued (their entries are the `alive` keys of `LockKeys`).
    fn redlock_queue(&self) -> Vec<u8>;
}

impl RedlockKeys for LockKeys {
    fn wanted(&self) -> Vec<u8> {
        self.companion(WANTED, b"")
    }

    fn blocked(&self) -> Vec<u8> {
        self.companion(BLOCKED, b"")
    }

    fn wake(&self) -> Vec<u8> {
        self.companion(WAKE, b"")
    }

    fn turn(&self) -> Vec<u8> {
        self.companion(TURN, b"")
    }

    fn redlock_queue(&self) -> Vec<u8> {
        self.companion(REDLOCK_QUEUE, b"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::keys::slot;

    #[test]
    fn they_share_the_lock_slot_and_differ() {
        for prefix in [&b""[..], b"app:", b"{app}:"] {
            let k = LockKeys::new(prefix, b"orders:7").unwrap();
            let all = [
                k.wanted(),
                k.blocked(),
                k.wake(),
                k.turn(),
                k.redlock_queue(),
            ];
            for c in &all {
                assert_eq!(slot(c), slot(k.lock()), "{:?}", String::from_utf8_lossy(c));
            }
            let distinct: std::collections::HashSet<_> = all.iter().collect();
            assert_eq!(distinct.len(), all.len());
        }
        let k = LockKeys::new(b"p:", b"orders:7").unwrap();
        assert_eq!(k.wanted(), b"{p:orders:7}:wanted");
        assert_eq!(k.wake(), b"{p:orders:7}:wake");
    }
}
