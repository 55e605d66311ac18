//! The Redis server the standalone run measures against: a private one started by the test kit
//! (`redislock-testkit`: a free loopback port, no persistence, a temp directory, killed when the
//! program ends or dies), or an existing one given with `--port`.

use redislock_testkit::RedisServer;

use crate::report::RedisCpu;
use crate::sys::{connect, info, info_field};

pub struct Server {
    pub port: u16,
    /// The server's pid when its /proc entry is visible (for its CPU time).
    pub pid: Option<u32>,
    pub version: String,
    /// The server the test kit started (None with `--port`); dropping it stops the server.
    _own: Option<RedisServer>,
}

impl Server {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts a private redis-server through the test kit (`$REDISLOCK_TEST_REDIS_SERVER` or
    /// `redis-server` from `PATH`).
    pub fn start() -> Server {
        let own = RedisServer::start();
        let mut s = Server {
            port: own.port(),
            pid: Some(own.pid()),
            version: String::new(),
            _own: Some(own),
        };
        s.version = s.read_version();
        s
    }

    /// An existing server on 127.0.0.1:`port`.
    pub fn external(port: u16) -> Server {
        let mut s = Server {
            port,
            pid: None,
            version: String::new(),
            _own: None,
        };
        let raw = info(&mut connect(&s.url()), "server");
        s.pid = info_field(&raw, "process_id")
            .and_then(|p| p.parse().ok())
            .filter(|p| std::path::Path::new(&format!("/proc/{p}/stat")).exists());
        s.version = s.read_version();
        s
    }

    fn read_version(&self) -> String {
        let raw = info(&mut connect(&self.url()), "server");
        info_field(&raw, "redis_version").unwrap_or("?").to_owned()
    }

    pub fn cpu_secs(&self) -> Option<f64> {
        crate::sys::cpu_secs(&self.pid?.to_string())
    }
}

impl RedisCpu for Server {
    fn redis_cpu_secs(&self) -> Option<f64> {
        self.cpu_secs()
    }
}
