//! Spans through the `tracing` crate (cargo feature `tracing`): an acquire (its wait time and
//! outcome), a release, an extend, a renewal, and a lost lock, each with the lock's kind and, for
//! a name the client tracks in its metrics (`ClientBuilder::metric_names`), the tracked entry as
//! `lock.name`; never a token. The names and fields are listed in `docs/metrics.md`.
//!
//! Each engine site makes one call here. Without the feature the span types are empty and every
//! function is an empty `#[inline(always)]` one, or calls its closure and nothing else: no code
//! is emitted for them. With the feature, a span that no subscriber wants costs the `tracing`
//! macros' level check, and nothing is looked up for it.

use std::time::{Duration, Instant};

use crate::base::error::Error;
#[cfg(feature = "tracing")]
use crate::base::metrics::Outcome;
use crate::base::metrics::{KindLabel, LostReason, Metrics};

#[cfg(feature = "tracing")]
use crate::base::metrics::error_label;
#[cfg(feature = "tracing")]
use tracing::{Span, field::Empty};

/// The target of every span, for filters (`redislock=info`).
#[cfg(feature = "tracing")]
const TARGET: &str = "redislock";

/// The lock a span is about: its kind, its name, and the metrics of its client, whose tracked
/// names give the span its `lock.name`. The module takes nothing else of the engine.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "tracing"), allow(dead_code))]
pub(crate) struct Subject<'a> {
    pub kind: KindLabel,
    pub name: &'a [u8],
    pub metrics: &'a Metrics,
}

/// An acquire's span, entered on the acquiring thread from the acquire's start to its end.
#[must_use = "the span ends with `end`"]
pub(crate) struct Acquire {
    #[cfg(feature = "tracing")]
    span: tracing::span::EnteredSpan,
}

impl Acquire {
    /// Opens and enters the span of an acquire of `subject` (asked for only with the feature).
    #[inline(always)]
    pub(crate) fn start<'a>(subject: impl FnOnce() -> Subject<'a>) -> Acquire {
        #[cfg(feature = "tracing")]
        {
            let s = subject();
            let span = tracing::info_span!(
                target: TARGET,
                "redislock.acquire",
                "lock.kind" = s.kind.label(),
                "lock.name" = Empty,
                "lock.wait_seconds" = Empty,
                outcome = Empty,
                "error.type" = Empty,
                "otel.status_code" = Empty,
            );
            name(&span, &s);
            Acquire {
                span: span.entered(),
            }
        }
        #[cfg(not(feature = "tracing"))]
        {
            let _ = subject;
            Acquire {}
        }
    }

    /// Records how the acquire that began at `started` ended (`waited`: it entered the wait
    /// loop), as the metrics count it, and closes the span.
    #[inline(always)]
    pub(crate) fn end<T>(self, result: &Result<T, Error>, waited: bool, started: Instant) {
        #[cfg(feature = "tracing")]
        {
            let span = self.span.exit();
            if span.is_disabled() {
                return;
            }
            let outcome = Outcome::of(result, waited);
            span.record("outcome", outcome.label());
            if waited {
                span.record("lock.wait_seconds", started.elapsed().as_secs_f64());
            }
            // A refusal, a timeout and a cancel are outcomes, not errors.
            if let (Outcome::Failed, Err(e)) = (outcome, result) {
                span.record("error.type", error_label(e.kind()));
                span.record("otel.status_code", "ERROR");
            }
        }
        #[cfg(not(feature = "tracing"))]
        let _ = (self, result, waited, started);
    }
}

/// Runs `f`, the release of `lock`'s grant, in a span of its own.
#[inline(always)]
pub(crate) fn release(
    lock: Subject<'_>,
    f: impl FnOnce() -> Result<bool, Error>,
) -> Result<bool, Error> {
    #[cfg(feature = "tracing")]
    {
        let span = tracing::info_span!(
            target: TARGET,
            "redislock.release",
            "lock.kind" = lock.kind.label(),
            "lock.name" = Empty,
            outcome = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
        );
        name(&span, &lock);
        let result = span.in_scope(f);
        ended(&span, "released", &result);
        result
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = lock;
        f()
    }
}

