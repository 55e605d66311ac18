//! The handle of a held grant (`Held`), as the engine hands it to the API's guards: whether it
//! is held, its lease, extend, release (on drop too, and on a thread of the library when the
//! server cannot be reached), lost-lock callbacks; inert in a forked child.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use crate::base::config::check_lease;
use crate::base::error::Error;
use crate::base::grant::drift;
use crate::base::metrics::LostReason;
use crate::engine::backend::Owner;
use crate::engine::lock::{LockState, nanos};
use crate::engine::renewable::Phase;
use crate::engine::trace;

/// A held grant of any kind, as the engine hands it to the API's guards: its state (shared with
/// its renewal) and the backend it runs on. Dropping it releases the grant (best effort).
#[must_use = "dropping the handle releases the grant at once"]
#[clippy::has_significant_drop]
pub(crate) struct Held {
    pub(crate) state: Arc<LockState>,
    /// Keeps the client's connections and renewal threads running while the lock lives, also
    /// after the client itself is dropped.
    pub(crate) _owner: Arc<Owner>,
}

impl Held {
    /// The lock's name (without the client's key prefix).
    pub(crate) fn name(&self) -> &[u8] {
        self.state.keys.name()
    }

    /// Whether the lock is still ours, as far as this process knows, without a round trip:
    /// not released, not found lost by renewal, lease not run out, and this is the process
    /// that acquired it.
    pub(crate) fn is_held(&self) -> bool {
        // The process first: a forked child must not take the status (see `LockState`).
        if self.state.check_process().is_err() {
            return false;
        }
        let st = self.state.status.lock();
        st.phase == Phase::Held && Instant::now() < st.valid_until
    }

    /// Whether renewal (or an extend) found the lock lost: the key expired, was deleted or
    /// taken over behind our back, or Redis stayed unreachable until the lease ran out.
    /// Never in a forked child: the grant is the parent's, and nothing there watches it.
    pub(crate) fn is_lost(&self) -> bool {
        self.state.check_process().is_ok()
            && matches!(self.state.status.lock().phase, Phase::Lost(_))
    }

    /// How long the lock is surely still ours (zero when it is not held). Counted from before
    /// the acquiring request was sent, less a clock-drift margin.
    pub(crate) fn remaining(&self) -> Duration {
        if !self.is_held() {
            return Duration::ZERO;
        }
        self.state
            .status
            .lock()
            .valid_until
            .saturating_duration_since(Instant::now())
    }

    /// The fencing token of this grant, when the lock was acquired with fencing: strictly
    /// larger than that of every earlier fenced grant of the same name (on a Sentinel group or
    /// a Cluster, ordered first by the failover epoch of the master that granted it). Pass it to the
    /// protected resource, which should refuse writes carrying a smaller token than it has seen.
    pub(crate) fn fencing_token(&self) -> Option<u64> {
        self.state.fence
    }

    /// The current lease (in a forked child, the lease the grant had at the fork).
    pub(crate) fn lease(&self) -> Duration {
        Duration::from_nanos(self.state.lease_nanos.load(Ordering::Relaxed))
    }

    /// Whether a renewal thread keeps this lock alive.
    pub(crate) fn auto_renews(&self) -> bool {
        self.state.auto_renews()
    }

    /// Resets the lease to `lease` from now, if the key still holds our token. Auto-renewal
    /// continues with the new lease. Fails with [`Error::is_not_held`] when the lock is gone.
    pub(crate) fn extend(&self, lease: Duration) -> Result<(), Error> {
        let s = &self.state;
        check_lease(lease, s.auto_renews())?;
        s.check_process()?;
        drop(s.held_status()?);
        let patience = s.backend.store.cfg().release_timeout;
        let mut sent = Instant::now();
        // With `at_most`, the lease is cut at it (and renewal stops there); with `at_least`, it
        // covers it.
        let mut last = false;
        let mut px = lease;
        let extended = trace::extend(s.subject(), lease, || {
            s.ride_out(patience, || {
                sent = Instant::now();
                (px, last) = s.bounds.extension(lease, sent);
                if px.is_zero() {
                    return Ok(false);
                }
                s.kind.extend(&s.backend, &s.keys, &s.token, px)
            })
        })?;
        let mut st = s.status.lock();
        if extended {
            if st.phase != Phase::Held {
                // Released, detached or found lost by another thread while the call was on its
                // way: the handle's verdict stands (a lost lock stays lost).
                let phase = st.phase;
                drop(st);
                return Err(s.not_held(phase));
            }
            st.lease = lease;
            s.lease_nanos.store(nanos(lease), Ordering::Relaxed);
            st.valid_until = sent + px.saturating_sub(drift(px));
            st.next_renewal = sent + lease / 3;
            st.last = last;
            let due = st.next_renewal;
            drop(st);
            if let Some(id) = s.renew_id {
                s.backend.renewer.reschedule(id, due);
                s.wake.notify_all();
            }
            Ok(())
        } else {
            let reason = if px.is_zero() {
                LostReason::AtMost
            } else {
                LostReason::FoundByExtend
            };
            s.mark_lost(st, reason);
            Err(Error::not_held(&s.keys.shown(), reason.why()))
        }
    }

