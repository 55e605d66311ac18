//! `redislock fenced` as a process, against real servers from the test kit (one server, a
//! Sentinel group and a Cluster, shared set-ups): writes from inside `redislock run --fencing`
//! with the token it hands the command, and a write with an older token refused with exit 77,
//! changing nothing.

use std::process::{Command, Output};

use redislock_testkit::{Shared, Topology, unique_name};

mod common;

use common::redislock;

redislock_testkit::shared_keeper!();

fn output(c: &mut Command) -> Output {
    c.output().expect("redislock runs")
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or_else(|| panic!("killed: {o:?}"))
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn get(shared: &Shared, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut shared.conn_for(key))
        .unwrap()
}

/// `redislock run --fencing NAME -- sh -c SCRIPT`, the script seeing `redislock` as `$RL`.
fn run_fenced(shared: &Shared, name: &str, script: &str) -> Output {
    output(
        redislock(shared.url())
            .env("RL", env!("CARGO_BIN_EXE_redislock"))
            .args(["run", "--fencing", name, "--", "sh", "-c", script]),
    )
}

/// Holder A writes under `run --fencing`, holder B after it; A's token, used again, is refused
/// (exit 77) and changes nothing; B's value stays.
fn stale_writes_exit_77(t: Topology) {
    let shared = Shared::get(t);
    let name = unique_name("cli-fenced-lock");
    let key = unique_name("cli-fenced-res");
    let count = unique_name("cli-fenced-count");

    let script = format!(
        "echo $REDISLOCK_FENCING_TOKEN; \"$RL\" fenced set {key} from-a && \
         \"$RL\" fenced incr {count} 5"
    );
    let a = run_fenced(shared, &name, &script);
    assert_eq!(code(&a), 0, "{t:?}: {}", stderr(&a));
    let a_out = stdout(&a);
    let mut lines = a_out.lines();
    let token_a: u64 = lines.next().unwrap().parse().unwrap();
    assert_eq!(lines.collect::<Vec<_>>(), ["OK", "5"], "{t:?}: {a_out}");
    assert_eq!(get(shared, &key).as_deref(), Some("from-a"));

    let b = run_fenced(
        shared,
        &name,
        &format!(
            "echo $REDISLOCK_FENCING_TOKEN; \"$RL\" fenced set {key} from-b && \
             \"$RL\" fenced incr {count}"
        ),
    );
    assert_eq!(code(&b), 0, "{t:?}: {}", stderr(&b));
    let b_out = stdout(&b);
    let token_b: u64 = b_out.lines().next().unwrap().parse().unwrap();
    assert!(token_b > token_a, "{t:?}: {token_b} > {token_a}");
    assert_eq!(b_out.lines().skip(1).collect::<Vec<_>>(), ["OK", "6"]);
    assert_eq!(get(shared, &key).as_deref(), Some("from-b"));

    // A comes back with its old token: refused, nothing written.
    let token = token_a.to_string();
    let stale =
        output(redislock(shared.url()).args(["fenced", "--token", &token, "set", &key, "from-a"]));
    assert_eq!(code(&stale), 77, "{t:?}: {}", stderr(&stale));
    assert_eq!(stderr(&stale).lines().count(), 1, "{}", stderr(&stale));
    assert!(stderr(&stale).contains("stale"), "{}", stderr(&stale));
    assert_eq!(stdout(&stale), "");
    assert_eq!(get(shared, &key).as_deref(), Some("from-b"));
    // The environment's token works as --token does.
    let stale = output(
        redislock(shared.url())
            .env("REDISLOCK_FENCING_TOKEN", &token)
            .args(["fenced", "incr", &count, "-2"]),
    );
    assert_eq!(code(&stale), 77, "{t:?}: {}", stderr(&stale));
    assert_eq!(get(shared, &count).as_deref(), Some("6"));

    // The resource's fence is B's token.
    let o = output(redislock(shared.url()).args(["fenced", "fence", &key]));
    assert_eq!((code(&o), stdout(&o)), (0, format!("{token_b}\n")));
    // B's token again (the same holder writing again) applies: a negative step too.
    let o = output(redislock(shared.url()).args([
        "fenced",
        "--token",
        &token_b.to_string(),
        "incr",
        &count,
        "-2",
    ]));
    assert_eq!(
        (code(&o), stdout(&o)),
        (0, "4\n".to_owned()),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stale_writes_exit_77_single() {
    stale_writes_exit_77(Topology::Single);
}

#[test]
fn stale_writes_exit_77_sentinel() {
    stale_writes_exit_77(Topology::Sentinel);
}

#[test]
fn stale_writes_exit_77_cluster() {
    stale_writes_exit_77(Topology::Cluster);
}

/// Without a token (outside `run --fencing`), or with one that is not a number: usage errors
/// (64) that touch nothing; a key without a fence yet: exit 1.
#[test]
fn no_token_is_a_usage_error() {
    let shared = Shared::get(Topology::Single);
    let key = unique_name("cli-fenced-none");
    let o = output(redislock(shared.url()).args(["fenced", "set", &key, "x"]));
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("REDISLOCK_FENCING_TOKEN"),
        "{}",
        stderr(&o)
    );
    let o = output(
        redislock(shared.url())
            .env("REDISLOCK_FENCING_TOKEN", "soon")
            .args(["fenced", "set", &key, "x"]),
    );
    assert_eq!(code(&o), 64, "{}", stderr(&o));
    assert_eq!(get(shared, &key), None);
    let o = output(redislock(shared.url()).args(["fenced", "fence", &key]));
    assert_eq!((code(&o), stdout(&o)), (1, "none\n".to_owned()));
}
