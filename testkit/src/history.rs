//! A history of lock calls and a checker, in the manner of Jepsen: clients record what they
//! asked and what they were told, the protected resource records what it accepted, and the
//! checker reads the whole and reports what went wrong.
//!
//! * [`History`]: events with a monotonic clock (time since the history's start). A client
//!   records through a [`Recorder`]: `acquire` (the call's start and bound), `granted` (the
//!   fencing token and how long the library says the lease still runs), `release`, `lost`,
//!   `error`. Every call records its duration and its bound.
//! * [`FencedResource`]: the soak's resource, a file `"<value> <highest token>\n"` changed under
//!   `flock`; a write whose token is below the highest seen is rejected. It logs every accepted
//!   increment (read value, token) into the history.
//! * [`check`] gives a [`Report`]: overlaps (two clients that both hold by their own lease
//!   accounting: from the grant to the earliest of the release call, the reported loss and the
//!   lease's end), fencing tokens granted twice, writes accepted with a stale token, lost updates,
//!   the longest liveness gap (a waiter waits, nobody holds) and calls that overran their bounds.
//! * [`History::import_json_lines`]: events recorded by another process (a C or PHP client),
//!   one JSON object a line with CLOCK_MONOTONIC timestamps, taken into the history as one
//!   client's, so that the checker judges every client together. The history's start is read
//!   on CLOCK_MONOTONIC when it starts ([`History::start_monotonic`]; Rust's `Instant` is that
//!   clock on Linux).

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// An acquire call began; it may wait up to `wait`.
    Acquire { wait: Duration },
    /// The acquire call returned a lock with this fencing token, valid (by the library's own
    /// accounting, [`Lock::remaining`]) for `valid_for` from now.
    ///
    /// [`Lock::remaining`]: https://docs.rs/redislock-sync
    Granted {
        token: Option<u64>,
        valid_for: Duration,
    },
    /// A release call began.
    Release,
    /// The library reported the lock lost (`is_lost`, or a release saying `NotHeld`).
    Lost,
    /// A call failed (`op`: which call; `what`: the error).
    Error { op: String, what: String },
    /// A call ended after `took`; it should have within `bound`.
    CallEnd {
        op: String,
        took: Duration,
        bound: Duration,
    },
    /// The resource accepted an increment: it read `read` and wrote `read + 1` with `token`.
    Accepted { token: u64, read: u64 },
    /// The resource rejected a write with `token` (below the highest it had seen).
    Rejected { token: u64 },
    /// A mark of the test's own (a fault began, a partition healed...).
    Mark(String),
}

/// One event: who, when (since the history's start), what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub client: usize,
    pub at: Duration,
    pub op: Op,
}

/// The events of one run, shared by its clients (clone the `Arc`).
#[derive(Debug)]
pub struct History {
    start: Instant,
    /// `start` on CLOCK_MONOTONIC, as other processes read that clock.
    start_monotonic: Duration,
    events: Mutex<Vec<Event>>,
}

/// CLOCK_MONOTONIC now (what `clock_gettime(CLOCK_MONOTONIC)` gives a C program, and
/// `hrtime(true)` a PHP one on Linux).
pub fn monotonic_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given, which lives across the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime: {}", std::io::Error::last_os_error());
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

impl History {
    /// An empty history whose clock starts now.
    pub fn new() -> Arc<History> {
        Arc::new(History {
            start: Instant::now(),
            start_monotonic: monotonic_now(),
            events: Mutex::new(Vec::new()),
        })
    }

    /// A history from events made by hand (the checker's tests).
    pub fn from_events(events: Vec<Event>) -> History {
        History {
            start: Instant::now(),
            start_monotonic: monotonic_now(),
            events: Mutex::new(events),
        }
    }

    /// Time since the start.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Records `op` by `client` now.
    pub fn record(&self, client: usize, op: Op) {
        let at = self.now();
        self.lock().push(Event { client, at, op });
    }

    /// A mark of the test's own, by client `usize::MAX`; returns its time.
    pub fn mark(&self, what: &str) -> Duration {
        let at = self.now();
        self.lock().push(Event {
            client: usize::MAX,
            at,
            op: Op::Mark(what.to_owned()),
        });
        at
    }

