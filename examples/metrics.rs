//! The metrics of a client, served as Prometheus text while a small contended workload runs:
//! four threads take turns on two locks (short holds, waits with a bound, now and then a single
//! attempt that finds the lock held), and `http://ADDR/metrics` answers every scrape with
//! `Client::metrics().to_prometheus()`. Runs until it is stopped (Ctrl-C, SIGINT or SIGTERM,
//! also when started in the background).
//!
//! Run with `cargo run --release --example metrics -- --listen 127.0.0.1:9464` against
//! `$REDIS_URL` or the default `redis://127.0.0.1:6379/`, then scrape it:
//! `curl http://127.0.0.1:9464/metrics`. Keys: under a unique `redislock-example:` prefix; they
//! expire within 10 s of the program's end.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use redislock::Client;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const WORKERS: usize = 4;
const NAMES: [&str; 2] = ["orders", "reports"];

fn main() -> Res<()> {
    // A shell script starts a background job (`example &`) with SIGINT ignored, and an ignored
    // signal stays ignored across exec: the default action back, so that SIGINT (Ctrl-C, or
    // `kill -INT`) stops the example however it was started.
    // SAFETY: signal(2) with SIG_DFL, before any thread is started.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let mut args = std::env::args().skip(1);
    let mut listen = "127.0.0.1:9464".to_owned();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--listen" => listen = args.next().ok_or("--listen needs an address")?,
            other => {
                return Err(format!("unknown argument {other:?} (usage: --listen ADDR)").into());
            }
        }
    }
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let prefix = format!(
        "redislock-example:{}-{:08x}:",
        std::process::id(),
        getrandom::u32()?
    );
    let client = Client::builder(&url)
        .key_prefix(&prefix)
        .lease(Duration::from_secs(10))
        .metric_names(["orders"])
        .build()?;
    let listener = TcpListener::bind(&listen)?;
    println!("serving http://{}/metrics", listener.local_addr()?);
    thread::scope(|s| {
        for w in 0..WORKERS {
            let client = &client;
            s.spawn(move || work(client, w));
        }
        for stream in listener.incoming().flatten() {
            if let Err(e) = serve(&client, stream) {
                eprintln!("a scrape failed: {e}");
            }
        }
    });
    Ok(())
}

/// One worker's endless turns: wait up to 200 ms for a lock, hold it 2-9 ms; every tenth turn
/// a single attempt instead, which usually finds the lock held.
fn work(client: &Client, w: usize) {
    for turn in 0usize.. {
        let name = NAMES[(turn + w) % NAMES.len()];
        let got = if turn % 10 == 0 {
            client.try_acquire(name)
        } else {
            client.acquire(name, Duration::from_millis(200))
        };
        if let Ok(lock) = got {
            thread::sleep(Duration::from_millis(2 + (turn as u64 * 7 + w as u64) % 8));
            let _ = lock.release();
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Answers one HTTP request: the metrics for `GET /metrics`, 404 for anything else.
fn serve(client: &Client, stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // The headers, up to the empty line.
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let mut stream = stream;
    let (status, kind, body) = if request.starts_with("GET /metrics ") {
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            client.metrics().to_prometheus(),
        )
    } else {
        ("404 Not Found", "text/plain", "try /metrics\n".to_owned())
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}
