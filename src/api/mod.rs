//! The public API: the client, the requests and the guards, with the kinds of lock as their type
//! parameter.

pub(crate) mod builder;
pub(crate) mod client;
pub(crate) mod fence;
pub(crate) mod fenced;
pub(crate) mod guard;
pub mod kinds;
pub(crate) mod request;
