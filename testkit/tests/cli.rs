//! The `redislock-testkit` program, driven the way the C and PHP runners and the soak drive it:
//! through its standard input and output.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// A running `redislock-testkit`, its banner read.
struct Kit {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    url: String,
    nodes: Vec<u16>,
    sentinels: Vec<u16>,
}

impl Kit {
    fn start(args: &[&str]) -> Kit {
        let mut child = Command::new(env!("CARGO_BIN_EXE_redislock-testkit"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run redislock-testkit");
        let stdin = child.stdin.take();
        let lines = read_lines(child.stdout.take().unwrap());
        let mut kit = Kit {
            child,
            stdin,
            lines,
            url: String::new(),
            nodes: Vec::new(),
            sentinels: Vec::new(),
        };
        loop {
            let line = kit.line(Duration::from_secs(60));
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["URL", url] => kit.url = url.to_string(),
                ["NODE", i, port] => {
                    assert_eq!(i.parse::<usize>().unwrap(), kit.nodes.len());
                    kit.nodes.push(port.parse().unwrap());
                }
                ["SENTINEL", i, port] => {
                    assert_eq!(i.parse::<usize>().unwrap(), kit.sentinels.len());
                    kit.sentinels.push(port.parse().unwrap());
                }
                ["READY"] => return kit,
                _ => panic!("unexpected banner line {line:?}"),
            }
        }
    }

    fn line(&self, timeout: Duration) -> String {
        self.lines
            .recv_timeout(timeout)
            .expect("redislock-testkit said nothing in time")
    }

    /// Sends one command and returns the one-line answer.
    fn ask(&mut self, command: &str) -> String {
        let stdin = self.stdin.as_mut().expect("stdin closed");
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        self.line(Duration::from_secs(30))
    }

    fn pid(&mut self, node: usize) -> i32 {
        let answer = self.ask(&format!("pid node {node}"));
        answer
            .strip_prefix("PID ")
            .unwrap_or_else(|| panic!("{answer}"))
            .parse()
            .unwrap()
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_lines(out: ChildStdout) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// The reply to PING (or the error text), with 1 s timeouts.
fn ping(port: u16) -> Result<String, String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(1))
        .map_err(|e| e.to_string())?;
    con.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    redis::cmd("PING")
        .query::<String>(&mut con)
        .map_err(|e| e.to_string())
}

/// Whether a process with this pid exists (a zombie counts).
fn alive(pid: i32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn single_server_faults_through_standard_input() {
    let mut kit = Kit::start(&["single"]);
    let port = kit.nodes[0];
    assert_eq!(kit.url, format!("redis://127.0.0.1:{port}/"));
    assert!(kit.sentinels.is_empty());
    assert_ne!(port, 6379);
    assert_eq!(ping(port).as_deref(), Ok("PONG"));
    assert_eq!(kit.ask("running node 0"), "RUNNING yes");
    let first = kit.pid(0);
    assert!(alive(first));

    let log = kit.ask("log node 0");
    let path = log.strip_prefix("LOG ").unwrap_or_else(|| panic!("{log}"));
    let text = std::fs::read_to_string(path).expect("the log file is readable");
    assert!(text.contains("Ready to accept connections"), "{text}");

    // pause: connections open but nothing answered; resume: answered again.
    assert_eq!(kit.ask("pause node 0"), "OK");
    assert!(ping(port).is_err());
    assert_eq!(kit.ask("resume node 0"), "OK");
    assert_eq!(ping(port).as_deref(), Ok("PONG"));

    // kill: gone; a failing command answers ERR and the set-up carries on.
    assert_eq!(kit.ask("kill node 0"), "OK");
    assert_eq!(kit.ask("running node 0"), "RUNNING no");
    assert!(ping(port).is_err());
    assert!(!alive(first));
    assert!(kit.ask("pause node 0").starts_with("ERR "));

    // restart: a new process on the same port.
    assert_eq!(kit.ask("restart node 0"), "OK");
    assert_eq!(ping(port).as_deref(), Ok("PONG"));
    let second = kit.pid(0);
    assert_ne!(second, first);

    // term: SIGTERM, and the answer comes once the process is gone (also when paused).
    assert_eq!(kit.ask("pause node 0"), "OK");
    assert_eq!(kit.ask("term node 0"), "OK");
    assert!(!alive(second));
    assert_eq!(kit.ask("running node 0"), "RUNNING no");
    assert_eq!(kit.ask("term node 0"), "OK");
    assert_eq!(kit.ask("restart node 0"), "OK");
    let third = kit.pid(0);

    for bad in [
        "pid node 1",
        "kill sentinel 0",
        "master",
        "jump node 0",
        "",
        "pid",
    ] {
        assert!(kit.ask(bad).starts_with("ERR "), "{bad:?}");
    }

    // quit: everything stopped and removed before the OK; then the program exits.
    let dir = std::path::Path::new(path).parent().unwrap().to_path_buf();
    assert!(dir.is_dir());
    assert_eq!(kit.ask("quit"), "OK");
    assert!(!alive(third));
    assert!(!dir.exists());
    let status = kit.child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn single_server_takes_redis_server_arguments_and_stops_at_end_of_input() {
    let mut kit = Kit::start(&["single", "--requirepass", "the-password"]);
    let port = kit.nodes[0];
    let refused = ping(port).unwrap_err();
    assert!(refused.contains("NOAUTH"), "{refused}");
    let pid = kit.pid(0);
    drop(kit.stdin.take());
    let status = kit.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(!alive(pid));
}

#[test]
fn usage_errors_exit_with_status_2() {
    for args in [&[][..], &["bogus"], &["cluster", "--port", "7000"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_redislock-testkit"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage:"));
    }
}

#[test]
fn sentinel_group_names_its_master_and_sentinels() {
    let mut kit = Kit::start(&["sentinel"]);
    assert_eq!(kit.nodes.len(), 3);
    assert_eq!(kit.sentinels.len(), 3);
    assert!(
        kit.url.starts_with("redis-sentinel://127.0.0.1:"),
        "{}",
        kit.url
    );
    assert_eq!(kit.ask("master"), format!("MASTER {}", kit.nodes[0]));
    assert_eq!(kit.ask("running sentinel 2"), "RUNNING yes");
    assert_eq!(kit.ask("kill sentinel 2"), "OK");
    assert_eq!(kit.ask("running sentinel 2"), "RUNNING no");
    assert_eq!(kit.ask("master"), format!("MASTER {}", kit.nodes[0]));
    assert!(kit.ask("pid sentinel 3").starts_with("ERR "));
}
