//! Fenced writes to a SQL row: a holder paused past its lease cannot overwrite a later holder's
//! write, because the row keeps the fence of its last write and the update checks it.
//!
//! The table has a fence column beside the data:
//!
//! ```sql
//! CREATE TABLE accounts (id bigint PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL);
//! ```
//!
//! and every write under the lock carries the holder's fencing token and applies only when it is
//! not older than the row's (equal: the same holder writing again):
//!
//! ```sql
//! UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2
//! ```
//!
//! One row affected: written. None: a later holder wrote since (or there is no such row; the
//! `INSERT ... ON CONFLICT` form of [`fenced_upsert`] tells the two apart by creating the row).
//!
//! Holder A takes a fenced lock with a short lease and no renewal, then pauses past its lease.
//! Holder B takes the lock and writes the row (creating it). When A wakes up and writes with its older fence,
//! its update affects no row and is reported stale; B's balance stays.
//!
//! Run it with `DATABASE_URL=postgres://user@host/db cargo run --example fenced_sql`. The
//! table is a temporary one of the demo's session, so nothing of the database is touched. The
//! Redis server is chosen as in `examples/fenced_write.rs`: `$REDIS_URL` if set; else
//! `127.0.0.1:6379` if it answers PING (skipped when `REDISLOCK_DEMO_NO_DEFAULT=1`); else a
//! private `redis-server` from `PATH`, stopped on exit. Exit code: 0 when A's stale write was
//! refused, 1 when it was not or the demo failed, 2 when no usable Redis server or no
//! `DATABASE_URL` was found.

use std::process::ExitCode;
use std::thread;
use std::time::Duration;

use redislock::{Client, Fence};

#[path = "oversell.rs"]
#[allow(dead_code)]
mod oversell;

use oversell::{Cleanup, Res, demo_prefix, pick_server};

const LEASE: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(5);
const ACCOUNT: i64 = 1;

/// The conditional update: sets the balance of row `id` if `fence` is not older than the
/// row's. `Ok(true)`: written; `Ok(false)`: refused, a later holder wrote since (or there is
/// no row `id`).
pub fn fenced_update(
    db: &mut postgres::Client,
    table: &str,
    id: i64,
    balance: i64,
    fence: &Fence,
) -> Res<bool> {
    let sql = format!("UPDATE {table} SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2");
    let rows = db.execute(&sql, &[&balance, &token(fence)?, &id])?;
    Ok(rows == 1)
}

/// The same for a row that may not exist yet: inserts it, or updates it if `fence` is not older
/// than the row's. `Ok(false)` means only "a later holder wrote since".
pub fn fenced_upsert(
    db: &mut postgres::Client,
    table: &str,
    id: i64,
    balance: i64,
    fence: &Fence,
) -> Res<bool> {
    let sql = format!(
        "INSERT INTO {table} (id, balance, fence) VALUES ($1, $2, $3) \
         ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence \
         WHERE {table}.fence <= EXCLUDED.fence"
    );
    let rows = db.execute(&sql, &[&id, &balance, &token(fence)?])?;
    Ok(rows == 1)
}

/// The fence's token as a `bigint`: tokens stay below 2^63 (epoch below 2^15 on a Sentinel
/// group or a Cluster).
pub fn token(fence: &Fence) -> Res<i64> {
    i64::try_from(fence.token()).map_err(|_| format!("{fence} does not fit a bigint").into())
}

/// The balance and fence of row `id`.
pub fn row(db: &mut postgres::Client, table: &str, id: i64) -> Res<Option<(i64, i64)>> {
    let sql = format!("SELECT balance, fence FROM {table} WHERE id = $1");
    Ok(db.query_opt(&sql, &[&id])?.map(|r| (r.get(0), r.get(1))))
}

#[allow(dead_code)]
fn main() -> ExitCode {
    let Ok(db_url) = std::env::var("DATABASE_URL") else {
        eprintln!(
            "No database: set DATABASE_URL to a PostgreSQL URL, e.g. \
             postgres://postgres@127.0.0.1:5432/postgres (the demo writes only a temporary \
             table of its own)."
        );
        return ExitCode::from(2);
    };
    let prefix = match demo_prefix() {
        Ok(prefix) => prefix,
        Err(code) => return code,
    };
    let lock = format!("{prefix}account:{ACCOUNT}");
    let (url, data_url, _server) = match pick_server(&lock) {
        Ok(found) => found,
        Err(e) => {
            eprintln!("No usable Redis server: {e}.");
            return ExitCode::from(2);
        }
    };
    let mut db = match postgres::Client::connect(&db_url, postgres::NoTls) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("No usable database at DATABASE_URL: {e}.");
            return ExitCode::from(2);
        }
    };
    // The lock and its companions (src/base/keys.rs), deleted by name when main returns.
    let mut keys = vec![lock.clone()];
    keys.extend([":fence", ":q", ":rq"].map(|suffix| format!("{lock}{suffix}")));
    let _cleanup = redis::Client::open(data_url.as_str()).map(|data| Cleanup(data, keys));
    match run(&url, &mut db, &lock) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// A, B and the row: the lock `lock` through `url`, the table a temporary one of `db`'s session.
pub fn run(url: &str, db: &mut postgres::Client, lock: &str) -> Res<()> {
    db.batch_execute(
        "CREATE TEMPORARY TABLE accounts \
         (id bigint PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL)",
    )?;
    let client = Client::builder(url)
        .fencing(true)
        .lease(LEASE)
        .auto_renew(false)
        .build()?;

    let a = client.acquire(lock, WAIT)?;
    let fence_a = a.fence().ok_or("A's lock has no fence")?;
    println!("A holds the lock ({fence_a}), then pauses past its {LEASE:?} lease");
    thread::sleep(LEASE + Duration::from_millis(200));

    let b = client.acquire(lock, WAIT)?;
    let fence_b = b.fence().ok_or("B's lock has no fence")?;
    // The row does not exist yet: B's write creates it.
    if !fenced_upsert(db, "accounts", ACCOUNT, 70, &fence_b)? {
        return Err("B's write was refused".into());
    }
    println!("B holds the lock ({fence_b}) and writes a balance of 70: 1 row");
    b.release()?;

    let late = fenced_update(db, "accounts", ACCOUNT, 130, &fence_a)?;
    let now = row(db, "accounts", ACCOUNT)?;
    if late {
        println!("A wakes up and writes 130 with its older fence: 1 row updated");
    } else {
        println!("A wakes up and writes 130 with its older fence: 0 rows updated, stale");
    }
    println!("The row holds (balance, fence) = {now:?}");
    drop(a); // its lease ran out long ago: the release finds it gone
    db.batch_execute("DROP TABLE accounts")?;
    if late {
        return Err("A's stale write was applied".into());
    }
    if now != Some((70, token(&fence_b)?)) {
        return Err(format!("A's write was refused, but the row holds {now:?}").into());
    }
    println!("A's stale write was refused: B's write stays. Correct.");
    Ok(())
}
