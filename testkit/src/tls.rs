//! TLS: a private CA and server certificates (made with the `openssl` CLI), and TLS-only
//! `redis-server` processes that present them.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::{free_port, unique_name};

/// A private CA and server certificates made with the `openssl` CLI in a temp dir (removed on
/// drop).
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn new() -> Pki {
        let dir = std::env::temp_dir().join(unique_name("redislock-tls"));
        fs::create_dir(&dir).unwrap();
        let pki = Pki { dir };
        pki.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=redislock test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        pki.server_cert("good", "DNS:localhost,IP:127.0.0.1");
        pki.server_cert("wronghost", "DNS:wrong-host.invalid");
        pki
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn read(&self, file: &str) -> Vec<u8> {
        fs::read(self.path(file)).unwrap()
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&self.dir)
            .output()
            .expect("cannot run the openssl CLI");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `<name>.key` and `<name>.crt`, signed by the CA, for the given subjectAltName. Also for
    /// client authentication: cluster nodes present it to each other on the cluster bus.
    pub fn server_cert(&self, name: &str, san: &str) {
        let ext = format!(
            "subjectAltName={san}\nbasicConstraints=CA:FALSE\n\
             keyUsage=critical,digitalSignature,keyEncipherment\n\
             extendedKeyUsage=serverAuth,clientAuth\n"
        );
        fs::write(self.path(&format!("{name}.ext")), ext).unwrap();
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            "/CN=redislock test server",
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
        ]);
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A TLS-only redis-server (`--port 0 --tls-port P`) on a free loopback port. The support
/// harness checks readiness over plain TCP, so TLS-only servers are started here; dropping it
/// kills the process (also when the test panics), and the process dies with the test process.
pub struct TlsServer {
    child: Child,
    pub port: u16,
}

impl TlsServer {
    pub fn start(pki: &Pki, cert: &str) -> TlsServer {
        TlsServer::start_with(pki, cert, &[])
    }

    /// With more `redis-server` arguments; `{port}` in them is the server's port.
    pub fn start_with(pki: &Pki, cert: &str, extra: &[&str]) -> TlsServer {
        let bin =
            std::env::var_os(crate::REDIS_SERVER_ENV).unwrap_or_else(|| "redis-server".into());
        for _ in 0..5 {
            let port = free_port();
            let log = pki.path(&format!("redis-{port}.log"));
            let mut cmd = Command::new(&bin);
            cmd.args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--tls-auth-clients", "no"])
                .arg("--dir")
                .arg(&pki.dir)
                .arg("--logfile")
                .arg(&log)
                .arg("--tls-cert-file")
                .arg(pki.path(&format!("{cert}.crt")))
                .arg("--tls-key-file")
                .arg(pki.path(&format!("{cert}.key")))
                .arg("--tls-ca-cert-file")
                .arg(pki.path("ca.crt"))
                .args(extra.iter().map(|a| a.replace("{port}", &port.to_string())))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            let child = crate::spawn_anchored(cmd).expect("cannot run redis-server");
            let mut srv = TlsServer { child, port };
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                if let Some(status) = srv.child.try_wait().unwrap() {
                    let text = fs::read_to_string(&log).unwrap_or_default();
                    if text.contains("Address already in use") {
                        break; // someone took the port: try another
                    }
                    panic!("TLS redis-server exited ({status}):\n{text}");
                }
                // Listening (TLS handshakes are checked by the tests themselves).
                let text = fs::read_to_string(&log).unwrap_or_default();
                if text.contains("Ready to accept connections") {
                    return srv;
                }
                assert!(
                    Instant::now() < deadline,
                    "TLS redis-server did not answer:\n{}",
                    fs::read_to_string(&log).unwrap_or_default()
                );
                thread::sleep(Duration::from_millis(20));
            }
        }
        panic!("no free port for the TLS redis-server");
    }

    pub fn url(&self, host: &str) -> String {
        format!("rediss://{host}:{}/", self.port)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
