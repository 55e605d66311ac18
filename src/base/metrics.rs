//! The metrics of one backend: atomic counters, gauges and fixed-bucket histograms, bumped on
//! the hot path without allocation or lock, and their [`Snapshot`] with its Prometheus text.
//!
//! Every layer counts here: the pool its connections, the stores their topology events, the
//! engine acquisitions, waits, holds, handoffs, renewals and lost locks. A backend owns one
//! [`Metrics`] (persistent clients with the same settings share a backend, and so its numbers).
//! The names, types and labels are listed in `docs/metrics.md`.

use std::fmt::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use crate::base::error::{Error, ErrorKind};
use crate::base::facade;

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
/// The most lock names (or prefixes) a client may track with series of their own.
pub const MAX_TRACKED_NAMES: usize = 32;
/// The longest tracked name or prefix, in bytes.
const MAX_TRACKED_LEN: usize = 256;

/// A kind of lock, as the metrics' `kind` label names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// An exclusive lock.
    Exclusive,
    /// The read side of a read/write lock.
    Read,
    /// The write side of a read/write lock.
    Write,
    /// Permits of a semaphore.
    Semaphore,
    /// A set of exclusive locks taken together.
    Set,
    /// Redisson's RLock, as Java services take it.
    Redisson,
}

impl LockKind {
    /// Every kind, in label order.
    pub const ALL: [LockKind; 6] = [
        LockKind::Exclusive,
        LockKind::Read,
        LockKind::Write,
        LockKind::Semaphore,
        LockKind::Set,
        LockKind::Redisson,
    ];

    /// The `kind` label's value.
    pub fn label(self) -> &'static str {
        match self {
            LockKind::Exclusive => "exclusive",
            LockKind::Read => "read",
            LockKind::Write => "write",
            LockKind::Semaphore => "semaphore",
            LockKind::Set => "set",
            LockKind::Redisson => "redisson",
        }
    }
}

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
}

impl LostReason {
    /// Every reason, in label order.
    pub const ALL: [LostReason; 5] = [
        LostReason::TakenOver,
        LostReason::Expired,
        LostReason::NoRenewalThread,
        LostReason::FoundByRelease,
        LostReason::FoundByExtend,
    ];

