//! The Prometheus text exposition format (version 0.0.4) of a [`Snapshot`].

use std::fmt::Write as _;

use super::instruments::BUCKETS;
use super::snapshot::{MetricType, Snapshot, Value};

impl Snapshot {
    /// The Prometheus text exposition format (version 0.0.4) of every family.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::with_capacity(32 * 1024);
        for f in &self.families {
            let kind = match f.kind {
                MetricType::Counter => "counter",
                MetricType::Gauge => "gauge",
                MetricType::Histogram => "histogram",
            };
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {kind}", f.name);
            for s in &f.samples {
                match &s.value {
                    Value::Counter(n) => line(&mut out, f.name, "", &s.labels, None, n),
                    Value::Gauge(n) => line(&mut out, f.name, "", &s.labels, None, n),
                    Value::Histogram(h) => {
                        for (i, n) in h.cumulative.iter().enumerate() {
                            let le = BUCKETS.get(i).map_or("+Inf".to_owned(), f64::to_string);
                            line(&mut out, f.name, "_bucket", &s.labels, Some(&le), n);
                        }
                        line(&mut out, f.name, "_sum", &s.labels, None, &h.sum);
                        line(&mut out, f.name, "_count", &s.labels, None, &h.count);
                    }
                }
            }
        }
        out
    }
}

/// One sample line of the text format.
fn line(
    out: &mut String,
    name: &str,
    suffix: &str,
    labels: &[(&'static str, String)],
    le: Option<&str>,
    value: &dyn std::fmt::Display,
) {
    out.push_str(name);
    out.push_str(suffix);
    let all = labels
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(le.map(|le| ("le", le)));
    let mut first = true;
    for (k, v) in all {
        out.push(if first { '{' } else { ',' });
        first = false;
        let _ = write!(out, "{k}=\"");
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

#[cfg(test)]
mod tests {
    use super::super::Metrics;

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new(&["a\"b\\c\n*".to_owned()]);
        let text = m.snapshot(&[]).to_prometheus();
        assert!(text.contains("name=\"a\\\"b\\\\c\\n*\""), "{text}");
    }
}
