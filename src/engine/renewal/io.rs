//! Batched renewal I/O: renewal threads hand their EXTEND to one thread that sends everything
//! due in one pipeline per server and applies each reply to its lock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::base::sync::Mutex;

use super::{IDLE_EXIT, Inner, spawn, stopping};
use crate::base::error::Error;
use crate::base::grant::drift;
use crate::engine::renewable::{Phase, Renewable};
use crate::engine::trace;
use crate::stores::extend::Extension;

/// The most EXTENDs sent in one pipeline.
const MAX_BATCH: usize = 1024;
/// EXTENDs waiting for the renewal-I/O thread.
#[derive(Default)]
pub(super) struct IoQueue {
    pub(super) requests: Vec<Arc<PendingExtend>>,
    pub(super) running: bool,
}

/// One renewal's EXTEND and, once its reply is in, what became of it.
pub(super) struct PendingExtend {
    pub(super) lock: Arc<dyn Renewable>,
    pub(super) lease: Duration,
    /// The key's new expiry: the lease, or longer to cover `at_least`, or cut at `at_most`.
    pub(super) px: Duration,
    /// The expiry reaches `at_most`: the last renewal.
    pub(super) last: bool,
    /// When the renewal was handed over: the new lease counts from here.
    pub(super) sent: Instant,
    pub(super) state: Mutex<PendingState>,
}

#[derive(Default)]
pub(super) struct PendingState {
    pub(super) outcome: Option<ExtendReply>,
    /// The renewal thread waits for this reply past the time it expected it: wake it.
    pub(super) waiting: bool,
}

/// What a renewal's reply did.
pub(super) enum ExtendReply {
    /// Extended: the I/O thread has set the lock's new lease and next renewal already.
    Extended,
    /// The key no longer held the token (false), or the EXTEND failed: the renewal thread decides.
    Failed(Result<bool, Error>),
}

/// Queues an EXTEND of `lock` for the renewal-I/O thread, starting that thread if needed.
/// The renewal thread then need not wait for the reply: a success is applied to the lock by the
/// I/O thread, which wakes the renewal thread only for a failure (or a reply it is waiting for).
pub(super) fn submit(
    inner: &Arc<Inner>,
    lock: &Arc<dyn Renewable>,
    lease: Duration,
    px: Duration,
    last: bool,
    sent: Instant,
) -> Result<Arc<PendingExtend>, Error> {
    let request = Arc::new(PendingExtend {
        lock: lock.clone(),
        lease,
        px,
        last,
        sent,
        state: Mutex::new(PendingState::default()),
    });
    let mut q = inner.io.lock();
    q.requests.push(request.clone());
    if !q.running {
        let io_inner = inner.clone();
        spawn(inner, "redislock-renew-io", move || io_loop(io_inner))
            .map_err(|e| Error::limit(format!("cannot start the renewal I/O thread: {e}")))?;
        q.running = true;
    }
    inner.io_wake.notify_one();
    Ok(request)
}

/// Sends queued EXTENDs in pipelines and applies the replies. Ends after [`IDLE_EXIT`] idle,
/// or at shutdown (when no lock is held any more).
fn io_loop(inner: Arc<Inner>) {
    loop {
        let batch = {
            let mut q = inner.io.lock();
            while q.requests.is_empty() {
                if stopping(&inner) {
                    q.running = false;
                    return;
                }
                if inner.io_wake.wait_for(&mut q, IDLE_EXIT).timed_out() && q.requests.is_empty() {
                    q.running = false;
                    return;
                }
            }
            let n = q.requests.len().min(MAX_BATCH);
            q.requests.drain(..n).collect::<Vec<_>>()
        };
        let outcomes = trace::renewals(batch.iter().map(|r| r.lock.subject()), || {
            send_batch(&batch)
        });
        for (request, outcome) in batch.iter().zip(outcomes) {
            apply(request, outcome);
        }
    }
}

/// Applies one reply: a success to the lock's lease directly, without waking its renewal
/// thread (unless it waits for this reply); anything else is left to that thread, woken now.
/// Lock order: the lock's status, then the request's state (the renewal thread holds the status
/// while it looks at the request).
fn apply(r: &PendingExtend, outcome: Result<bool, Error>) {
    let lock = &r.lock;
    let mut st = lock.status().lock();
    let mut rs = r.state.lock();
    let wake = match outcome {
        Ok(true) => {
            if st.phase == Phase::Held {
                st.valid_until = r.sent + r.px.saturating_sub(drift(r.px));
                st.next_renewal = r.sent + r.lease / 3;
                st.last = r.last;
                lock.metrics().renewals.inc();
            }
            rs.outcome = Some(ExtendReply::Extended);
            rs.waiting
        }
        other => {
            rs.outcome = Some(ExtendReply::Failed(other));
            true
        }
    };
    drop(rs);
    drop(st);
    if wake {
        lock.wake().notify_all();
    }
}

/// The EXTENDs of a batch: one pipeline per server (a cluster has one per master). All the
/// locks belong to one client, so the first lock's backend serves them all.
fn send_batch(batch: &[Arc<PendingExtend>]) -> Vec<Result<bool, Error>> {
    let locks: Vec<Extension<'_>> = batch.iter().map(|r| r.lock.extend_to(r.px)).collect();
    batch[0].lock.send_extends(&locks)
}
