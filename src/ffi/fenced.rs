//! `redislock_fenced`: a resource kept in Redis written only with a fencing token not older than
//! its own (`FencedResource`), and `redislock_lock_fence_epoch`.

use std::ffi::c_char;

use super::client::redislock_client;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::{BoxHandle, bytes, free_handle, into_handle, write_out};
use super::last_error;
use super::lock::redislock_lock;
use crate::{Error, Fence, FencedResource};

/// A resource kept in Redis at one key, written only with a fencing token not older than the
/// last one a write to it was applied with (kept in `{key}:fenced`). Open it with
/// `redislock_fenced_open`; free it with `redislock_fenced_free`. Thread-safe.
pub struct redislock_fenced {
    _private: [u8; 0],
}

impl BoxHandle for redislock_fenced {
    type Inner = FencedResource;
}

/// Opens the resource `key` (`key_len` bytes, used as given: no key prefix) on the servers of
/// `client` (one server, a Sentinel group or a Cluster). Touches no network. On success
/// `*fenced_out` is a new handle to free with `redislock_fenced_free`.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (empty or oversized key; a Redlock client).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_open(
    client: *const redislock_client,
    key: *const u8,
    key_len: usize,
    fenced_out: *mut *mut redislock_fenced,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        let key = try_bytes!(key, key_len);
        try_out!(fenced_out);
        let res = try_rust!(FencedResource::with_client(client, key));
        // SAFETY: `fenced_out` is not NULL (checked above) and points to writable memory for a
        // pointer (calling conventions).
        unsafe { write_out(fenced_out, into_handle::<redislock_fenced>(res)) };
        REDISLOCK_OK
    }
}

/// Sets the resource to `value` (`value_len` bytes) if `token` is not older than the resource's
/// fence, and advances the fence to `token`, in one script. Errors: STALE (a later token wrote:
/// nothing written), NULL_PARAMETER, CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_set(
    fenced: *const redislock_fenced,
    token: u64,
    value: *const u8,
    value_len: usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let res = try_ref!(fenced);
        let value = try_bytes!(value, value_len);
        try_rust!(res.set(&Fence::new(Vec::new(), token, None), value));
        REDISLOCK_OK
    }
}

/// Adds `n` to the resource's integer (0 when it has none) if `token` is not older than the
/// resource's fence, advances the fence to `token`, and writes the new value to `*value_out`.
/// Errors: STALE (nothing written), NULL_PARAMETER, CONNECTION (also when the connection
/// dropped after the write was sent: whether it applied is unknown), REDIS_ERROR (the value is
/// not an integer).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_incr_by(
    fenced: *const redislock_fenced,
    token: u64,
    n: i64,
    value_out: *mut i64,
) -> redislock_result {
    ffi_panic_boundary! {
        let res = try_ref!(fenced);
        try_out!(value_out);
        let value = try_rust!(res.incr_by(&Fence::new(Vec::new(), token, None), n));
        // SAFETY: `value_out` is not NULL (checked above) and points to writable memory for an
        // `int64_t` (calling conventions).
        unsafe { write_out(value_out, value) };
        REDISLOCK_OK
    }
}

/// Writes the resource's fence to `*fence_out`: the largest fencing token a write to it was
/// applied with, 0 before the first (tokens start at 1). One round trip.
/// Errors: NULL_PARAMETER, CONNECTION, REDIS_ERROR.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_current_fence(
    fenced: *const redislock_fenced,
    fence_out: *mut u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let res = try_ref!(fenced);
        try_out!(fence_out);
        let fence = try_rust!(res.current_fence()).unwrap_or(0);
        // SAFETY: `fence_out` is not NULL (checked above) and points to writable memory for a
        // `uint64_t` (calling conventions).
        unsafe { write_out(fence_out, fence) };
        REDISLOCK_OK
    }
}

/// The most keys, or arguments, one `redislock_fenced_eval` takes (Lua's own limit on a
/// script's arguments is lower still).
const MAX_EVAL_ITEMS: usize = 1 << 20;

