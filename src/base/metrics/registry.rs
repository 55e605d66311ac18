//! The metrics of one backend ([`Metrics`]): the counters, gauges and histograms of every
//! family, the series of the names a client tracks, and the [`Snapshot`] of them all.

use std::sync::OnceLock;
use std::time::Duration;

use super::facade;
use super::instruments::{Counter, Gauge, Histogram, Named};
use super::labels::{KindLabel, LostReason, Outcome, error_label};
use super::snapshot::{Snapshot, Value};
use crate::base::error::{Error, ErrorKind};

/// The most lock names (or prefixes) a client may track with series of their own.
pub const MAX_TRACKED_NAMES: usize = 32;
/// The longest tracked name or prefix, in bytes.
const MAX_TRACKED_LEN: usize = 256;

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

type PerKind<T> = [T; KindLabel::ALL.len()];

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
        kind: KindLabel,
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
    pub(crate) fn holding(&self, kind: KindLabel, n: i64) {
        self.held[kind as usize].add(n);
        facade::add(HELD, (&[("kind", kind.label())], None), n);
    }

    /// A waiter of `kind` entered (`+1`) or left (`-1`) the wait loop.
    #[inline]
    pub(crate) fn waiting(&self, kind: KindLabel, n: i64) {
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
    pub(crate) fn held_for(&self, kind: KindLabel, name: &[u8], held: Duration) {
        self.hold[kind as usize].observe(held);
        facade::observe(HOLD, (&[("kind", kind.label())], None), held);
        if let Some(t) = self.tracked(name) {
            t.hold.observe(held);
            facade::observe(NAME_HOLD, (&[], Some(("name", t.pattern.as_str()))), held);
        }
    }

    /// A waiter of `kind` was handed the grant by a release.
    #[inline]
    pub(crate) fn handoff(&self, kind: KindLabel) {
        self.handoffs[kind as usize].inc();
        facade::count(HANDOFFS, (&[("kind", kind.label())], None));
    }

    /// A held lock of `name` was found lost.
    pub(crate) fn lost(&self, kind: KindLabel, name: &[u8], reason: LostReason) {
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
            KindLabel::ALL
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
    KindLabel::ALL.iter().flat_map(move |&k| {
        values.iter().zip(&table[k as usize]).map(move |(v, c)| {
            (
                vec![("kind", k.label().to_owned()), (label, (*v).to_owned())],
                Value::Counter(c.get()),
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracked_names_are_checked() {
        assert!(check_tracked(&["a".into(), "b*".into()]).is_ok());
        assert!(check_tracked(&["".into()]).is_err());
        assert!(check_tracked(&["*".into()]).is_err());
        let many: Vec<String> = (0..=MAX_TRACKED_NAMES).map(|i| i.to_string()).collect();
        assert!(check_tracked(&many).is_err());
    }
}
