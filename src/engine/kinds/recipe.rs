//! The recipe kind: a trivially simple kind of lock added by ARCHITECTURE.md's "Adding a kind"
//! (cargo feature `recipe-kind`, no part of the API), whose tests (`tests/recipe_kind.rs`) drive
//! it through the Rust API and the C ABI to show that the recipe's steps are all it takes.
//!
//! Its key holds the holder's token as an exclusive lock's does (the ACQUIRE script takes it,
//! EXTEND renews it); its release (RECIPE_RELEASE) deletes the key and publishes on the lock's
//! own channel, which its waiters listen on: no queue (`Waits::Channel`).

use redis::RedisResult;

use super::{Acquiring, Rules, Waits, done};
use crate::base::connection::Connection;
use crate::base::error::Error;
use crate::base::grant::Grant;
use crate::base::keys::LockKeys;
use crate::base::kind::{self, Descriptor};
use crate::base::scripts::{self, scripts};
use crate::base::token::Token;
use crate::engine::backend::Backend;
use crate::stores::LockStore;
use crate::stores::extend::{ExclusiveExtend, ExtendScript};
use crate::stores::pubsub::{ChannelWaiter, publish_command, sharded};
use crate::stores::wait::Step;

scripts! {
    [] {
        /// RECIPE_RELEASE: release a recipe lock, publish on its channel: `recipe_release.lua`.
        static RECIPE_RELEASE = ["recipe_release.lua"];
    }
}

/// A recipe lock: one holder at a time.
#[derive(Debug)]
pub(crate) struct RecipeRules;

/// The channel a release publishes on (a key of the lock's slot, as sharded pub/sub needs).
fn channel(keys: &LockKeys) -> Vec<u8> {
    keys.companion(b":recipe:ch", b"")
}

/// One attempt: the ACQUIRE script without fencing, which takes the key if it is free (or holds
/// our token already: a retried attempt), else replies the holder's PTTL.
fn take(c: &mut Connection, keys: &LockKeys, token: &Token, lease_ms: u64) -> RedisResult<Step> {
    let (ok, n): (i64, i64) = scripts::ACQUIRE
        .key(keys.lock())
        .key(keys.fence())
        .arg(token.as_str())
        .arg(lease_ms)
        .arg("0")
        .invoke(c)?;
    Ok(if ok == 1 {
        Step::granted(0, lease_ms as i64)
    } else {
        Step::Queued { pttl: n }
    })
}

impl Rules for RecipeRules {
    fn descriptor(&self) -> &'static Descriptor {
        &kind::RECIPE
    }

    fn try_once(
        &self,
        a: &Acquiring<'_>,
        store: &dyn LockStore,
        sent: &mut bool,
    ) -> Result<Option<Grant>, Error> {
        store.attempt(a.keys, a.lease, sent, &mut |c, _| {
            take(c, a.keys, a.token, a.lease_ms())
        })
    }

    fn waiter<'a>(&'a self, a: &Acquiring<'a>) -> Result<Waits<'a>, Error> {
        let (keys, token, lease_ms) = (a.keys, a.token, a.lease_ms());
        Ok(Waits::Channel(Box::new(ChannelWaiter {
            keys,
            channel: channel(keys),
            seed: token.as_str().as_bytes(),
            attempt: move |c: &mut Connection, _retry: bool, _sharded: bool| {
                take(c, keys, token, lease_ms)
            },
        })))
    }

    fn release(&self, b: &Backend, keys: &LockKeys, token: &Token) -> Result<bool, Error> {
        let store = &*b.store;
        done(store, keys, |c| {
            let publish = publish_command(sharded(store), c);
            RECIPE_RELEASE
                .key(keys.lock())
                .key(channel(keys))
                .arg(token.as_str())
                .arg(publish)
                .invoke(c)
        })
    }
}

/// Its renewal: the exclusive lock's EXTEND (the lock key holds the token).
impl ExtendScript for RecipeRules {
    fn script(&self) -> &'static redis::Script {
        ExclusiveExtend.script()
    }

    fn add_args(&self, pipe: &mut redis::Pipeline, keys: &LockKeys, token: &Token, lease_ms: u64) {
        ExclusiveExtend.add_args(pipe, keys, token, lease_ms)
    }
}
