//! A backend's metrics at one moment: its families, their series and values, and the look-ups
//! the tests and the C API make in them.

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Only goes up (from the backend's start).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Durations in fixed buckets.
    Histogram,
}

/// A histogram's numbers at a snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations at most each bound of [`BUCKETS`](super::BUCKETS), then in all (`+Inf`):
    /// cumulative.
    pub cumulative: Vec<u64>,
    /// Observations in all.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
}

/// One series' value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A counter's value.
    Counter(u64),
    /// A gauge's value.
    Gauge(i64),
    /// A histogram's buckets, count and sum.
    Histogram(HistogramSnapshot),
}

/// One series of a family: its labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Label names and values, in order.
    pub labels: Vec<(&'static str, String)>,
    /// The value.
    pub value: Value,
}

/// A metric family: its name, help text, type and series.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The metric's name (`redislock_...`).
    pub name: &'static str,
    /// What it counts.
    pub help: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricType,
    /// Its series.
    pub samples: Vec<Sample>,
}

/// A client backend's metrics at one moment ([`Client::metrics`](crate::Client::metrics)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Every family, in a fixed order.
    pub families: Vec<Family>,
}

impl Snapshot {
    pub(super) fn family(
        &mut self,
        name: &'static str,
        help: &'static str,
        samples: impl Iterator<Item = (Vec<(&'static str, String)>, Value)>,
    ) {
        let samples: Vec<Sample> = samples
            .map(|(labels, value)| Sample { labels, value })
            .collect();
        let kind = match samples.first().map(|s| &s.value) {
            Some(Value::Gauge(_)) => MetricType::Gauge,
            Some(Value::Histogram(_)) => MetricType::Histogram,
            _ if name.ends_with("_seconds") => MetricType::Histogram,
            _ => MetricType::Counter,
        };
        self.families.push(Family {
            name,
            help,
            kind,
            samples,
        });
    }

    /// The family named `name`.
    pub fn family_named(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The value of the series of `name` whose labels include every `labels` pair.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<&Value> {
        self.family_named(name)?
            .samples
            .iter()
            .find(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|s| &s.value)
    }

    /// The counter or gauge `name` with `labels` (see [`value`](Self::value)); a histogram
    /// gives its count.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<i64> {
        Some(match self.value(name, labels)? {
            Value::Counter(n) => i64::try_from(*n).unwrap_or(i64::MAX),
            Value::Gauge(n) => *n,
            Value::Histogram(h) => i64::try_from(h.count).unwrap_or(i64::MAX),
        })
    }

    /// The counter or gauge `name` summed over every series whose labels include `labels`.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> i64 {
        let Some(f) = self.family_named(name) else {
            return 0;
        };
        f.samples
            .iter()
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|s| match &s.value {
                Value::Counter(n) => i64::try_from(*n).unwrap_or(i64::MAX),
                Value::Gauge(n) => *n,
                Value::Histogram(h) => i64::try_from(h.count).unwrap_or(i64::MAX),
            })
            .sum()
    }
}
