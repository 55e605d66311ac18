//! The metrics' label values: the kinds of lock, the outcomes of an acquire, the reasons a lock
//! was lost, and the error kinds, each as its label names it.

use crate::base::error::{Error, ErrorKind};

/// A kind of lock, as the metrics' `kind` label names it: with each kind's other names and
/// what it offers, in `base/kind.rs`.
pub use crate::base::kind::KindLabel;

/// How an acquire ended, as the `outcome` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Granted by the first attempt, without waiting.
    Immediate,
    /// Granted after waiting (handed over by a release, or taken at a re-check or wake-up).
    Waited,
    /// Not granted within the wait bound.
    TimedOut,
    /// Ended by a cancel.
    Cancelled,
    /// Held by another owner, and the request did not wait.
    Busy,
    /// Failed with an error (connection, Redis error, limit, ...): `redislock_acquire_errors_total`
    /// says which.
    Failed,
}

impl Outcome {
    /// Every outcome, in label order.
    pub const ALL: [Outcome; 6] = [
        Outcome::Immediate,
        Outcome::Waited,
        Outcome::TimedOut,
        Outcome::Cancelled,
        Outcome::Busy,
        Outcome::Failed,
    ];

    /// The `outcome` label's value.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Immediate => "immediate",
            Outcome::Waited => "waited",
            Outcome::TimedOut => "timed_out",
            Outcome::Cancelled => "cancelled",
            Outcome::Busy => "busy",
            Outcome::Failed => "failed",
        }
    }

    /// The outcome of an acquire that ended with `result`.
    pub(crate) fn of<T>(result: &Result<T, Error>, waited: bool) -> Outcome {
        match result {
            Ok(_) if waited => Outcome::Waited,
            Ok(_) => Outcome::Immediate,
            Err(e) if e.is_wait_timeout() => Outcome::TimedOut,
            Err(e) if e.is_cancelled() => Outcome::Cancelled,
            Err(e) if e.is_held() => Outcome::Busy,
            Err(_) => Outcome::Failed,
        }
    }
}

/// Why a held lock was lost, as the `reason` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LostReason {
    /// Renewal found the key gone or held by another owner.
    TakenOver,
    /// The lease ran out before renewal could reach Redis.
    Expired,
    /// No renewal thread could be started for it.
    NoRenewalThread,
    /// A release found the key gone or held by another owner.
    FoundByRelease,
    /// An extend found the key gone or held by another owner.
    FoundByExtend,
    /// Its `at_most` came: renewal stopped and the lease ran out.
    AtMost,
}

impl LostReason {
    /// Every reason, in label order.
    pub const ALL: [LostReason; 6] = [
        LostReason::TakenOver,
        LostReason::Expired,
        LostReason::NoRenewalThread,
        LostReason::FoundByRelease,
        LostReason::FoundByExtend,
        LostReason::AtMost,
    ];

    /// The `reason` label's value.
    pub fn label(self) -> &'static str {
        match self {
            LostReason::TakenOver => "taken_over",
            LostReason::Expired => "expired",
            LostReason::NoRenewalThread => "no_renewal_thread",
            LostReason::FoundByRelease => "found_by_release",
            LostReason::FoundByExtend => "found_by_extend",
            LostReason::AtMost => "at_most",
        }
    }

    /// What the holder is told (the error's detail, the log line).
    pub(crate) fn why(self) -> &'static str {
        match self {
            LostReason::TakenOver => "renewal found the key gone or held by another owner",
            LostReason::Expired => "its lease ran out before renewal could reach Redis",
            LostReason::NoRenewalThread => "no renewal thread could be started",
            LostReason::FoundByRelease | LostReason::FoundByExtend => {
                "its lease ran out or another owner took it over"
            }
            LostReason::AtMost => "it was held for its at_most, the longest it may be held",
        }
    }

    /// Whether renewal found it (what `Client::stats().lost_locks` counts).
    pub(crate) fn by_renewal(self) -> bool {
        matches!(
            self,
            LostReason::TakenOver
                | LostReason::Expired
                | LostReason::NoRenewalThread
                | LostReason::AtMost
        )
    }
}

/// The `error` label's value of an error kind.
pub fn error_label(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Held => "held",
        ErrorKind::WaitTimeout => "wait_timeout",
        ErrorKind::NotHeld => "not_held",
        ErrorKind::InvalidArgument => "invalid_argument",
        ErrorKind::Connection => "connection",
        ErrorKind::Redis => "redis",
        ErrorKind::Forked => "forked",
        ErrorKind::LimitReached => "limit_reached",
        ErrorKind::Internal => "internal",
        ErrorKind::Cancelled => "cancelled",
    }
}
