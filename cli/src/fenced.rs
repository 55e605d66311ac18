//! `redislock fenced`: writes to a key in Redis that apply only with a fencing token not older
//! than the last one a write to it was applied with: from a command that `redislock run
//! --fencing` runs, with the token it was given in `REDISLOCK_FENCING_TOKEN`.

use std::time::Duration;

use redislock::{Fence, FencedResource};

use crate::args::{Connection, FencedArgs, FencedOp};
use crate::connect;
use crate::exit::{self, Failure};

/// The variable `redislock run --fencing` gives the command its fencing token in.
pub const TOKEN_ENV: &str = "REDISLOCK_FENCING_TOKEN";
/// The variable `redislock elect` gives the command its epoch (its fencing token) in.
pub const EPOCH_ENV: &str = "REDISLOCK_EPOCH";

/// `redislock fenced set|incr|fence`.
pub fn fenced(conn: &Connection, a: FencedArgs) -> Result<u8, Failure> {
    let client = connect::client(conn, Duration::from_secs(30), false)?;
    let key = match &a.op {
        FencedOp::Set { key, .. } | FencedOp::Incr { key, .. } | FencedOp::Fence { key } => key,
    };
    let res = FencedResource::with_client(&client, key)?;
    match &a.op {
        FencedOp::Set { value, .. } => {
            let fence = fence(a.token)?;
            res.set(&fence, value).map_err(stale(key))?;
            println!("OK");
        }
        FencedOp::Incr { by, .. } => {
            let fence = fence(a.token)?;
            let value = res.incr_by(&fence, *by).map_err(stale(key))?;
            println!("{value}");
        }
        FencedOp::Fence { .. } => match res.current_fence()? {
            Some(token) => println!("{token}"),
            None => {
                println!("none");
                return Ok(1);
            }
        },
    }
    Ok(0)
}

/// The fence to write with: `--token`, else the token `redislock run --fencing` gave (else the
/// epoch `redislock elect` gave).
fn fence(token: Option<u64>) -> Result<Fence, Failure> {
    let name = std::env::var("REDISLOCK_NAME").unwrap_or_default();
    if let Some(t) = token {
        return Ok(Fence::new(name, t, None));
    }
    for var in [TOKEN_ENV, EPOCH_ENV] {
        let Ok(text) = std::env::var(var) else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let t = text.trim().parse::<u64>().map_err(|_| {
            Failure::new(
                exit::USAGE,
                format!("{var}={text:?} is not a fencing token (a whole number)"),
            )
        })?;
        return Ok(Fence::new(name, t, None));
    }
    Err(Failure::new(
        exit::USAGE,
        format!(
            "no fencing token: run this under `redislock run --fencing` (which sets {TOKEN_ENV}) \
             or give --token"
        ),
    ))
}

fn stale(key: &str) -> impl Fn(redislock::Error) -> Failure + '_ {
    move |e| {
        if e.is_stale() {
            Failure::new(
                exit::STALE,
                format!(
                    "{}: nothing written to {key:?}: a later holder of the lock wrote to it",
                    exit::one_line(&e.to_string())
                ),
            )
        } else {
            e.into()
        }
    }
}
