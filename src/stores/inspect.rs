//! A look at a lock without holding it, on the server that holds the lock (one server, a
//! Sentinel group's master, a cluster's master): the INSPECT script, read only. Redlock's
//! masters make their own (`redlock/inspect.rs`).

use std::time::Duration;

use crate::base::error::Error;
use crate::base::grant::fencing_token;
use crate::base::inspect::LockInfo;
use crate::base::keys::LockKeys;
use crate::base::kind;
use crate::base::kind::{HeldAs, LockKind};
use crate::base::scripts;
use crate::stores::{LockStore, run_on};

/// INSPECT on the server that holds `keys`' lock; the waiters are `kind`'s.
pub(crate) fn on_one_server<S: LockStore + ?Sized>(
    store: &S,
    keys: &LockKeys,
    kind: LockKind,
) -> Result<LockInfo, Error> {
    let queue = keys.queue();
    let [k1, k2, k3] = kind::inspect_keys(keys);
    let mut epoch = 0;
    let r: Vec<i64> = run_on(store, keys, |c, _| {
        epoch = c.epoch();
        scripts::INSPECT
            .key(keys.lock())
            .key(keys.fence())
            .key(&queue)
            .key(&k1)
            .key(&k2)
            .key(&k3)
            .invoke(c)
    })?;
    let [
        used,
        holders,
        permits_held,
        permits,
        pttl,
        w_ex,
        w_rw,
        w_sem,
        fence,
    ] = r[..]
    else {
        return Err(Error::internal("INSPECT's reply has the wrong shape"));
    };
    let held_as = HeldAs::from_code(used);
    let waiters = kind.waiters([w_ex, w_rw, w_sem]);
    let count = |n: i64| u32::try_from(n.max(0)).unwrap_or(u32::MAX);
    Ok(LockInfo {
        held: held_as.is_some(),
        held_as,
        holders: count(holders),
        permits_held: count(permits_held),
        permits: (permits > 0).then(|| count(permits)),
        remaining: remaining(held_as.is_some(), pttl),
        waiters: Some(count(waiters)),
        fencing_counter: Some(fencing_token(epoch, fence.max(0) as u64)),
    })
}

/// A held key's PTTL as the lease left: none for a free lock or a key without expiry.
pub(crate) fn remaining(held: bool, pttl_ms: i64) -> Option<Duration> {
    (held && pttl_ms >= 0).then(|| Duration::from_millis(pttl_ms as u64))
}
