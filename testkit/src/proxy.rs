//! A fault proxy: a TCP proxy on a loopback port in front of a server, with Toxiproxy's faults
//! switchable while it runs.
//!
//! ```text
//! client ──► 127.0.0.1:<proxy port> ──► 127.0.0.1:<server port>
//!            latency (fixed + jitter), blackhole, reset after N bytes, slow close,
//!            bandwidth, cut every connection
//! ```
//!
//! **Why a proxy of the kit's own and not the `noxious` crate.** `noxious` (1.0.4, a Rust port of
//! Toxiproxy's core) runs on tokio with async traits, futures and a mocking crate; the kit is
//! synchronous, starts no runtime, and is built on two shared cores by every test binary. Its
//! toxics are also driven through Toxiproxy's HTTP-style model (a server process, toxics by name),
//! where the tests want a method call. The faults a lock test needs fit in a few hundred lines of
//! threads and blocking sockets: one accept thread, and two pump threads per connection (one per
//! direction) that poll a shared fault setting every few milliseconds. Dropping the proxy stops
//! and joins them all.
//!
//! **What each fault does.** Latency, bandwidth and reset act on what the server sends (the
//! "downstream" of Toxiproxy, where a reply is late or cut); a blackhole stops both directions.
//! * [`latency`](FaultProxy::latency): every chunk of a reply is held `fixed` + a uniform random
//!   part of `jitter` before it is passed on (chunks keep their order).
//! * [`blackhole`](FaultProxy::blackhole): new connections are accepted and answered by nothing;
//!   established ones stop forwarding both ways. What was sent meanwhile waits in the socket
//!   buffers and is delivered when the blackhole ends (Toxiproxy's `timeout` toxic with a
//!   timeout of 0 does the same), as TCP's retransmissions do when a partition heals: a
//!   command a client gave up on may still run after the heal.
//! * [`reset_after`](FaultProxy::reset_after): every connection (open or new) is reset (RST to
//!   both sides) once `n` more bytes of replies have passed: `n` smaller than a reply cuts it in
//!   the middle.
//! * [`slow_close`](FaultProxy::slow_close): when one side closes, the other learns it only after
//!   the delay.
//! * [`bandwidth`](FaultProxy::bandwidth): replies pass at most at this many bytes per second.
//! * [`cut_all`](FaultProxy::cut_all): resets every connection open now (new ones are accepted).
//! * [`heal`](FaultProxy::heal): removes every fault.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often a pump looks at the fault setting and at the stop flag.
const TICK: Duration = Duration::from_millis(5);
/// The largest chunk a pump reads at once.
const CHUNK: usize = 16 * 1024;
/// The range the proxy's port is chosen from: below the kernel's ephemeral range, so that no
/// client connection takes it, and apart from the servers' ports and their cluster bus ports
/// (`server.rs`, 12000-31999).
const PORTS: std::ops::Range<u16> = 5_000..12_000;

/// The faults in force (all off by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Faults {
    /// Fixed delay of every reply chunk.
    pub latency: Duration,
    /// Upper bound of a uniform random extra delay.
    pub jitter: Duration,
    /// Forward nothing, either way.
    pub blackhole: bool,
    /// Reset each connection after this many more bytes of replies.
    pub reset_after: Option<u64>,
    /// Delay before a close is passed on.
    pub slow_close: Option<Duration>,
    /// Bytes per second of replies.
    pub bandwidth: Option<u64>,
}

/// A TCP proxy on `127.0.0.1:<port>` in front of `upstream` (see the module documentation).
/// Every method takes `&self`: a test can switch faults from any thread while clients use it.
pub struct FaultProxy {
    port: u16,
    upstream: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    faults: Mutex<Setting>,
    stop: AtomicBool,
    conns: Mutex<Vec<Conn>>,
    next_id: AtomicU64,
    accepted: AtomicU64,
}