/// Runs the caller's Lua `script` (NUL-terminated UTF-8: the body of a function, whose `return`
/// is the reply) if `token` is not older than the resource's fence, then advances the fence to
/// `token`, all in one script. The script sees the resource's key as `KEYS[1]`, then the
/// `keys_count` keys (key i is `keys_len[i]` bytes at `keys[i]`), and the `args_count`
/// arguments as `ARGV` (likewise); on a Cluster every key must share the resource's slot (give
/// them its hash tag). The script's reply is copied into `reply_buf`: a string as it is, an
/// integer in decimal, nil (or false) as nothing; at most `reply_buf_len - 1` bytes, then a NUL
/// (binary-safe: a reply holding NUL bytes is copied whole up to the cut); `reply_buf` may be
/// NULL when `reply_buf_len` is 0. `*reply_len_out` gets the whole reply's length: a value `>=
/// reply_buf_len` means it was cut. The script is not run again to fetch the rest, so size the
/// buffer for the replies the script gives. A script that fails leaves the fence as it was
/// (what it wrote before failing stays, as with any Redis script).
/// Errors: STALE (a later token wrote: the script did not run), NULL_PARAMETER (`script` or
/// `reply_len_out` NULL; `keys`, `keys_len`, `args` or `args_len` NULL with a count; an item
/// NULL with a length), INVALID_ARGUMENT (the script is not UTF-8; the script ran and the fence
/// advanced, but it replied with a table, which has no byte form), CONNECTION (also when the
/// connection dropped after the script was sent: whether it ran is unknown; it is never sent
/// twice), REDIS_ERROR (the script failed: a Lua error, a key of another slot).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_eval(
    fenced: *const redislock_fenced,
    token: u64,
    script: *const c_char,
    keys: *const *const u8,
    keys_len: *const usize,
    keys_count: usize,
    args: *const *const u8,
    args_len: *const usize,
    args_count: usize,
    reply_buf: *mut c_char,
    reply_buf_len: usize,
    reply_len_out: *mut usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let res = try_ref!(fenced);
        let script = try_str!(script);
        try_out!(reply_len_out);
        // SAFETY: the header's calling conventions: non-NULL arrays hold `count` readable
        // elements, and each non-NULL item its length in bytes, unchanged during the call.
        let keys = match unsafe { byte_strings(keys, keys_len, keys_count, "keys") } {
            Ok(keys) => keys,
            Err(code) => return code,
        };
        // SAFETY: as for the keys.
        let args = match unsafe { byte_strings(args, args_len, args_count, "args") } {
            Ok(args) => args,
            Err(code) => return code,
        };
        let fence = Fence::new(Vec::new(), token, None);
        let reply: redis::Value = try_rust!(res.eval(&fence, script, &keys, &args));
        let reply = try_rust!(reply_bytes(reply));
        write_bytes(&reply, reply_buf, reply_buf_len);
        // SAFETY: `reply_len_out` is not NULL (checked above) and points to writable memory
        // for a `size_t` (calling conventions).
        unsafe { write_out(reply_len_out, reply.len()) };
        REDISLOCK_OK
    }
}

