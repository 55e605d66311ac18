//! The Cluster section: a test-kit Redis Cluster (three masters with a replica each) beside the
//! standalone run's single server, in the same run.
//!
//! Every key of the section carries the hash tag `{bench}`, so all of them live on one master
//! (the counter of c8 with them): u1 interleaved cycle by cycle with the floor on the single
//! server and on that master, and redislock through `redis-cluster://` without and with
//! `min_replicas(1)`; c8 beside the handoff floor and redislock on the single server.

use redislock_testkit::{Cluster, RedisServer};

use crate::report::{Load, Report, Targets};
use crate::server::Server;
use crate::standalone::Opts;
use crate::sys;
use crate::topology::{self, Conf, Kind, NONE, ONE, Procs, conf};

/// The hash tag of every key of the section.
const TAG: &str = "{bench}";

/// The whole section. `rtt_us` is the single server's round trip (for the handoff columns).
pub fn section(o: &Opts, server: &Server, rep: &mut Report, targets: &mut Targets, rtt_us: f64) {
    let (u1, c8) = (
        topology::wants(o, "cluster", "cluster-u1"),
        topology::wants(o, "cluster", "cluster-c8"),
    );
    if !u1 && !c8 {
        return;
    }
    eprintln!("  cluster: starting a cluster (3 masters with a replica each) ...");
    let Some(cluster) = topology::start("Cluster", Cluster::start) else {
        return;
    };
    let node = cluster.master_of(TAG);
    let (single, node_url, url) = (server.url(), node.url(), cluster.url());
    let masters: Vec<String> = cluster.masters().iter().map(|n| n.addr()).collect();
    println!(
        "\n## Cluster\n\ncluster: masters {} with a replica each (node timeout 2 s); the section's \
         keys ({TAG}) on master {}; single server 127.0.0.1:{}\n",
        masters.join(", "),
        node.addr(),
        server.port,
    );
    let procs = Procs {
        server,
        pids: cluster.nodes().iter().map(RedisServer::pid).collect(),
    };
    let peer = |p: &str| format!("{p}:{TAG}");
    if u1 {
        // Indices into `confs`.
        const FLOOR: usize = 0;
        const SINGLE: usize = 1;
        const FLOOR_NODE: usize = 2;
        const CLUSTER: usize = 3;
        const CLUSTER_MIN1: usize = 4;
        let confs = [
            conf(
                "floor, single server",
                &peer("cluster-floor"),
                Kind::Floor,
                &single,
                &single,
            ),
            conf(
                "redislock, single server",
                &peer("redislock-single"),
                NONE,
                &single,
                &single,
            ),
            conf(
                "floor, the keys' cluster master",
                &peer("cluster-floor-node"),
                Kind::Floor,
                &node_url,
                &node_url,
            ),
            conf(
                "redislock, redis-cluster://",
                &peer("redislock-cluster"),
                NONE,
                &url,
                &node_url,
            ),
            conf(
                "redislock, redis-cluster:// + min_replicas(1)",
                &peer("redislock-cluster-min1"),
                ONE,
                &url,
                &node_url,
            ),
        ];
        eprintln!(
            "  cluster u1 per-cycle interleaved: {} cycles each ...",
            o.n
        );
        let load = Load::start(&procs);
        let mixed = topology::interleaved(&confs, o.n);
        let floor_of = |i: usize| {
            if confs[i].admin == single {
                FLOOR
            } else {
                FLOOR_NODE
            }
        };
        topology::interleaved_table(
            rep,
            "cluster_u1_per_cycle",
            "Cluster u1 per-cycle interleaved: the five alternating cycle by cycle on one thread",
            load.end(&procs),
            &confs,
            &mixed,
            floor_of,
            SINGLE,
        );
        let p50 = |i: usize| sys::pct_sorted(&mixed[i], 50.0) / 1e3;
        targets.add(
            "cluster u1 through redis-cluster://",
            "(information: beside the single server and the floor on the keys' master)",
            format!(
                "{:.2}× p50 redislock on the single server ({:.1} vs {:.1} µs); {:.2}× the floor on the keys' master; that floor {:.2}× the single server's",
                p50(CLUSTER) / p50(SINGLE),
                p50(CLUSTER),
                p50(SINGLE),
                p50(CLUSTER) / p50(FLOOR_NODE),
                p50(FLOOR_NODE) / p50(FLOOR)
            ),
            None,
        );
        let r = p50(CLUSTER_MIN1) / p50(CLUSTER);
        targets.add(
            "cluster u1 min_replicas(1)",
            "≤ 1.60× u1 through the cluster without it",
            format!(
                "{r:.2}× p50 per-cycle interleaved ({:.1} vs {:.1} µs)",
                p50(CLUSTER_MIN1),
                p50(CLUSTER)
            ),
            Some(r <= 1.60),
        );
    }
    if c8 {
        let confs: [Conf; 4] = [
            conf(
                "handoff floor, single server",
                &peer("cluster-handoff-floor"),
                Kind::HandoffFloor,
                &single,
                &single,
            ),
            conf(
                "redislock, single server",
                &peer("redislock-single"),
                NONE,
                &single,
                &single,
            ),
            conf(
                "redislock, redis-cluster://",
                &peer("redislock-cluster"),
                NONE,
                &url,
                &node_url,
            ),
            conf(
                "redislock, redis-cluster:// + min_replicas(1)",
                &peer("redislock-cluster-min1"),
                ONE,
                &url,
                &node_url,
            ),
        ];
        let rtt_us = topology::rtt(o, &single, rep, rtt_us);
        let load = Load::start(&procs);
        let ms = topology::c8(
            o,
            rep,
            "cluster_c8",
            &format!(
                "Cluster c8: eight workers, one key, GET/SET counter to {} (fixed lease; the counter on the lock's master)",
                o.target
            ),
            &load,
            &procs,
            &confs,
            rtt_us,
        );
        for (i, who) in [(2, "Cluster"), (3, "Cluster + min_replicas(1)")] {
            topology::c8_targets(targets, &format!("cluster c8 {who}"), &ms[i], &ms[1]);
        }
    }
}