/// The faults and a generation that changes with every change of them: a connection counts the
/// bytes of a `reset_after` from the change that set it.
struct Setting {
    faults: Faults,
    generation: u64,
    cut: u64,
}

struct Conn {
    id: u64,
    client: TcpStream,
    server: TcpStream,
    pumps: Vec<JoinHandle<()>>,
}

impl FaultProxy {
    /// A proxy in front of the server on `127.0.0.1:upstream_port`, with no fault.
    pub fn start(upstream_port: u16) -> FaultProxy {
        Self::start_to(SocketAddr::from((Ipv4Addr::LOCALHOST, upstream_port)))
    }

    /// A proxy in front of `upstream` (a loopback address), with no fault.
    pub fn start_to(upstream: SocketAddr) -> FaultProxy {
        assert!(
            upstream.ip().is_loopback(),
            "the fault proxy forwards to loopback only, not {upstream}"
        );
        let (listener, port) = bind_low_port();
        listener
            .set_nonblocking(true)
            .expect("cannot make the proxy's listener non-blocking");
        let shared = Arc::new(Shared {
            faults: Mutex::new(Setting {
                faults: Faults::default(),
                generation: 0,
                cut: 0,
            }),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
            next_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("fault-proxy-{port}"))
                .spawn(move || accept_loop(listener, upstream, shared))
                .expect("cannot start the proxy's accept thread")
        };
        FaultProxy {
            port,
            upstream,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// The proxy's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:PORT` of the proxy.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `redis://127.0.0.1:PORT/` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The server the proxy forwards to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// The faults in force.
    pub fn faults(&self) -> Faults {
        self.setting().faults.clone()
    }

    /// Replaces every fault with `faults`.
    pub fn set(&self, faults: Faults) {
        let mut s = self.setting();
        s.faults = faults;
        s.generation += 1;
    }

    /// Removes every fault (a blackhole's held data then flows).
    pub fn heal(&self) {
        self.set(Faults::default());
    }

    /// Every reply chunk is held `fixed` + up to `jitter` (uniform) before it is passed on.
    pub fn latency(&self, fixed: Duration, jitter: Duration) {
        self.change(|f| {
            f.latency = fixed;
            f.jitter = jitter;
        });
    }

    /// Starts (`true`) or ends a blackhole: accept, forward nothing either way.
    pub fn blackhole(&self, on: bool) {
        self.change(|f| f.blackhole = on);
    }

    /// Resets every connection once `n` more bytes of replies have passed (`None`: off).
    pub fn reset_after(&self, n: Option<u64>) {
        self.change(|f| f.reset_after = n);
    }

    /// Passes a close on only after `delay` (`None`: at once).
    pub fn slow_close(&self, delay: Option<Duration>) {
        self.change(|f| f.slow_close = delay);
    }

    /// Replies pass at most at `bytes_per_second` (`None`: no limit).
    pub fn bandwidth(&self, bytes_per_second: Option<u64>) {
        assert!(
            bytes_per_second != Some(0),
            "a bandwidth of 0: use blackhole"
        );
        self.change(|f| f.bandwidth = bytes_per_second);
    }

    /// Resets (RST) every connection open now; new ones are accepted as before.
    pub fn cut_all(&self) {
        self.setting().cut += 1;
        for conn in self.shared.lock_conns().iter() {
            reset(&conn.client);
            reset(&conn.server);
        }
    }

    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.shared.lock_conns().len()
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    fn change(&self, f: impl FnOnce(&mut Faults)) {
        let mut s = self.setting();
        f(&mut s.faults);
        s.generation += 1;
    }

    fn setting(&self) -> MutexGuard<'_, Setting> {
        self.shared.setting()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let conns = std::mem::take(&mut *self.shared.lock_conns());
        for conn in conns {
            let _ = conn.client.shutdown(Shutdown::Both);
            let _ = conn.server.shutdown(Shutdown::Both);
            for pump in conn.pumps {
                let _ = pump.join();
            }
        }
    }
}

impl Shared {
    fn setting(&self) -> MutexGuard<'_, Setting> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_conns(&self) -> MutexGuard<'_, Vec<Conn>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Forgets connection `id` once both of its pumps have ended (the last one out removes it).
    fn pump_ended(&self, id: u64, remaining: &AtomicU64) {
        if remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
            let mut conns = self.lock_conns();
            if let Some(i) = conns.iter().position(|c| c.id == id) {
                // The pumps are ending: their handles are dropped (detached) here, as they have
                // nothing left to do but return.
                conns.swap_remove(i);
            }
        }
    }
}

