//! Cancelling a blocked acquire from another thread (shutdown, an aborted request).
//!
//! A waiter blocks in BLPOP on its own signal list. [`Cancel::cancel`] sets a flag and, when a
//! waiter is blocked, pushes a cancel mark onto that list, which wakes it at once: it leaves the
//! queue (passing on a lock handed to it meanwhile) and returns [`Error::is_cancelled`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::base::sync::Mutex;

use crate::base::keys::LockKeys;
use crate::engine::backend::Backend;
use crate::stores::CANCEL_MARK;

/// How long a cancel mark stays on a signal list whose waiter has gone.
const MARK_LIFETIME: Duration = Duration::from_secs(10);

/// Cancels the acquires it is given to (see [`LockRequest::cancel_on`]): cheap to clone, every
/// clone cancels the same acquires. Once cancelled it stays cancelled: an acquire given it later
/// fails at once.
///
/// ```no_run
/// use std::time::Duration;
/// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
/// let cancel = redislock::Cancel::new();
/// let on_shutdown = cancel.clone();
/// std::thread::spawn(move || {
///     // ... when the program shuts down:
///     on_shutdown.cancel();
/// });
/// match client.lock("jobs:nightly").cancel_on(&cancel).acquire(Duration::from_secs(3600)) {
///     Ok(lock) => { /* work */ }
///     Err(e) if e.is_cancelled() => { /* shutting down */ }
///     Err(e) => return Err(e),
/// }
/// # Ok::<(), redislock::Error>(())
/// ```
///
/// [`LockRequest::cancel_on`]: crate::LockRequest::cancel_on
#[derive(Clone, Default)]
pub struct Cancel {
    state: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    cancelled: bool,
    /// The waiters blocked now: their backend, lock keys and signal list.
    blocked: Vec<(Arc<Backend>, LockKeys, Vec<u8>)>,
}

impl Cancel {
    /// A new, not yet cancelled, cancel handle.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Cancels: every acquire given this handle that is waiting now returns
    /// [`Error::is_cancelled`](crate::Error::is_cancelled) within about a round trip, leaving no
    /// queue entry behind; later ones fail at once. A lock that was handed to such a waiter
    /// meanwhile is passed on to the next waiter or freed.
    pub fn cancel(&self) {
        let blocked = {
            let mut st = self.state.lock();
            st.cancelled = true;
            std::mem::take(&mut st.blocked)
        };
        for (backend, keys, signal) in blocked {
            // Best effort: if the server cannot be reached, the waiter notices the flag at its
            // next re-check or when its wait bound ends.
            let _ = backend
                .store
                .signal_cancel(&keys, &signal, CANCEL_MARK, MARK_LIFETIME);
        }
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.state.lock().cancelled
    }

    /// A waiter is about to block on `signal`; false when cancelled already.
    pub(crate) fn block(&self, backend: &Arc<Backend>, keys: &LockKeys, signal: &[u8]) -> bool {
        let mut st = self.state.lock();
        if st.cancelled {
            return false;
        }
        st.blocked
            .push((backend.clone(), keys.clone(), signal.to_vec()));
        true
    }

    /// The waiter on `signal` is done waiting.
    pub(crate) fn unblock(&self, signal: &[u8]) {
        self.state.lock().blocked.retain(|(_, _, s)| s != signal);
    }
}

impl fmt::Debug for Cancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}
