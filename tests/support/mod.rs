//! Integration-test support: the project's test kit (`testkit/`), which starts real
//! `redis-server` processes (single servers, Sentinel groups, Clusters) on free loopback
//! ports, plus its helpers for multi-process tests. Use from a test file with `mod support;`.
#![allow(unused_imports)]

pub use redislock_testkit::*;