fn bind_low_port() -> (TcpListener, u16) {
    let mut seed = seed();
    for _ in 0..200 {
        let port =
            PORTS.start + (next_random(&mut seed) % u64::from(PORTS.end - PORTS.start)) as u16;
        if let Ok(l) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            return (l, port);
        }
    }
    panic!("the fault proxy found no free port in {PORTS:?} in 200 tries");
}

fn accept_loop(listener: TcpListener, upstream: SocketAddr, shared: Arc<Shared>) {
    while !shared.stopping() {
        match listener.accept() {
            Ok((client, _)) => {
                shared.accepted.fetch_add(1, Ordering::Relaxed);
                if let Err(e) = open(client, upstream, &shared) {
                    eprintln!("fault proxy: cannot reach {upstream}: {e}");
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => thread::sleep(TICK),
            Err(_) => thread::sleep(TICK),
        }
    }
}

/// Connects to the server for `client` and starts the connection's two pumps.
fn open(client: TcpStream, upstream: SocketAddr, shared: &Arc<Shared>) -> io::Result<()> {
    client.set_nonblocking(false)?;
    let server = match TcpStream::connect_timeout(&upstream, Duration::from_secs(1)) {
        Ok(s) => s,
        Err(e) => {
            // As a refused server would: the client sees its connection reset.
            reset(&client);
            return Err(e);
        }
    };
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(TICK))?;
        s.set_write_timeout(Some(TICK))?;
    }
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let remaining = Arc::new(AtomicU64::new(2));
    let mut conns = shared.lock_conns();
    let mut pumps = Vec::with_capacity(2);
    for downstream in [false, true] {
        let (from, to) = if downstream {
            (server.try_clone()?, client.try_clone()?)
        } else {
            (client.try_clone()?, server.try_clone()?)
        };
        let shared = Arc::clone(shared);
        let remaining = Arc::clone(&remaining);
        let name = format!(
            "fault-proxy-{id}-{}",
            if downstream { "down" } else { "up" }
        );
        pumps.push(
            thread::Builder::new()
                .name(name)
                .spawn(move || {
                    Pump {
                        from,
                        to,
                        downstream,
                        shared: &shared,
                    }
                    .run();
                    shared.pump_ended(id, &remaining);
                })
                .expect("cannot start a proxy pump thread"),
        );
    }
    conns.push(Conn {
        id,
        client,
        server,
        pumps,
    });
    Ok(())
}

/// One direction of one connection.
struct Pump<'a> {
    from: TcpStream,
    to: TcpStream,
    /// Server to client (where latency, bandwidth and reset apply).
    downstream: bool,
    shared: &'a Shared,
}

