//! Which lock names were found held recently, so that an acquire that may wait can queue at
//! once (a waiter's first round takes a free lock too) instead of first sending an attempt that
//! a contended lock would refuse: a round trip and a server call less per contended acquire.
//!
//! A small lossy table of the process: an entry per hash of the lock key, holding the key's tag and
//! when it was found held. A wrong answer costs no correctness, only a round trip or a heavier
//! script: names that share an entry evict each other, and a name found free by a waiter's first
//! round is cleared, so an uncontended name soon goes back to the plain attempt.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::base::sync::Lazy;

const ENTRIES: usize = 256;
/// How long a name counts as contended after it was last found held.
const FOR: Duration = Duration::from_secs(5);

static TABLE: [AtomicU64; ENTRIES] = [const { AtomicU64::new(0) }; ENTRIES];
/// The first use (a [`Lazy`]: a child forked while a thread of the parent reads it never waits).
static EPOCH: Lazy<Instant> = Lazy::new(Instant::now);

/// FNV-1a, 64 bits.
fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Milliseconds since the first use, never 0 (0 marks an empty entry), wrapping after 49 days.
fn now_ms() -> u32 {
    let ms = EPOCH.elapsed().as_millis() as u32;
    ms.max(1)
}

fn entry(key: &[u8]) -> (&'static AtomicU64, u64) {
    let h = hash(key);
    (&TABLE[h as usize % ENTRIES], h & 0xffff_ffff_0000_0000)
}

/// The lock `key` was found held just now.
pub(crate) fn note(key: &[u8]) {
    let (entry, tag) = entry(key);
    entry.store(tag | u64::from(now_ms()), Ordering::Relaxed);
}

/// The lock `key` was found free.
pub(crate) fn clear(key: &[u8]) {
    let (entry, tag) = entry(key);
    let v = entry.load(Ordering::Relaxed);
    if v & 0xffff_ffff_0000_0000 == tag {
        let _ = entry.compare_exchange(v, 0, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// Whether the lock `key` was found held within the last few seconds.
pub(crate) fn recently(key: &[u8]) -> bool {
    let (entry, tag) = entry(key);
    let v = entry.load(Ordering::Relaxed);
    let at = v as u32;
    at != 0
        && v & 0xffff_ffff_0000_0000 == tag
        && now_ms().wrapping_sub(at) < FOR.as_millis() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn noted_until_cleared() {
        let k = b"contended-test:a";
        assert!(!recently(k));
        note(k);
        assert!(recently(k));
        // Another name's clear leaves this one alone.
        clear(b"contended-test:b");
        assert!(recently(k));
        clear(k);
        assert!(!recently(k));
    }
}
