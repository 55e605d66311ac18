//! Pauses between tries: jittered, so that the many clients that met the same fault (a master
//! killed, a failover under way) do not come back in step.
//!
//! [`Backoff`] paces the calls that ride out a failover (a release, an extend, a queued waiter
//! whose server stopped answering): they try again after a pause that doubles from
//! [`FIRST_PAUSE`] up to [`MAX_PAUSE`], so a name held by a release in flight is freed within
//! about [`MAX_PAUSE`] of the new master's promotion, while a dead master is not hammered.
//! [`Jitter`] is the small generator behind it, also used by the wait loop's re-checks.

use std::time::Duration;

/// The first pause after a try that found no server.
pub(crate) const FIRST_PAUSE: Duration = Duration::from_millis(25);
/// The longest pause between two tries.
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The pauses between the tries of one call.
pub(crate) struct Backoff {
    next: Duration,
    jitter: Jitter,
}

impl Backoff {
    /// Pauses for a call; `seed` spreads the pauses of different calls (a token, a waiter's
    /// signal list: anything random).
    pub(crate) fn new(seed: &[u8]) -> Backoff {
        Backoff {
            next: FIRST_PAUSE,
            jitter: Jitter::new(seed),
        }
    }

    /// The next pause: doubling from [`FIRST_PAUSE`] up to [`MAX_PAUSE`], less a random part of
    /// up to a half.
    pub(crate) fn pause(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(MAX_PAUSE);
        self.jitter.shorten(d, 0.5)
    }
}

/// A small xorshift generator for jitter, seeded from something random of the caller's (a
/// waiter's signal list holds its random id).
pub(crate) struct Jitter(u64);

impl Jitter {
    pub(crate) fn new(seed: &[u8]) -> Jitter {
        // FNV-1a of the seed.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in seed {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Jitter(h | 1)
    }

    /// `d` less a random fraction (up to `fraction`) of it.
    pub(crate) fn shorten(&mut self, d: Duration, fraction: f64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        d.mul_f64(1.0 - fraction * u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_in_range() {
        let mut j = Jitter::new(b"{lock}:w:0123456789abcdef");
        let d = Duration::from_millis(1000);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let s = j.shorten(d, 0.2);
            assert!(s <= d && s >= Duration::from_millis(800), "{s:?}");
            seen.insert(s.as_millis());
        }
        assert!(seen.len() > 50, "jitter should spread: {}", seen.len());
        assert_eq!(j.shorten(d, 0.0), d);
    }

    #[test]
    fn pauses_double_up_to_the_longest() {
        let mut b = Backoff::new(b"seed");
        let pauses: Vec<Duration> = (0..8).map(|_| b.pause()).collect();
        assert!(pauses[0] <= FIRST_PAUSE && pauses[0] >= FIRST_PAUSE / 2);
        assert!(pauses.iter().all(|p| *p <= MAX_PAUSE));
        assert!(pauses[7] >= MAX_PAUSE / 2, "{pauses:?}");
    }
}