    /// The events so far, in time order.
    pub fn events(&self) -> Vec<Event> {
        let mut events = self.lock().clone();
        events.sort_by_key(|e| e.at);
        events
    }

    /// The history's start on CLOCK_MONOTONIC.
    pub fn start_monotonic(&self) -> Duration {
        self.start_monotonic
    }

    /// Takes the events another process recorded into the history as client `client`'s, and
    /// returns how many. `text` holds one JSON object a line, `t` being the time of the event
    /// on CLOCK_MONOTONIC in nanoseconds and `op` what happened, with the fields of its
    /// [`Op`] (times in milliseconds but a call's duration):
    ///
    /// ```text
    /// {"t":..,"op":"acquire","wait_ms":1500}
    /// {"t":..,"op":"call_end","call":"acquire","took_ns":1234567,"bound_ms":3800}
    /// {"t":..,"op":"granted","token":17,"valid_ms":1998}       (token null without fencing)
    /// {"t":..,"op":"accepted","token":17,"read":41}
    /// {"t":..,"op":"rejected","token":17}
    /// {"t":..,"op":"release"}
    /// {"t":..,"op":"lost"}
    /// {"t":..,"op":"error","call":"acquire","what":"..."}
    /// ```
    ///
    /// A last line without its newline (a process killed while writing it) is left out. Fails
    /// on anything else that is not such an event, and on an event from before the history's
    /// start or after now (the clocks would disagree); the history is then left as it was.
    pub fn import_json_lines(&self, client: usize, text: &str) -> Result<usize, String> {
        let complete = match text.rfind('\n') {
            Some(end) => &text[..end],
            None => "",
        };
        let mut imported = Vec::new();
        for (n, line) in complete.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let event = self
                .parse_external(client, line)
                .map_err(|e| format!("line {}: {e}: {line}", n + 1))?;
            imported.push(event);
        }
        let count = imported.len();
        self.lock().extend(imported);
        Ok(count)
    }

    fn parse_external(&self, client: usize, line: &str) -> Result<Event, String> {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let u64_of = |key: &str| -> Result<u64, String> {
            v.get(key)
                .and_then(serde_json::Value::as_u64)
                .ok_or_else(|| format!("no unsigned integer \"{key}\""))
        };
        let str_of = |key: &str| -> Result<String, String> {
            v.get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("no string \"{key}\""))
        };
        let t = Duration::from_nanos(u64_of("t")?);
        let at = t.checked_sub(self.start_monotonic).ok_or_else(|| {
            format!(
                "t = {t:?} is before the history's start ({:?} on CLOCK_MONOTONIC)",
                self.start_monotonic
            )
        })?;
        // Events are imported once written: one from after now tells of clocks that disagree.
        if at > self.now() {
            return Err(format!(
                "t = {t:?} is after now ({:?} on CLOCK_MONOTONIC)",
                monotonic_now()
            ));
        }
        let op = match str_of("op")?.as_str() {
            "acquire" => Op::Acquire {
                wait: Duration::from_millis(u64_of("wait_ms")?),
            },
            "call_end" => Op::CallEnd {
                op: str_of("call")?,
                took: Duration::from_nanos(u64_of("took_ns")?),
                bound: Duration::from_millis(u64_of("bound_ms")?),
            },
            "granted" => Op::Granted {
                token: match v.get("token") {
                    Some(serde_json::Value::Null) => None,
                    _ => Some(u64_of("token")?),
                },
                valid_for: Duration::from_millis(u64_of("valid_ms")?),
            },
            "accepted" => Op::Accepted {
                token: u64_of("token")?,
                read: u64_of("read")?,
            },
            "rejected" => Op::Rejected {
                token: u64_of("token")?,
            },
            "release" => Op::Release,
            "lost" => Op::Lost,
            "error" => Op::Error {
                op: str_of("call")?,
                what: str_of("what")?,
            },
            other => return Err(format!("unknown op {other:?}")),
        };
        Ok(Event { client, at, op })
    }

    /// A recorder for client `client`.
    pub fn recorder(self: &Arc<Self>, client: usize) -> Recorder {
        Recorder {
            history: Arc::clone(self),
            client,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Event>> {
        self.events.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One client's pen.
#[derive(Debug, Clone)]
pub struct Recorder {
    history: Arc<History>,
    client: usize,
}

impl Recorder {
    /// The client's number.
    pub fn client(&self) -> usize {
        self.client
    }

    /// The history written to.
    pub fn history(&self) -> &Arc<History> {
        &self.history
    }

    /// Records `op` now.
    pub fn record(&self, op: Op) {
        self.history.record(self.client, op);
    }

    /// Runs `call` named `op` with `bound`, recording its end (and how long it took); returns
    /// its result.
    pub fn call<T>(&self, op: &str, bound: Duration, call: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = call();
        self.record(Op::CallEnd {
            op: op.to_owned(),
            took: start.elapsed(),
            bound,
        });
        out
    }
}

/// The protected resource of the soak: a file `"<value> <highest token>\n"`, read and written
/// under `flock`, that rejects tokens below the highest it has seen. It works across threads
/// and processes; the history gets its accepted increments and its rejections.
#[derive(Debug)]
pub struct FencedResource {
    path: PathBuf,
}

impl FencedResource {
    /// A new resource in a file at `path`, holding value 0 and highest token 0.
    pub fn create(path: &Path) -> FencedResource {
        std::fs::write(path, "0 0\n")
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        FencedResource {
            path: path.to_owned(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The value now.
    pub fn value(&self) -> u64 {
        self.with_file(|value, _| (value, None)).0
    }

    /// An increment under `token`: registers the token and reads (rejected if stale), waits
    /// `between` (the work of a holder), then writes value + 1 with the token (rejected if a
    /// larger token came meanwhile). Records `Accepted` or `Rejected` in the history; returns
    /// whether it was accepted.
    pub fn increment(&self, rec: &Recorder, token: u64, between: Duration) -> bool {
        let (read, ok) = self.with_file(|value, highest| {
            if token < highest {
                (value, None)
            } else {
                (value, Some((value, token)))
            }
        });
        if ok.is_none() {
            rec.record(Op::Rejected { token });
            return false;
        }
        std::thread::sleep(between);
        let (_, ok) = self.with_file(|value, highest| {
            if token < highest {
                (value, None)
            } else {
                (value, Some((read + 1, token)))
            }
        });
        match ok {
            Some(_) => rec.record(Op::Accepted { token, read }),
            None => rec.record(Op::Rejected { token }),
        }
        ok.is_some()
    }

    /// Runs `f(value, highest)` on the file under an exclusive `flock`; `f` returns something
    /// and, if the file is to change, the new (value, highest).
    fn with_file<T>(&self, f: impl FnOnce(u64, u64) -> (T, Option<(u64, u64)>)) -> (T, Option<()>) {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .unwrap_or_else(|e| panic!("cannot open {}: {e}", self.path.display()));
        flock(&file, libc::LOCK_EX);
        let mut text = String::new();
        file.read_to_string(&mut text).expect("resource read");
        let mut fields = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        let (value, highest) = (fields.next().unwrap(), fields.next().unwrap());
        let (out, change) = f(value, highest);
        let changed = change.map(|(value, highest)| {
            file.set_len(0).expect("resource truncate");
            file.seek(SeekFrom::Start(0)).expect("resource seek");
            file.write_all(format!("{value} {highest}\n").as_bytes())
                .expect("resource write");
        });
        // The flock ends with the file's descriptor.
        (out, changed)
    }
}

fn flock(file: &File, op: libc::c_int) {
    // SAFETY: flock(2) on a descriptor `file` owns and keeps open for the call.
    let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
    assert_eq!(rc, 0, "flock: {}", std::io::Error::last_os_error());
}

/// What the checker found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Grants.
    pub grants: usize,
    /// Pairs of holding intervals of different clients that intersect.
    pub overlaps: usize,
    /// The longest such intersection.
    pub longest_overlap: Duration,
    /// Fencing tokens granted more than once.
    pub tokens_granted_twice: usize,
    /// Increments accepted with a token lower than one accepted before, or granted twice.
    pub stale_accepted: usize,
    /// Increments accepted.
    pub increments: usize,
    /// Writes the resource refused (their token was below the highest it had seen).
    pub rejected: usize,
    /// Increments whose write overwrote another's (accepted, yet lost).
    pub lost_updates: usize,
    /// The longest time a waiter waited while nobody held the name, and when it began.
    pub longest_gap: Duration,
    pub longest_gap_at: Duration,
    /// Calls that took longer than their bound: (op, took, bound), the worst first.
    pub overruns: Vec<(String, Duration, Duration)>,
    /// Errors by call and message (first 80 characters), with counts.
    pub errors: Vec<(String, usize)>,
    /// Losses reported by the library.
    pub lost: usize,
}

impl Report {
    /// No overlap, no stale token accepted, no lost update, no overrun.
    pub fn safe(&self) -> bool {
        self.overlaps == 0
            && self.stale_accepted == 0
            && self.lost_updates == 0
            && self.tokens_granted_twice == 0
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "grants={} overlaps={} longest_overlap_ms={} tokens_granted_twice={} stale_accepted={} \
             increments={} rejected={} lost_updates={} longest_gap_ms={} (at {} ms) overruns={} \
             lost={}",
            self.grants,
            self.overlaps,
            self.longest_overlap.as_millis(),
            self.tokens_granted_twice,
            self.stale_accepted,
            self.increments,
            self.rejected,
            self.lost_updates,
            self.longest_gap.as_millis(),
            self.longest_gap_at.as_millis(),
            self.overruns.len(),
            self.lost,
        )?;
        if let Some((op, took, bound)) = self.overruns.first() {
            write!(
                f,
                " worst_overrun={op}:{}ms>{}ms",
                took.as_millis(),
                bound.as_millis()
            )?;
        }
        for (what, n) in &self.errors {
            write!(f, "\n  error x{n}: {what}")?;
        }
        Ok(())
    }
}

/// A holding interval of one client: from the grant to the earliest of the release call, the
/// reported loss and the end of the lease as the library counted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holding {
    pub client: usize,
    pub from: Duration,
    pub to: Duration,
    pub token: Option<u64>,
}

/// The holding intervals of `history` (an exclusive lock's: one name).
pub fn holdings(events: &[Event]) -> Vec<Holding> {
    let mut open: std::collections::HashMap<usize, Holding> = Default::default();
    let mut out = Vec::new();
    let end = events.last().map_or(Duration::ZERO, |e| e.at);
    for e in events {
        match &e.op {
            Op::Granted { token, valid_for } => {
                if let Some(h) = open.remove(&e.client) {
                    out.push(h);
                }
                open.insert(
                    e.client,
                    Holding {
                        client: e.client,
                        from: e.at,
                        to: e.at + *valid_for,
                        token: *token,
                    },
                );
            }
            Op::Release | Op::Lost => {
                if let Some(mut h) = open.remove(&e.client) {
                    h.to = h.to.min(e.at);
                    out.push(h);
                }
            }
            _ => {}
        }
    }
    out.extend(open.into_values().map(|mut h| {
        h.to = h.to.min(end.max(h.from));
        h
    }));
    out.sort_by_key(|h| h.from);
    out
}

/// The first grant at or after `at`, as time since `at`.
pub fn first_grant_after(events: &[Event], at: Duration) -> Option<Duration> {
    events
        .iter()
        .filter(|e| e.at >= at && matches!(e.op, Op::Granted { .. }))
        .map(|e| e.at - at)
        .min()
}

/// Checks a history (see the module documentation).
pub fn check(history: &History) -> Report {
    let events = history.events();
    let mut report = Report::default();
    let held = holdings(&events);
    report.grants = held.len();

    // Overlaps: intervals sorted by start; each against those after it that start before it ends.
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            if b.from >= a.to {
                break;
            }
            if a.client != b.client && b.from < a.to && b.to > b.from {
                report.overlaps += 1;
                let overlap = a.to.min(b.to) - b.from;
                report.longest_overlap = report.longest_overlap.max(overlap);
            }
        }
    }

    // Tokens granted twice.
    let mut tokens: Vec<u64> = held.iter().filter_map(|h| h.token).collect();
    tokens.sort_unstable();
    let twice: Vec<u64> = tokens
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    report.tokens_granted_twice = twice.len();

    // The resource: stale tokens and lost updates.
    let mut highest = 0u64;
    let mut value = 0u64;
    for e in &events {
        if let Op::Accepted { token, read } = e.op {
            report.increments += 1;
            if token < highest || twice.binary_search(&token).is_ok() {
                report.stale_accepted += 1;
            }
            highest = highest.max(token);
            if read != value {
                // The value this increment read was overwritten before its write: the
                // increments made in between are lost.
                report.lost_updates += value.saturating_sub(read) as usize;
            }
            value = read + 1;
        }
    }

    // Liveness: the longest time, within some acquire call, that nobody held the name.
    let mut waits: Vec<(Duration, Duration)> = Vec::new();
    let mut started: std::collections::HashMap<usize, Duration> = Default::default();
    for e in &events {
        match &e.op {
            Op::Acquire { .. } => {
                started.insert(e.client, e.at);
            }
            Op::Granted { .. } | Op::Error { .. } => {
                if let Some(s) = started.remove(&e.client) {
                    waits.push((s, e.at));
                }
            }
            Op::CallEnd { op, .. } if op == "acquire" => {
                if let Some(s) = started.remove(&e.client) {
                    waits.push((s, e.at));
                }
            }
            _ => {}
        }
    }
    let (gap, gap_at) = longest_gap(&waits, &held);
    report.longest_gap = gap;
    report.longest_gap_at = gap_at;

    // Overruns and errors.
    for e in &events {
        match &e.op {
            Op::CallEnd { op, took, bound } if took > bound => {
                report.overruns.push((op.clone(), *took, *bound));
            }
            Op::Error { op, what } => {
                let key = format!("{op}: {}", what.chars().take(80).collect::<String>());
                match report.errors.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, n)) => *n += 1,
                    None => report.errors.push((key, 1)),
                }
            }
            Op::Lost => report.lost += 1,
            Op::Rejected { .. } => report.rejected += 1,
            _ => {}
        }
    }
    report
        .overruns
        .sort_by_key(|(_, took, bound)| std::cmp::Reverse(took.saturating_sub(*bound)));
    report
}

