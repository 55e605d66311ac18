//! PHP rows of the standalone run: `bench/php/bench_redislock.php` (redislock through the
//! PHP package over FFI) and, beside it, the peers harness's own `php/bench_symfony.php`
//! (`--peer=floor`: phpredis SET NX PX + DEL; `--peer=symfony`: Symfony Lock). Each is run as
//! its own process tree per scenario and writes one README record, read back here.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::json::{self, J};
use crate::scenario::Params;

pub struct Php {
    pub redislock_script: PathBuf,
    /// shared/bench/peers/php/bench_symfony.php, when present.
    pub peers_script: Option<PathBuf>,
    pub lib: PathBuf,
    pub work: PathBuf,
}

impl Php {
    /// Finds what the PHP rows need, or says what is missing.
    pub fn find(peers_dir: &Path, lib: Option<PathBuf>) -> Result<Php, String> {
        // This crate's directory (bench/) and the repository's root above it.
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = here.parent().unwrap_or(here);
        let ok = Command::new("php")
            .args([
                "-r",
                "exit(extension_loaded('ffi') && extension_loaded('pcntl') ? 0 : 1);",
            ])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            return Err("php with the FFI and pcntl extensions is not available".into());
        }
        let redislock_script = here.join("php/bench_redislock.php");
        let package = root.join("bindings/php/src");
        if !package.is_dir() {
            return Err(format!(
                "the PHP package is missing ({})",
                package.display()
            ));
        }
        let lib = lib
            .or_else(|| std::env::var_os("REDISLOCK_LIB").map(PathBuf::from))
            .or_else(default_lib)
            .filter(|p| p.is_file())
            .ok_or(
                "libredislock.so not found: build it (cargo build --release) or set REDISLOCK_LIB",
            )?;
        let peers_script = Some(peers_dir.join("php/bench_symfony.php")).filter(|p| p.is_file());
        let work = std::env::temp_dir().join(format!("redislock-bench-php-{}", std::process::id()));
        std::fs::create_dir_all(&work).map_err(|e| e.to_string())?;
        Ok(Php {
            redislock_script,
            peers_script,
            lib,
            work,
        })
    }

    /// Runs redislock's PHP bench for one scenario.
    pub fn redislock(&self, port: u16, p: &Params, auto_renew: bool) -> Result<J, String> {
        let extra = [format!(
            "--auto-renew={}",
            if auto_renew { "on" } else { "off" }
        )];
        self.run(&self.redislock_script, &extra, port, p)
    }

    /// u1 with phpredis floor cycles interleaved (`--interleave-floor`): the record carries
    /// `cycle_ns` (redislock) and `floor_cycle_ns`.
    pub fn redislock_interleaved(&self, port: u16, p: &Params) -> Result<J, String> {
        let extra = [
            "--auto-renew=off".to_owned(),
            "--interleave-floor".to_owned(),
        ];
        self.run(&self.redislock_script, &extra, port, p)
    }

    /// Runs the peers' PHP bench (`floor` or `symfony`) for one scenario.
    pub fn peer(&self, peer: &str, port: u16, p: &Params) -> Result<J, String> {
        let script = self
            .peers_script
            .as_ref()
            .ok_or("the peers' bench_symfony.php is missing")?;
        self.run(script, &[format!("--peer={peer}")], port, p)
    }

    fn run(&self, script: &Path, extra: &[String], port: u16, p: &Params) -> Result<J, String> {
        let out = self.work.join("record.jsonl");
        let _ = std::fs::remove_file(&out);
        let res = Command::new("php")
            .arg(script)
            .args(extra)
            .arg(format!("--scenario={}", p.sc.name()))
            .arg(format!("--n={}", p.n))
            .arg(format!("--target={}", p.target))
            .arg(format!("--cap={}", p.cap.as_secs_f64()))
            .arg(format!("--out={}", out.display()))
            .arg(format!("--port={port}"))
            .env("REDISLOCK_LIB", &self.lib)
            .env("PEERBENCH_WORK", &self.work)
            .output()
            .map_err(|e| format!("php: {e}"))?;
        if !res.status.success() {
            return Err(format!(
                "{} {} failed ({}): {}",
                script.display(),
                p.sc.name(),
                res.status,
                String::from_utf8_lossy(&res.stderr).trim()
            ));
        }
        let text = std::fs::read_to_string(&out).map_err(|e| format!("{}: {e}", out.display()))?;
        let line = text.lines().last().ok_or("empty record file")?;
        json::parse(line)
    }
}

impl Drop for Php {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.work);
    }
}

/// `<target dir>/release/libredislock.so` next to this bench binary (`<target>/release/`).
fn default_lib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let release = exe.parent()?;
    Some(release.join("libredislock.so"))
}
