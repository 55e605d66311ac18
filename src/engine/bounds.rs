//! An exclusive lock's bounds on how long it is held, counted from its grant: `at_least` (a
//! release before it leaves the key ours until then) and `at_most` (no lease reaches past it;
//! its end is a loss).

use std::time::{Duration, Instant};

/// An exclusive lock's bounds on how long it is held ([`LockOptions`]'s `at_least` and
/// `at_most`, counted from its grant).
///
/// [`LockOptions`]: crate::base::grant::LockOptions
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bounds {
    /// A release before this leaves the key ours until then (`at_least`).
    pub keep_until: Option<Instant>,
    /// No lease reaches past this (`at_most`).
    pub until: Option<Instant>,
}

impl Bounds {
    /// What an extension by `lease` from `now` sets: the key's new expiry (long enough for
    /// `at_least`, cut at `at_most`) and whether it is the last one (it ends at `at_most`).
    pub(crate) fn extension(&self, lease: Duration, now: Instant) -> (Duration, bool) {
        let mut px = lease;
        if let Some(keep) = self.keep_until {
            px = px.max(ceil_ms(keep.saturating_duration_since(now)));
        }
        match self.until {
            Some(until) => {
                let left = until.saturating_duration_since(now);
                if left <= px {
                    (Duration::from_millis(left.as_millis() as u64), true)
                } else {
                    (px, false)
                }
            }
            None => (px, false),
        }
    }

    /// How long a release at `now` must leave the key ours (`at_least`), if at all.
    pub(crate) fn keep_for(&self, now: Instant) -> Option<Duration> {
        let left = self.keep_until?.saturating_duration_since(now);
        (!left.is_zero()).then(|| ceil_ms(left))
    }
}

/// `d` rounded up to whole milliseconds (what the scripts take).
fn ceil_ms(d: Duration) -> Duration {
    let ms = d.as_millis() as u64;
    Duration::from_millis(if Duration::from_millis(ms) < d {
        ms + 1
    } else {
        ms
    })
}
