//! What a lock is asked with and what a grant gives: the options of one acquire, the grant a
//! store answers with, and the margin a lease loses to clock drift.

use std::time::{Duration, Instant};

/// How one lock is taken: lease, auto-renewal and fencing; an exclusive lock's bounds on how
/// long it is held.
#[derive(Debug, Clone)]
pub(crate) struct LockOptions {
    pub lease: Duration,
    pub auto_renew: bool,
    pub fencing: bool,
    /// A release before this long after the grant leaves the key ours until then.
    pub at_least: Option<Duration>,
    /// Renewal never extends the lease past this long after the grant; the lock is lost then.
    pub at_most: Option<Duration>,
}

/// A lock granted: its fencing counter (0 without fencing), the epoch of the master that granted
/// it, and the instant from which its lease counts.
#[derive(Clone)]
pub(crate) struct Grant {
    /// The name's fencing counter as the grant left it.
    pub fence: u64,
    /// A set of locks: the fencing counter of each name, in order (empty for the other kinds).
    pub fences: Vec<u64>,
    /// The epoch of the master whose script granted it ([`fencing_token`]).
    pub epoch: u64,
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
            epoch: 0,
            lease_from: sent - lease.saturating_sub(left),
            acknowledged: false,
        }
    }

    /// The grant's fencing token.
    pub(crate) fn token(&self) -> u64 {
        fencing_token(self.epoch, self.fence)
    }

    /// A set's fencing tokens, one per name in order.
    pub(crate) fn tokens(&self) -> Vec<u64> {
        self.fences
            .iter()
            .map(|&f| fencing_token(self.epoch, f))
            .collect()
    }
}

/// How many low bits of a fencing token hold the name's counter; the master's epoch is above.
pub(crate) const COUNTER_BITS: u32 = 48;
/// The largest epoch a token can carry (tokens stay below 2^63: PHP's integers are signed).
pub(crate) const MAX_EPOCH: u64 = (1 << (63 - COUNTER_BITS)) - 1;

/// The fencing token of a grant: ordered first by the epoch of the master that granted it, then
/// by the name's counter on that master. The counter alone is not enough across a split brain:
/// an old master cut off from its sentinels keeps granting and counting while the promoted
/// replica counts on from the same number, so both hand out the same tokens. The epoch is the
/// Sentinel group's configuration epoch (every failover raises it) for a connection made to the
/// master the sentinels named in it, a Cluster master's own configuration epoch, and 0 for a
/// single server (the token is then the counter, as it always was). Epochs above [`MAX_EPOCH`] count as it, and counters above 2^48 - 1
/// (2.8·10^14 grants of one name) as that: neither is reached by a real deployment.
pub(crate) fn fencing_token(epoch: u64, counter: u64) -> u64 {
    if epoch == 0 {
        return counter;
    }
    (epoch.min(MAX_EPOCH) << COUNTER_BITS) | counter.min((1 << COUNTER_BITS) - 1)
}

/// The safety margin taken off a lease for clock drift between client and server.
pub(crate) fn drift(lease: Duration) -> Duration {
    Duration::from_millis(2) + lease / 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_the_counter_at_epoch_0_and_ordered_by_epoch_first() {
        assert_eq!(fencing_token(0, 0), 0);
        assert_eq!(fencing_token(0, 41), 41);
        assert_eq!(fencing_token(0, u64::MAX), u64::MAX);
        // Any grant of a later epoch sorts above every grant of an earlier one.
        assert!(fencing_token(1, 1) > fencing_token(0, (1 << COUNTER_BITS) - 1));
        assert!(fencing_token(2, 0) > fencing_token(1, 1_000_000));
        assert!(fencing_token(1, 6) > fencing_token(1, 5));
        assert_eq!(fencing_token(1, 5), (1 << 48) + 5);
        // Tokens stay below 2^63 (PHP's integers are signed), at the limits too.
        assert!(fencing_token(u64::MAX, u64::MAX) <= i64::MAX as u64);
        assert!(fencing_token(MAX_EPOCH, 7) > fencing_token(MAX_EPOCH - 1, 8));
    }

    #[test]
    fn a_grant_carries_its_epoch_into_its_tokens() {
        let mut g = Grant::from_left(9, 1000, Duration::from_secs(1), Instant::now());
        g.fences = vec![3, 4];
        assert_eq!((g.token(), g.tokens()), (9, vec![3, 4]));
        g.epoch = 2;
        assert_eq!(g.token(), (2 << 48) + 9);
        assert_eq!(g.tokens(), vec![(2 << 48) + 3, (2 << 48) + 4]);
    }
}
