//! Fuzz target: random sequences of redislock C API calls (through the library's C symbols,
//! declared below as in include/redislock.h, exactly as C calls them) against one private
//! redis-server.
//!
//! Each input is decoded into up to 64 operations over a small table of live handles
//! (configs, clients, requests, locks). All handles are freed at the end of each input, in an
//! order the input chooses. Invariants checked (a violation aborts = a crash for libFuzzer):
//!
//! - no function returns REDISLOCK_PANIC, and every result code is a known one;
//!   libfuzzer-sys' panic hook aborts on any panic, even one the library would catch;
//! - `*_out` parameters are untouched on failure and written on success;
//! - after a successful release: is_held false, remaining 0, a second release NOT_HELD,
//!   extend NOT_HELD (or INVALID_ARGUMENT for a bad lease);
//! - fencing_token succeeds iff the lock was acquired with fencing, and the token is >= 1;
//! - requests may take read or write locks (`redislock_request_set_kind`, a number that is no
//!   kind -> INVALID_ARGUMENT); a successful downgrade leaves the write lock released and makes
//!   a read lock with the same fencing;
//! - a lock request takes the client's default for every setting it was not given (the
//!   target follows each client's defaults from its config), and may be used again;
//! - argument checks: empty or >4096-byte name, bad lease -> INVALID_ARGUMENT, NULL name with
//!   a length -> NULL_PARAMETER, NULL out pointer or handle -> NULL_PARAMETER;
//! - buffer convention of last_error_message/result_message: NUL-terminated within buf_len,
//!   nothing written past buf_len.
//!
//! The server is $REDISLOCK_FUZZ_URL if set, else a redis-server that the test kit
//! (`redislock-testkit`) starts on a free loopback port (no persistence, a temp directory),
//! stopped at exit (atexit) and, should the fuzzer die without exiting, killed by the kit's
//! PR_SET_PDEATHSIG.
#![no_main]

use std::ffi::CString;
use std::ptr;
use std::sync::{Mutex, OnceLock};

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use redislock_testkit::RedisServer;

// Links the library; the functions are reached only through their C symbols (below).
extern crate redislock;

use c_api::*;

/// The C API exactly as C sees it, declared after include/redislock.h (`tests/c_abi.rs` checks
/// these declarations against the header, and the header against the exported symbols).
/// `redislock_result` is received as the `uint32_t` it is in C, so an out-of-range code is an
/// assertion failure here, not undefined behaviour. The functions are declared `safe` as the
/// library defines them (plain `extern "C" fn`s whose contract is the header's calling
/// conventions), so calls read as they would in C.
#[allow(non_camel_case_types, dead_code)]
mod c_api {
    use std::ffi::c_char;

    pub type redislock_result = u32;
    pub type redislock_kind = u32;

    #[repr(C)]
    pub struct redislock_config {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct redislock_client {
        _opaque: [u8; 0],
    }
    #[repr(C)]
    pub struct redislock_lock {
        _opaque: [u8; 0],
    }

    #[repr(C)]
    pub struct redislock_request {
        _opaque: [u8; 0],
    }

