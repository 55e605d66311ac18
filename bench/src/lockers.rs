//! The lock implementations the scenarios run: the floors (redis-rs, no library) and redislock
//! through its public API, plus the u1 per-cycle interleaving of the standalone run.

use std::thread;
use std::time::{Duration, Instant};

use redislock::Client;

use crate::scenario::{LEASE, LONG_WAIT, Locker};
use crate::sys::{Rng, connect};

/// The two-round-trip floor: redis-rs on one connection, `SET key token NX PX 10000` (1 ms
/// sleep after a refusal, as the peers' floors) and release by EVALSHA of a compare-and-delete
/// script loaded once.
pub struct Floor {
    con: redis::Connection,
    sha: String,
    rng: Rng,
}

const COMPARE_AND_DELETE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

impl Floor {
    pub fn new(url: &str, wid: usize) -> Floor {
        let mut con = connect(url);
        let sha = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(COMPARE_AND_DELETE)
            .query(&mut con)
            .expect("SCRIPT LOAD");
        Floor {
            con,
            sha,
            rng: Rng::new(wid as u64),
        }
    }
}

impl Locker for Floor {
    type Guard = (String, String);
    fn acquire(&mut self, key: &str) -> (String, String) {
        // 32 hex characters, like the library's 128-bit token (same bytes on the wire).
        let token = format!("{:016x}{:016x}", self.rng.next(), self.rng.next());
        loop {
            let ok: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(LEASE.as_millis() as u64)
                .query(&mut self.con)
                .expect("floor SET");
            if ok.is_some() {
                return (key.to_owned(), token);
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
    fn release(&mut self, (key, token): (String, String)) {
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&self.sha)
            .arg(1)
            .arg(key)
            .arg(token)
            .query(&mut self.con)
            .expect("floor EVALSHA");
    }
}

/// The Redlock floor (the peers' `rust_redlock-floor`): the least a quorum lock over K
/// independent masters can do, with redis-rs and no library. One connection per master;
/// acquire writes `SET key token NX PX 10000` to all K, then reads the K replies (all in flight
/// at once); it holds the lock when a majority said OK within the lease less the time taken and
/// a 1 % drift allowance, else it compare-and-deletes where it got OK, sleeps 1 ms and retries.
/// Release writes the compare-and-delete (EVALSHA) to all K, then reads the K replies.
pub struct RedlockFloor {
    cons: Vec<redis::Connection>,
    sha: String,
    rng: Rng,
}

impl RedlockFloor {
    /// `urls`: one `redis://` URL per master.
    pub fn new(urls: &[String], wid: usize) -> RedlockFloor {
        let mut sha = String::new();
        let cons = urls
            .iter()
            .map(|url| {
                let mut con = connect(url);
                sha = redis::cmd("SCRIPT")
                    .arg("LOAD")
                    .arg(COMPARE_AND_DELETE)
                    .query(&mut con)
                    .expect("SCRIPT LOAD");
                con
            })
            .collect();
        RedlockFloor {
            cons,
            sha,
            rng: Rng::new(wid as u64 + 7),
        }
    }

    /// Sends `cmd` to the masters `to` says, then reads their replies: whether each said OK.
    fn all(&mut self, cmd: &redis::Cmd, to: &[bool]) -> Vec<bool> {
        let packed = cmd.get_packed_command();
        for (con, _) in self.cons.iter_mut().zip(to).filter(|(_, t)| **t) {
            con.send_packed_command(&packed)
                .expect("redlock floor send");
        }
        self.cons
            .iter_mut()
            .zip(to)
            .map(|(con, t)| {
                *t && matches!(
                    con.recv_response().expect("redlock floor reply"),
                    redis::Value::Okay | redis::Value::Int(1)
                )
            })
            .collect()
    }

    fn delete(&mut self, key: &str, token: &str, on: &[bool]) {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(&self.sha).arg(1).arg(key).arg(token);
        self.all(&cmd, on);
    }
}

impl Locker for RedlockFloor {
    type Guard = (String, String);
    fn acquire(&mut self, key: &str) -> (String, String) {
        let token = format!("{:016x}{:016x}", self.rng.next(), self.rng.next());
        let every = vec![true; self.cons.len()];
        let quorum = self.cons.len() / 2 + 1;
        let mut set = redis::cmd("SET");
        set.arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(LEASE.as_millis() as u64);
        loop {
            let t = Instant::now();
            let granted = self.all(&set, &every);
            let n = granted.iter().filter(|g| **g).count();
            if n >= quorum && t.elapsed() < LEASE - LEASE / 100 {
                return (key.to_owned(), token);
            }
            if n > 0 {
                self.delete(key, &token, &granted);
            }
            thread::sleep(Duration::from_millis(1));
        }
    }
    fn release(&mut self, (key, token): (String, String)) {
        let every = vec![true; self.cons.len()];
        self.delete(&key, &token, &every);
    }
}

/// The floor of a waking handoff (c8, h2): the least a queue + BLPOP lock can do, with redis-rs
/// on one connection and no library. Acquire is one script, "SET NX PX, else queue my token";
/// a queued waiter blocks in BLPOP on its own signal list. Release is one script that gives the
/// key to the oldest queued token and pushes onto that waiter's list, or deletes the key. So a
/// handoff costs: release request → script → BLPOP reply → waiter's thread wakes.
pub struct HandoffFloor {
    con: redis::Connection,
    enqueue: String,
    release: String,
    rng: Rng,
}

const HF_ENQUEUE: &str =
    "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
redis.call('RPUSH', KEYS[2], ARGV[1])
return 0";
const HF_RELEASE: &str = "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local w = redis.call('LPOP', KEYS[2])
if w then
  redis.call('SET', KEYS[1], w, 'PX', ARGV[2])
  redis.call('RPUSH', KEYS[1] .. ':s:' .. w, 1)
else
  redis.call('DEL', KEYS[1])
end
return 1";

impl HandoffFloor {
    pub fn new(url: &str, wid: usize) -> HandoffFloor {
        let mut con = connect(url);
        let mut load = |src: &str| -> String {
            redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(src)
                .query(&mut con)
                .expect("SCRIPT LOAD")
        };
        let (enqueue, release) = (load(HF_ENQUEUE), load(HF_RELEASE));
        HandoffFloor {
            con,
            enqueue,
            release,
            rng: Rng::new(wid as u64 + 99),
        }
    }
}

impl Locker for HandoffFloor {
    type Guard = (String, String);
    fn acquire(&mut self, key: &str) -> (String, String) {
        let token = format!("{:016x}{:016x}", self.rng.next(), self.rng.next());
        let ms = LEASE.as_millis() as u64;
        let got: i64 = redis::cmd("EVALSHA")
            .arg(&self.enqueue)
            .arg(2)
            .arg(key)
            .arg(format!("{key}:q"))
            .arg(&token)
            .arg(ms)
            .query(&mut self.con)
            .expect("handoff floor enqueue");
        if got == 0 {
            let signal = format!("{key}:s:{token}");
            loop {
                let popped: Option<(String, i64)> = redis::cmd("BLPOP")
                    .arg(&signal)
                    .arg(1)
                    .query(&mut self.con)
                    .expect("handoff floor BLPOP");
                if popped.is_some() {
                    break;
                }
            }
        }
        (key.to_owned(), token)
    }
    fn release(&mut self, (key, token): (String, String)) {
        let _: i64 = redis::cmd("EVALSHA")
            .arg(&self.release)
            .arg(2)
            .arg(&key)
            .arg(format!("{key}:q"))
            .arg(token)
            .arg(LEASE.as_millis() as u64)
            .query(&mut self.con)
            .expect("handoff floor release");
    }
}

/// redislock through its public API: `client.lock(name).lease(10 s).auto_renew(b).acquire(..)`
/// then `Lock::release`; one `Client` shared by all workers.
pub struct Redislock {
    pub client: Client,
    pub auto_renew: bool,
}

impl Locker for Redislock {
    type Guard = redislock::Lock;
    fn acquire(&mut self, key: &str) -> redislock::Lock {
        loop {
            match self
                .client
                .lock(key.as_bytes())
                .lease(LEASE)
                .auto_renew(self.auto_renew)
                .acquire(LONG_WAIT)
            {
                Ok(lock) => return lock,
                Err(e) if e.is_wait_timeout() => continue,
                Err(e) => panic!("redislock acquire {key}: {e}"),
            }
        }
    }
    fn release(&mut self, lock: redislock::Lock) {
        if let Err(e) = lock.release() {
            panic!("redislock release: {e}");
        }
    }
}

pub fn redislock_client(url: &str, auto_renew: bool) -> Client {
    Client::builder(url)
        .lease(LEASE)
        .auto_renew(auto_renew)
        .build()
        .expect("client")
}

pub fn variant(auto_renew: bool) -> String {
    format!(
        "lease=10s auto_renew={}",
        if auto_renew { "on" } else { "off" }
    )
}

/// u1 with the floor and redislock (fixed lease, auto-renewal) interleaved cycle by cycle on
/// one thread, the order rotating every cycle: each of them meets the same machine load, so
/// the ratios hold up on a busy machine better than those of separate runs. Not a contract
/// scenario (no record); `n` timed cycles each, after 200 warm-up cycles each.
pub fn u1_per_cycle(url: &str, n: usize) -> [Vec<u64>; 3] {
    let mut out = per_cycle(
        vec![
            timed("pb:u:rust:mixed:floor", Floor::new(url, 0)),
            timed(
                "pb:u:rust:mixed:off",
                Redislock {
                    client: redislock_client(url, false),
                    auto_renew: false,
                },
            ),
            timed(
                "pb:u:rust:mixed:on",
                Redislock {
                    client: redislock_client(url, true),
                    auto_renew: true,
                },
            ),
        ],
        n,
    )
    .into_iter();
    std::array::from_fn(|_| out.next().unwrap_or_default())
}

/// One configuration of a per-cycle interleaving: one acquire + release on its own key, timed
/// in ns.
pub type TimedCycle<'a> = Box<dyn FnMut() -> u64 + 'a>;

/// A [`TimedCycle`] of `locker` on `key`.
pub fn timed<'a, L: Locker + 'a>(key: &'a str, mut locker: L) -> TimedCycle<'a> {
    Box::new(move || {
        let s = Instant::now();
        let g = locker.acquire(key);
        locker.release(g);
        s.elapsed().as_nanos() as u64
    })
}

/// Runs the configurations interleaved cycle by cycle on this thread, the order rotating every
/// cycle; returns `n` timed cycles of each (after 200 warm-up cycles each), in ns.
pub fn per_cycle(mut configs: Vec<TimedCycle<'_>>, n: usize) -> Vec<Vec<u64>> {
    let k = configs.len();
    let mut out = vec![Vec::with_capacity(n); k];
    for i in 0..200 + n {
        for j in 0..k {
            let which = (i + j) % k;
            let d = configs[which]();
            if i >= 200 {
                out[which].push(d);
            }
        }
    }
    out
}
