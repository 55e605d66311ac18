//! `redislock_client`: one Redis lock client, shared by all threads of a process.

use std::ffi::c_char;

use super::config::redislock_config;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, free_handle, into_handle, write_out};
use crate::Client;

/// A Redis lock client: a pool of connections to one server and the renewal threads of its
/// locks. Thread-safe: create one per process (and server) and share it between all threads.
/// It connects lazily, so creating it never touches the network. After fork() a child can keep
/// using it: it notices the new process and opens connections of its own.
pub struct redislock_client {
    _private: [u8; 0],
}

impl BoxHandle for redislock_client {
    type Inner = Client;
}

/// A client with default settings for `url`, `redis://[user:password@]host:port/db`.
/// On success `*client_out` is a new client to free with `redislock_client_free`.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (bad URL).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_new(
    url: *const c_char,
    client_out: *mut *mut redislock_client,
) -> redislock_result {
    ffi_panic_boundary! {
        let url = try_str!(url);
        try_out!(client_out);
        let client = try_rust!(Client::open(url));
        // SAFETY: `client_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(client_out, into_handle::<redislock_client>(client)) };
        REDISLOCK_OK
    }
}

/// A client built from a config, after checking the URL and every setting. The config is not
/// consumed: free it with `redislock_config_free` when done.
/// On success `*client_out` is a new client to free with `redislock_client_free`.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (bad URL or setting; the last error names it).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_from_config(
    config: *const redislock_config,
    client_out: *mut *mut redislock_client,
) -> redislock_result {
    ffi_panic_boundary! {
        let builder = try_ref!(config);
        try_out!(client_out);
        let client = try_rust!(builder.clone().build());
        // SAFETY: `client_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(client_out, into_handle::<redislock_client>(client)) };
        REDISLOCK_OK
    }
}

/// Frees a client. Its locks and requests stay usable (each keeps what it needs) and must still
/// be freed. When the client and its last lock and request are freed, every thread the client started
/// has ended and been joined, and its connections are closed (unless the client is persistent:
/// see `redislock_config_set_persistent`). No other thread may use the client during or after
/// this call. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_free(client: *mut redislock_client) {
    ffi_panic_boundary! {
        // SAFETY: `client` is NULL or a live client that the caller gives up and no other thread
        // uses (calling conventions).
        unsafe { free_handle(client) }
    }
}

/// Releases the lock `name` whoever holds it (or hands it to the oldest waiter): an operator's
/// last resort for a holder that is gone. `*released_out` tells whether a holder was there.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (name), CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_force_release(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    released_out: *mut bool,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        try_out!(released_out);
        let released = try_rust!(client.force_release(name));
        // SAFETY: `released_out` is not NULL (checked above) and points to writable memory for
        // a `bool` (calling conventions).
        unsafe { write_out(released_out, released) };
        REDISLOCK_OK
    }
}

/// Writes to `*owned_out` whether the lock `name` is held now with the owner token `owner`
/// (`owner_len` bytes); one round trip. The token is compared inside the library: no caller
/// learns another holder's token.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (name), CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_is_owned_by(
    client: *const redislock_client,
    name: *const u8,
    name_len: usize,
    owner: *const u8,
    owner_len: usize,
    owned_out: *mut bool,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let name = try_bytes!(name, name_len);
        let owner = try_bytes!(owner, owner_len);
        try_out!(owned_out);
        let owner = String::from_utf8_lossy(owner);
        let owned = try_rust!(client.is_owned_by(name, &owner));
        // SAFETY: `owned_out` is not NULL (checked above) and points to writable memory for a
        // `bool` (calling conventions).
        unsafe { write_out(owned_out, owned) };
        REDISLOCK_OK
    }
}