    unsafe extern "C" {
        pub safe fn redislock_version() -> *const c_char;
        pub safe fn redislock_client_new(
            url: *const c_char,
            client_out: *mut *mut redislock_client,
        ) -> redislock_result;
        pub safe fn redislock_client_from_config(
            config: *const redislock_config,
            client_out: *mut *mut redislock_client,
        ) -> redislock_result;
        pub safe fn redislock_client_free(client: *mut redislock_client);
        pub safe fn redislock_config_new(
            url: *const c_char,
            config_out: *mut *mut redislock_config,
        ) -> redislock_result;
        pub safe fn redislock_config_free(config: *mut redislock_config);
        pub safe fn redislock_config_set_pool_size(
            config: *mut redislock_config,
            n: u32,
        ) -> redislock_result;
        pub safe fn redislock_config_set_max_waiters(
            config: *mut redislock_config,
            n: u32,
        ) -> redislock_result;
        pub safe fn redislock_config_set_connect_timeout_ms(
            config: *mut redislock_config,
            ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_read_timeout_ms(
            config: *mut redislock_config,
            ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_write_timeout_ms(
            config: *mut redislock_config,
            ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_checkout_timeout_ms(
            config: *mut redislock_config,
            ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_lease_ms(
            config: *mut redislock_config,
            ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_auto_renew(
            config: *mut redislock_config,
            on: bool,
        ) -> redislock_result;
        pub safe fn redislock_config_set_fencing(
            config: *mut redislock_config,
            on: bool,
        ) -> redislock_result;
        pub safe fn redislock_config_set_key_prefix(
            config: *mut redislock_config,
            prefix: *const u8,
            len: usize,
        ) -> redislock_result;
        pub safe fn redislock_config_set_recheck_interval_ms(
            config: *mut redislock_config,
            ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_recheck_jitter(
            config: *mut redislock_config,
            fraction: f64,
        ) -> redislock_result;
        pub safe fn redislock_config_set_max_renewed_locks(
            config: *mut redislock_config,
            n: u64,
        ) -> redislock_result;
        pub safe fn redislock_last_error_message(buf: *mut c_char, buf_len: usize) -> usize;
        pub safe fn redislock_lock_try_acquire(
            client: *const redislock_client,
            name: *const u8,
            name_len: usize,
            lock_out: *mut *mut redislock_lock,
        ) -> redislock_result;
        pub safe fn redislock_lock_acquire(
            client: *const redislock_client,
            name: *const u8,
            name_len: usize,
            wait_ms: u64,
            lock_out: *mut *mut redislock_lock,
        ) -> redislock_result;
        pub safe fn redislock_request_new(
            client: *const redislock_client,
            name: *const u8,
            name_len: usize,
            request_out: *mut *mut redislock_request,
        ) -> redislock_result;
        pub safe fn redislock_request_free(request: *mut redislock_request);
        pub safe fn redislock_request_set_lease_ms(
            request: *mut redislock_request,
            lease_ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_request_set_auto_renew(
            request: *mut redislock_request,
            on: bool,
        ) -> redislock_result;
        pub safe fn redislock_request_set_fencing(
            request: *mut redislock_request,
            on: bool,
        ) -> redislock_result;
        pub safe fn redislock_request_set_kind(
            request: *mut redislock_request,
            kind: redislock_kind,
        ) -> redislock_result;
        pub safe fn redislock_request_try_acquire(
            request: *const redislock_request,
            lock_out: *mut *mut redislock_lock,
        ) -> redislock_result;
        pub safe fn redislock_request_acquire(
            request: *const redislock_request,
            wait_ms: u64,
            lock_out: *mut *mut redislock_lock,
        ) -> redislock_result;
        pub safe fn redislock_lock_release(lock: *mut redislock_lock) -> redislock_result;
        pub safe fn redislock_lock_extend(
            lock: *mut redislock_lock,
            lease_ms: u64,
        ) -> redislock_result;
        pub safe fn redislock_lock_is_held(lock: *const redislock_lock) -> bool;
        pub safe fn redislock_lock_remaining_ms(lock: *const redislock_lock) -> u64;
        pub safe fn redislock_lock_fencing_token(
            lock: *const redislock_lock,
            token_out: *mut u64,
        ) -> redislock_result;
        pub safe fn redislock_lock_downgrade(
            lock: *const redislock_lock,
            read_out: *mut *mut redislock_lock,
        ) -> redislock_result;
        pub safe fn redislock_lock_free(lock: *mut redislock_lock);
        pub safe fn redislock_result_message(
            code: redislock_result,
            buf: *mut c_char,
            buf_len: usize,
        ) -> usize;
    }
}

const OK: u32 = 0;
const HELD: u32 = 1;
const WAIT_TIMEOUT: u32 = 2;
const NOT_HELD: u32 = 3;
const INVALID_ARGUMENT: u32 = 4;
const CONNECTION: u32 = 5;
const REDIS_ERROR: u32 = 6;
const NULL_PARAMETER: u32 = 10;
const PANIC: u32 = 11;
/// How many result codes there are (0 to CODES - 1); src/ffi/drift_tests.rs checks it.
const CODES: u32 = 14;

const MAX_NAME: usize = 4096;
const MAX_OPS: usize = 64;

// ---- the private redis-server --------------------------------------------------------------

static SERVER: Mutex<Option<RedisServer>> = Mutex::new(None);
static URL: OnceLock<String> = OnceLock::new();

/// Stops the server and removes its directory (dropping the kit's handle does both).
extern "C" fn stop_server() {
    if let Ok(mut guard) = SERVER.lock() {
        drop(guard.take());
    }
}

fn start_server() -> String {
    if let Ok(url) = std::env::var("REDISLOCK_FUZZ_URL") {
        return url;
    }
    let server = RedisServer::start();
    let url = server.url();
    eprintln!("fuzz: redis-server on {}", server.addr());
    *SERVER.lock().unwrap() = Some(server);
    // SAFETY: atexit only records a plain `extern "C" fn()` to call when the process exits.
    unsafe { libc::atexit(stop_server) };
    url
}

fn url() -> &'static str {
    URL.get_or_init(start_server)
}

// ---- checks ----------------------------------------------------------------------------------

fn code(c: redislock_result) -> u32 {
    assert_ne!(c, PANIC, "a panic was caught at the C boundary");
    assert!(c < CODES, "unknown result code {c}");
    c
}

/// A pointer value that no allocation returns, to detect writes to `*_out` on failure.
fn sentinel<T>() -> *mut T {
    0x5a5a_5a50usize as *mut T
}

fn check_out<T>(c: u32, out: *mut T, what: &str) {
    if c == OK {
        assert!(
            !out.is_null() && out != sentinel(),
            "{what}: OK but *_out not written"
        );
    } else {
        assert_eq!(
            out,
            sentinel(),
            "{what}: *_out written on failure (code {c})"
        );
    }
}

fn check_text_buffer(ret: usize, buf: &[u8], buf_len: usize) {
    // buf has 16 canary bytes (0xEE) after buf_len.
    for &b in &buf[buf_len..] {
        assert_eq!(b, 0xEE, "written past buf_len");
    }
    if buf_len > 0 {
        let nul = buf[..buf_len]
            .iter()
            .position(|&b| b == 0)
            .expect("text not NUL-terminated within buf_len");
        if ret < buf_len {
            assert_eq!(nul, ret, "a text that fits is written whole");
        } else {
            // Cut to buf_len - 1 bytes, less at most 3 to end on a UTF-8 character boundary.
            assert!(nul + 4 > buf_len - 1, "cut too short: {nul} of {buf_len}");
        }
        assert!(
            std::str::from_utf8(&buf[..nul]).is_ok(),
            "text cut inside a UTF-8 character"
        );
    }
}

fn last_error(u: &mut Unstructured) {
    let buf_len = small_len(u);
    let mut buf = vec![0xEEu8; buf_len + 16];
    let p = if buf_len == 0 && u.arbitrary().unwrap_or(true) {
        ptr::null_mut()
    } else {
        buf.as_mut_ptr().cast()
    };
    let ret = redislock_last_error_message(p, buf_len);
    check_text_buffer(ret, &buf, buf_len);
}

fn small_len(u: &mut Unstructured) -> usize {
    match u.int_in_range(0u8..=3).unwrap_or(0) {
        0 => 0,
        1 => 1,
        2 => u.int_in_range(2..=16).unwrap_or(2),
        _ => 512,
    }
}

// ---- the handle table ------------------------------------------------------------------------

struct HeldLock {
    ptr: *mut redislock_lock,
    /// Whether it was acquired with a fencing token.
    fencing: bool,
    /// A release returned OK or NOT_HELD: it is known not held any more.
    released: bool,
}

/// A client's lock defaults, as its config set them (the library's when not set).
#[derive(Debug, Clone, Copy)]
struct Defaults {
    lease_ms: u64,
    auto_renew: bool,
    fencing: bool,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            lease_ms: 30_000,
            auto_renew: true,
            fencing: false,
        }
    }
}

impl Defaults {
    /// Whether a lock with these settings passes the lease check.
    fn lease_ok(&self) -> bool {
        self.lease_ms >= 1
            && self.lease_ms <= 30 * 24 * 3600 * 1000
            && (!self.auto_renew || self.lease_ms >= 100)
    }
}

struct LiveConfig {
    ptr: *mut redislock_config,
    defaults: Defaults,
}

struct LiveClient {
    ptr: *mut redislock_client,
    defaults: Defaults,
}

struct LiveRequest {
    ptr: *mut redislock_request,
    name_len: usize,
    /// The settings its acquires use: the client's defaults, with what was set on it.
    settings: Defaults,
}

#[derive(Default)]
struct Table {
    configs: Vec<LiveConfig>,
    clients: Vec<LiveClient>,
    requests: Vec<LiveRequest>,
    locks: Vec<HeldLock>,
}

fn pick<T>(u: &mut Unstructured, v: &[T]) -> Option<usize> {
    if v.is_empty() {
        None
    } else {
        Some(u.choose_index(v.len()).unwrap_or(0))
    }
}

fn fuzz_u64(u: &mut Unstructured) -> u64 {
    match u.int_in_range(0u8..=7).unwrap_or(0) {
        0 => 0,
        1 => 1,
        2 => u64::MAX,
        3 => 30 * 24 * 3600 * 1000,
        4 => 30 * 24 * 3600 * 1000 + 1,
        5 => u.int_in_range(50..=200).unwrap_or(100),
        6 => u.int_in_range(90..=5000).unwrap_or(1000),
        _ => u.arbitrary().unwrap_or(0),
    }
}

fn lease(u: &mut Unstructured) -> u64 {
    match u.int_in_range(0u8..=6).unwrap_or(0) {
        0 => 0,
        1 => u64::MAX,
        2 => 1,
        3 => 99,
        4 => 100,
        5 => 30 * 24 * 3600 * 1000 + 1,
        _ => u.int_in_range(2..=3000).unwrap_or(1000),
    }
}

/// A lock name: a few fixed names (so that locks collide), empty, large, oversized, or random.
fn name(u: &mut Unstructured) -> (Vec<u8>, bool /* NULL pointer */) {
    let null = u.ratio(1u8, 16u8).unwrap_or(false);
    let n = match u.int_in_range(0u8..=7).unwrap_or(0) {
        0 => Vec::new(),
        1 => b"a".to_vec(),
        2 => b"{tag}:x".to_vec(),
        3 => vec![0u8, 0xff, b'{', b'}', 0x80],
        4 => vec![b'n'; MAX_NAME],
        5 => vec![b'o'; MAX_NAME + 1],
        6 => vec![b'L'; u.int_in_range(1..=70_000).unwrap_or(1)],
        _ => {
            let len = u.int_in_range(0..=64).unwrap_or(0);
            u.bytes(len).map(|b| b.to_vec()).unwrap_or_default()
        }
    };
    (n, null)
}

fn url_bytes(u: &mut Unstructured) -> Vec<u8> {
    let base = url();
    let port = base
        .trim_start_matches("redis://127.0.0.1:")
        .trim_end_matches('/');
    match u.int_in_range(0u8..=9).unwrap_or(0) {
        0..=3 => base.as_bytes().to_vec(),
        4 => b"redis://127.0.0.1:1/".to_vec(), // refused at once
        5 => format!("redis://user:wrong@127.0.0.1:{port}/").into_bytes(), // AUTH error
        6 => format!(
            "redis://127.0.0.1:{port}/{}",
            u.arbitrary::<u32>().unwrap_or(99)
        )
        .into_bytes(),
        7 => vec![b'r', 0xff, 0xfe, b':', b'/', 0xc3, 0x28], // not UTF-8
        8 => format!("unix:///nonexistent/redislock-fuzz-{port}.sock").into_bytes(),
        _ => {
            // Garbage; anything that could name a remote host is redirected to loopback.
            let len = u.int_in_range(0..=40).unwrap_or(0);
            let mut g = u.bytes(len).map(|b| b.to_vec()).unwrap_or_default();
            g.retain(|&b| b != 0);
            if g.windows(3).any(|w| w == b"://") {
                let mut v = format!("redis://127.0.0.1:{port}/").into_bytes();
                v.extend(g.into_iter().filter(|b| b.is_ascii_digit()));
                v
            } else {
                g
            }
        }
    }
}

/// A URL for `redislock_client_new`, whose clients keep the default timeouts (3 s checkout,
/// retried connects): only the fuzz server or text that cannot parse as a URL, so no call made
/// through such a client waits for an unreachable server.
fn fast_url_bytes(u: &mut Unstructured) -> Vec<u8> {
    match u.int_in_range(0u8..=7).unwrap_or(0) {
        0..=4 => url().as_bytes().to_vec(),
        5 => vec![b'r', 0xff, 0xfe, b':', b'/', 0xc3, 0x28], // not UTF-8
        6 => Vec::new(),
        _ => {
            let len = u.int_in_range(0..=40).unwrap_or(0);
            let mut g = vec![b'%', b'!']; // never a valid URL start
            g.extend(u.bytes(len).map(|b| b.to_vec()).unwrap_or_default());
            g
        }
    }
}

fn cstring(bytes: Vec<u8>) -> CString {
    CString::new(bytes.into_iter().filter(|&b| b != 0).collect::<Vec<u8>>()).unwrap()
}

/// A new request for `name` on `client`, with some of its settings given (each at random);
/// the settings its acquires will use. `None` when the name pointer is NULL with a length
/// (checked: NULL_PARAMETER).
fn new_request(
    u: &mut Unstructured,
    client: &LiveClient,
    name: &[u8],
    null_name: bool,
) -> Option<(*mut redislock_request, Defaults)> {
    let name_ptr = if null_name {
        ptr::null()
    } else {
        name.as_ptr()
    };
    let mut out: *mut redislock_request = sentinel();
    let c = code(redislock_request_new(
        client.ptr,
        name_ptr,
        name.len(),
        &mut out,
    ));
    check_out(c, out, "request_new");
    if null_name && !name.is_empty() {
        assert_eq!(c, NULL_PARAMETER, "NULL name not reported");
        return None;
    }
    assert_eq!(c, OK, "request_new failed");
    let mut settings = client.defaults;
    if u.arbitrary().unwrap_or(false) {
        settings.lease_ms = lease(u);
        assert_eq!(
            code(redislock_request_set_lease_ms(out, settings.lease_ms)),
            OK
        );
    }
    if u.arbitrary().unwrap_or(false) {
        settings.auto_renew = u.arbitrary().unwrap_or(false);
        assert_eq!(
            code(redislock_request_set_auto_renew(out, settings.auto_renew)),
            OK
        );
    }
    if u.arbitrary().unwrap_or(false) {
        settings.fencing = u.arbitrary().unwrap_or(true);
        assert_eq!(
            code(redislock_request_set_fencing(out, settings.fencing)),
            OK
        );
    }
    if u.arbitrary().unwrap_or(false) {
        // A read or write lock (same settings, same checks), or a number that is no kind. (Kind
        // 3, Redisson's lock, is reentrant per thread, which the checks here would take for a
        // second holder: tests/redisson.rs and the C boundary's own tests cover it.)
        let kind = match u.int_in_range(0u8..=4).unwrap_or(0) {
            3 => u.arbitrary::<u32>().unwrap_or(4).max(4),
            k => u32::from(k % 3),
        };
        let c = code(redislock_request_set_kind(out, kind));
        assert_eq!(c, if kind <= 2 { OK } else { INVALID_ARGUMENT }, "kind {kind}");
    }
    Some((out, settings))
}

fn set_config(u: &mut Unstructured, config: &mut LiveConfig) {
    let cfg = if u.ratio(1u8, 32u8).unwrap_or(false) {
        ptr::null_mut()
    } else {
        config.ptr
    };
    // What a lock setting will be for clients built from this config (if it builds).
    let mut defaults = config.defaults;
    let which = u.int_in_range(0u8..=12).unwrap_or(0);
    let r = match which {
        0 => redislock_config_set_pool_size(cfg, small_u32(u)),
        1 => redislock_config_set_max_waiters(cfg, small_u32(u)),
        2 => redislock_config_set_connect_timeout_ms(cfg, fuzz_u64(u)),
        3 => redislock_config_set_read_timeout_ms(cfg, fuzz_u64(u)),
        4 => redislock_config_set_write_timeout_ms(cfg, fuzz_u64(u)),
        5 => redislock_config_set_checkout_timeout_ms(cfg, fuzz_u64(u)),
        6 => {
            defaults.lease_ms = lease(u);
            redislock_config_set_lease_ms(cfg, defaults.lease_ms)
        }
        7 => {
            defaults.auto_renew = u.arbitrary().unwrap_or(false);
            redislock_config_set_auto_renew(cfg, defaults.auto_renew)
        }
        8 => {
            defaults.fencing = u.arbitrary().unwrap_or(false);
            redislock_config_set_fencing(cfg, defaults.fencing)
        }
        9 => {
            let (p, null) = name(u);
            let ptr = if null { ptr::null() } else { p.as_ptr() };
            redislock_config_set_key_prefix(cfg, ptr, p.len())
        }
        10 => redislock_config_set_recheck_interval_ms(cfg, fuzz_u64(u)),
        11 => {
            let f = match u.int_in_range(0u8..=6).unwrap_or(0) {
                0 => f64::NAN,
                1 => f64::INFINITY,
                2 => -0.5,
                3 => 1.0,
                4 => 1.5,
                5 => f64::from_bits(u.arbitrary().unwrap_or(0)),
                _ => 0.2,
            };
            redislock_config_set_recheck_jitter(cfg, f)
        }
        _ => redislock_config_set_max_renewed_locks(
            cfg,
            match u.int_in_range(0u8..=3).unwrap_or(0) {
                0 => 0,
                1 => 1,
                2 => u64::MAX,
                _ => u.int_in_range(2..=2_000_000).unwrap_or(2),
            },
        ),
    };
    let c = code(r);
    if cfg.is_null() {
        assert_eq!(c, NULL_PARAMETER);
    } else if c == OK {
        config.defaults = defaults;
    }
}

fn small_u32(u: &mut Unstructured) -> u32 {
    match u.int_in_range(0u8..=3).unwrap_or(0) {
        0 => 0,
        1 => u32::MAX,
        2 => 10_001,
        _ => u.int_in_range(1..=8).unwrap_or(1),
    }
}

/// Forces the timeouts of a config into 50..=200 ms so an unreachable or paused server never
/// slows the fuzzer down (the setters were exercised with arbitrary values before).
fn short_timeouts(u: &mut Unstructured, cfg: *mut redislock_config) {
    let mut t = || u.int_in_range(50u64..=200).unwrap_or(100);
    for (r, v) in [
        (
            redislock_config_set_connect_timeout_ms
                as extern "C" fn(*mut redislock_config, u64) -> redislock_result,
            t(),
        ),
        (redislock_config_set_read_timeout_ms, t()),
        (redislock_config_set_write_timeout_ms, t()),
        (redislock_config_set_checkout_timeout_ms, t()),
    ] {
        assert_eq!(code(r(cfg, v)), OK);
    }
}

/// One acquire: with the client's defaults (`redislock_lock_try_acquire` / `_acquire`), or
/// through a new request with some settings given, which is then freed or kept for reuse.
fn acquire(u: &mut Unstructured, t: &mut Table, wait: Option<u64>) {
    let Some(ci) = pick(u, &t.clients) else {
        return;
    };
    let (n, null_name) = name(u);
    let null_out = u.ratio(1u8, 32u8).unwrap_or(false);
    let mut out: *mut redislock_lock = sentinel();
    let out_ptr = if null_out {
        ptr::null_mut()
    } else {
        &mut out as *mut _
    };
    let (c, settings) = if u.arbitrary().unwrap_or(true) {
        let client = t.clients[ci].ptr;
        let name_ptr = if null_name { ptr::null() } else { n.as_ptr() };
        let r = match wait {
            None => redislock_lock_try_acquire(client, name_ptr, n.len(), out_ptr),
            Some(w) => redislock_lock_acquire(client, name_ptr, n.len(), w, out_ptr),
        };
        let c = code(r);
        if null_name && !n.is_empty() {
            check_out(c, out, "acquire");
            assert_eq!(c, NULL_PARAMETER, "NULL name not reported");
            return;
        }
        (c, t.clients[ci].defaults)
    } else {
        let Some((request, settings)) = new_request(u, &t.clients[ci], &n, null_name) else {
            return;
        };
        let c = request_acquire(request, wait, out_ptr);
        if t.requests.len() < 4 && u.arbitrary().unwrap_or(false) {
            t.requests.push(LiveRequest {
                ptr: request,
                name_len: n.len(),
                settings,
            });
        } else {
            redislock_request_free(request);
        }
        (c, settings)
    };
    check_acquired(u, t, c, out, null_out, n.len(), settings, wait);
}

/// An acquire through a request.
fn request_acquire(
    request: *const redislock_request,
    wait: Option<u64>,
    out_ptr: *mut *mut redislock_lock,
) -> u32 {
    code(match wait {
        None => redislock_request_try_acquire(request, out_ptr),
        Some(w) => redislock_request_acquire(request, w, out_ptr),
    })
}

/// Checks an acquire's outcome against its arguments, and keeps the lock it made.
#[allow(clippy::too_many_arguments)]
fn check_acquired(
    u: &mut Unstructured,
    t: &mut Table,
    c: u32,
    out: *mut redislock_lock,
    null_out: bool,
    name_len: usize,
    settings: Defaults,
    wait: Option<u64>,
) {
    check_out(c, out, "acquire");
    if c != OK {
        last_error(u);
    }
    if null_out {
        assert_eq!(c, NULL_PARAMETER, "NULL lock_out not reported");
        return;
    }
    if name_len == 0 || name_len > MAX_NAME {
        assert_eq!(c, INVALID_ARGUMENT, "bad name length {name_len} accepted");
        return;
    }
    if !settings.lease_ok() {
        assert_eq!(c, INVALID_ARGUMENT, "bad lease accepted: {settings:?}");
        return;
    }
    match wait {
        None => assert_ne!(c, WAIT_TIMEOUT),
        Some(w) if w > 0 => assert_ne!(c, HELD, "acquire with a wait bound returned HELD"),
        Some(_) => {}
    }
    if c == OK {
        t.locks.push(HeldLock {
            ptr: out,
            fencing: settings.fencing,
            released: false,
        });
    }
}

fn check_released(l: &HeldLock) {
    assert!(!redislock_lock_is_held(l.ptr), "is_held true after release");
    assert_eq!(
        redislock_lock_remaining_ms(l.ptr),
        0,
        "remaining > 0 after release"
    );
}

fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let mut t = Table::default();
    for _ in 0..MAX_OPS {
        if u.is_empty() {
            break;
        }
        let op = u.int_in_range(0u8..=22).unwrap_or(0);
        match op {
            0 => {
                // client from a URL
                let null_url = u.ratio(1u8, 32u8).unwrap_or(false);
                let s = cstring(fast_url_bytes(&mut u));
                let mut out: *mut redislock_client = sentinel();
                let c = code(redislock_client_new(
                    if null_url { ptr::null() } else { s.as_ptr() },
                    &mut out,
                ));
                check_out(c, out, "client_new");
                if null_url {
                    assert_eq!(c, NULL_PARAMETER);
                }
                if c == OK {
                    if t.clients.len() < 4 {
                        t.clients.push(LiveClient {
                            ptr: out,
                            defaults: Defaults::default(),
                        });
                    } else {
                        redislock_client_free(out);
                    }
                } else {
                    last_error(&mut u);
                }
            }
            1 => {
                // config
                if t.configs.len() < 2 {
                    let s = cstring(url_bytes(&mut u));
                    let mut out: *mut redislock_config = sentinel();
                    let c = code(redislock_config_new(s.as_ptr(), &mut out));
                    check_out(c, out, "config_new");
                    if c == OK {
                        t.configs.push(LiveConfig {
                            ptr: out,
                            defaults: Defaults::default(),
                        });
                    }
                }
            }
            2 | 3 => {
                if let Some(i) = pick(&mut u, &t.configs) {
                    set_config(&mut u, &mut t.configs[i]);
                }
            }
            4 => {
                // client from config (with short timeouts)
                if let Some(i) = pick(&mut u, &t.configs) {
                    let cfg = t.configs[i].ptr;
                    let defaults = t.configs[i].defaults;
                    short_timeouts(&mut u, cfg);
                    let mut out: *mut redislock_client = sentinel();
                    let null_out = u.ratio(1u8, 32u8).unwrap_or(false);
                    let c = code(redislock_client_from_config(
                        cfg,
                        if null_out { ptr::null_mut() } else { &mut out },
                    ));
                    check_out(c, out, "client_from_config");
                    if null_out {
                        assert_eq!(c, NULL_PARAMETER);
                    }
                    if c == OK {
                        assert!(defaults.lease_ok(), "bad lock defaults built: {defaults:?}");
                        if t.clients.len() < 4 {
                            t.clients.push(LiveClient { ptr: out, defaults });
                        } else {
                            redislock_client_free(out);
                        }
                    } else {
                        last_error(&mut u);
                    }
                }
            }
            5..=7 => {
                if t.locks.len() < 8 {
                    acquire(&mut u, &mut t, None);
                }
            }
            8 | 9 => {
                if t.locks.len() < 8 {
                    let w = u.int_in_range(0u64..=5).unwrap_or(0);
                    acquire(&mut u, &mut t, Some(w));
                }
            }
            10 | 11 => {
                // release (possibly again)
                if let Some(i) = pick(&mut u, &t.locks) {
                    let l = &mut t.locks[i];
                    let was_released = l.released;
                    let c = code(redislock_lock_release(l.ptr));
                    if was_released {
                        assert_eq!(c, NOT_HELD, "second release returned {c}");
                    }
                    if c == OK || c == NOT_HELD {
                        l.released = true;
                        check_released(l);
                        let c2 = code(redislock_lock_release(l.ptr));
                        assert_eq!(c2, NOT_HELD, "release after release returned {c2}");
                    } else {
                        last_error(&mut u);
                    }
                }
            }
            12 => {
                if let Some(i) = pick(&mut u, &t.locks) {
                    let l = &t.locks[i];
                    let c = code(redislock_lock_extend(l.ptr, lease(&mut u)));
                    if l.released {
                        assert!(
                            c == NOT_HELD || c == INVALID_ARGUMENT,
                            "extend after release returned {c}"
                        );
                    }
                    if c == OK {
                        assert!(!l.released);
                    }
                }
            }
            13 => {
                if let Some(i) = pick(&mut u, &t.locks) {
                    let l = &t.locks[i];
                    let held = redislock_lock_is_held(l.ptr);
                    let rem = redislock_lock_remaining_ms(l.ptr);
                    if l.released {
                        assert!(!held && rem == 0);
                    }
                    if !held {
                        assert_eq!(rem, 0, "remaining > 0 while not held");
                    }
                }
            }
            14 => {
                if let Some(i) = pick(&mut u, &t.locks) {
                    let l = &t.locks[i];
                    let mut tok: u64 = 0xDEAD_BEEF_DEAD_BEEF;
                    let null_out = u.ratio(1u8, 16u8).unwrap_or(false);
                    let c = code(redislock_lock_fencing_token(
                        l.ptr,
                        if null_out { ptr::null_mut() } else { &mut tok },
                    ));
                    if null_out {
                        assert_eq!(c, NULL_PARAMETER);
                    } else if l.fencing {
                        assert_eq!(c, OK, "fenced lock without token");
                        assert!(tok >= 1 && tok != 0xDEAD_BEEF_DEAD_BEEF);
                    } else {
                        assert_eq!(c, INVALID_ARGUMENT);
                        assert_eq!(tok, 0xDEAD_BEEF_DEAD_BEEF, "token_out written on failure");
                    }
                }
            }
            15 => {
                // free a lock (releases it if held)
                if let Some(i) = pick(&mut u, &t.locks) {
                    let l = t.locks.swap_remove(i);
                    redislock_lock_free(l.ptr);
                }
            }
            16 => {
                // free a client (its locks stay usable)
                if let Some(i) = pick(&mut u, &t.clients) {
                    redislock_client_free(t.clients.swap_remove(i).ptr);
                }
            }
            17 => {
                if let Some(i) = pick(&mut u, &t.configs) {
                    redislock_config_free(t.configs.swap_remove(i).ptr);
                }
            }
            18 => {
                // text functions
                let codes = u.arbitrary::<u32>().unwrap_or(0);
                let codes = if u.arbitrary().unwrap_or(false) {
                    codes % (CODES + 1)
                } else {
                    codes
                };
                let buf_len = small_len(&mut u);
                let mut buf = vec![0xEEu8; buf_len + 16];
                let p = if buf_len == 0 {
                    ptr::null_mut()
                } else {
                    buf.as_mut_ptr().cast()
                };
                let ret = redislock_result_message(codes, p, buf_len);
                assert!(ret > 0);
                check_text_buffer(ret, &buf, buf_len);
                last_error(&mut u);
                assert!(!redislock_version().is_null());
            }
            19 => {
                // acquire again with a kept request (it holds no lock of its own)
                if t.locks.len() < 8
                    && let Some(i) = pick(&mut u, &t.requests)
                {
                    let (request, name_len, settings) = (
                        t.requests[i].ptr,
                        t.requests[i].name_len,
                        t.requests[i].settings,
                    );
                    let wait = if u.arbitrary().unwrap_or(false) {
                        Some(u.int_in_range(0u64..=5).unwrap_or(0))
                    } else {
                        None
                    };
                    let mut out: *mut redislock_lock = sentinel();
                    let c = request_acquire(request, wait, &mut out);
                    check_acquired(&mut u, &mut t, c, out, false, name_len, settings, wait);
                }
            }
            20 => {
                // free a kept request (its locks stay held)
                if let Some(i) = pick(&mut u, &t.requests) {
                    redislock_request_free(t.requests.swap_remove(i).ptr);
                }
            }
            21 => {
                // downgrade: only a held write lock does; it is then released, and the read
                // lock has its fencing
                if t.locks.len() < 8
                    && let Some(i) = pick(&mut u, &t.locks)
                {
                    let mut out: *mut redislock_lock = sentinel();
                    let c = code(redislock_lock_downgrade(t.locks[i].ptr, &mut out));
                    check_out(c, out, "downgrade");
                    if c == OK {
                        assert!(!t.locks[i].released, "a released lock downgraded");
                        t.locks[i].released = true;
                        check_released(&t.locks[i]);
                        // (The read lock may be past its lease already: a lease of a few ms.)
                        let fencing = t.locks[i].fencing;
                        t.locks.push(HeldLock {
                            ptr: out,
                            fencing,
                            released: false,
                        });
                    } else {
                        assert!(
                            [INVALID_ARGUMENT, NOT_HELD, CONNECTION, REDIS_ERROR].contains(&c),
                            "downgrade returned {c}"
                        );
                        last_error(&mut u);
                    }
                }
            }
            _ => {
                // NULL handles everywhere
                assert_eq!(
                    code(redislock_lock_release(ptr::null_mut())),
                    NULL_PARAMETER
                );
                assert_eq!(
                    code(redislock_lock_extend(ptr::null_mut(), 1000)),
                    NULL_PARAMETER
                );
                assert!(!redislock_lock_is_held(ptr::null()));
                assert_eq!(redislock_lock_remaining_ms(ptr::null()), 0);
                let mut tok = 5u64;
                assert_eq!(
                    code(redislock_lock_fencing_token(ptr::null(), &mut tok)),
                    NULL_PARAMETER
                );
                assert_eq!(tok, 5);
                let mut out: *mut redislock_lock = sentinel();
                assert_eq!(
                    code(redislock_lock_try_acquire(
                        ptr::null(),
                        b"x".as_ptr(),
                        1,
                        &mut out
                    )),
                    NULL_PARAMETER
                );
                let mut request: *mut redislock_request = sentinel();
                assert_eq!(
                    code(redislock_request_new(
                        ptr::null(),
                        b"x".as_ptr(),
                        1,
                        &mut request
                    )),
                    NULL_PARAMETER
                );
                assert_eq!(request, sentinel());
                assert_eq!(
                    code(redislock_request_set_lease_ms(ptr::null_mut(), 1000)),
                    NULL_PARAMETER
                );
                assert_eq!(
                    code(redislock_request_set_auto_renew(ptr::null_mut(), true)),
                    NULL_PARAMETER
                );
                assert_eq!(
                    code(redislock_request_set_fencing(ptr::null_mut(), true)),
                    NULL_PARAMETER
                );
                assert_eq!(
                    code(redislock_request_try_acquire(ptr::null(), &mut out)),
                    NULL_PARAMETER
                );
                assert_eq!(
                    code(redislock_request_acquire(ptr::null(), 1, &mut out)),
                    NULL_PARAMETER
                );
                assert_eq!(out, sentinel());
                redislock_lock_free(ptr::null_mut());
                redislock_request_free(ptr::null_mut());
                redislock_client_free(ptr::null_mut());
                redislock_config_free(ptr::null_mut());
            }
        }
    }
    // Free everything, in an order the input picks (locks and requests may outlive their
    // client).
    while !(t.locks.is_empty()
        && t.requests.is_empty()
        && t.clients.is_empty()
        && t.configs.is_empty())
    {
        match u.int_in_range(0u8..=3).unwrap_or(0) {
            0 if !t.locks.is_empty() => redislock_lock_free(t.locks.pop().unwrap().ptr),
            1 if !t.clients.is_empty() => redislock_client_free(t.clients.pop().unwrap().ptr),
            2 if !t.requests.is_empty() => redislock_request_free(t.requests.pop().unwrap().ptr),
            _ => {
                if let Some(c) = t.configs.pop() {
                    redislock_config_free(c.ptr);
                } else if let Some(l) = t.locks.pop() {
                    redislock_lock_free(l.ptr);
                } else if let Some(r) = t.requests.pop() {
                    redislock_request_free(r.ptr);
                } else if let Some(c) = t.clients.pop() {
                    redislock_client_free(c.ptr);
                }
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = url();
    run(data);
});
