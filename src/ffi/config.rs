//! `redislock_config`: the client builder. Setters record values; `redislock_client_from_config`
//! validates them all at once.

use std::ffi::c_char;
use std::time::Duration;

use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use crate::{Client, ClientBuilder};

/// A client configuration being built: the URL and every setting of a client. Not thread-safe:
/// use one config from one thread at a time. It can build any number of clients.
pub struct redislock_config {
    _private: [u8; 0],
}

impl BoxHandle for redislock_config {
    type Inner = ClientBuilder;
}

/// Replaces the builder with `f(builder)`. Works on a clone so that the config stays whole
/// even if `f` panicked.
fn update(builder: &mut ClientBuilder, f: impl FnOnce(ClientBuilder) -> ClientBuilder) {
    *builder = f(builder.clone());
}

/// Starts a configuration for the Redis server at `url`,
/// `redis://[user:password@]host:port/db` (also `rediss://` and `unix://`), with every setting
/// at its default. The URL is checked, with all settings, by `redislock_client_from_config`.
/// On success `*config_out` is a new config to free with `redislock_config_free`.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (URL not UTF-8).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_new(
    url: *const c_char,
    config_out: *mut *mut redislock_config,
) -> redislock_result {
    ffi_panic_boundary! {
        let url = try_str!(url);
        try_out!(config_out);
        let config = into_handle::<redislock_config>(Client::builder(url));
        // SAFETY: `config_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(config_out, config) };
        REDISLOCK_OK
    }
}

/// Frees a config. Clients built from it are not affected. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_free(config: *mut redislock_config) {
    ffi_panic_boundary! {
        // SAFETY: `config` is NULL or a live config that the caller gives up (calling
        // conventions).
        unsafe { free_handle(config) }
    }
}

/// Connections for acquire, release, extend and renewal (default 16; 1 to 10000). Waiters use a
/// pool of their own (see `redislock_config_set_max_waiters`), so they never starve these.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_pool_size(
    config: *mut redislock_config,
    n: u32,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.pool_size(n));
        REDISLOCK_OK
    }
}

/// Threads of this process that may block waiting for locks at the same time, each on a
/// connection of the waiter pool (default 128; 1 to 10000). Further waiters queue for a
/// connection.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_max_waiters(
    config: *mut redislock_config,
    n: u32,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.max_waiters(n));
        REDISLOCK_OK
    }
}

/// Whether clients built from this config share one backend (connections and renewal threads)
/// with every other persistent client of this process that has the same URL and connection
/// settings (default false: each client has its own, and its threads end when the client and
/// its last lock are freed). A persistent backend lives until the process exits, so a program
/// that makes a client per request connects and starts threads only once. Lock defaults and
/// the key prefix stay each client's own. At most 64 different settings per process; beyond
/// that, building fails with LIMIT_REACHED on first use.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_persistent(
    config: *mut redislock_config,
    on: bool,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.persistent(on));
        REDISLOCK_OK
    }
}

/// Replicas that must acknowledge every lock write (acquire with its fencing counter, handoff,
/// extend, renewal) before it counts (default 0; 0 to 100): each such write is followed by
/// WAIT. An acquire that fewer replicas acknowledge in time is released again and fails with
/// CONNECTION. With Sentinel, an acknowledged lock survives the promotion of a replica.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_min_replicas(
    config: *mut redislock_config,
    n: u32,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.min_replicas(n));
        REDISLOCK_OK
    }
}

/// How long a lock write waits for the min_replicas acknowledgements, in milliseconds (default
/// 500; at least 1 and less than the read timeout).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_replica_timeout_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.replica_timeout(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// TCP connect timeout in milliseconds (default 2000; 1 ms to 30 days).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_connect_timeout_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.connect_timeout(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// Socket read timeout in milliseconds for every command (default 2000; 1 ms to 30 days). A
/// blocked waiter gets its block time added to it.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_read_timeout_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.read_timeout(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// Socket write timeout in milliseconds (default 2000; 1 ms to 30 days).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_write_timeout_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.write_timeout(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// The longest a call waits for a pooled connection, including connecting one, in
/// milliseconds (default 3000; 1 ms to 30 days).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_checkout_timeout_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.checkout_timeout(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// How long a release or an extend keeps trying while the server that holds the lock cannot
/// be reached (a Sentinel or Cluster failover), in milliseconds (default 10000; 0 to 30 days;
/// 0: no longer than its first try). Never past the lock's lease. A release still without an
/// answer at the bound returns its error and goes on trying on a thread of the library until
/// the lease ends; so does `redislock_lock_free` of a held lock, without blocking.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_release_timeout_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.release_timeout(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// Default lease of a lock in milliseconds (default 30000; 1 ms to 30 days, at least 100 ms
/// with auto-renewal). With auto-renewal the key is extended every lease/3 while held; without
/// it the lock simply expires after the lease.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_lease_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.lease(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// Whether locks auto-renew by default (default true). Each auto-renewed lock has a renewal
/// thread while held.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_auto_renew(
    config: *mut redislock_config,
    on: bool,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.auto_renew(on));
        REDISLOCK_OK
    }
}

/// Whether locks get fencing tokens by default (default false). Each fenced grant of a name
/// increments a counter kept next to the lock key and returns it.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_fencing(
    config: *mut redislock_config,
    on: bool,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.fencing(on));
        REDISLOCK_OK
    }
}

/// A prefix put in front of every lock name to form its key (default empty; at most 4096
/// bytes). `prefix` points to `len` bytes, which are copied; it may be NULL when `len` is 0.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_key_prefix(
    config: *mut redislock_config,
    prefix: *const u8,
    len: usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let config = try_mut!(config);
        let prefix = try_bytes!(prefix, len);
        update(config, |b| b.key_prefix(prefix));
        REDISLOCK_OK
    }
}

/// How often a waiter re-checks the lock when no release wakes it, in milliseconds (default
/// 1000; 1 ms to 30 days), never later than the lock's remaining lifetime. This only matters
/// when a holder vanishes or a foreign client releases with a plain DEL.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_recheck_interval_ms(
    config: *mut redislock_config,
    ms: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.recheck_interval(Duration::from_millis(ms)));
        REDISLOCK_OK
    }
}

/// Random fraction (0 to 1) taken off each re-check interval so waiters spread out (default
/// 0.2).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_recheck_jitter(
    config: *mut redislock_config,
    fraction: f64,
) -> redislock_result {
    ffi_panic_boundary! {
        update(try_mut!(config), |b| b.recheck_jitter(fraction));
        REDISLOCK_OK
    }
}

/// Upper bound on auto-renewed locks held at once through one client (default 4096; at most
/// 1000000). An acquire beyond it fails with REDISLOCK_LIMIT_REACHED before touching Redis.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_set_max_renewed_locks(
    config: *mut redislock_config,
    n: u64,
) -> redislock_result {
    ffi_panic_boundary! {
        // Beyond usize (32-bit targets) is beyond the accepted range anyway: build() refuses it.
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        update(try_mut!(config), |b| b.max_renewed_locks(n));
        REDISLOCK_OK
    }
}
