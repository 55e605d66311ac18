//! `redislock_set_log_callback`: the library's log records (the `log` facade) handed to a C
//! function.

use std::ffi::{CString, c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use super::enums::redislock_log_level;
use super::enums::redislock_result::{self, REDISLOCK_OK};

/// A log callback: `user_data` as given to `redislock_set_log_callback`, the record's level,
/// and its text (NUL-terminated, valid only during the call). Called on whichever thread logs,
/// often a library thread: it must not block for long and must not call back into the library.
pub type redislock_log_callback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: redislock_log_level,
        message: *const c_char,
    ),
>;

struct Sink {
    callback: unsafe extern "C" fn(*mut c_void, redislock_log_level, *const c_char),
    user_data: *mut c_void,
    max: redislock_log_level,
    /// Once replaced: the sink replaced before this one (see RETIRED).
    older: AtomicPtr<Sink>,
}

// SAFETY: the user data pointer is only handed back to the C callback, on any thread; the
// caller of redislock_set_log_callback promises that this is allowed (documented there).
unsafe impl Send for Sink {}
// SAFETY: as above; the sink itself is never changed in place.
unsafe impl Sync for Sink {}

/// The sink in use, or null when logging is off. Taken without a lock, so that a child forked
/// while a thread of the parent was inside a callback (or replacing the sink) logs and replaces
/// it without waiting for that thread.
static SINK: AtomicPtr<Sink> = AtomicPtr::new(ptr::null_mut());
/// The sinks replaced so far, newest first (each links the one before it): never freed, since
/// another thread may be calling one still, and kept reachable, as memory in use. One small
/// allocation per `redislock_set_log_callback` with a callback.
static RETIRED: AtomicPtr<Sink> = AtomicPtr::new(ptr::null_mut());

/// The sink in use, if any.
fn sink() -> Option<&'static Sink> {
    // SAFETY: a non-null pointer here is a leaked Box (see SINK), never freed.
    unsafe { SINK.load(Ordering::Acquire).as_ref() }
}

struct CLogger;

fn level_of(level: log::Level) -> redislock_log_level {
    use redislock_log_level::*;
    match level {
        log::Level::Error => REDISLOCK_LOG_ERROR,
        log::Level::Warn => REDISLOCK_LOG_WARN,
        log::Level::Info => REDISLOCK_LOG_INFO,
        log::Level::Debug => REDISLOCK_LOG_DEBUG,
        log::Level::Trace => REDISLOCK_LOG_TRACE,
    }
}

impl log::Log for CLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("redislock")
            && sink().is_some_and(|s| level_of(metadata.level()) <= s.max)
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let Some(sink) = sink() else { return };
        let text = record.args().to_string().replace('\0', " ");
        let Ok(text) = CString::new(text) else { return };
        // SAFETY: the callback and its user data were given by the C caller, who promised they
        // can be called from any thread until replaced; the text lives during the call.
        unsafe { (sink.callback)(sink.user_data, level_of(record.level()), text.as_ptr()) };
    }

    fn flush(&self) {}
}

/// Sends the library's log records up to `max_level` to `callback` (NULL, or
/// REDISLOCK_LOG_OFF, turns logging off again; a later call replaces the callback). `user_data`
/// is passed back to every call, from any thread, until replaced. Records never hold a lock
/// token or a password.
/// Errors: INTERNAL when the process has another logger of the Rust `log` facade installed
/// (only possible in a Rust program that also uses this C API).
#[unsafe(no_mangle)]
pub extern "C" fn redislock_set_log_callback(
    callback: redislock_log_callback,
    user_data: *mut c_void,
    max_level: redislock_log_level,
) -> redislock_result {
    ffi_panic_boundary! {
        // Installed at the first call; a later call (or a racing one) finds it in place.
        static LOGGER: CLogger = CLogger;
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(log::LevelFilter::Trace);
        }
        let installed: *const dyn log::Log = log::logger();
        if !ptr::addr_eq(installed, &LOGGER as *const CLogger) {
            return super::last_error::fail(&crate::Error::internal(
                "another logger of the Rust log facade is installed in this process",
            ));
        }
        let sink = callback
            .filter(|_| max_level != redislock_log_level::REDISLOCK_LOG_OFF)
            .map(|callback| Sink {
                callback,
                user_data,
                max: max_level,
                older: AtomicPtr::new(ptr::null_mut()),
            });
        let sink = sink.map_or(ptr::null_mut(), |s| Box::into_raw(Box::new(s)));
        let replaced = SINK.swap(sink, Ordering::AcqRel);
        // SAFETY: a non-null pointer from SINK is a Box leaked above, never freed.
        if let Some(replaced) = unsafe { replaced.as_ref() } {
            let mut head = RETIRED.load(Ordering::Acquire);
            loop {
                replaced.older.store(head, Ordering::Relaxed);
                let new = ptr::from_ref(replaced).cast_mut();
                match RETIRED.compare_exchange(head, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(now) => head = now,
                }
            }
        }
        REDISLOCK_OK
    }
}
