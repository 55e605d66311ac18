//! Batched renewal I/O: renewal threads hand their EXTEND to one thread that sends everything
//! due in one pipeline and hands each its reply.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{IDLE_EXIT, Inner, spawn, stopping};
use crate::error::Error;
use crate::lock::LockState;
use crate::scripts;

/// The most EXTENDs sent in one pipeline.
const MAX_BATCH: usize = 1024;
/// EXTENDs waiting for the renewal-I/O thread.
#[derive(Default)]
pub(super) struct IoQueue {
    pub(super) requests: Vec<Arc<Request>>,
    pub(super) running: bool,
}

/// One renewal's EXTEND and, once sent, its outcome.
pub(super) struct Request {
    pub(super) lock: Arc<LockState>,
    pub(super) lease_ms: u64,
    pub(super) outcome: Mutex<Option<Result<i64, Error>>>,
    pub(super) done: Condvar,
}

/// Queues an EXTEND of `lock` for the renewal-I/O thread and waits up to `limit` for its reply.
pub(super) fn extend_batched(
    inner: &Arc<Inner>,
    lock: &Arc<LockState>,
    lease_ms: u64,
    limit: Duration,
) -> Result<i64, Error> {
    let request = Arc::new(Request {
        lock: lock.clone(),
        lease_ms,
        outcome: Mutex::new(None),
        done: Condvar::new(),
    });
    {
        let mut q = inner.io.lock();
        q.requests.push(request.clone());
        if !q.running {
            let io_inner = inner.clone();
            spawn(inner, "redislock-renew-io", move || io_loop(io_inner))
                .map_err(|e| Error::limit(format!("cannot start the renewal I/O thread: {e}")))?;
            q.running = true;
        }
        inner.io_wake.notify_one();
    }
    let deadline = Instant::now() + limit;
    let mut outcome = request.outcome.lock();
    while outcome.is_none() {
        if request.done.wait_until(&mut outcome, deadline).timed_out() {
            break;
        }
    }
    outcome.take().unwrap_or_else(|| {
        Err(Error::connection(
            request.lock.backend.main.server(),
            "renewal got no reply in time",
            true,
        ))
    })
}

/// Sends queued EXTENDs in pipelines and hands out the replies. Ends after [`IDLE_EXIT`] idle,
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
        let outcomes = send_batch(&batch);
        for (request, outcome) in batch.iter().zip(outcomes) {
            *request.outcome.lock() = Some(outcome);
            request.done.notify_one();
        }
    }
}

/// One pipeline of EXTENDs (loading the script first if the server lost it). All the locks
/// belong to one client, so the first lock's pool serves them all.
fn send_batch(batch: &[Arc<Request>]) -> Vec<Result<i64, Error>> {
    let pool = &batch[0].lock.backend.main;
    let sent = pool.run(None, |c, _| {
        let mut loaded = false;
        loop {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for r in batch {
                pipe.cmd("EVALSHA")
                    .arg(scripts::EXTEND.get_hash())
                    .arg(1)
                    .arg(r.lock.keys.lock())
                    .arg(r.lock.token.as_str())
                    .arg(r.lease_ms);
            }
            let replies: Vec<redis::RedisResult<i64>> = pipe.query(c)?;
            let noscript = replies.iter().any(|r| {
                r.as_ref().is_err_and(|e| {
                    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
                })
            });
            if noscript && !loaded {
                scripts::EXTEND.load(c)?;
                loaded = true;
                continue;
            }
            return Ok(replies);
        }
    });
    match sent {
        Ok(replies) => replies
            .into_iter()
            .map(|r| r.map_err(|e| Error::from_redis(pool.server(), &e)))
            .collect(),
        Err(e) => batch.iter().map(|_| Err(e.clone())).collect(),
    }
}
