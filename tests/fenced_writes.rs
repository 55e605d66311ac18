//! Fenced writes to a resource in Redis (`FencedResource`), on one server, a Sentinel group and
//! a Cluster (shared set-ups): a write with the current fence applies, an older one is refused
//! as stale and changes nothing, an equal one applies, the caller's script runs only when fresh,
//! and a key with a hash tag works on a Cluster.

mod support;

use std::time::Duration;

use redislock::{Client, ErrorKind, Fence, FencedResource};
use support::{Shared, Topology, unique_name};

support::shared_keeper!();

fn get(shared: &Shared, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query(&mut shared.conn_for(key))
        .unwrap()
}

/// Two fences of one lock, older then newer: two fenced grants one after the other.
fn two_fences(client: &Client, name: &str) -> (Fence, Fence) {
    let a = client
        .lock(name.as_bytes())
        .fencing(true)
        .try_acquire()
        .unwrap();
    let old = a.fence().expect("a fenced grant has a fence");
    a.release().unwrap();
    let b = client
        .lock(name.as_bytes())
        .fencing(true)
        .try_acquire()
        .unwrap();
    let new = b.fence().unwrap();
    b.release().unwrap();
    assert!(old < new, "{old} < {new}");
    (old, new)
}

fn writes_are_fenced(t: Topology) {
    let shared = Shared::get(t);
    let client = Client::open(shared.url()).unwrap();
    let name = unique_name("fw-lock");
    let key = unique_name("fw-res");
    let fence_key = format!("{{{key}}}:fenced");
    let res = FencedResource::open(shared.url(), &key).unwrap();
    assert_eq!(res.fence_key(), fence_key.as_bytes());
    let (old, new) = two_fences(&client, &name);
    match t {
        Topology::Single => assert_eq!(new.epoch(), None),
        _ => assert_eq!(new.epoch(), Some(new.token() >> 48)),
    }
    assert_eq!(new.name(), name.as_bytes());

    // The current fence writes, and the resource keeps it.
    res.set(&new, "from-new").unwrap();
    assert_eq!(get(shared, &key).as_deref(), Some("from-new"));
    assert_eq!(res.current_fence().unwrap(), Some(new.token()));
    // The same holder writes again (an equal fence).
    res.set(&new, "again").unwrap();
    assert_eq!(get(shared, &key).as_deref(), Some("again"));

    // An older fence is refused and changes nothing.
    let e = res.set(&old, "from-old").unwrap_err();
    assert!(e.is_stale(), "{e}");
    assert_eq!(e.kind(), ErrorKind::NotHeld);
    let msg = e.to_string();
    assert!(msg.contains(&key), "{msg}");
    assert!(msg.contains(&old.token().to_string()), "{msg}");
    assert!(msg.contains(&new.token().to_string()), "{msg}");
    assert_eq!(get(shared, &key).as_deref(), Some("again"));
    assert_eq!(res.current_fence().unwrap(), Some(new.token()));

    // A later grant's fence writes, and the old one stays refused.
    let (_, newer) = two_fences(&client, &name);
    res.set(&newer, "from-newer").unwrap();
    assert_eq!(res.current_fence().unwrap(), Some(newer.token()));
    assert!(res.set(&new, "x").unwrap_err().is_stale());
    assert_eq!(get(shared, &key).as_deref(), Some("from-newer"));
}

fn increments_are_fenced(t: Topology) {
    let shared = Shared::get(t);
    let client = Client::open(shared.url()).unwrap();
    let name = unique_name("fw-lock");
    let key = unique_name("fw-count");
    let res = FencedResource::open(shared.url(), &key).unwrap();
    let (old, new) = two_fences(&client, &name);
    assert_eq!(res.incr_by(&old, 5).unwrap(), 5);
    assert_eq!(res.incr_by(&new, 2).unwrap(), 7);
    assert_eq!(res.incr_by(&new, -1).unwrap(), 6);
    let e = res.incr_by(&old, 100).unwrap_err();
    assert!(e.is_stale(), "{e}");
    assert_eq!(get(shared, &key).as_deref(), Some("6"));
    assert_eq!(res.current_fence().unwrap(), Some(new.token()));
}