    /// The `reason` label's value.
    pub fn label(self) -> &'static str {
        match self {
            LostReason::TakenOver => "taken_over",
            LostReason::Expired => "expired",
            LostReason::NoRenewalThread => "no_renewal_thread",
            LostReason::FoundByRelease => "found_by_release",
            LostReason::FoundByExtend => "found_by_extend",
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
        }
    }

    /// Whether renewal found it (what `Client::stats().lost_locks` counts).
    pub(crate) fn by_renewal(self) -> bool {
        matches!(
            self,
            LostReason::TakenOver | LostReason::Expired | LostReason::NoRenewalThread
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
    name: &'static str,
    help: &'static str,
    label: Option<(&'static str, &'static str)>,
    n: Counter,
}

impl Named {
    const fn new(name: &'static str, help: &'static str) -> Named {
        Named {
            name,
            help,
            label: None,
            n: Counter(AtomicU64::new(0)),
        }
    }

    const fn labelled(
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

    fn get(&self) -> i64 {
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

    fn snapshot(&self) -> HistogramSnapshot {
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

/// The series of one tracked name or prefix.
struct Tracked {
    /// As the user gave it: a name, or a prefix ending in `*`.
    pattern: String,
    acquisitions: [Counter; Outcome::ALL.len()],
    wait: Histogram,
    hold: Histogram,
    lost: Counter,
}

impl Tracked {
    fn matches(&self, name: &[u8]) -> bool {
        match self.pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix.as_bytes()),
            None => name == self.pattern.as_bytes(),
        }
    }
}

/// Checks the names and prefixes a client tracks: at most [`MAX_TRACKED_NAMES`], each
/// non-empty and at most 256 bytes.
pub(crate) fn check_tracked(names: &[String]) -> Result<(), Error> {
    if names.len() > MAX_TRACKED_NAMES {
        return Err(Error::invalid_argument(format!(
            "metric_names: {} names given, at most {MAX_TRACKED_NAMES} are tracked",
            names.len()
        )));
    }
    for n in names {
        if n.is_empty() || n == "*" || n.len() > MAX_TRACKED_LEN {
            return Err(Error::invalid_argument(format!(
                "metric_names: {n:?} is not a name or prefix (1 to {MAX_TRACKED_LEN} bytes, \
                 a prefix ends in '*' after at least one byte)"
            )));
        }
    }
    Ok(())
}

type PerKind<T> = [T; LockKind::ALL.len()];

/// The counters, gauges and histograms of one backend.
pub(crate) struct Metrics {
    acquisitions: PerKind<[Counter; Outcome::ALL.len()]>,
    acquire_errors: PerKind<[Counter; ErrorKind::ALL.len()]>,
    wait: PerKind<Histogram>,
    hold: PerKind<Histogram>,
    handoffs: PerKind<Counter>,
    lost: PerKind<[Counter; LostReason::ALL.len()]>,
    held: PerKind<Gauge>,
    waiters: PerKind<Gauge>,
    pub renewals: Named,
    pub renewals_late: Named,
    pub renewal_failures: Named,
    connections_open: Gauge,
    pub connections_opened: Named,
    pub connections_broken: Named,
    pub connect_failures: Named,
    pub sentinel_switches: Named,
    pub cluster_moved: Named,
    pub cluster_ask: Named,
    /// One counter per Redlock master (`host:port`), set when the store is opened.
    redlock_failures: OnceLock<Box<[(String, Counter)]>>,
    tracked: Box<[Tracked]>,
}

const ACQUISITIONS: &str = "redislock_acquisitions_total";
const ACQUIRE_ERRORS: &str = "redislock_acquire_errors_total";
const WAIT: &str = "redislock_wait_seconds";
const HOLD: &str = "redislock_hold_seconds";
const HANDOFFS: &str = "redislock_handoffs_received_total";
const LOST: &str = "redislock_locks_lost_total";
const HELD: &str = "redislock_locks_held";
const WAITERS: &str = "redislock_waiters";
const CONNECTIONS_OPEN: &str = "redislock_connections_open";
const REDLOCK_FAILURES: &str = "redislock_redlock_master_failures_total";
const NAME_ACQUISITIONS: &str = "redislock_name_acquisitions_total";
const NAME_WAIT: &str = "redislock_name_wait_seconds";
const NAME_HOLD: &str = "redislock_name_hold_seconds";
const NAME_LOST: &str = "redislock_name_locks_lost_total";
const REDIRECTS: &str = "redislock_cluster_redirects_total";
const REDIRECTS_HELP: &str = "Cluster redirections followed, by type.";

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            acquisitions: Default::default(),
            acquire_errors: Default::default(),
            wait: Default::default(),
            hold: Default::default(),
            handoffs: Default::default(),
            lost: Default::default(),
            held: Default::default(),
            waiters: Default::default(),
            renewals: Named::new(
                "redislock_renewals_total",
                "Renewals that extended a lease.",
            ),
            renewals_late: Named::new(
                "redislock_renewals_late_total",
                "Renewals sent more than lease/6 after they were due.",
            ),
            renewal_failures: Named::new(
                "redislock_renewal_failures_total",
                "Renewals that failed for want of an answer or with an error reply (retried until the lease runs out).",
            ),
            connections_open: Gauge::default(),
            connections_opened: Named::new(
                "redislock_connections_opened_total",
                "Connections opened to Redis.",
            ),
            connections_broken: Named::new(
                "redislock_connections_broken_total",
                "Connections closed because they failed.",
            ),
            connect_failures: Named::new(
                "redislock_connect_failures_total",
                "Connects that failed.",
            ),
            sentinel_switches: Named::new(
                "redislock_sentinel_master_switches_total",
                "Times the Sentinel group's master was found to have changed.",
            ),
            cluster_moved: Named::labelled(REDIRECTS, REDIRECTS_HELP, ("type", "moved")),
            cluster_ask: Named::labelled(REDIRECTS, REDIRECTS_HELP, ("type", "ask")),
            redlock_failures: OnceLock::new(),
            tracked: Box::default(),
        }
    }
}

