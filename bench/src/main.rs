//! The redislock benchmark program (the `redislock-bench` crate of the workspace).
//!
//! Standalone (what `scripts/bench/bench.sh` runs):
//!
//! ```text
//! cargo build --release -p redislock-bench
//! target/release/redislock-bench [--port P] [--n 20000] [--target 2000] [--htarget 200] [--cap 60]
//!     [--rounds 5] [--scale-secs 30] [--scale-locks 1000,10000,30000] [--scale-lease-ms 3000]
//!     [--scale-pool-size N] [--failovers 3] [--stops-gap 4]
//!     [--only u1,u8,c8,h2,sentinel,cluster,redlock,scale,kinds,php] [--skip ...] [--raw FILE.jsonl]
//!     [--php auto|on|off] [--peers-dir ../shared/bench/peers] [--php-lib path/to/libredislock.so]
//! ```
//!
//! starts its own `redis-server` on a free loopback port through the test kit
//! (`redislock-testkit`: no persistence, killed when the program ends or dies), or uses
//! 127.0.0.1:P with `--port`, and runs: the two-round-trip floor (redis-rs `SET NX PX` + EVALSHA
//! of a compare-and-delete script) interleaved with redislock (fixed lease and auto-renewal) in
//! u1 and u8; c8 and h2; Sentinel (a test-kit group of one master, two replicas and three
//! sentinels: u1 and c8 through `redis-sentinel://` with and without `min_replicas(1)` beside
//! the single server, and `--failovers` trials of killing the master; `--only` / `--skip`
//! `sentinel`, or one part: `sentinel-u1`, `sentinel-c8`, `sentinel-failover`); Cluster (a
//! test-kit cluster of three masters with a replica each: u1 and c8 through `redis-cluster://`
//! beside the floor on the keys' master and the single server; `cluster`, `cluster-u1`,
//! `cluster-c8`); Redlock (three test-kit masters: u1 and c8 through `redlock://` beside the
//! Redlock floor, `SET NX PX` on all masters at once; `redlock`, `redlock-u1`, `redlock-c8`;
//! and `redlock-stops`: a c8 race while each master is SIGSTOPped for 5 s in turn, `--stops-gap`
//! seconds apart, then the lock's home master alone, on fresh masters);
//! renewal at scale
//! (1,000 and 10,000 auto-renewed locks, and the refusal of one lock beyond
//! `max_renewed_locks`); the other kinds (`kinds`: a read-mostly load on the read/write lock
//! beside the exclusive lock and the floor, and a semaphore); and the PHP rows (redislock's PHP package over FFI beside the phpredis
//! floor and Symfony Lock) when PHP, the package and the cdylib are there.
//! It prints markdown tables, a targets table and one JSON summary line per row; `--raw` keeps
//! every run's record in the peers' format.
//!
//! Peers contract (shared/bench/peers/README.md, `run.sh --extra LABEL=COMMAND`):
//!
//! ```text
//! redislock-bench [--impl redislock|floor|handoff-floor] [--auto-renew on|off] --scenario u1|u8|c8|h2 --n N --target T
//!       --cap C --out FILE --port P
//! ```
//!
//! runs that one scenario against 127.0.0.1:P and appends one JSON line to FILE. With
//! `--ports P1,P2,P3` instead of `--port P` (the harness's `--masters K`), redislock takes its
//! locks through `redlock://` over those masters and `floor` is the Redlock floor; the counter
//! lives on the first.
//! A `--bench` argument (what `cargo bench` passed when this program was a bench target) is
//! ignored.

mod cluster;
mod failover;
mod json;
mod kinds;
mod lockers;
mod metrics;
mod php;
mod php_rows;
mod redlock;
mod redlock_stops;
mod report;
mod scale;
mod scenario;
mod sentinel;
mod server;
#[cfg(feature = "tracing")]
mod spans;
mod standalone;
mod sys;
mod topology;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use lockers::{Floor, Redislock, RedlockFloor};
use scenario::{Params, Sc};

/// What `--help` prints (the top of this file says more).
const HELP: &str = "\
The redislock benchmark program (BENCHMARKS.md).