/// Borrows `count` byte strings given as an array of pointers and one of lengths (`what`
/// names them in errors).
///
/// # Safety
/// Non-NULL arrays hold `count` readable elements, and each non-NULL pointer of `ptrs` its
/// length's readable bytes, unchanged while the result lives.
unsafe fn byte_strings<'a>(
    ptrs: *const *const u8,
    lens: *const usize,
    count: usize,
    what: &str,
) -> Result<Vec<&'a [u8]>, redislock_result> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if count > MAX_EVAL_ITEMS {
        // Refused before reading the arrays, which the count says are this long.
        return Err(last_error::fail(&Error::invalid_argument(format!(
            "a fenced script takes at most {MAX_EVAL_ITEMS} {what}, got {count}"
        ))));
    }
    if ptrs.is_null() {
        last_error::null_parameter(what);
        return Err(redislock_result::REDISLOCK_NULL_PARAMETER);
    }
    let lens_name = format!("{what}_len");
    if lens.is_null() {
        last_error::null_parameter(&lens_name);
        return Err(redislock_result::REDISLOCK_NULL_PARAMETER);
    }
    // SAFETY: both are non-NULL (checked above) and point to `count` readable elements (the
    // contract above); `count` is at most MAX_EVAL_ITEMS, so the slices' sizes are far below
    // isize::MAX.
    let (ptrs, lens) = unsafe {
        (
            std::slice::from_raw_parts(ptrs, count),
            std::slice::from_raw_parts(lens, count),
        )
    };
    let mut out = Vec::with_capacity(count);
    for (&p, &len) in ptrs.iter().zip(lens) {
        // SAFETY: a non-NULL item points to `len` readable bytes (the contract above).
        out.push(unsafe { bytes(p, len, what) }?);
    }
    Ok(out)
}

/// The bytes of a script's reply: a string as it is, an integer in decimal, nil as nothing; a
/// table has none.
fn reply_bytes(reply: redis::Value) -> Result<Vec<u8>, Error> {
    use redis::Value;
    Ok(match reply {
        Value::Nil => Vec::new(),
        Value::Int(n) => n.to_string().into_bytes(),
        Value::BulkString(b) => b,
        Value::SimpleString(s) => s.into_bytes(),
        Value::Okay => b"OK".to_vec(),
        Value::Boolean(b) => {
            if b {
                b"1".to_vec()
            } else {
                Vec::new()
            }
        }
        Value::Double(d) => d.to_string().into_bytes(),
        other => {
            return Err(Error::invalid_argument(format!(
                "the script ran and the resource's fence advanced, but its reply has no byte \
                 form (return a string or an integer): {other:?}"
            )));
        }
    })
}

/// Copies `reply` into the caller's buffer: at most `buf_len - 1` bytes, then a NUL; nothing
/// when `buf` is NULL or `buf_len` is 0. The byte-string twin of `text::write_text` (no cut at
/// a character boundary).
fn write_bytes(reply: &[u8], buf: *mut c_char, buf_len: usize) {
    if buf.is_null() || buf_len == 0 {
        return;
    }
    let n = reply.len().min(buf_len - 1);
    // SAFETY: the caller gives `buf_len` writable bytes at `buf` (the buffer convention); we
    // write `n + 1 <= buf_len` of them, from a Vec that cannot overlap a buffer the caller owns.
    unsafe {
        std::ptr::copy_nonoverlapping(reply.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
}

/// Frees the handle. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_fenced_free(fenced: *mut redislock_fenced) {
    ffi_panic_boundary! {
        // SAFETY: `fenced` is NULL or a live handle that the caller gives up and no other thread
        // uses (calling conventions).
        unsafe { free_handle(fenced) }
    }
}

/// Writes the failover epoch of the master that granted this fenced lock to `*epoch_out` (the
/// fencing token's high bits: token = epoch × 2^48 + counter) on a Sentinel group or a Cluster,
/// 0 on a single server. Errors: INVALID_ARGUMENT (acquired without fencing; a set or
/// permits), NULL_PARAMETER.
#[unsafe(no_mangle)]
pub extern "C" fn redislock_lock_fence_epoch(
    lock: *const redislock_lock,
    epoch_out: *mut u64,
) -> redislock_result {
    ffi_panic_boundary! {
        let lock = try_ref!(lock);
        try_out!(epoch_out);
        let Some(fence) = try_rust!(lock.fence()) else {
            return last_error::fail(&Error::invalid_argument(format!(
                "lock {} was acquired without fencing: it has no fence",
                lock.shown()
            )));
        };
        // SAFETY: `epoch_out` is not NULL (checked above) and points to writable memory for a
        // `uint64_t` (calling conventions).
        unsafe { write_out(epoch_out, fence.epoch().unwrap_or(0)) };
        REDISLOCK_OK
    }
}