impl Metrics {
    /// Metrics with series of their own for `tracked` names and prefixes (checked already).
    pub(crate) fn new(tracked: &[String]) -> Metrics {
        Metrics {
            tracked: tracked
                .iter()
                .map(|p| Tracked {
                    pattern: p.clone(),
                    acquisitions: Default::default(),
                    wait: Histogram::default(),
                    hold: Histogram::default(),
                    lost: Counter::default(),
                })
                .collect(),
            ..Metrics::default()
        }
    }

    fn tracked(&self, name: &[u8]) -> Option<&Tracked> {
        if self.tracked.is_empty() {
            return None;
        }
        self.tracked.iter().find(|t| t.matches(name))
    }

    /// The tracked entry (a name, or a prefix ending in `*`, as the client listed it) that
    /// `name` counts under, if any: what the spans give as `lock.name`.
    #[cfg(feature = "tracing")]
    pub(crate) fn tracked_name(&self, name: &[u8]) -> Option<&str> {
        self.tracked(name).map(|t| t.pattern.as_str())
    }

    /// An acquire of `name` ended with `outcome` (`error`: its kind, when it failed), after
    /// `waited` in the wait loop (`None`: it never waited).
    pub(crate) fn acquired(
        &self,
        kind: LockKind,
        name: &[u8],
        outcome: Outcome,
        error: Option<ErrorKind>,
        waited: Option<Duration>,
    ) {
        let k = kind as usize;
        self.acquisitions[k][outcome as usize].inc();
        let labels = [("kind", kind.label()), ("outcome", outcome.label())];
        facade::count(ACQUISITIONS, (&labels, None));
        if let (Outcome::Failed, Some(e)) = (outcome, error) {
            self.acquire_errors[k][e as usize].inc();
            let labels = [("kind", kind.label()), ("error", error_label(e))];
            facade::count(ACQUIRE_ERRORS, (&labels, None));
        }
        if let Some(w) = waited {
            self.wait[k].observe(w);
            facade::observe(WAIT, (&[("kind", kind.label())], None), w);
        }
        if let Some(t) = self.tracked(name) {
            t.acquisitions[outcome as usize].inc();
            let name = Some(("name", t.pattern.as_str()));
            facade::count(NAME_ACQUISITIONS, (&[("outcome", outcome.label())], name));
            if let Some(w) = waited {
                t.wait.observe(w);
                facade::observe(NAME_WAIT, (&[], name), w);
            }
        }
    }

    /// A lock of `kind` is held now (`+1`) or no longer (`-1`).
    #[inline]
    pub(crate) fn holding(&self, kind: LockKind, n: i64) {
        self.held[kind as usize].add(n);
        facade::add(HELD, (&[("kind", kind.label())], None), n);
    }

    /// A waiter of `kind` entered (`+1`) or left (`-1`) the wait loop.
    #[inline]
    pub(crate) fn waiting(&self, kind: LockKind, n: i64) {
        self.waiters[kind as usize].add(n);
        facade::add(WAITERS, (&[("kind", kind.label())], None), n);
    }

    /// A connection was opened (`+1`) or closed (`-n`).
    #[inline]
    pub(crate) fn connections(&self, n: i64) {
        self.connections_open.add(n);
        facade::add(CONNECTIONS_OPEN, (&[], None), n);
    }

    /// A lock of `name` held for `held` ended (released, detached or lost).
    pub(crate) fn held_for(&self, kind: LockKind, name: &[u8], held: Duration) {
        self.hold[kind as usize].observe(held);
        facade::observe(HOLD, (&[("kind", kind.label())], None), held);
        if let Some(t) = self.tracked(name) {
            t.hold.observe(held);
            facade::observe(NAME_HOLD, (&[], Some(("name", t.pattern.as_str()))), held);
        }
    }

