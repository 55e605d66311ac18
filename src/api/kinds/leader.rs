//! The leadership of an election, one leader at a time with an epoch, as the API offers it: its
//! marker, the client's [`leader`](Client::leader) campaign and its observers
//! ([`leader_info`](Client::leader_info),
//! [`wait_for_leader_change`](Client::wait_for_leader_change)), and its guard's epoch, identity
//! and resign.

use std::time::Duration;

use super::{Kind, OneName, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::fence::Fence;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::config::check_wait;
use crate::base::error::Error;
use crate::base::keys::LockKeys;
use crate::base::kind::{Descriptor, LEADER};
use crate::engine::kinds::leader::{self, LeaderInfo, LeaderRules};
use crate::stores::{Check, LockStore};

/// The leadership of an election: one leader at a time, with an epoch
/// ([`Leadership`](crate::Leadership), [`LeaderRequest`](crate::LeaderRequest);
/// docs/leaders.md).
#[derive(Debug)]
pub enum Leader {}

impl sealed::Sealed for Leader {}
impl Kind for Leader {
    const DESCRIPTOR: &'static Descriptor = &LEADER;
    /// The identity the leader campaigned with.
    type Parts = Box<str>;
}
impl OneName for Leader {}
impl RequestKind for Leader {}

/// A campaign for the leadership of an election.
pub type LeaderRequest<'a> = Request<'a, Leader>;
/// The leadership of an election, held (see [`Client::leader`](crate::Client::leader)).
/// Dropping it resigns.
pub type Leadership = Guard<Leader>;

/// The election, as the client offers it: campaigns and observers.
impl Client {
    /// A campaign for the leadership of the election `name` (docs/leaders.md): give it an
    /// [`identity`](LeaderRequest::identity), then [`campaign`](LeaderRequest::campaign) (wait
    /// to lead) or [`try_campaign`](LeaderRequest::try_campaign). The leadership is an
    /// exclusive lock on `name` with a fencing token, its [`epoch`](crate::Leadership::epoch);
    /// lease, auto-renewal and cancel default to the client's. Refused with a `redlock://` URL,
    /// which has no fencing tokens.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let leadership = client
    ///     .leader("scheduler")
    ///     .identity("host-a:4242")
    ///     .campaign(Duration::from_secs(60))?;
    /// while leadership.is_leader() {
    ///     // ... one step of the leader's work, fenced with leadership.epoch() ...
    /// #   break;
    /// }
    /// leadership.resign()?;
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn leader<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> LeaderRequest<'a> {
        Request::new(self, vec![name.as_ref()], 0).with_fencing()
    }

    /// Who leads the election `name` now, without campaigning: its identity, epoch and
    /// remaining lease, or `None` when nobody leads. Fails with an invalid-argument error when
    /// the name is held as a plain lock.
    pub fn leader_info(&self, name: impl AsRef<[u8]>) -> Result<Option<LeaderInfo>, Error> {
        let keys = self.keys(name.as_ref())?;
        let b = self.backend()?;
        offers_elections(&*b.store, &keys)?;
        leader::read(&*b.store, &keys)
    }

    /// Waits up to `timeout` until the election `name` is led by another epoch than `since`
    /// (`None`: nobody led; pass the epoch of the last [`leader_info`](Self::leader_info)), and
    /// returns who leads then (`None`: nobody, after a resign or a leader's lease ran out).
    /// Woken by the change published on the election's channel, or at the leader's remaining
    /// lease (a killed leader publishes nothing): no polling. Fails with
    /// [`Error::is_wait_timeout`] when nothing changed within `timeout`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// # let client = redislock::Client::open("redis://127.0.0.1:6379/")?;
    /// let mut now = client.leader_info("scheduler")?;
    /// loop {
    ///     match client.wait_for_leader_change("scheduler", now.as_ref().map(|l| l.epoch), Duration::from_secs(60)) {
    ///         Ok(next) => now = next,
    ///         Err(e) if e.is_wait_timeout() => continue,
    ///         Err(e) => return Err(e),
    ///     }
    ///     println!("leader: {:?}", now.as_ref().map(|l| &l.identity));
    /// #   break;
    /// }
    /// # Ok::<(), redislock::Error>(())
    /// ```
    pub fn wait_for_leader_change(
        &self,
        name: impl AsRef<[u8]>,
        since: Option<u64>,
        timeout: Duration,
    ) -> Result<Option<LeaderInfo>, Error> {
        check_wait(timeout)?;
        let keys = self.keys(name.as_ref())?;
        let b = self.backend()?;
        offers_elections(&*b.store, &keys)?;
        leader::wait_change(&*b.store, &keys, since, timeout)
    }
}

