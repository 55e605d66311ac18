//! `redislock_client_metrics_prometheus`: a client's metrics as Prometheus text, and the lock
//! names that get series of their own (`redislock_config_add_metric_name`).

use std::ffi::c_char;

use super::client::redislock_client;
use super::config::redislock_config;
use super::enums::redislock_result::{self, REDISLOCK_OK};
use super::handle::write_out;
use super::last_error::fail;
use super::text::write_text;
use crate::Error;

/// Writes the metrics of the client's backend in this process as Prometheus text (exposition
/// format 0.0.4; every metric is listed in `docs/metrics.md`) into `buf`, NUL-terminated, and
/// the size it needs, NUL included, to `*needed_out`. Persistent clients with the same settings
/// share a backend, and so its numbers.
///
/// When the text does not fit in `buf_len` bytes nothing but an empty string is written (a cut
/// text would be wrong, not short) and INVALID_ARGUMENT is returned: call again with a buffer
/// of `*needed_out` bytes (a little more, as the numbers may grow meanwhile). `buf` may be NULL
/// when `buf_len` is 0, to learn the size.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (buffer too small).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_client_metrics_prometheus(
    client: *const redislock_client,
    buf: *mut c_char,
    buf_len: usize,
    needed_out: *mut usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let client = try_ref!(client);
        try_out!(needed_out);
        if buf.is_null() && buf_len > 0 {
            super::last_error::null_parameter("buf");
            return redislock_result::REDISLOCK_NULL_PARAMETER;
        }
        let text = client.metrics().to_prometheus();
        let needed = text.len() + 1;
        // SAFETY: `needed_out` is not NULL (checked above) and points to writable memory for a
        // `size_t` (calling conventions).
        unsafe { write_out(needed_out, needed) };
        if needed > buf_len {
            write_text("", buf, buf_len);
            return fail(&Error::invalid_argument(format!(
                "the metrics text needs a buffer of {needed} bytes, {buf_len} were given"
            )));
        }
        write_text(&text, buf, buf_len);
        REDISLOCK_OK
    }
}

/// Gives the lock `name` (`len` bytes, copied) metric series of its own (`redislock_name_*`);
/// a name ending in `*` is a prefix (`"jobs:*"`). At most 32 names or prefixes per client;
/// checked by `redislock_client_from_config`. No other name gets series of its own.
/// Errors: NULL_PARAMETER, INVALID_ARGUMENT (not UTF-8).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_config_add_metric_name(
    config: *mut redislock_config,
    name: *const u8,
    len: usize,
) -> redislock_result {
    ffi_panic_boundary! {
        let config = try_mut!(config);
        let name = try_bytes!(name, len);
        let name = try_rust!(std::str::from_utf8(name).map_err(|_| {
            Error::invalid_argument("a metric name must be UTF-8")
        }));
        *config = config.clone().add_metric_name(name);
        REDISLOCK_OK
    }
}
