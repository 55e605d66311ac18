//! The recipe kind (cargo feature `recipe-kind`): a kind added by ARCHITECTURE.md's "Adding a
//! kind", for its tests; no part of the API.

use std::time::Duration;

use super::{Kind, OneName, RequestKind, sealed};
use crate::api::client::Client;
use crate::api::guard::Guard;
use crate::api::request::Request;
use crate::base::error::Error;
use crate::base::kind::{Descriptor, RECIPE};
use crate::engine::kinds::recipe::RecipeRules;

/// The recipe kind's marker.
#[doc(hidden)]
#[derive(Debug)]
pub enum Recipe {}

impl sealed::Sealed for Recipe {}
impl Kind for Recipe {
    const DESCRIPTOR: &'static Descriptor = &RECIPE;
    type Parts = ();
}
impl OneName for Recipe {}
impl RequestKind for Recipe {}

/// The recipe kind, as the client offers it.
impl Client {
    /// A request for the recipe lock `name` (cargo feature `recipe-kind`: the kind
    /// ARCHITECTURE.md's "Adding a kind" adds, for its tests; no part of the API).
    #[doc(hidden)]
    pub fn recipe_lock<'a, N: AsRef<[u8]> + ?Sized>(&'a self, name: &'a N) -> Request<'a, Recipe> {
        Request::new(self, vec![name.as_ref()], 0).without_fencing()
    }
}

impl Request<'_, Recipe> {
    /// One attempt: fails with [`Error::is_held`] at once if another owner holds the lock.
    pub fn try_acquire(&self) -> Result<Guard<Recipe>, Error> {
        self.take(None)
    }

    /// Waits up to `wait` for the lock (fails with [`Error::is_wait_timeout`]), woken by the
    /// holder's release on the lock's channel.
    pub fn acquire(&self, wait: Duration) -> Result<Guard<Recipe>, Error> {
        self.take(Some(wait))
    }

    fn take(&self, wait: Option<Duration>) -> Result<Guard<Recipe>, Error> {
        let keys = self.keys()?;
        let kind = RecipeRules;
        let (held, _) = self.take_as(Box::new(kind), keys, None, wait)?;
        Ok(Guard::new(held, ()))
    }
}