    /// Releases the lock. `Ok` means it was still ours and is now free (or handed to the next
    /// waiter); [`Error::is_not_held`] means it had already expired, been lost or taken over,
    /// so the protected work may have overlapped with another holder's.
    ///
    /// While the server cannot be reached (a failover) the release is tried again for up to
    /// the client's `release_timeout`. When it still has no answer then, the error is
    /// returned and the release goes on on a thread of the library until it is answered or
    /// the lease has run out, so the name is free again soon after the failover, not only at
    /// the end of the lease.
    pub(crate) fn release(self) -> Result<(), Error> {
        let patience = self.state.backend.store.cfg().release_timeout;
        let result = self.state.release(patience);
        match &result {
            Err(e) if e.is_transient() && self.state.check_process().is_ok() => {
                release_later(self);
            }
            // This handle is gone with the call: leave the key to its lease.
            Err(_) if self.state.check_process().is_ok() => {
                let _ = self.state.detach();
            }
            _ => {}
        }
        result
    }

    /// Calls `f` once if the lock is found lost: renewal found its key gone or held by another
    /// owner, or could not reach Redis before the lease ran out (also when an extend or release
    /// finds it gone). `f` gets the [`Error::is_not_held`] error that says why, and runs on the
    /// thread that found it, usually a renewal thread: it must not block, and must not release
    /// or extend this lock. A release or detach never calls it. When the lock is lost already,
    /// `f` runs at once on this thread. A second call replaces the first callback. In a forked
    /// child, where the grant is the parent's and is never found lost, `f` is dropped uncalled.
    pub(crate) fn on_lost(&self, f: impl FnOnce(&Error) + Send + 'static) {
        let s = &self.state;
        if s.check_process().is_err() {
            return;
        }
        let st = s.status.lock();
        if let Phase::Lost(why) = st.phase {
            drop(st);
            f(&Error::not_held(&s.keys.shown(), why));
            return;
        }
        // Stored with the status locked: a loss found after this sees the callback.
        *s.on_lost.lock() = Some(Box::new(f));
    }

    /// The lock's owner token: the random value its Redis key holds while the lock is ours.
    /// It is a bearer secret (whoever knows it can release or extend the lock): hand it only to
    /// the code that is to take the lock over, for example a queued job that
    /// [restores](crate::LockRequest::restore) it, and never log it.
    pub(crate) fn owner_token(&self) -> &str {
        self.state.token.as_str()
    }

    /// Lets the lock outlive this handle: it is no longer renewed, and dropping the handle does
    /// not release it, so it ends with its lease unless someone holding its
    /// [owner token](Self::owner_token) releases or extends it first. Returns that token.
    pub(crate) fn detach(self) -> Result<String, Error> {
        self.state.detach()?;
        Ok(self.state.token.as_str().to_owned())
    }
}

impl Held {
    /// Releases the lock without blocking on a server that cannot be reached: one try on this
    /// thread; if the server cannot be reached (a failover), the error is returned and the
    /// release goes on on a thread of the library ([`release_later`]), so that the caller (a
    /// scope's end, a PHP request's) is not held up.
    pub(crate) fn release_or_hand_over(&self) -> Result<(), Error> {
        let s = &self.state;
        let result = s.release(Duration::ZERO);
        if let Err(e) = &result
            && e.is_transient()
            && s.check_process().is_ok()
        {
            release_later(Held {
                state: s.clone(),
                _owner: self._owner.clone(),
            });
        }
        result
    }
}

impl Drop for Held {
    /// Releases a lock still held, without blocking on a server that cannot be reached
    /// ([`Held::release_or_hand_over`]).
    fn drop(&mut self) {
        let s = &self.state;
        // The process first: in a forked child the handle is dropped without a look at its
        // status, which a thread of the parent may have held at the fork (see `LockState`).
        if s.check_process().is_ok() && s.status.lock().phase == Phase::Held {
            let _ = self.release_or_hand_over();
        }
    }
}

