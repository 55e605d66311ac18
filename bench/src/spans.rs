//! With the cargo feature `tracing` and `REDISLOCK_BENCH_SPANS=1`: a subscriber that takes every
//! span of the library, visits its fields and keeps nothing, so that a run measures what the
//! library's spans cost it (their creation, fields and dispatch), without an exporter's own work.

use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Installs the subscriber when `REDISLOCK_BENCH_SPANS=1`.
pub fn install_if_asked() {
    if std::env::var("REDISLOCK_BENCH_SPANS").as_deref() == Ok("1") {
        tracing::subscriber::set_global_default(Discard::default())
            .expect("no other subscriber is installed");
        eprintln!("spans: a subscriber that takes every span and keeps nothing");
    }
}

#[derive(Default)]
struct Discard {
    next: AtomicU64,
}

/// Looks at every field value, as a real subscriber would.
struct Look(u64);

impl Visit for Look {
    fn record_debug(&mut self, _: &Field, v: &dyn std::fmt::Debug) {
        let _ = std::hint::black_box(v);
        self.0 += 1;
    }
}

impl Subscriber for Discard {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        attrs.record(&mut Look(0));
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Look(0));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
