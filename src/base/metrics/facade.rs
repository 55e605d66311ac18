//! The metrics through the `metrics` crate's facade (cargo feature `metrics`): every count and
//! observation of `metrics/` is also handed to the recorder the program installed, under the
//! same names and labels, so that any exporter (Prometheus, StatsD, OpenTelemetry) picks them
//! up. Histograms get the durations themselves, in seconds: the exporter buckets them.
//!
//! Without the feature these functions do nothing and cost nothing.

#[cfg(feature = "metrics")]
use ::metrics::{Label, counter, gauge, histogram};
use std::time::Duration;

/// The labels of one count: static pairs, and at most one pair with a value of the user's (a
/// tracked name, a Redlock master), which comes first.
pub(crate) type Labels<'a> = (
    &'a [(&'static str, &'static str)],
    Option<(&'static str, &'a str)>,
);

#[cfg(feature = "metrics")]
fn labels(l: Labels<'_>) -> Vec<Label> {
    let own = l.1.map(|(k, v)| Label::new(k, v.to_owned()));
    own.into_iter().chain(l.0.iter().map(Label::from)).collect()
}

/// A counter went up by one.
#[inline]
pub(crate) fn count(name: &'static str, l: Labels<'_>) {
    #[cfg(feature = "metrics")]
    counter!(name, labels(l)).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (name, l);
}

/// A gauge moved by `delta`.
#[inline]
pub(crate) fn add(name: &'static str, l: Labels<'_>, delta: i64) {
    #[cfg(feature = "metrics")]
    gauge!(name, labels(l)).increment(delta as f64);
    #[cfg(not(feature = "metrics"))]
    let _ = (name, l, delta);
}

/// A histogram got a duration.
#[inline]
pub(crate) fn observe(name: &'static str, l: Labels<'_>, d: Duration) {
    #[cfg(feature = "metrics")]
    histogram!(name, labels(l)).record(d.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (name, l, d);
}

/// Describes every family (its help text, and seconds for histograms) to the recorder.
#[cfg(feature = "metrics")]
pub(crate) fn describe(families: &[crate::base::metrics::Family]) {
    use crate::base::metrics::MetricType;
    for f in families {
        match f.kind {
            MetricType::Counter => ::metrics::describe_counter!(f.name, f.help),
            MetricType::Gauge => ::metrics::describe_gauge!(f.name, f.help),
            MetricType::Histogram => {
                ::metrics::describe_histogram!(f.name, ::metrics::Unit::Seconds, f.help)
            }
        }
    }
}

/// Describes every metric family to the installed recorder: its help text, and the unit
/// (seconds) of the histograms. Call it once after installing the recorder.
#[cfg(feature = "metrics")]
pub fn describe_all() {
    describe(
        &crate::base::metrics::Metrics::default()
            .snapshot(&[])
            .families,
    );
}