Standalone run (its own redis-server through the test kit, or 127.0.0.1:P with --port):
  redislock-bench [--port P] [--n 20000] [--rounds 5] [--target 2000]
      [--htarget 200] [--cap 60] [--scale-secs 30] [--scale-locks 1000,10000,30000]
      [--scale-lease-ms 3000] [--scale-pool-size N] [--failovers 3] [--stops-gap 4] [--masters 3]
      [--only SECTIONS] [--skip SECTIONS] [--raw FILE.jsonl] [--php auto|on|off]
      [--peers-dir ../shared/bench/peers] [--php-lib path/to/libredislock.so]
  SECTIONS: comma-separated u1, u8, c8, h2, sentinel (or one part of it: sentinel-u1,
  sentinel-c8, sentinel-failover), cluster (cluster-u1, cluster-c8), redlock (redlock-u1,
  redlock-c8 over --masters masters, redlock-stops: each of three masters stopped in turn,
  --stops-gap seconds apart), scale,
  kinds (read/write lock and semaphore), php.

One scenario under the peers harness's contract (appends one JSON record to FILE):
  redislock-bench [--impl redislock|floor|handoff-floor] [--auto-renew on|off] --scenario u1|u8|c8|h2
      --n N --target T --cap C --out FILE (--port P | --ports P1,P2,P3)
  (--ports: redislock over redlock://, floor = the Redlock floor)
";

fn usage(msg: &str) -> ! {
    eprintln!("redislock-bench: {msg}\n(--help lists the options)");
    std::process::exit(2);
}

fn on_off(v: &str) -> bool {
    match v {
        "on" | "1" | "true" => true,
        "off" | "0" | "false" => false,
        _ => usage(&format!("expected on or off, got {v:?}")),
    }
}

fn num<T: std::str::FromStr>(flag: &str, v: &str) -> T {
    v.parse()
        .unwrap_or_else(|_| usage(&format!("{flag}: bad value {v:?}")))
}

fn main() {
    #[cfg(feature = "tracing")]
    spans::install_if_asked();
    let mut args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    // --flag=value is accepted as well as --flag value.
    args = args
        .into_iter()
        .flat_map(|a| match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => vec![f.to_owned(), v.to_owned()],
            _ => vec![a],
        })
        .collect();
    let mut o = standalone::Opts {
        port: None,
        n: 20_000,
        target: 2_000,
        htarget: 200,
        cap: Duration::from_secs(60),
        rounds: 5,
        scale_secs: 30.0,
        scale_locks: vec![1_000, 10_000, 30_000],
        scale_lease: Duration::from_secs(3),
        scale_pool_size: None,
        failovers: 3,
        stops_gap: Duration::from_secs(4),
        masters: 3,
        only: Vec::new(),
        skip: Vec::new(),
        raw: None,
        php: None,
        peers_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/bench/peers"),
        php_lib: None,
    };
    let (mut scenario, mut out, mut imp, mut auto_renew) =
        (None, None, "redislock".to_owned(), false);
    let mut target_given = None;
    let mut scale_child = None;
    let mut ports: Option<Vec<u16>> = None;
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--scenario" => {
                scenario =
                    Some(Sc::parse(&val()).unwrap_or_else(|| usage("--scenario: u1, u8, c8 or h2")))
            }
            "--n" => o.n = num("--n", &val()),
            "--target" => target_given = Some(num::<i64>("--target", &val())),
            "--htarget" => o.htarget = num("--htarget", &val()),
            "--cap" => o.cap = Duration::from_secs_f64(num("--cap", &val())),
            "--out" => out = Some(PathBuf::from(val())),
            "--port" => o.port = Some(num("--port", &val())),
            "--ports" => {
                ports = Some(
                    val()
                        .split(',')
                        .map(|p| num::<u16>("--ports", p))
                        .collect::<Vec<_>>(),
                )
            }
            "--impl" => imp = val(),
            "--auto-renew" => auto_renew = on_off(&val()),
            "--rounds" => o.rounds = num::<usize>("--rounds", &val()).max(1),
            "--scale-secs" => o.scale_secs = num("--scale-secs", &val()),
            "--scale-locks" => {
                o.scale_locks = val()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| num("--scale-locks", s))
                    .collect()
            }
            "--scale-pool-size" => o.scale_pool_size = Some(num("--scale-pool-size", &val())),
            "--scale-lease-ms" => {
                o.scale_lease = Duration::from_millis(num("--scale-lease-ms", &val()))
            }
            "--failovers" => o.failovers = num("--failovers", &val()),
            "--stops-gap" => o.stops_gap = Duration::from_secs_f64(num("--stops-gap", &val())),
            "--masters" => {
                o.masters = num("--masters", &val());
                if o.masters < 3 || o.masters.is_multiple_of(2) {
                    usage("--masters: an odd number, at least 3");
                }
            }
            "--only" => o.only = val().split(',').map(str::to_owned).collect(),
            "--skip" => o.skip = val().split(',').map(str::to_owned).collect(),
            "--raw" => o.raw = Some(PathBuf::from(val())),
            "--php" => {
                o.php = match val().as_str() {
                    "auto" => None,
                    v => Some(on_off(v)),
                }
            }
            "--peers-dir" => o.peers_dir = PathBuf::from(val()),
            "--php-lib" => o.php_lib = Some(PathBuf::from(val())),
            "--scale-child" => scale_child = Some(num::<usize>("--scale-child", &val())),
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    if let Some(n) = scale_child {
        let port = o
            .port
            .unwrap_or_else(|| usage("--scale-child needs --port"));
        let a = scale::ScaleArgs {
            locks: n,
            secs: o.scale_secs,
            lease: o.scale_lease,
            pool_size: o.scale_pool_size,
        };
        println!(
            "{}",
            scale::child(&format!("redis://127.0.0.1:{port}/"), &a).line()
        );
        return;
    }
    if let Some(sc) = scenario {
        let ports = match ports {
            Some(ports) => ports,
            None => vec![o.port.unwrap_or_else(|| {
                std::env::var("PEERBENCH_PORT")
                    .ok()
                    .and_then(|p| p.parse().ok())
                    .unwrap_or_else(|| usage("--port (or --ports) is required"))
            })],
        };
        let out = out.unwrap_or_else(|| usage("--out FILE is required with --scenario"));
        let target = target_given.unwrap_or(if sc == Sc::H2 { o.htarget } else { o.target });
        contract(
            &ports,
            &Params {
                sc,
                n: o.n,
                target,
                cap: o.cap,
            },
            &imp,
            auto_renew,
            &out,
        );
        return;
    }
    if let Some(t) = target_given {
        o.target = t;
    }
    standalone::run(&o);
}

