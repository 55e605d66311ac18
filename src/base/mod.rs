//! The base layer: what every layer above uses and nothing here knows of them: configuration and
//! its checks, errors, the keys of a lock, tokens, the connection pool, the Lua scripts,
//! replica acknowledgement, the metrics every layer counts into, and the locks and condition
//! variables every layer uses.

pub(crate) mod backoff;
pub(crate) mod config;
pub(crate) mod connection;
pub(crate) mod error;
pub(crate) mod grant;
pub(crate) mod inspect;
pub(crate) mod keys;
pub(crate) mod kind;
pub(crate) mod metrics;
pub(crate) mod pool;
pub(crate) mod replication;
pub(crate) mod scripts;
pub(crate) mod sync;
pub(crate) mod token;
pub(crate) mod url;
