//! The engine: acquire, waiting, the held lock and its renewal, lost-lock reports, and the kinds
//! of lock; it runs on the stores below it.

pub(crate) mod acquire;
pub(crate) mod backend;
pub(crate) mod bounds;
pub(crate) mod cancel;
pub(crate) mod contended;
pub(crate) mod held;
pub(crate) mod kinds;
pub(crate) mod lock;
pub(crate) mod renewable;
pub(crate) mod renewal;
pub(crate) mod trace;
pub(crate) mod wait;