    /// A waiter of `kind` was handed the grant by a release.
    #[inline]
    pub(crate) fn handoff(&self, kind: LockKind) {
        self.handoffs[kind as usize].inc();
        facade::count(HANDOFFS, (&[("kind", kind.label())], None));
    }

    /// A held lock of `name` was found lost.
    pub(crate) fn lost(&self, kind: LockKind, name: &[u8], reason: LostReason) {
        self.lost[kind as usize][reason as usize].inc();
        let labels = [("kind", kind.label()), ("reason", reason.label())];
        facade::count(LOST, (&labels, None));
        if let Some(t) = self.tracked(name) {
            t.lost.inc();
            facade::count(NAME_LOST, (&[], Some(("name", t.pattern.as_str()))));
        }
    }

    /// Locks found lost by renewal (`Client::stats().lost_locks`).
    pub(crate) fn lost_by_renewal(&self) -> u64 {
        let mut n = 0;
        for per_kind in &self.lost {
            for r in LostReason::ALL.into_iter().filter(|r| r.by_renewal()) {
                n += per_kind[r as usize].get();
            }
        }
        n
    }

    /// Names the Redlock masters, once, when the store is opened.
    pub(crate) fn redlock_masters(&self, masters: impl Iterator<Item = String>) {
        let _ = self
            .redlock_failures
            .set(masters.map(|m| (m, Counter::default())).collect());
    }

    /// A request to Redlock's master number `i` failed (unreachable, timed out, error reply).
    #[inline]
    pub(crate) fn redlock_failure(&self, i: usize) {
        if let Some((master, c)) = self.redlock_failures.get().and_then(|m| m.get(i)) {
            c.inc();
            facade::count(REDLOCK_FAILURES, (&[], Some(("master", master.as_str()))));
        }
    }

    /// The numbers now, with `extra` gauges (name, help, value) of the layers above.
    pub(crate) fn snapshot(&self, extra: &[(&'static str, &'static str, i64)]) -> Snapshot {
        let mut s = Snapshot::default();
        let kinds = || {
            LockKind::ALL
                .iter()
                .map(|k| vec![("kind", k.label().to_owned())])
        };
        let outcomes = Outcome::ALL.map(Outcome::label);
        s.family(
            ACQUISITIONS,
            "Acquires that ended, by lock kind and outcome.",
            by_kind(&self.acquisitions, "outcome", &outcomes),
        );
        let errors: Vec<&'static str> = ErrorKind::ALL.iter().map(|&e| error_label(e)).collect();
        s.family(
            ACQUIRE_ERRORS,
            "Acquires that failed with an error (outcome=\"failed\"), by lock kind and error kind.",
            by_kind(&self.acquire_errors, "error", &errors),
        );
        s.family(
            WAIT,
            "Time acquires spent waiting (from the acquire's start), for every acquire that waited, whatever its outcome.",
            kinds().zip(self.wait.iter().map(|h| Value::Histogram(h.snapshot()))),
        );
        s.family(
            HOLD,
            "How long locks were held, from the grant to their release, detach or loss.",
            kinds().zip(self.hold.iter().map(|h| Value::Histogram(h.snapshot()))),
        );
        s.family(
            HANDOFFS,
            "Grants a waiter received from a release that handed the lock over.",
            kinds().zip(self.handoffs.iter().map(|c| Value::Counter(c.get()))),
        );
        s.family(
            LOST,
            "Held locks found lost, by lock kind and reason.",
            by_kind(
                &self.lost,
                "reason",
                &LostReason::ALL.map(LostReason::label),
            ),
        );
        s.family(
            HELD,
            "Locks held now through this backend.",
            kinds().zip(self.held.iter().map(|g| Value::Gauge(g.get()))),
        );
        s.family(
            WAITERS,
            "Acquires waiting now.",
            kinds().zip(self.waiters.iter().map(|g| Value::Gauge(g.get()))),
        );
        let one = |v: Value| std::iter::once((Vec::new(), v));
        let named = [
            &self.renewals,
            &self.renewals_late,
            &self.renewal_failures,
            &self.connections_opened,
            &self.connections_broken,
            &self.connect_failures,
            &self.sentinel_switches,
        ];
        for c in named {
            s.family(c.name, c.help, one(Value::Counter(c.get())));
        }
        s.family(
            CONNECTIONS_OPEN,
            "Connections open now (idle or in use).",
            one(Value::Gauge(self.connections_open.get())),
        );
        s.family(
            REDIRECTS,
            REDIRECTS_HELP,
            [&self.cluster_moved, &self.cluster_ask]
                .into_iter()
                .map(|c| {
                    let (k, v) = c.label.unwrap_or_default();
                    (vec![(k, v.to_owned())], Value::Counter(c.get()))
                }),
        );
        let masters = self.redlock_failures.get().map_or(&[][..], |m| &m[..]);
        s.family(
            REDLOCK_FAILURES,
            "Requests to a Redlock master that failed (unreachable, timed out, error reply).",
            masters
                .iter()
                .map(|(m, c)| (vec![("master", m.clone())], Value::Counter(c.get()))),
        );
        for (name, help, v) in extra {
            s.family(name, help, one(Value::Gauge(*v)));
        }
        let tracked = || self.tracked.iter();
        s.family(
            NAME_ACQUISITIONS,
            "Acquires of a tracked name or prefix that ended, by outcome.",
            tracked().flat_map(|t| {
                Outcome::ALL.iter().map(move |&o| {
                    (
                        vec![
                            ("name", t.pattern.clone()),
                            ("outcome", o.label().to_owned()),
                        ],
                        Value::Counter(t.acquisitions[o as usize].get()),
                    )
                })
            }),
        );
        s.family(
            NAME_WAIT,
            "Time acquires of a tracked name or prefix spent waiting.",
            tracked().map(|t| {
                (
                    vec![("name", t.pattern.clone())],
                    Value::Histogram(t.wait.snapshot()),
                )
            }),
        );
        s.family(
            NAME_HOLD,
            "How long locks of a tracked name or prefix were held.",
            tracked().map(|t| {
                (
                    vec![("name", t.pattern.clone())],
                    Value::Histogram(t.hold.snapshot()),
                )
            }),
        );
        s.family(
            NAME_LOST,
            "Held locks of a tracked name or prefix found lost.",
            tracked().map(|t| {
                (
                    vec![("name", t.pattern.clone())],
                    Value::Counter(t.lost.get()),
                )
            }),
        );
        s
    }
}

