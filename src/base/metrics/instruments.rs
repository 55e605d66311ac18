//! The instruments every layer counts into: counters, gauges and fixed-bucket histograms,
//! bumped on the hot path without allocation or lock.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use super::facade;
use super::snapshot::HistogramSnapshot;

/// The upper bounds of the histograms' buckets, in seconds (a last bucket, `+Inf`, takes the
/// rest).
pub const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];
/// The same bounds in nanoseconds, for the hot path.
const BOUNDS_NS: [u64; 16] = [
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
    60_000_000_000,
];

/// A counter that only goes up.
#[derive(Default)]
pub(crate) struct Counter(AtomicU64);

impl Counter {
    #[inline]
    pub(crate) fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A counter with its family's name, help text and label: bumped, it tells the facade too.
pub(crate) struct Named {
    pub(super) name: &'static str,
    pub(super) help: &'static str,
    pub(super) label: Option<(&'static str, &'static str)>,
    n: Counter,
}

impl Named {
    pub(super) const fn new(name: &'static str, help: &'static str) -> Named {
        Named {
            name,
            help,
            label: None,
            n: Counter(AtomicU64::new(0)),
        }
    }

    pub(super) const fn labelled(
        name: &'static str,
        help: &'static str,
        label: (&'static str, &'static str),
    ) -> Named {
        Named {
            label: Some(label),
            ..Named::new(name, help)
        }
    }

    #[inline]
    pub(crate) fn inc(&self) {
        self.n.inc();
        facade::count(self.name, (self.label.as_slice(), None));
    }

    pub(crate) fn get(&self) -> u64 {
        self.n.get()
    }
}

/// A value that goes up and down.
#[derive(Default)]
pub(crate) struct Gauge(AtomicI64);

impl Gauge {
    #[inline]
    pub(crate) fn add(&self, n: i64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub(super) fn get(&self) -> i64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Durations in the fixed buckets of [`BUCKETS`] (each observation counted in one bucket; the
/// snapshot makes them cumulative), and their sum.
#[derive(Default)]
pub(crate) struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    #[inline]
    pub(crate) fn observe(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let i = BOUNDS_NS.partition_point(|&b| b < ns);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = Vec::with_capacity(BUCKETS.len() + 1);
        let mut total = 0;
        for b in &self.buckets {
            total += b.load(Ordering::Relaxed);
            cumulative.push(total);
        }
        HistogramSnapshot {
            cumulative,
            count: total,
            sum: self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{KindLabel, Metrics, Outcome, Value};
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_sum_to_the_count() {
        let m = Metrics::new(&["jobs:*".to_owned()]);
        for ms in [0, 1, 3, 70, 200_000] {
            m.acquired(
                KindLabel::Exclusive,
                b"jobs:1",
                Outcome::Waited,
                None,
                Some(Duration::from_millis(ms)),
            );
        }
        let s = m.snapshot(&[]);
        let Some(Value::Histogram(h)) = s.value("redislock_wait_seconds", &[("kind", "exclusive")])
        else {
            panic!("no histogram")
        };
        assert_eq!(h.count, 5);
        assert_eq!(h.cumulative.last(), Some(&5));
        assert_eq!(h.cumulative[0], 1); // 0 ms
        assert_eq!(h.cumulative[1], 2); // 1 ms: le=0.001 includes it
        assert_eq!(h.cumulative[BUCKETS.len() - 1], 4); // 200 s is above 60 s
        assert!((h.sum - 200.074).abs() < 1e-6, "{}", h.sum);
        assert_eq!(
            s.get(
                "redislock_name_acquisitions_total",
                &[("name", "jobs:*"), ("outcome", "waited")]
            ),
            Some(5)
        );
        let text = s.to_prometheus();
        assert!(text.contains("redislock_wait_seconds_bucket{kind=\"exclusive\",le=\"+Inf\"} 5\n"));
        assert!(text.contains("# TYPE redislock_name_wait_seconds histogram\n"));
    }
}
