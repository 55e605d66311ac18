//! The Redis server the standalone run measures against: a private `redis-server` on a free
//! loopback port (no persistence, temp directory, killed on drop and when this process dies),
//! or an existing one given with `--port`.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sys::{connect, info, info_field};

pub struct Server {
    pub port: u16,
    /// The server's pid when its /proc entry is visible (for its CPU time).
    pub pid: Option<u32>,
    pub version: String,
    child: Option<Child>,
    dir: Option<PathBuf>,
}

impl Server {
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Starts a private redis-server (`$REDISLOCK_TEST_REDIS_SERVER` or `redis-server`).
    pub fn start() -> Server {
        let bin =
            std::env::var("REDISLOCK_TEST_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_port();
            let dir =
                std::env::temp_dir().join(format!("redislock-bench-{}-{port}", std::process::id()));
            std::fs::create_dir_all(&dir).expect("temp dir");
            let mut cmd = Command::new(&bin);
            cmd.args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .args(["--daemonize", "no", "--logfile", ""])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
            // SAFETY: prctl is async-signal-safe; it only asks the kernel to kill the server
            // when this (the spawning, main) thread dies, so no server outlives the bench.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let mut child = match cmd.spawn() {
                Ok(c) => c,
                Err(e) => panic!(
                    "cannot start {bin}: {e} (install redis-server or set REDISLOCK_TEST_REDIS_SERVER)"
                ),
            };
            let t0 = Instant::now();
            let url = format!("redis://127.0.0.1:{port}/");
            while t0.elapsed() < Duration::from_secs(5) {
                if let Ok(Some(status)) = child.try_wait() {
                    last = format!("{bin} exited with {status} on port {port}");
                    break;
                }
                let pong = redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                    .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
                if pong.is_ok() {
                    let mut s = Server {
                        port,
                        pid: Some(child.id()),
                        version: String::new(),
                        child: Some(child),
                        dir: Some(dir),
                    };
                    s.version = s.read_version();
                    return s;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_dir_all(&dir);
        }
        panic!("could not start a redis-server: {last}");
    }

    /// An existing server on 127.0.0.1:`port`.
    pub fn external(port: u16) -> Server {
        let mut s = Server {
            port,
            pid: None,
            version: String::new(),
            child: None,
            dir: None,
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

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}
