//! [`Fence`]: what a fenced grant hands to the resources it protects (its name, its fencing
//! token, the epoch where the topology has one), ordered by the token.

use std::cmp::Ordering;
use std::fmt;

use crate::base::grant::COUNTER_BITS;
use crate::engine::held::Held;

/// The fence of a fenced grant: the lock's name, its fencing token and, on a Sentinel group or
/// a Cluster, the failover epoch of the master that granted it. A later grant of the name has a
/// larger token, also across a failover (the token is `epoch × 2^48 + counter` there), so fences
/// are ordered by their token alone: a resource refuses a write whose fence is older than the
/// one it has seen ([`FencedResource`](crate::FencedResource)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    name: Vec<u8>,
    token: u64,
    epoch: Option<u64>,
}

impl Fence {
    /// A fence of its parts, for a fence received from another process (`epoch` is `None` on a
    /// single server).
    pub fn new(name: impl Into<Vec<u8>>, token: u64, epoch: Option<u64>) -> Fence {
        Fence {
            name: name.into(),
            token,
            epoch,
        }
    }

    /// The fence of a held grant, if it was taken with fencing.
    pub(crate) fn of(held: &Held) -> Option<Fence> {
        let token = held.fencing_token()?;
        let epoch = held
            .state
            .backend
            .store
            .failover_epochs()
            .then_some(token >> COUNTER_BITS);
        Some(Fence::new(held.name(), token, epoch))
    }

    /// The lock's name (without the client's key prefix).
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The fencing token: what orders fences.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// The failover epoch of the master that granted the lock (the token's high bits), on a
    /// Sentinel group or a Cluster; `None` on a single server.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }
}

impl PartialOrd for Fence {
    fn partial_cmp(&self, other: &Fence) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// By the token (the name and epoch break ties only, so that the order agrees with `Eq`).
impl Ord for Fence {
    fn cmp(&self, other: &Fence) -> Ordering {
        (self.token, &self.name, self.epoch).cmp(&(other.token, &other.name, other.epoch))
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} fence {}",
            String::from_utf8_lossy(&self.name),
            self.token
        )?;
        if let Some(e) = self.epoch {
            write!(f, " (epoch {e})")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_ordered_by_their_token() {
        let old = Fence::new("a", 5, Some(0));
        let new = Fence::new("a", (1 << 48) + 1, Some(1));
        assert!(old < new);
        assert!(Fence::new("z", 1, None) < Fence::new("a", 2, None));
        assert_eq!(
            new.to_string(),
            format!("a fence {} (epoch 1)", (1u64 << 48) + 1)
        );
    }
}
