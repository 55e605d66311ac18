//! The metrics of one backend: atomic counters, gauges and fixed-bucket histograms, bumped on
//! the hot path without allocation or lock, and their [`Snapshot`] with its Prometheus text.
//!
//! Every layer counts here: the pool its connections, the stores their topology events, the
//! engine acquisitions, waits, holds, handoffs, renewals and lost locks. A backend owns one
//! [`Metrics`] (persistent clients with the same settings share a backend, and so its numbers).
//! The names, types and labels are listed in `docs/metrics.md`.
//!
//! One file per concern: `labels.rs` the label values, `instruments.rs` the counters, gauges and
//! histograms, `registry.rs` a backend's [`Metrics`], `snapshot.rs` the numbers at one moment,
//! `prometheus.rs` their text format.

pub(crate) mod facade;
mod instruments;
mod labels;
mod prometheus;
mod registry;
mod snapshot;

pub use instruments::BUCKETS;
pub use labels::{KindLabel, LostReason, Outcome, error_label};
pub use registry::MAX_TRACKED_NAMES;
pub(crate) use registry::{Metrics, check_tracked};
pub use snapshot::{Family, HistogramSnapshot, MetricType, Sample, Snapshot, Value};