/// Runs `f`, an extend of `lock`'s lease to `lease` asked by its holder, in a span of its own.
#[inline(always)]
pub(crate) fn extend(
    lock: Subject<'_>,
    lease: Duration,
    f: impl FnOnce() -> Result<bool, Error>,
) -> Result<bool, Error> {
    #[cfg(feature = "tracing")]
    {
        let span = tracing::info_span!(
            target: TARGET,
            "redislock.extend",
            "lock.kind" = lock.kind.label(),
            "lock.name" = Empty,
            "lock.lease_seconds" = lease.as_secs_f64(),
            outcome = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
        );
        name(&span, &lock);
        let result = span.in_scope(f);
        ended(&span, "extended", &result);
        result
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = (lock, lease);
        f()
    }
}

/// Runs `f`, one pipeline of renewals of `locks`, with a span for each lock's renewal; `f`
/// gives one result per lock, in order.
#[inline(always)]
pub(crate) fn renewals<'a>(
    locks: impl Iterator<Item = Subject<'a>>,
    f: impl FnOnce() -> Vec<Result<bool, Error>>,
) -> Vec<Result<bool, Error>> {
    #[cfg(feature = "tracing")]
    {
        if !tracing::span_enabled!(target: TARGET, tracing::Level::DEBUG) {
            return f();
        }
        let spans: Vec<Span> = locks
            .map(|lock| {
                let span = tracing::debug_span!(
                    target: TARGET,
                    "redislock.renew",
                    "lock.kind" = lock.kind.label(),
                    "lock.name" = Empty,
                    outcome = Empty,
                    "error.type" = Empty,
                    "otel.status_code" = Empty,
                );
                name(&span, &lock);
                span
            })
            .collect();
        let results = f();
        for (span, result) in spans.iter().zip(&results) {
            ended(span, "extended", result);
        }
        results
    }
    #[cfg(not(feature = "tracing"))]
    {
        let _ = locks;
        f()
    }
}

/// `lock` was found lost for `reason`: a span of no length that says so, a child of the
/// thread's current span (the caller's, for a loss a release or extend found; none on a
/// renewal thread).
#[inline(always)]
pub(crate) fn lost(lock: Subject<'_>, reason: LostReason, granted_at: Instant) {
    #[cfg(feature = "tracing")]
    {
        let span = tracing::warn_span!(
            target: TARGET,
            "redislock.lost",
            "lock.kind" = lock.kind.label(),
            "lock.name" = Empty,
            "lock.lost_reason" = reason.label(),
            "lock.hold_seconds" = granted_at.elapsed().as_secs_f64(),
            "otel.status_code" = "ERROR",
        );
        name(&span, &lock);
    }
    #[cfg(not(feature = "tracing"))]
    let _ = (lock, reason, granted_at);
}

/// Gives `span` the tracked entry of `name`, if the client tracks it.
#[cfg(feature = "tracing")]
fn name(span: &Span, s: &Subject<'_>) {
    if span.is_disabled() {
        return;
    }
    if let Some(tracked) = s.metrics.tracked_name(s.name) {
        span.record("lock.name", tracked);
    }
}

/// Records the end of a release, extend or renewal: `done` when the grant was still ours,
/// `not_held` when it was not, `failed` (with the error's kind) when the call failed.
#[cfg(feature = "tracing")]
fn ended(span: &Span, done: &'static str, result: &Result<bool, Error>) {
    if span.is_disabled() {
        return;
    }
    match result {
        Ok(true) => {
            span.record("outcome", done);
        }
        Ok(false) => {
            span.record("outcome", "not_held");
            span.record("otel.status_code", "ERROR");
        }
        Err(e) => {
            span.record("outcome", "failed");
            span.record("error.type", error_label(e.kind()));
            span.record("otel.status_code", "ERROR");
        }
    }
}