fn scripts_run_only_when_fresh(t: Topology) {
    let shared = Shared::get(t);
    let client = Client::open(shared.url()).unwrap();
    let name = unique_name("fw-lock");
    // A key with a hash tag: the caller's second key shares its slot.
    let tag = unique_name("fw-tag");
    let key = format!("{{{tag}}}:list");
    let other = format!("{{{tag}}}:log");
    let res = FencedResource::open(shared.url(), &key).unwrap();
    assert_eq!(res.fence_key(), format!("{key}:fenced").as_bytes());
    let (old, new) = two_fences(&client, &name);
    let script = "redis.call('RPUSH', KEYS[1], ARGV[1])\n\
                  redis.call('SET', KEYS[2], ARGV[1])\n\
                  return redis.call('LLEN', KEYS[1])";
    let n: i64 = res
        .eval(&new, script, &[other.as_bytes()], &[b"first"])
        .unwrap();
    assert_eq!(n, 1);
    let n: i64 = res
        .eval(&new, script, &[other.as_bytes()], &[b"second"])
        .unwrap();
    assert_eq!(n, 2);
    let e = res
        .eval::<i64>(&old, script, &[other.as_bytes()], &[b"stale"])
        .unwrap_err();
    assert!(e.is_stale(), "{e}");
    let mut con = shared.conn_for(&key);
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg(&key)
        .arg(0)
        .arg(-1)
        .query(&mut con)
        .unwrap();
    assert_eq!(list, ["first", "second"]);
    assert_eq!(get(shared, &other).as_deref(), Some("second"));
    assert_eq!(res.current_fence().unwrap(), Some(new.token()));
    // A script that returns nothing.
    let none: Option<String> = res.eval(&new, "return nil", &[], &[]).unwrap();
    assert_eq!(none, None);
}

/// The resource on another server than the lock's, and fences handed over as their parts.
fn fences_travel(t: Topology) {
    let shared = Shared::get(t);
    let client = Client::open(Shared::get(Topology::Single).url()).unwrap();
    let name = unique_name("fw-lock");
    let key = unique_name("fw-res");
    let res = FencedResource::open(shared.url(), &key).unwrap();
    let lock = client
        .lock(name.as_bytes())
        .fencing(true)
        .lease(Duration::from_secs(5))
        .try_acquire()
        .unwrap();
    let f = lock.fence().unwrap();
    let received = Fence::new(f.name(), f.token(), f.epoch());
    res.set(&received, "v").unwrap();
    let older = Fence::new(f.name(), f.token() - 1, None);
    assert!(res.set(&older, "w").unwrap_err().is_stale());
    // An unfenced grant has no fence.
    let unfenced = client.try_acquire(unique_name("fw-nofence")).unwrap();
    assert!(unfenced.fence().is_none());
}

/// Tokens compare as numbers: 10 after 9 (not as text), and tokens above 2^53 (a Cluster's, a
/// Sentinel group's after failovers) apart by one, beyond what a Lua number holds exactly.
#[test]
fn tokens_compare_as_numbers_to_the_last_unit() {
    let shared = Shared::get(Topology::Single);
    let res = FencedResource::open(shared.url(), unique_name("fw-order")).unwrap();
    let at = |token: u64| Fence::new("x", token, None);
    res.set(&at(9), "9").unwrap();
    res.set(&at(10), "10").unwrap();
    assert!(res.set(&at(9), "9 again").unwrap_err().is_stale());
    let big = (1u64 << 62) + 1;
    res.set(&at(big), "big").unwrap();
    assert!(res.set(&at(big - 1), "one less").unwrap_err().is_stale());
    res.set(&at(big + 1), "one more").unwrap();
    assert_eq!(res.current_fence().unwrap(), Some(big + 1));
}

/// The other fenced guards give fences too: a write lock, a leadership, a lock of any kind.
#[test]
fn other_guards_give_fences() {
    let shared = Shared::get(Topology::Single);
    let client = Client::builder(shared.url()).fencing(true).build().unwrap();
    let w = client.rw_lock(&unique_name("fw-rw")).try_write().unwrap();
    assert_eq!(w.fence().map(|f| f.token()), w.fencing_token());
    let leader = client
        .leader(&unique_name("fw-leader"))
        .identity("a")
        .try_campaign()
        .unwrap();
    assert_eq!(leader.fence().token(), leader.epoch());
}

#[test]
fn redlock_urls_are_refused() {
    let url = "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3/";
    let e = FencedResource::open(url, "k").err().unwrap();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("Redlock"), "{e}");
}

#[test]
fn an_empty_key_is_refused() {
    let e = FencedResource::open("redis://127.0.0.1:1/", "")
        .err()
        .unwrap();
    assert!(e.is_invalid_argument(), "{e}");
    assert!(e.to_string().contains("resource key"), "{e}");
}

macro_rules! on {
    ($($topology:ident: $t:expr;)*) => {$(
        mod $topology {
            use super::*;
            #[test]
            fn writes_are_fenced() {
                super::writes_are_fenced($t)
            }
            #[test]
            fn increments_are_fenced() {
                super::increments_are_fenced($t)
            }
            #[test]
            fn scripts_run_only_when_fresh() {
                super::scripts_run_only_when_fresh($t)
            }
            #[test]
            fn fences_travel() {
                super::fences_travel($t)
            }
        }
    )*};
}

on! {
    single: Topology::Single;
    sentinel: Topology::Sentinel;
    cluster: Topology::Cluster;
}