impl Pump<'_> {
    fn run(self) {
        let mut seed = seed() ^ self.from.as_raw_fd() as u64;
        let mut buf = vec![0u8; CHUNK];
        // Chunks read and not yet written, with the time each may be written.
        let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
        // When the link is next free (bandwidth).
        let mut link_free = Instant::now();
        let (mut generation, cut) = {
            let s = self.shared.setting();
            (s.generation, s.cut)
        };
        let mut passed_since_change: u64 = 0;
        let mut eof_at: Option<Instant> = None;
        while !self.shared.stopping() {
            let (faults, now_generation, now_cut) = {
                let s = self.shared.setting();
                (s.faults.clone(), s.generation, s.cut)
            };
            if now_cut != cut {
                return self.reset_both();
            }
            if now_generation != generation {
                generation = now_generation;
                passed_since_change = 0;
            }
            if faults.blackhole {
                thread::sleep(TICK);
                continue;
            }
            // Write what is due.
            let now = Instant::now();
            while queue.front().is_some_and(|(due, _)| *due <= now) {
                let (_, mut chunk) = queue.pop_front().unwrap();
                if self.downstream
                    && let Some(limit) = faults.reset_after
                {
                    let allowed = limit.saturating_sub(passed_since_change) as usize;
                    if !chunk.is_empty() && chunk.len() >= allowed {
                        chunk.truncate(allowed);
                        let _ = self.write_all(&chunk);
                        return self.reset_both();
                    }
                }
                if self.write_all(&chunk).is_err() {
                    return self.close_both();
                }
                passed_since_change += chunk.len() as u64;
            }
            if let Some(at) = eof_at {
                if queue.is_empty() {
                    let delay = faults.slow_close.unwrap_or(Duration::ZERO);
                    if Instant::now() >= at + delay {
                        let _ = self.to.shutdown(Shutdown::Write);
                        return;
                    }
                }
                thread::sleep(TICK);
                continue;
            }
            // Read more (the read timeout is the tick).
            match (&self.from).read(&mut buf) {
                Ok(0) => eof_at = Some(Instant::now()),
                Ok(n) => {
                    // The setting as it is now, not as it was when the read began.
                    let faults = self.shared.setting().faults.clone();
                    let now = Instant::now();
                    let mut due = now;
                    if self.downstream {
                        due += faults.latency + random_upto(&mut seed, faults.jitter);
                        if let Some(rate) = faults.bandwidth {
                            let start = link_free.max(now);
                            link_free = start + Duration::from_secs_f64(n as f64 / rate as f64);
                            due = due.max(link_free);
                        }
                    }
                    // Never before an earlier chunk: the stream keeps its order.
                    if let Some((last, _)) = queue.back() {
                        due = due.max(*last);
                    }
                    queue.push_back((due, buf[..n].to_vec()));
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.reset_both(),
            }
        }
    }

    /// Writes `data`, retrying on the write timeout while the proxy runs.
    fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            if self.shared.stopping() {
                return Err(io::Error::other("proxy stopping"));
            }
            match (&self.to).write(data) {
                Ok(0) => return Err(io::Error::from(ErrorKind::WriteZero)),
                Ok(n) => data = &data[n..],
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn reset_both(&self) {
        reset(&self.from);
        reset(&self.to);
    }

    fn close_both(&self) {
        let _ = self.from.shutdown(Shutdown::Both);
        let _ = self.to.shutdown(Shutdown::Both);
    }
}

/// Closes `stream` with a reset (RST) instead of an orderly close: SO_LINGER with a zero
/// timeout, then shutdown (the other clones of the socket see it ended too).
fn reset(stream: &TcpStream) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt(2) on a descriptor that `stream` owns and keeps open for the call, with
    // a pointer to a live `linger` of the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    let _ = stream.shutdown(Shutdown::Both);
}

fn seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    (nanos ^ 0x9E37_79B9_7F4A_7C15) | 1
}