impl<'a> Request<'a, Leader> {
    /// The identity the leader is known by to observers ([`Client::leader_info`]): not
    /// empty, at most [`MAX_IDENTITY_LEN`](crate::MAX_IDENTITY_LEN) bytes, no control
    /// characters. Never the token. Required: a campaign without one fails with an
    /// invalid-argument error.
    pub fn identity(mut self, identity: &'a str) -> Self {
        self.identity = Some(identity);
        self
    }

    /// One attempt: leads at once if nobody leads, else fails with [`Error::is_held`].
    pub fn try_campaign(&self) -> Result<Leadership, Error> {
        self.campaign_for(None)
    }

    /// Waits up to `wait` to lead (fails with [`Error::is_wait_timeout`]; with
    /// [`cancel_on`](Self::cancel_on), a cancel ends it). Woken by a change published on the
    /// election's channel (a resign), and at the leader's remaining lease (a leader that died
    /// publishes nothing): no polling.
    pub fn campaign(&self, wait: Duration) -> Result<Leadership, Error> {
        self.campaign_for(Some(wait))
    }

    fn campaign_for(&self, wait: Option<Duration>) -> Result<Leadership, Error> {
        let Some(identity) = self.identity else {
            return Err(Error::invalid_argument(
                "a campaign needs the leader's identity (LeaderRequest::identity)",
            ));
        };
        let kind = LeaderRules::new(identity.as_bytes())?;
        let keys = self.keys()?;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, identity.into()))
    }
}

impl Guard<Leader> {
    /// The epoch of this leadership: a fencing token, strictly larger than every earlier
    /// leader's of the election (on a Sentinel group or a Cluster ordered first by the
    /// failover epoch of the master that elected it). Pass it to the resources the leader
    /// writes, and have them refuse an epoch smaller than one they saw (docs/leaders.md).
    pub fn epoch(&self) -> u64 {
        self.held.fencing_token().unwrap_or(0)
    }

    /// The fence of this grant (a leadership is always fenced): its name, fencing token and, on
    /// a Sentinel group or a Cluster, epoch, to hand to the resources it protects (a
    /// [`FencedResource`](crate::FencedResource)).
    pub fn fence(&self) -> Fence {
        Fence::of(&self.held).unwrap_or_else(|| Fence::new(self.held.name(), 0, None))
    }

    /// Whether this process still leads, as far as it knows, without a round trip: not
    /// resigned, not found lost, and the lease not run out by this process's clock. A leader
    /// paused past its lease (a stop, a long pause) sees `false` before it acts again; check
    /// it before each step that must be the leader's alone.
    pub fn is_leader(&self) -> bool {
        self.held.is_held()
    }

    /// The identity this leader campaigned with.
    pub fn identity(&self) -> &str {
        &self.parts
    }

    /// Steps down: deletes the leadership and wakes the campaigners and observers. `Ok` means
    /// it was still ours; [`Error::is_not_held`] means it was lost before.
    pub fn resign(self) -> Result<(), Error> {
        self.held.release()
    }
}

/// Whether `store` offers leader elections (all but Redlock's masters).
fn offers_elections(store: &dyn LockStore, keys: &LockKeys) -> Result<(), Error> {
    store.check(Check::Kind {
        what: LEADER.what,
        shown: &keys.shown(),
    })
}
