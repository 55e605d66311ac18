//! Fenced writes to a SQL row (`examples/fenced_sql.rs`, docs/guarantees.md "Fenced writes"),
//! against a real PostgreSQL and a real Redis started by the test kit: the row keeps the fence
//! of its last write, and the conditional `UPDATE` / `INSERT ... ON CONFLICT` of a holder paused
//! past its lease affects no row, while the later holder's write stays.
//!
//! The recipe's functions are the example's own (the example file is a module here), and the
//! example itself runs as a user runs it, with `REDIS_URL` and `DATABASE_URL`.

mod support;

#[path = "../examples/fenced_sql.rs"]
#[allow(dead_code)]
mod demo;

use std::path::Path;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use redislock::{Client, Fence};
use support::{Postgres, RedisServer, cargo_build_example, unique_name, wait_child};

const LEASE: Duration = Duration::from_millis(300);
const WAIT: Duration = Duration::from_secs(5);
/// The demo takes about a second; this only stops a hung one.
const DEMO_TIMEOUT: Duration = Duration::from_secs(60);
/// A cold build of the example; once the test's dependencies are built, seconds.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Redis and PostgreSQL, started side by side.
fn servers() -> (RedisServer, Postgres) {
    let pg = thread::spawn(Postgres::start);
    let redis = RedisServer::start();
    (redis, pg.join().expect("PostgreSQL did not start"))
}

fn connect(pg: &Postgres) -> postgres::Client {
    postgres::Client::connect(&pg.url(), postgres::NoTls)
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}\n{}", pg.url(), pg.log_tail()))
}

/// Two holders of one fenced lock, A's lease run out before B took it; A's and B's fences.
fn paused_then_taken_over(client: &Client, lock: &str) -> (Fence, Fence) {
    let a = client.acquire(lock, WAIT).unwrap();
    let fence_a = a.fence().expect("taken with fencing");
    thread::sleep(LEASE + Duration::from_millis(200));
    let b = client.acquire(lock, WAIT).unwrap();
    let fence_b = b.fence().expect("taken with fencing");
    assert!(fence_a < fence_b, "{fence_a} is not older than {fence_b}");
    b.release().unwrap();
    assert!(
        a.release().is_err(),
        "A's lease ran out: its release finds the lock gone"
    );
    (fence_a, fence_b)
}

/// The story on a table of the database (not a temporary one): B creates the row with the
/// `INSERT ... ON CONFLICT` form; A's late `UPDATE` and `INSERT ... ON CONFLICT` affect no row,
/// and another session sees B's balance and fence; B writing again with its fence (equal) is
/// applied, and so is a later holder's write.
#[test]
fn a_paused_holders_write_affects_no_row_and_the_later_one_stays() {
    let (redis, pg) = servers();
    let (mut a_db, mut b_db, mut reader) = (connect(&pg), connect(&pg), connect(&pg));
    a_db.batch_execute(
        "CREATE TABLE accounts \
         (id bigint PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL)",
    )
    .unwrap();
    let client = Client::builder(&redis.url())
        .fencing(true)
        .lease(LEASE)
        .auto_renew(false)
        .build()
        .unwrap();
    let lock = unique_name("account:7");
    let (fence_a, fence_b) = paused_then_taken_over(&client, &lock);
    let row = |db: &mut postgres::Client| demo::row(db, "accounts", 7).unwrap();

    // A plain UPDATE of a row that does not exist yet affects no row either: only the upsert
    // tells "no row" from "stale".
    assert!(!demo::fenced_update(&mut b_db, "accounts", 7, 70, &fence_b).unwrap());
    assert!(demo::fenced_upsert(&mut b_db, "accounts", 7, 70, &fence_b).unwrap());
    let b_row = Some((70, demo::token(&fence_b).unwrap()));
    assert_eq!(row(&mut reader), b_row);

    assert!(
        !demo::fenced_update(&mut a_db, "accounts", 7, 130, &fence_a).unwrap(),
        "A's stale UPDATE ({fence_a}) was applied over B's ({fence_b})"
    );
    assert!(
        !demo::fenced_upsert(&mut a_db, "accounts", 7, 130, &fence_a).unwrap(),
        "A's stale INSERT ... ON CONFLICT ({fence_a}) was applied over B's ({fence_b})"
    );
    assert_eq!(
        row(&mut reader),
        b_row,
        "A's refused writes changed the row"
    );

    // The same holder writing again (an equal fence) is applied.
    assert!(demo::fenced_update(&mut b_db, "accounts", 7, 60, &fence_b).unwrap());
    assert_eq!(row(&mut reader), Some((60, demo::token(&fence_b).unwrap())));

    // A later holder writes over B.
    let c = client.acquire(&lock, WAIT).unwrap();
    let fence_c = c.fence().expect("taken with fencing");
    assert!(demo::fenced_update(&mut a_db, "accounts", 7, 50, &fence_c).unwrap());
    assert_eq!(row(&mut reader), Some((50, demo::token(&fence_c).unwrap())));
    c.release().unwrap();
    assert!(!demo::fenced_update(&mut b_db, "accounts", 7, 40, &fence_b).unwrap());
}

/// The example's story, run in this process against the test kit's servers: it returns Ok only
/// when A's stale UPDATE was refused and the row holds B's write.
#[test]
fn the_examples_story_refuses_the_stale_update() {
    let (redis, pg) = servers();
    let mut db = connect(&pg);
    demo::run(&redis.url(), &mut db, &unique_name("account")).unwrap();
    // Its table was a temporary one, dropped at the end: nothing is left in the database.
    let tables = pg.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'accounts'");
    assert_eq!(tables.trim(), "0");
}

/// The example as a user runs it: exit 0 and the success line with `REDIS_URL` and
/// `DATABASE_URL`; exit 2 and what to set without `DATABASE_URL`.
#[test]
fn the_example_runs_with_redis_url_and_database_url() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let started = thread::spawn(servers);
    let example = cargo_build_example(root, "fenced_sql", BUILD_TIMEOUT);
    let (redis, pg) = started.join().expect("the servers did not start");
    let run = |database_url: Option<String>| {
        let mut cmd = Command::new(&example);
        cmd.env("REDIS_URL", redis.url())
            .env_remove("DATABASE_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(url) = database_url {
            cmd.env("DATABASE_URL", url);
        }
        let out = wait_child(cmd.spawn().expect("cannot run the example"), DEMO_TIMEOUT);
        let text = format!(
            "({})\n--- stdout ---\n{}--- stderr ---\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, text) = run(Some(pg.url()));
    assert!(
        code == Some(0) && text.contains("A's stale write was refused: B's write stays."),
        "the fenced_sql example did not succeed {text}"
    );
    let (code, text) = run(None);
    assert!(
        code == Some(2) && text.contains("set DATABASE_URL"),
        "without DATABASE_URL the example should exit 2 saying what to set {text}"
    );
    let mut con = redis.conn();
    let left: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert!(left.is_empty(), "the example left keys behind: {left:?}");
}