/// xorshift64: enough for jitter and port choice.
fn next_random(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

fn random_upto(seed: &mut u64, max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    let nanos = max.as_nanos().min(u128::from(u64::MAX)) as u64;
    Duration::from_nanos(next_random(seed) % (nanos + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RedisServer;

    fn ping(con: &mut redis::Connection) -> redis::RedisResult<String> {
        redis::cmd("PING").query(con)
    }

    fn conn(proxy: &FaultProxy, timeout: Duration) -> redis::Connection {
        let client = redis::Client::open(proxy.url()).unwrap();
        let con = client.get_connection_with_timeout(timeout).unwrap();
        con.set_read_timeout(Some(timeout)).unwrap();
        con.set_write_timeout(Some(timeout)).unwrap();
        con
    }

    #[test]
    fn forwards_and_adds_latency_then_heals() {
        let srv = RedisServer::start();
        let proxy = FaultProxy::start(srv.port());
        let mut con = conn(&proxy, Duration::from_secs(2));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        proxy.latency(Duration::from_millis(200), Duration::from_millis(50));
        let t = Instant::now();
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        let took = t.elapsed();
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_millis(1000),
            "{took:?}"
        );
        proxy.heal();
        let t = Instant::now();
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        assert!(
            t.elapsed() < Duration::from_millis(150),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn blackhole_holds_then_delivers() {
        let srv = RedisServer::start();
        let proxy = FaultProxy::start(srv.port());
        let mut con = conn(&proxy, Duration::from_millis(300));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        proxy.blackhole(true);
        let e = ping(&mut con).unwrap_err();
        assert!(e.is_timeout(), "{e}");
        // A new connection is accepted but answered by nothing.
        let mut raw = TcpStream::connect(proxy.addr()).expect("the blackhole accepts");
        raw.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        raw.write_all(b"PING\r\n").unwrap();
        let mut reply = [0u8; 16];
        let e = raw.read(&mut reply).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
            "{e}"
        );
        proxy.heal();
        let mut con = conn(&proxy, Duration::from_secs(2));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
    }

    #[test]
    fn reset_after_cuts_a_reply_and_cut_all_resets() {
        let srv = RedisServer::start();
        let proxy = FaultProxy::start(srv.port());
        let mut con = conn(&proxy, Duration::from_secs(2));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        proxy.reset_after(Some(3));
        let e = ping(&mut con).unwrap_err();
        println!("mid-reply reset: {e}");
        proxy.heal();
        let mut con = conn(&proxy, Duration::from_secs(2));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        assert!(crate::eventually(Duration::from_secs(2), || proxy
            .connections()
            == 1));
        proxy.cut_all();
        assert!(ping(&mut con).is_err());
        assert!(crate::eventually(Duration::from_secs(2), || proxy
            .connections()
            == 0));
    }

    #[test]
    fn bandwidth_slows_a_large_reply() {
        let srv = RedisServer::start();
        let proxy = FaultProxy::start(srv.port());
        let mut con = conn(&proxy, Duration::from_secs(5));
        let value = "x".repeat(100_000);
        let () = redis::cmd("SET")
            .arg("big")
            .arg(&value)
            .query(&mut con)
            .unwrap();
        proxy.bandwidth(Some(200_000));
        let t = Instant::now();
        let got: String = redis::cmd("GET").arg("big").query(&mut con).unwrap();
        assert_eq!(got.len(), value.len());
        assert!(
            t.elapsed() >= Duration::from_millis(400),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn slow_close_delays_the_close_and_drop_ends_the_threads() {
        let srv = RedisServer::start();
        let proxy = FaultProxy::start(srv.port());
        proxy.slow_close(Some(Duration::from_millis(300)));
        let mut con = conn(&proxy, Duration::from_secs(2));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        let t = Instant::now();
        let _: redis::RedisResult<()> = redis::cmd("QUIT").query(&mut con);
        drop(con);
        assert!(crate::eventually(Duration::from_secs(3), || proxy
            .connections()
            == 0));
        assert!(
            t.elapsed() >= Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
        let mut con = conn(&proxy, Duration::from_secs(2));
        assert_eq!(ping(&mut con).unwrap(), "PONG");
        let before = threads();
        drop(proxy);
        assert!(
            threads() + 2 <= before,
            "the proxy's threads did not end ({before} before the drop, {} after)",
            threads()
        );
        assert!(ping(&mut con).is_err());
    }

    fn threads() -> usize {
        std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
    }
}
