//! With the cargo feature `metrics`, the same numbers reach the `metrics` crate's recorder as
//! the snapshot shows: every counter and histogram series a workload moved, under the same name
//! and labels. Run with `cargo nextest run --features metrics --test metrics_facade`.

mod support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use redislock::metrics::Value;
use redislock::{Client, ErrorKind};
use support::{RedisServer, eventually, unique_name};

/// One series' numbers as the recorder got them: counter total, gauge value, histogram count.
#[derive(Default)]
struct Cell {
    total: AtomicU64,
    gauge: Mutex<f64>,
}

impl CounterFn for Cell {
    fn increment(&self, v: u64) {
        self.total.fetch_add(v, Ordering::Relaxed);
    }
    fn absolute(&self, v: u64) {
        self.total.store(v, Ordering::Relaxed);
    }
}

impl GaugeFn for Cell {
    fn increment(&self, v: f64) {
        *self.gauge.lock().unwrap() += v;
    }
    fn decrement(&self, v: f64) {
        *self.gauge.lock().unwrap() -= v;
    }
    fn set(&self, v: f64) {
        *self.gauge.lock().unwrap() = v;
    }
}

impl HistogramFn for Cell {
    fn record(&self, _: f64) {
        self.total.fetch_add(1, Ordering::Relaxed);
    }
}

/// Keeps every series by its rendered key, and every description.
#[derive(Default)]
struct Keeper {
    series: Mutex<HashMap<String, Arc<Cell>>>,
    described: Mutex<HashMap<String, Option<Unit>>>,
}

fn render(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl Keeper {
    fn cell(&self, key: &Key) -> Arc<Cell> {
        self.series
            .lock()
            .unwrap()
            .entry(render(key))
            .or_default()
            .clone()
    }
}

impl Recorder for &'static Keeper {
    fn describe_counter(&self, k: KeyName, u: Option<Unit>, _: SharedString) {
        self.described
            .lock()
            .unwrap()
            .insert(k.as_str().to_owned(), u);
    }
    fn describe_gauge(&self, k: KeyName, u: Option<Unit>, _: SharedString) {
        self.described
            .lock()
            .unwrap()
            .insert(k.as_str().to_owned(), u);
    }
    fn describe_histogram(&self, k: KeyName, u: Option<Unit>, _: SharedString) {
        self.described
            .lock()
            .unwrap()
            .insert(k.as_str().to_owned(), u);
    }
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key))
    }
}

#[test]
fn the_facade_gets_the_snapshots_numbers() {
    let keeper: &'static Keeper = Box::leak(Box::default());
    metrics::set_global_recorder(keeper).expect("no recorder yet");
    redislock::metrics::describe();
    assert_eq!(
        keeper
            .described
            .lock()
            .unwrap()
            .get("redislock_wait_seconds"),
        Some(&Some(Unit::Seconds))
    );

    let srv = RedisServer::start();
    let name = unique_name("facade");
    let c = Client::builder(&srv.url())
        .metric_names([name.clone()])
        .build()
        .unwrap();
    let a = c.try_acquire(&name).unwrap();
    assert_eq!(c.try_acquire(&name).unwrap_err().kind(), ErrorKind::Held);
    thread::scope(|s| {
        let waiter = s.spawn(|| c.acquire(&name, Duration::from_secs(30)));
        assert!(eventually(Duration::from_secs(10), || {
            c.metrics().sum("redislock_waiters", &[]) == 1
        }));
        a.release().unwrap();
        waiter.join().unwrap().unwrap().release().unwrap();
    });
    let r = c.rw_lock(&unique_name("facade-rw")).try_read().unwrap();

    let snapshot = c.metrics();
    let series = keeper.series.lock().unwrap();
    let mut compared = 0;
    for f in &snapshot.families {
        if f.name.starts_with("redislock_renew") {
            continue; // the renewal threads' gauges are the snapshot's only
        }
        for s in &f.samples {
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let key = format!("{}{{{}}}", f.name, labels.join(","));
            let got = series.get(&key);
            match &s.value {
                Value::Counter(0) => {}
                Value::Counter(n) => {
                    let got = got.unwrap_or_else(|| panic!("{key} never reached the recorder"));
                    assert_eq!(got.total.load(Ordering::Relaxed), *n, "{key}");
                    compared += 1;
                }
                Value::Histogram(h) if h.count > 0 => {
                    let got = got.unwrap_or_else(|| panic!("{key} never reached the recorder"));
                    assert_eq!(got.total.load(Ordering::Relaxed), h.count, "{key}");
                    compared += 1;
                }
                Value::Gauge(g) if *g != 0 || got.is_some() => {
                    let got = got.unwrap_or_else(|| panic!("{key} never reached the recorder"));
                    assert_eq!(*got.gauge.lock().unwrap(), *g as f64, "{key}");
                    compared += 1;
                }
                _ => {}
            }
        }
    }
    // Acquisitions (3 outcomes and the read lock), name series, wait and hold histograms,
    // handoff, held and waiter gauges, connections.
    assert!(compared >= 12, "only {compared} series compared");
    assert_eq!(
        series
            .get("redislock_locks_held{kind=read}")
            .map(|c| *c.gauge.lock().unwrap()),
        Some(1.0)
    );
    drop(series);
    drop(r);
}