/// The series of a counter table by lock kind and one more label, whose values are `values` in
/// the table's order.
fn by_kind<'a, const N: usize>(
    table: &'a PerKind<[Counter; N]>,
    label: &'static str,
    values: &'a [&'static str],
) -> impl Iterator<Item = (Vec<(&'static str, String)>, Value)> + 'a {
    LockKind::ALL.iter().flat_map(move |&k| {
        values.iter().zip(&table[k as usize]).map(move |(v, c)| {
            (
                vec![("kind", k.label().to_owned()), (label, (*v).to_owned())],
                Value::Counter(c.get()),
            )
        })
    })
}

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
    /// Observations at most each bound of [`BUCKETS`], then in all (`+Inf`): cumulative.
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
    fn family(
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
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_sum_to_the_count() {
        let m = Metrics::new(&["jobs:*".to_owned()]);
        for ms in [0, 1, 3, 70, 200_000] {
            m.acquired(
                LockKind::Exclusive,
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

    #[test]
    fn label_values_are_escaped() {
        let m = Metrics::new(&["a\"b\\c\n*".to_owned()]);
        let text = m.snapshot(&[]).to_prometheus();
        assert!(text.contains("name=\"a\\\"b\\\\c\\n*\""), "{text}");
    }

    #[test]
    fn tracked_names_are_checked() {
        assert!(check_tracked(&["a".into(), "b*".into()]).is_ok());
        assert!(check_tracked(&["".into()]).is_err());
        assert!(check_tracked(&["*".into()]).is_err());
        let many: Vec<String> = (0..=MAX_TRACKED_NAMES).map(|i| i.to_string()).collect();
        assert!(check_tracked(&many).is_err());
    }
}
