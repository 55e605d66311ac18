//! What a lock is asked with and what a grant gives: the options of one acquire, the grant a
//! store answers with, and the margin a lease loses to clock drift.

use std::time::{Duration, Instant};

/// How one lock is taken: lease, auto-renewal and fencing.
#[derive(Debug, Clone)]
pub(crate) struct LockOptions {
    pub lease: Duration,
    pub auto_renew: bool,
    pub fencing: bool,
}

/// A lock granted: its fencing token (0 without fencing) and the instant from which its lease
/// counts.
pub(crate) struct Grant {
    pub fence: u64,
    /// A set of locks: the fencing token of each name, in order (empty for the other kinds).
    pub fences: Vec<u64>,
    pub lease_from: Instant,
    /// Whether enough replicas acknowledged it already (`min_replicas`: the exclusive lock's
    /// `SET NX` sends its WAIT in the same round trip).
    pub acknowledged: bool,
}

impl Grant {
    /// A grant whose script reported `left_ms` of its lease left, for a request sent at `sent`.
    pub(crate) fn from_left(fence: u64, left_ms: i64, lease: Duration, sent: Instant) -> Grant {
        let left = Duration::from_millis(left_ms.max(0) as u64);
        Grant {
            fence,
            fences: Vec::new(),
            lease_from: sent - lease.saturating_sub(left),
            acknowledged: false,
        }
    }
}

/// The safety margin taken off a lease for clock drift between client and server.
pub(crate) fn drift(lease: Duration) -> Duration {
    Duration::from_millis(2) + lease / 100
}
