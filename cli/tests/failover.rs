//! `redislock run` through a Sentinel failover, as a cron-like load runs it: the master is killed
//! (SIGKILL, once its replicas have the lock) while a command holds the lock; the holder's
//! release rides the failover out, the waiters queued at the kill (one without a bound, one
//! with `--wait 10s`) run their commands, and so does the next `--no-wait` run, all within 3 s of
//! the promotion (not at the end of the 30 s lease).

use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use redislock_testkit::{SentinelGroup, eventually, llen, unique_name};

/// How soon after the promotion the commands must run.
const WITHIN: Duration = Duration::from_secs(3);

fn redislock(url: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_redislock"));
    c.env("REDIS_URL", url)
        .env_remove("REDISLOCK_PASSWORD")
        .env_remove("REDISLOCK_OWNER_TOKEN")
        .args(["--timeout", "500ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    c
}

/// Waits for `child` to end within `limit`; its exit code and when it ended.
fn ended(child: &mut Child, limit: Duration) -> (i32, Instant) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status.code().unwrap_or(-1), Instant::now());
        }
        assert!(
            Instant::now() < deadline,
            "redislock still runs after {limit:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn run_rides_out_a_sentinel_failover() {
    let group = SentinelGroup::start();
    let url = group.url();
    let name = unique_name("cli-failover");
    let dir = std::env::temp_dir().join(unique_name("cli-failover"));
    std::fs::create_dir_all(&dir).unwrap();
    let started = dir.join("started");
    let mut holder = redislock(&url)
        .args(["run", &name, "--", "sh", "-c"])
        .arg(format!("touch {}; sleep 1", started.display()))
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || started.exists()),
        "the holder never ran"
    );
    let mut waiters: Vec<Child> = [None, Some("10s")]
        .into_iter()
        .map(|wait| {
            let mut c = redislock(&url);
            c.arg("run");
            if let Some(w) = wait {
                c.args(["--wait", w]);
            }
            c.args([&name, "--", "true"]).spawn().unwrap()
        })
        .collect();
    let master = group.master();
    let mut con = master.conn();
    let queue = format!("{{{name}}}:q");
    assert!(
        eventually(Duration::from_secs(5), || llen(&mut con, &queue) == 2),
        "the waiters never queued"
    );
    // Everything written so far is on both replicas before the kill.
    let _: () = redis::cmd("SET")
        .arg(format!("{{{name}}}:synced"))
        .arg(1)
        .query(&mut con)
        .unwrap();
    let acked: u32 = redis::cmd("WAIT").arg(2).arg(5000).query(&mut con).unwrap();
    assert_eq!(acked, 2);
    let old = master.port();
    master.kill();
    let killed = Instant::now();

    // The cron load: `run --no-wait` every 100 ms until one runs its command.
    let cron = {
        let (url, name) = (url.clone(), name.clone());
        thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(40);
            while Instant::now() < deadline {
                let status = redislock(&url)
                    .args(["run", "--no-wait", &name, "--", "true"])
                    .stderr(Stdio::null())
                    .status()
                    .unwrap();
                if status.success() {
                    return Some(Instant::now());
                }
                thread::sleep(Duration::from_millis(100));
            }
            None
        })
    };
    group
        .wait_for_failover(old, Duration::from_secs(30))
        .expect("the sentinels promoted no replica");
    let promoted = Instant::now();
    println!("promoted {:?} after the kill", promoted - killed);

    let (code, _) = ended(&mut holder, Duration::from_secs(15));
    assert_eq!(code, 0, "the holder exits with its command's status");
    for (i, w) in waiters.iter_mut().enumerate() {
        let (code, at) = ended(w, Duration::from_secs(15));
        let after = at.saturating_duration_since(promoted);
        println!("waiter {i} ran {after:?} after the promotion");
        assert_eq!(code, 0, "waiter {i}");
        assert!(
            after <= WITHIN,
            "waiter {i} ran {after:?} after the promotion"
        );
    }
    let first = cron
        .join()
        .unwrap()
        .expect("no --no-wait run succeeded in 40 s");
    let after = first.saturating_duration_since(promoted);
    println!("the first --no-wait run after the kill ran {after:?} after the promotion");
    assert!(after <= WITHIN, "ran {after:?} after the promotion");
    let _ = std::fs::remove_dir_all(&dir);
}