/// One scenario under the peers contract: append the record to `out`, one status line to stdout.
/// Several `ports`: the lock over that many independent masters (`redlock://`, or the Redlock
/// floor), the counter on the first, the statistics of all.
fn contract(ports: &[u16], p: &Params, imp: &str, auto_renew: bool, out: &PathBuf) {
    let urls: Vec<String> = ports
        .iter()
        .map(|port| format!("redis://127.0.0.1:{port}/"))
        .collect();
    let (url, others) = (&urls[0], &urls[1..]);
    let rec = match imp {
        "redislock" => {
            let lock_url = if ports.len() > 1 {
                let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
                format!("redlock://{}", addrs.join(","))
            } else {
                url.clone()
            };
            let client = lockers::redislock_client(&lock_url, auto_renew);
            let tag = format!("redislock-{}", if auto_renew { "on" } else { "off" });
            scenario::run_on(url, others, &tag, p, |_| Redislock {
                client: client.clone(),
                auto_renew,
            })
            .record(
                p,
                "redislock",
                &sys::versions(),
                &lockers::variant(auto_renew),
            )
        }
        "floor" if ports.len() > 1 => scenario::run_on(url, others, "redlock-floor", p, |w| {
            RedlockFloor::new(&urls, w)
        })
        .record(
            p,
            "redlock-floor",
            &format!("redis-rs {} (redlock floor)", sys::redis_rs_version()),
            "SET NX PX on every master at once, majority; EVALSHA compare-and-delete on all",
        ),
        _ if ports.len() > 1 => usage("--ports: only --impl redislock or floor"),
        "floor" => scenario::run(url, "floor", p, |w| Floor::new(url, w)).record(
            p,
            "floor",
            &format!("redis-rs {} (floor)", sys::redis_rs_version()),
            "SET NX PX + EVALSHA compare-and-delete",
        ),
        "handoff-floor" => scenario::run(url, "handoff-floor", p, |w| {
            lockers::HandoffFloor::new(url, w)
        })
        .record(
            p,
            "handoff-floor",
            &format!("redis-rs {} (handoff floor)", sys::redis_rs_version()),
            "queue + BLPOP, release hands over",
        ),
        other => usage(&format!(
            "--impl: redislock, floor or handoff-floor, not {other:?}"
        )),
    };
    let mut line = rec.line();
    line.push('\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .and_then(|mut f| f.write_all(line.as_bytes()))
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    let (cycles, wall) = (rec.int("cycles"), rec.int("wall_ns") as f64 / 1e9);
    let extra = if p.sc.contended() {
        format!(" counter={} expected={cycles}", rec.int("final_counter"))
    } else {
        String::new()
    };
    println!(
        "{} {} {} cycles={cycles} wall={wall:.3}s rate={:.0}/s{extra}",
        rec.text("version"),
        rec.text("variant"),
        p.sc.name(),
        cycles as f64 / wall
    );
}
