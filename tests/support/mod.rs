//! Integration-test support: the project's test kit (`testkit/`), which starts real
//! `redis-server` processes (single servers, Sentinel groups, Clusters) on free loopback
//! ports, plus its helpers for multi-process tests; and the few helpers that need the library
//! itself. Use from a test file with `mod support;`.
#![allow(unused_imports, dead_code)]

use std::time::Duration;

pub use redislock_testkit::*;

/// A client of `url` whose waiters re-check only after a minute, and whose grants last as
/// long: within a test, a waiter can only be woken by a release's handoff.
pub fn handoff_only(url: &str) -> redislock::Client {
    redislock::Client::builder(url)
        .recheck_interval(Duration::from_secs(60))
        .lease(Duration::from_secs(60))
        .build()
        .unwrap()
}