/// Goes on with the release of `held`, which found no server to answer it, on a thread of its
/// own (`redislock-release`): tried again with back-off until it is answered or the lease has
/// run out (then the key is gone anyway and the handle is left detached). The thread keeps the
/// client's connections alive until then, and ends with it. If no thread can be started, the
/// lock is left to its lease, as before a release at all.
fn release_later(held: Held) {
    let state = held.state.clone();
    let started = thread::Builder::new()
        .name("redislock-release".to_owned())
        .spawn(move || {
            let s = &held.state;
            let result = s.release(Duration::MAX);
            match result {
                Ok(()) => log::info!("lock {} released once its server answered", s.keys.shown()),
                Err(e) if !e.is_not_held() => {
                    log::warn!(
                        "release of lock {} not confirmed: it ends with its lease ({e})",
                        s.keys.shown()
                    );
                    let _ = s.detach();
                }
                Err(_) => {}
            }
            drop(held);
        });
    if let Err(e) = started {
        log::warn!(
            "release of lock {} left to its lease: no thread to retry it ({e})",
            state.keys.shown()
        );
        let _ = state.detach();
    }
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.state.keys.shown())
            .field("token", &self.state.token)
            .field("held", &self.is_held())
            .field("fencing_token", &self.state.fence)
            .field("auto_renew", &self.state.auto_renews())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(unsafe_code)] // fork(2), waitpid(2) and _exit(2): std makes no forked child

    use std::sync::mpsc;

    use super::*;
    use crate::base::config::Config;
    use crate::base::keys::LockKeys;
    use crate::base::token::Token;
    use crate::engine::kinds::exclusive::ExclusiveRules;
    use crate::engine::lock::LockState;
    use crate::stores;

    /// A thread of the parent inside a handle's status at the `fork()` (as a renewal thread is
    /// for a moment at every renewal) must not hang the child: there the handle's calls, and
    /// its drop, look at the process before they take anything.
    #[test]
    fn a_forked_child_never_waits_for_the_status_a_parent_thread_held() {
        // Nothing here reaches a server: the client connects lazily, and the grant is made
        // here, without a round trip.
        let cfg = Config::new("redis://127.0.0.1:1/");
        let (info, deployment) = stores::parse_url(&cfg.url).unwrap();
        let owner = Owner::start(&cfg, &info, &deployment).unwrap();
        let lease = Duration::from_secs(30);
        let state = LockState::new(
            owner.backend().clone(),
            LockKeys::new(b"", b"forked").unwrap(),
            Token::new(std::process::id()).unwrap(),
            Some(7),
            None,
            lease,
            Instant::now(),
            Box::new(ExclusiveRules),
            Default::default(),
        );
        let held = Held {
            state: Arc::new(state),
            _owner: owner,
        };
        let (inside_tx, inside_rx) = mpsc::channel();
        let (forked_tx, forked_rx) = mpsc::channel::<()>();
        let child_ok = thread::scope(|s| {
            let state = &held.state;
            s.spawn(move || {
                let _status = state.status.lock();
                inside_tx.send(()).unwrap();
                let _ = forked_rx.recv();
            });
            inside_rx.recv().unwrap();
            // SAFETY: the child only runs the calls below on its copy of the handle and leaves
            // with _exit, without running any destructor of the parent's.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let forked = |r: Result<(), Error>| r.is_err_and(|e| e.is_forked());
                let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let checks = !held.is_held()
                        && !held.is_lost()
                        && held.remaining() == Duration::ZERO
                        && held.lease() == lease
                        && held.fencing_token() == Some(7)
                        && forked(held.extend(lease))
                        && forked(held.state.release(Duration::ZERO))
                        && forked(held.state.detach());
                    held.on_lost(|_| {});
                    let _ = format!("{held:?}");
                    // SAFETY: this process's copy of the handle, dropped once, as a program
                    // drops what it inherited; the process ends right after.
                    drop(unsafe { std::ptr::read(&held) });
                    checks
                }))
                .unwrap_or(false);
                // SAFETY: ends the forked child at once (see above).
                unsafe { libc::_exit(if ok { 0 } else { 1 }) };
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            let status = loop {
                let mut status = 0;
                // SAFETY: polls our own child.
                let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                assert!(r >= 0, "waitpid failed");
                if r == pid {
                    break Some(status);
                }
                if Instant::now() >= deadline {
                    // SAFETY: kills and reaps our own child.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                        libc::waitpid(pid, &mut status, 0);
                    }
                    break None;
                }
                thread::sleep(Duration::from_millis(5));
            };
            forked_tx.send(()).unwrap();
            let status = status.expect("the forked child hung on the handle's status");
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        });
        assert!(child_ok, "the forked child found something wrong");
        // Still the parent's: held here, and left to its lease (no server to release it on).
        assert!(held.is_held());
        assert_eq!(held.lease(), lease);
        held.detach().unwrap();
    }
}
