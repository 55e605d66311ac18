//! Replica acknowledgement (`min_replicas`): a lock write counts only once WAIT reports that
//! enough replicas have it, so that an acknowledged lock (and its fencing counter) survives the
//! promotion of a replica. Without it, a failover can lose a lock that the old master granted
//! but had not yet replicated.

use std::io;

use crate::base::config::Config;
use crate::base::connection::Connection;

/// Adds `WAIT min_replicas timeout` to `pipe` when the configuration asks for acknowledgement;
/// returns whether it did (its reply is then the pipeline's last).
pub(crate) fn add_wait(pipe: &mut redis::Pipeline, cfg: &Config) -> bool {
    if cfg.min_replicas == 0 {
        return false;
    }
    pipe.cmd("WAIT")
        .arg(cfg.min_replicas)
        .arg(cfg.replica_timeout.as_millis() as u64);
    true
}

/// Checks a WAIT reply: enough replicas acknowledged, or an error that says how many did.
pub(crate) fn check(acks: i64, cfg: &Config) -> redis::RedisResult<()> {
    if acks >= i64::from(cfg.min_replicas) {
        return Ok(());
    }
    Err(redis::RedisError::from(io::Error::other(format!(
        "only {acks} of the {} replicas asked for (min_replicas) acknowledged the write within \
         {} ms",
        cfg.min_replicas,
        cfg.replica_timeout.as_millis()
    ))))
}

/// Sends WAIT alone on `c` (after the connection's own writes) and checks it.
pub(crate) fn wait(c: &mut Connection, cfg: &Config) -> redis::RedisResult<()> {
    if cfg.min_replicas == 0 {
        return Ok(());
    }
    let acks: i64 = redis::cmd("WAIT")
        .arg(cfg.min_replicas)
        .arg(cfg.replica_timeout.as_millis() as u64)
        .query(c)?;
    check(acks, cfg)
}
