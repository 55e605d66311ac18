//! The kit's set-ups form, and their faults do what they say.

use std::time::Duration;

use redislock_testkit::{Cluster, SentinelGroup};

#[test]
fn a_sentinel_group_fails_over_when_its_master_is_killed() {
    let group = SentinelGroup::start();
    assert!(group.url().starts_with("redis-sentinel://127.0.0.1:"));
    let old = group.master().port();
    assert_eq!(old, group.nodes()[0].port());
    group.nodes()[0].kill();
    let (new, took) = group
        .wait_for_failover(old, Duration::from_secs(20))
        .expect("no replica was promoted");
    println!("promoted 127.0.0.1:{new} after {took:?}");
    assert_ne!(new, old);
    // The old master comes back empty and is turned into a replica of the new one.
    group.nodes()[0].restart();
    let replica = redislock_testkit::eventually(Duration::from_secs(20), || {
        let Ok(mut con) = group.nodes()[0].try_conn() else {
            return false;
        };
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut con)
            .unwrap_or_default();
        info.contains("role:slave") && info.contains(&format!("master_port:{new}"))
    });
    assert!(replica, "the old master did not become a replica");
}

#[test]
fn a_cluster_forms_with_three_masters() {
    let cluster = Cluster::start();
    assert_eq!(cluster.masters().len(), 3);
    assert!(cluster.url().starts_with("redis-cluster://"));
    let owner = cluster.master_of("{stock}:42");
    let mut con = owner.conn();
    let () = redis::cmd("SET")
        .arg("{stock}:42")
        .arg("1")
        .query(&mut con)
        .unwrap();
}
