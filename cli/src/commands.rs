//! The commands for scripts that cannot wrap a command (`acquire`, `extend`, `release`) and
//! `status`. An owner token is never taken from the command line, which `ps` shows: it comes
//! from `REDISLOCK_OWNER_TOKEN` or standard input.

use std::io::{self, BufRead, IsTerminal, Write};
use std::time::Duration;

use redislock::{HeldAs, LeaderInfo, LockInfo};

use crate::args::{AcquireArgs, Connection, ExtendArgs, LeaderArgs, ReleaseArgs, StatusArgs};
use crate::connect;
use crate::exit::{self, Failure};
use crate::run::acquire as acquire_waiting;

/// The environment variable that holds an owner token.
pub const TOKEN_ENV: &str = "REDISLOCK_OWNER_TOKEN";

/// `redislock acquire`: prints the owner token of a lock held with a fixed lease.
pub fn acquire(conn: &Connection, a: AcquireArgs) -> Result<u8, Failure> {
    let client = connect::client(conn, a.lease, false)?;
    let request = client.lock(&a.name);
    let lock = acquire_waiting(&a.wait, |w| match w {
        Some(w) => request.acquire(w),
        None => request.try_acquire(),
    })?;
    let token = lock.detach()?;
    println!("{token}");
    Ok(0)
}

/// `redislock extend`: the lease of a lock held with the token reset to the given one.
pub fn extend(conn: &Connection, a: ExtendArgs) -> Result<u8, Failure> {
    let token = owner_token()?;
    let client = connect::client(conn, a.lease, false)?;
    // The restore resets the lease to the request's; detach leaves the lock held.
    let lock = client
        .lock(&a.name)
        .restore(&token)
        .map_err(not_held(&a.name))?;
    lock.detach()?;
    Ok(0)
}

/// `redislock release`.
pub fn release(conn: &Connection, a: ReleaseArgs) -> Result<u8, Failure> {
    let token = owner_token()?;
    let client = connect::client(conn, Duration::from_secs(30), false)?;
    let lock = client
        .lock(&a.name)
        .restore(&token)
        .map_err(not_held(&a.name))?;
    lock.release().map_err(not_held(&a.name))?;
    Ok(0)
}

/// `redislock status`: exit 0 when held, 1 when free.
pub fn status(conn: &Connection, a: StatusArgs) -> Result<u8, Failure> {
    let client = connect::client(conn, Duration::from_secs(30), false)?;
    let info = client.inspect(&a.name, a.kind)?;
    let text = if a.json {
        json(&a.name, &info)
    } else {
        lines(&a.name, &info)
    };
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    Ok(if info.held { 0 } else { 1 })
}

/// How long one wait of `leader --watch` for a change lasts before it waits again.
const WATCH_ROUND: Duration = Duration::from_secs(60);

/// `redislock leader`: who leads the election (exit 0), or nobody (exit 1); with `--watch`,
/// then each change, until interrupted (woken by the election's channel, not by polling).
pub fn leader(conn: &Connection, a: LeaderArgs) -> Result<u8, Failure> {
    let client = connect::client(conn, Duration::from_secs(30), false)?;
    let mut now = client.leader_info(&a.name)?;
    let show = |info: &Option<LeaderInfo>| {
        let text = if a.json {
            leader_json(&a.name, info)
        } else {
            leader_lines(&a.name, info)
        };
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    if !a.watch {
        let _ = show(&now);
        return Ok(if now.is_some() { 0 } else { 1 });
    }
    loop {
        if show(&now).is_err() {
            // Standard output closed (a pipe's reader ended): nothing more to watch for.
            return Ok(0);
        }
        let since = now.as_ref().map(|l| l.epoch);
        now = loop {
            match client.wait_for_leader_change(&a.name, since, WATCH_ROUND) {
                Err(e) if e.is_wait_timeout() => continue,
                other => break other?,
            }
        };
    }
}

fn leader_lines(name: &str, info: &Option<LeaderInfo>) -> String {
    match info {
        None => format!("election: {name}\nleader: none\n"),
        Some(l) => format!(
            "election: {name}\nleader: {}\nepoch: {}\nremaining lease: {:.3}s\n",
            l.identity,
            l.epoch,
            l.remaining.as_secs_f64()
        ),
    }
}

fn leader_json(name: &str, info: &Option<LeaderInfo>) -> String {
    match info {
        None => format!(
            "{{\"election\":{},\"leader\":null,\"epoch\":null,\"remaining_ms\":null}}\n",
            json_string(name)
        ),
        Some(l) => format!(
            "{{\"election\":{},\"leader\":{},\"epoch\":{},\"remaining_ms\":{}}}\n",
            json_string(name),
            json_string(&l.identity),
            l.epoch,
            l.remaining.as_millis()
        ),
    }
}

fn held_as(h: Option<HeldAs>) -> &'static str {
    h.map_or("free", HeldAs::name)
}