/// The longest stretch covered by some wait and by no holding, and where it begins.
fn longest_gap(waits: &[(Duration, Duration)], held: &[Holding]) -> (Duration, Duration) {
    // Points where coverage changes; between two neighbours both counts are constant.
    let mut points: Vec<Duration> = waits
        .iter()
        .flat_map(|w| [w.0, w.1])
        .chain(held.iter().flat_map(|h| [h.from, h.to]))
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut best = (Duration::ZERO, Duration::ZERO);
    let mut run: Option<Duration> = None;
    for pair in points.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let mid = a + (b - a) / 2;
        let waiting = waits.iter().any(|w| w.0 <= mid && mid < w.1);
        let holding = held.iter().any(|h| h.from <= mid && mid < h.to);
        if waiting && !holding {
            let begin = *run.get_or_insert(a);
            if b - begin > best.0 {
                best = (b - begin, begin);
            }
        } else {
            run = None;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ev(client: usize, at: u64, op: Op) -> Event {
        Event {
            client,
            at: ms(at),
            op,
        }
    }

    fn granted(token: u64, valid_ms: u64) -> Op {
        Op::Granted {
            token: Some(token),
            valid_for: ms(valid_ms),
        }
    }

    fn acquire() -> Op {
        Op::Acquire { wait: ms(1000) }
    }

    #[test]
    fn a_clean_handoff_is_safe_and_has_a_small_gap() {
        let h = History::from_events(vec![
            ev(0, 0, acquire()),
            ev(0, 1, granted(1, 1000)),
            ev(1, 2, acquire()),
            ev(0, 10, Op::Accepted { token: 1, read: 0 }),
            ev(0, 20, Op::Release),
            ev(1, 23, granted(2, 1000)),
            ev(1, 30, Op::Accepted { token: 2, read: 1 }),
            ev(1, 40, Op::Release),
        ]);
        let r = check(&h);
        assert!(r.safe(), "{r}");
        assert_eq!(r.grants, 2);
        assert_eq!(r.increments, 2);
        assert_eq!(r.longest_gap, ms(3), "{r}");
        assert_eq!(r.longest_gap_at, ms(20));
    }

    #[test]
    fn two_holders_at_once_are_an_overlap_until_the_first_lease_ends() {
        let h = History::from_events(vec![
            ev(0, 0, granted(1, 100)),
            ev(1, 60, granted(2, 100)),
            ev(1, 200, Op::Release),
        ]);
        let r = check(&h);
        assert_eq!(r.overlaps, 1, "{r}");
        assert_eq!(r.longest_overlap, ms(40));
        assert!(!r.safe());
        // The same, with the first holder's lease over before the second grant: no overlap.
        let h = History::from_events(vec![ev(0, 0, granted(1, 50)), ev(1, 60, granted(2, 100))]);
        assert_eq!(check(&h).overlaps, 0);
        // Or its loss reported before it.
        let h = History::from_events(vec![
            ev(0, 0, granted(1, 500)),
            ev(0, 30, Op::Lost),
            ev(1, 60, granted(2, 100)),
        ]);
        let r = check(&h);
        assert_eq!(r.overlaps, 0, "{r}");
        assert_eq!(r.lost, 1);
    }

    #[test]
    fn a_token_granted_twice_and_an_overwritten_increment_are_reported() {
        // Two masters count on from the same number: both grant token 7; both holders read 5,
        // both writes are accepted (equal tokens pass a ">= highest" check): one update is lost.
        let h = History::from_events(vec![
            ev(0, 0, granted(7, 1000)),
            ev(1, 1, granted(7, 1000)),
            ev(0, 10, Op::Accepted { token: 7, read: 5 }),
            ev(1, 11, Op::Accepted { token: 7, read: 5 }),
        ]);
        let r = check(&h);
        assert_eq!(r.tokens_granted_twice, 1, "{r}");
        assert_eq!(r.stale_accepted, 2);
        assert_eq!(r.lost_updates, 1);
        assert_eq!(r.overlaps, 1);
        // A lower token accepted after a higher one is stale, even when granted once.
        let h = History::from_events(vec![
            ev(0, 10, Op::Accepted { token: 9, read: 0 }),
            ev(1, 11, Op::Accepted { token: 8, read: 1 }),
        ]);
        let r = check(&h);
        assert_eq!(r.stale_accepted, 1);
        assert_eq!(r.lost_updates, 0);
    }

    #[test]
    fn the_longest_wait_with_nobody_holding_is_the_gap() {
        // Client 0 holds 0..100; client 1 waits from 50 and is granted at 900: a gap of 800 ms
        // from 100. Client 2 waits 950..1000 while client 1 holds: no gap there.
        let h = History::from_events(vec![
            ev(0, 0, granted(1, 5000)),
            ev(1, 50, acquire()),
            ev(0, 100, Op::Release),
            ev(1, 900, granted(2, 5000)),
            ev(2, 950, acquire()),
            ev(
                2,
                1000,
                Op::Error {
                    op: "acquire".into(),
                    what: "wait timeout".into(),
                },
            ),
            ev(1, 1100, Op::Release),
        ]);
        let r = check(&h);
        assert_eq!(r.longest_gap, ms(800), "{r}");
        assert_eq!(r.longest_gap_at, ms(100));
        assert_eq!(r.errors, vec![("acquire: wait timeout".to_owned(), 1)]);
        assert_eq!(first_grant_after(&h.events(), ms(100)), Some(ms(800)));
    }

    #[test]
    fn overruns_are_listed_worst_first() {
        let end = |took, bound| Op::CallEnd {
            op: "release".into(),
            took: ms(took),
            bound: ms(bound),
        };
        let h = History::from_events(vec![
            ev(0, 0, end(100, 300)),
            ev(0, 1, end(400, 300)),
            ev(1, 2, end(2000, 300)),
        ]);
        let r = check(&h);
        assert_eq!(
            r.overruns,
            vec![
                ("release".into(), ms(2000), ms(300)),
                ("release".into(), ms(400), ms(300))
            ]
        );
    }

    #[test]
    fn imported_events_take_the_history_clock_and_are_checked_with_the_rest() {
        let history = History::new();
        let start = history.start_monotonic().as_nanos() as u64;
        let t = |ms: u64| start + ms * 1_000_000;
        // Client 0 (in this process) holds 0..100 with token 1; the other process's client 1
        // is granted token 1 again at 50, inside that holding, and writes with it.
        history.record(0, granted(1, 100));
        let text = format!(
            "{{\"t\":{},\"op\":\"acquire\",\"wait_ms\":1500}}\n\
             {{\"t\":{},\"op\":\"call_end\",\"call\":\"acquire\",\"took_ns\":40000000,\"bound_ms\":30}}\n\
             {{\"t\":{},\"op\":\"granted\",\"token\":1,\"valid_ms\":2000}}\n\
             {{\"t\":{},\"op\":\"accepted\",\"token\":1,\"read\":0}}\n\
             {{\"t\":{},\"op\":\"error\",\"call\":\"release\",\"what\":\"a \\\"quoted\\\" text\"}}\n\
             {{\"t\":{},\"op\":\"gran",
            t(10),
            t(50),
            t(50),
            t(60),
            t(70),
            t(80)
        );
        // Imported once they have happened.
        std::thread::sleep(ms(100));
        assert_eq!(history.import_json_lines(1, &text), Ok(5));
        let events = history.events();
        let imported: Vec<&Event> = events.iter().filter(|e| e.client == 1).collect();
        assert_eq!(imported.len(), 5);
        assert_eq!(imported[0].at, ms(10));
        assert_eq!(imported[0].op, Op::Acquire { wait: ms(1500) });
        assert_eq!(imported[2].at, ms(50));
        assert_eq!(imported[2].op, granted(1, 2000));
        assert_eq!(
            imported[4].op,
            Op::Error {
                op: "release".into(),
                what: "a \"quoted\" text".into()
            }
        );
        let r = check(&history);
        assert_eq!(r.tokens_granted_twice, 1, "{r}");
        assert_eq!(r.overlaps, 1);
        assert_eq!(r.stale_accepted, 1);
        assert_eq!(r.overruns, vec![("acquire".into(), ms(40), ms(30))]);
        // A line that is not an event, and an event from before the start, change nothing.
        let before = history.events().len();
        assert!(
            history
                .import_json_lines(2, "{\"t\":1,\"op\":\"x\"}\n")
                .is_err()
        );
        let early = format!("{{\"t\":{},\"op\":\"release\"}}\n", start - 1);
        assert!(history.import_json_lines(2, &early).is_err());
        let late = monotonic_now().as_nanos() as u64 + 60_000_000_000;
        let late = format!("{{\"t\":{late},\"op\":\"release\"}}\n");
        assert!(history.import_json_lines(2, &late).is_err());
        assert_eq!(history.events().len(), before);
        // The clocks agree: an event stamped now lands at the history's now.
        let now = monotonic_now().as_nanos() as u64;
        let line = format!("{{\"t\":{now},\"op\":\"release\"}}\n");
        let at_least = history.now();
        history.import_json_lines(3, &line).unwrap();
        let at = history.events().iter().find(|e| e.client == 3).unwrap().at;
        assert!(
            at + ms(5) >= at_least && at <= history.now() + ms(5),
            "{at:?} vs {at_least:?}"
        );
    }

    #[test]
    fn the_fenced_resource_rejects_a_stale_token_and_logs_what_it_accepts() {
        let dir = std::env::temp_dir().join(crate::unique_name("fenced"));
        std::fs::create_dir_all(&dir).unwrap();
        let res = FencedResource::create(&dir.join("resource"));
        let history = History::new();
        let rec = history.recorder(0);
        assert!(res.increment(&rec, 5, Duration::ZERO));
        assert!(res.increment(&rec, 5, Duration::ZERO));
        assert!(!res.increment(&rec, 4, Duration::ZERO));
        assert_eq!(res.value(), 2);
        let r = check(&history);
        assert_eq!(r.increments, 2);
        assert_eq!(r.rejected, 1);
        assert_eq!(r.lost_updates, 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