fn lines(name: &str, i: &LockInfo) -> String {
    let mut s = format!("name: {name}\n");
    if i.held {
        s += &format!(
            "held: yes ({})\nholders: {}\n",
            held_as(i.held_as),
            i.holders
        );
    } else {
        s += "held: no\n";
    }
    if let Some(n) = i.permits {
        s += &format!("permits: {} of {n} held\n", i.permits_held);
    }
    if let Some(r) = i.remaining {
        s += &format!("remaining lease: {:.3}s\n", r.as_secs_f64());
    }
    match i.waiters {
        Some(n) => s += &format!("waiters: {n}\n"),
        None => s += "waiters: unknown (each Redlock master keeps a queue of its own)\n",
    }
    if let Some(f) = i.fencing_counter {
        s += &format!("fencing counter: {f}\n");
    }
    s
}

fn json(name: &str, i: &LockInfo) -> String {
    let opt = |v: Option<u64>| v.map_or("null".to_owned(), |v| v.to_string());
    format!(
        "{{\"name\":{},\"held\":{},\"held_as\":{},\"holders\":{},\"permits_held\":{},\
         \"permits\":{},\"remaining_ms\":{},\"waiters\":{},\"fencing_counter\":{}}}\n",
        json_string(name),
        i.held,
        if i.held {
            format!("\"{}\"", held_as(i.held_as))
        } else {
            "null".into()
        },
        i.holders,
        i.permits_held,
        opt(i.permits.map(u64::from)),
        opt(i.remaining.map(|r| r.as_millis() as u64)),
        opt(i.waiters.map(u64::from)),
        opt(i.fencing_counter),
    )
}

fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            c if (c as u32) < 0x20 => out += &format!("\\u{:04x}", c as u32),
            c => out.push(c),
        }
    }
    out + "\""
}

/// The owner token from the environment, else the first line of standard input (not from a
/// terminal: it would wait for typing without saying so).
fn owner_token() -> Result<String, Failure> {
    if let Ok(t) = std::env::var(TOKEN_ENV)
        && !t.trim().is_empty()
    {
        return Ok(t.trim().to_owned());
    }
    let missing = || {
        Failure::new(
            exit::USAGE,
            format!(
                "no owner token: set {TOKEN_ENV} or pipe it to standard input \
                 (never on the command line)"
            ),
        )
    };
    let stdin = io::stdin();
    if stdin.is_terminal() {
        return Err(missing());
    }
    let mut line = String::new();
    stdin.lock().read_line(&mut line).map_err(|_| missing())?;
    let t = line.trim();
    if t.is_empty() {
        return Err(missing());
    }
    Ok(t.to_owned())
}

fn not_held(name: &str) -> impl Fn(redislock::Error) -> Failure + '_ {
    move |e| {
        if e.is_not_held() {
            Failure::new(
                exit::LOST,
                format!(
                    "lock {name:?} is not held with this owner token (expired, released or taken over)"
                ),
            )
        } else {
            e.into()
        }
    }
}
