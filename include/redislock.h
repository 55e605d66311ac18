/*
 * redislock: blocking Redis locks for C, C++ and PHP (FFI), on the same implementation as the
 * Rust crate. A lock for name N is the Redis key N (after an optional prefix) holding its
 * owner's random token with a millisecond expiry: SET key token NX PX lease to acquire, a
 * compare-and-delete script to release.
 *
 * Link with -lredislock (and -lpthread). Example:
 *
 *   redislock_client *client;
 *   redislock_lock *lock;
 *   if (redislock_client_new("redis://127.0.0.1:6379/", &client) != REDISLOCK_OK) ...;
 *   if (redislock_lock_acquire(client, (const uint8_t *)"stock:42", 8, 5000, &lock)
 *       == REDISLOCK_OK) {
 *       ... the critical section ...
 *       if (redislock_lock_release(lock) != REDISLOCK_OK) ... the lock was lost meanwhile ...;
 *       redislock_lock_free(lock);
 *   }
 *
 * A lock with settings of its own (any not set are the client's) is taken through a request:
 *
 *   redislock_request *req;
 *   if (redislock_request_new(client, (const uint8_t *)"report:daily", 12, &req)
 *       == REDISLOCK_OK) {
 *       redislock_request_set_lease_ms(req, 10000);
 *       redislock_request_set_auto_renew(req, false);
 *       redislock_request_set_fencing(req, true);
 *       if (redislock_request_try_acquire(req, &lock) == REDISLOCK_OK) ... as above ...;
 *       redislock_request_free(req);
 *   }
 *   redislock_client_free(client);
 *
 * A request holds no lock: it can acquire again, and freeing it leaves the locks it took alone.
 *
 * The other kinds of lock are taken through requests too, and each acquire gives a
 * redislock_lock that releases, extends, renews and reports loss like an exclusive lock:
 *
 *   redislock_request_new(client, name, len, &req);             many readers or one writer:
 *   redislock_request_set_kind(req, REDISLOCK_KIND_READ);       (or REDISLOCK_KIND_WRITE)
 *   redislock_request_new_semaphore(client, name, len, 3, &req);   3 permits in all,
 *   redislock_request_set_permits(req, 2);                         2 per acquire
 *   redislock_request_new_set(client, names, names_len, 2, &req);  both names or neither
 *
 * redislock_lock_downgrade() turns a write lock into a read lock with no gap in between.
 * Setters that do not apply to what a request takes (permits for a read lock, fencing for a
 * semaphore, an owner token for anything but an exclusive lock) fail with
 * REDISLOCK_INVALID_ARGUMENT and change nothing.
 *
 * Calling conventions (they hold for every function below):
 *
 * - Names. Functions are redislock_<object>_<action>, the object being the handle they take
 *   first (config, client, request, lock, cancel) or what they describe (result, last_error);
 *   the few that act on the library or on a name rather than a handle are redislock_<action>
 *   (version, set_log_callback, force_release, is_owned_by). Types are redislock_<object>,
 *   constants REDISLOCK_<NAME>. A renamed function keeps its old name as an alias until 1.0,
 *   and a result code or constant keeps its number for good.
 * - Results. Functions that can fail return a redislock_result: REDISLOCK_OK (0) or a code
 *   whose number never changes. redislock_result_message() gives the static text of a code and
 *   redislock_last_error_message() the detail of the calling thread's last failed call (which
 *   lock, which server, why). Every failure sets that detail; success leaves it alone.
 * - Out-parameters come last, are named *_out, and are written only on success.
 * - Pointers. A NULL where a pointer is required gives REDISLOCK_NULL_PARAMETER (false or 0
 *   for the functions that return those). Any other pointer must be valid: a handle from its
 *   _new function and not yet freed, or memory of the stated size. Byte strings (lock names,
 *   the key prefix) are a pointer and a length, may hold any bytes, and are copied; the pointer
 *   may be NULL when the length is 0. Text parameters (URLs) are NUL-terminated UTF-8.
 * - Ownership. Every object made by a _new or acquire function has a _free function, to be
 *   called exactly once; _free(NULL) is a no-op. Strings returned by redislock are static and
 *   never freed; text is otherwise written into the caller's buffer (see the buffer
 *   convention on redislock_result_message).
 * - const. A handle passed as const is not changed by the call.
 * - Threads. A client and a lock may be used from any number of threads at once; a config
 *   from one thread at a time. A request may acquire on several threads at once, but its
 *   setters need it to themselves. Nothing may use a handle while or after it is freed.
 * - Blocking. Calls that talk to Redis block, never longer than the configured timeouts
 *   (connect, read, write, pool checkout) plus, for an acquire, its wait bound.
 * - Panics. A bug that panics inside redislock is caught at the boundary and reported as
 *   REDISLOCK_PANIC (false, 0 or NULL for functions without a result code); it never unwinds
 *   into C.
 * - fork(). A client keeps working in a child process: it notices the new process and opens
 *   connections of its own. A lock inherited across fork() is the parent's: in the child its
 *   release and extend report REDISLOCK_FORKED, it is not held, and freeing it does not
 *   release it.
 * - The library starts threads (lock renewal, connection pools) and is linked with
 *   -z nodelete, so it is never unloaded while they run.
 */

#ifndef REDISLOCK_H
#define REDISLOCK_H

/* Generated by cbindgen from src/ffi/ with cbindgen.toml. Do not edit: run scripts/ci/gen-headers.sh. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * The outcome of a call. The numbers are stable: a code is never renumbered or reused.
 * `redislock_result_message` gives a static text per code, and
 * `redislock_last_error_message` the detail of the last failure on the calling thread.
 */
enum redislock_result
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * Success.
   */
  REDISLOCK_OK = 0,
  /**
   * A single acquire attempt found the lock held by another owner.
   */
  REDISLOCK_HELD = 1,
  /**
   * An acquire with a wait bound was not granted before the bound ran out.
   */
  REDISLOCK_WAIT_TIMEOUT = 2,
  /**
   * Release or extend found the lock no longer ours: released already, lease run out, found
   * lost by renewal, or taken over by another owner.
   */
  REDISLOCK_NOT_HELD = 3,
  /**
   * Bad input: empty or oversized name, zero or absurd lease or wait, invalid URL or
   * configuration, a lock without fencing asked for its fencing token.
   */
  REDISLOCK_INVALID_ARGUMENT = 4,
  /**
   * Redis could not be reached, did not answer within the configured timeouts, or the server
   * at the address does not speak the Redis protocol.
   */
  REDISLOCK_CONNECTION = 5,
  /**
   * Redis answered with an error reply (NOPERM, READONLY, WRONGTYPE, ...).
   */
  REDISLOCK_REDIS_ERROR = 6,
  /**
   * A lock handle was used in a child process after fork(); the lock is the parent's.
   */
  REDISLOCK_FORKED = 7,
  /**
   * A configured bound was reached (max_renewed_locks).
   */
  REDISLOCK_LIMIT_REACHED = 8,
  /**
   * A bug in redislock or an impossible reply from Redis; please report it.
   */
  REDISLOCK_INTERNAL = 9,
  /**
   * A required pointer parameter was NULL.
   */
  REDISLOCK_NULL_PARAMETER = 10,
  /**
   * A panic inside redislock was caught at the C boundary (a bug; please report it).
   */
  REDISLOCK_PANIC = 11,
  /**
   * A waiting acquire was cancelled through its `redislock_cancel`.
   */
  REDISLOCK_CANCELLED = 12,
  /**
   * A fenced write was refused: its fencing token is older than the resource's fence (a later
   * holder wrote since); nothing was written (`redislock_fenced_*`).
   */
  REDISLOCK_STALE = 13,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum redislock_result redislock_result;
#else
typedef uint32_t redislock_result;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * What holds a lock (`redislock_inspect_held_as`). The numbers are stable.
 */
enum redislock_held_as
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * Nothing: the lock is free.
   */
  REDISLOCK_HELD_NONE = 0,
  /**
   * One owner: an exclusive lock or a writer (or a plain `SET NX` client).
   */
  REDISLOCK_HELD_EXCLUSIVE = 1,
  /**
   * Readers of a read/write lock.
   */
  REDISLOCK_HELD_READERS = 2,
  /**
   * Permits of a semaphore.
   */
  REDISLOCK_HELD_SEMAPHORE = 3,
  /**
   * A key of another type than the locks use.
   */
  REDISLOCK_HELD_OTHER = 4,
  /**
   * Redisson's lock (`REDISLOCK_KIND_REDISSON`, or Redisson's own `RLock`): its holders are
   * its owners (client and thread).
   */
  REDISLOCK_HELD_REDISSON = 5,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum redislock_held_as redislock_held_as;
#else
typedef uint32_t redislock_held_as;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * How important a log record is. Lost locks, late or failing renewals: WARN; reconnects:
 * INFO; handoffs and failed connects: DEBUG. No record holds a lock token or a password.
 */
enum redislock_log_level
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * No records (as a `max_level`).
   */
  REDISLOCK_LOG_OFF = 0,
  /**
   * Failures of the library itself (a panicking callback).
   */
  REDISLOCK_LOG_ERROR = 1,
  /**
   * Lost locks, late or failing renewals.
   */
  REDISLOCK_LOG_WARN = 2,
  /**
   * Reconnects.
   */
  REDISLOCK_LOG_INFO = 3,
  /**
   * Handoffs to waiters, failed connects.
   */
  REDISLOCK_LOG_DEBUG = 4,
  /**
   * Everything.
   */
  REDISLOCK_LOG_TRACE = 5,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum redislock_log_level redislock_log_level;
#else
typedef uint32_t redislock_log_level;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Which side of one lock name a request takes (`redislock_request_set_kind`). The numbers are
 * stable.
 */
enum redislock_kind
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * The exclusive lock of the name (the default).
   */
  REDISLOCK_KIND_EXCLUSIVE = 0,
  /**
   * A read lock of the read/write lock of the name: shared with other readers.
   */
  REDISLOCK_KIND_READ = 1,
  /**
   * The write lock of the read/write lock of the name: alone, and excluding exclusive locks
   * of the name too.
   */
  REDISLOCK_KIND_WRITE = 2,
  /**
   * Redisson's RLock of the name (docs/redisson.md), shared with Java services that lock it
   * with Redisson: reentrant per calling OS thread, woken by Redisson's unlock message. No
   * fencing, no owner token; refused on Redlock URLs.
   */
  REDISLOCK_KIND_REDISSON = 3,
#if defined(REDISLOCK_RECIPE_KIND)
  /**
   * The recipe kind (a library built with the cargo feature `recipe-kind`, for its tests).
   */
  REDISLOCK_KIND_RECIPE = 100,
#endif
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum redislock_kind redislock_kind;
#else
typedef uint32_t redislock_kind;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * Whose waiters `redislock_client_inspect` counts. The numbers are stable.
 */
enum redislock_inspect_kind
#if defined(__cplusplus) || __STDC_VERSION__ >= 202311L
  : uint32_t
#endif // defined(__cplusplus) || __STDC_VERSION__ >= 202311L
 {
  /**
   * The exclusive lock's.
   */
  REDISLOCK_INSPECT_EXCLUSIVE = 0,
  /**
   * The read/write lock's.
   */
  REDISLOCK_INSPECT_RWLOCK = 1,
  /**
   * The semaphore's.
   */
  REDISLOCK_INSPECT_SEMAPHORE = 2,
  /**
   * Every kind's the name is used as.
   */
  REDISLOCK_INSPECT_ANY = 3,
};
#ifndef __cplusplus
#if __STDC_VERSION__ >= 202311L
typedef enum redislock_inspect_kind redislock_inspect_kind;
#else
typedef uint32_t redislock_inspect_kind;
#endif // __STDC_VERSION__ >= 202311L
#endif // __cplusplus

/**
 * A cancel handle: `redislock_cancel_cancel` ends every waiting acquire of the requests given
 * it (`redislock_request_set_cancel`), and fails their later ones at once, with
 * REDISLOCK_CANCELLED. Thread-safe: cancel from any thread while others wait with it. Once
 * cancelled it stays cancelled.
 */
typedef struct redislock_cancel redislock_cancel;

/**
 * A Redis lock client: a pool of connections to one server and the renewal threads of its
 * locks. Thread-safe: create one per process (and server) and share it between all threads.
 * It connects lazily, so creating it never touches the network. After fork() a child can keep
 * using it: it notices the new process and opens connections of its own.
 */
typedef struct redislock_client redislock_client;

/**
 * A client configuration being built: the URL and every setting of a client. Not thread-safe:
 * use one config from one thread at a time. It can build any number of clients.
 */
typedef struct redislock_config redislock_config;

/**
 * A resource kept in Redis at one key, written only with a fencing token not older than the
 * last one a write to it was applied with (kept in `{key}:fenced`). Open it with
 * `redislock_fenced_open`; free it with `redislock_fenced_free`. Thread-safe.
 */
typedef struct redislock_fenced redislock_fenced;

/**
 * What a lock looked like at one moment (`redislock_client_inspect`): whether it was held, as
 * what, by how many, for how long yet, how many waited, its fencing counter; never a token.
 * Read it with the `redislock_inspect_*` getters; free it with `redislock_inspect_free`.
 */
typedef struct redislock_inspect redislock_inspect;

/**
 * Who led an election at one moment (`redislock_client_leader`,
 * `redislock_client_wait_leader_change`): its identity, epoch and remaining lease; never its
 * token. Read it with the `redislock_leader_info_*` getters; free it with
 * `redislock_leader_info_free`.
 */
typedef struct redislock_leader_info redislock_leader_info;

/**
 * A lock acquired through a client or a request, of any kind a request can take; the
 * functions below work on each (those that do not apply to a kind say so). Thread-safe: any
 * thread may query, extend or release it, but it must be freed (once) when no other thread
 * uses it. It stays usable after its client is freed. In a child process after fork() it is
 * not the child's: release and extend report REDISLOCK_FORKED, and freeing it leaves the
 * parent's lock alone.
 */
typedef struct redislock_lock redislock_lock;

/**
 * How one lock is to be taken: what it takes (one lock name: an exclusive lock, or a read or
 * write lock; permits of a semaphore; a set of names), and whichever of its lease,
 * auto-renewal, fencing, owner token and cancel handle should differ from the client's
 * defaults (a setting never set is the client's). It holds no lock: one request may be used
 * for any number of acquires, one after the other or at once from several threads, each
 * making a lock of its own. Its setters and `redislock_request_free` need it to themselves:
 * no other thread may use it during those calls. It keeps what it needs of its client, which
 * may be freed before it.
 */
typedef struct redislock_request redislock_request;

/**
 * A lost-lock callback: `user_data` as given to `redislock_lock_on_lost`, the lock's name
 * (`name_len` bytes, without the key prefix) and why it was lost (NUL-terminated); both valid
 * only during the call.
 */
typedef void (*redislock_lost_callback)(void *user_data,
                                        const uint8_t *name,
                                        size_t name_len,
                                        const char *reason);

/**
 * A log callback: `user_data` as given to `redislock_set_log_callback`, the record's level,
 * and its text (NUL-terminated, valid only during the call). Called on whichever thread logs,
 * often a library thread: it must not block for long and must not call back into the library.
 */
typedef void (*redislock_log_callback)(void *user_data,
                                       redislock_log_level level,
                                       const char *message);

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * The library version as a static NUL-terminated string, such as `"0.4.0"`. Never free it.
 */
const char *redislock_version(void);

/**
 * A new cancel handle, not cancelled. On success `*cancel_out` is to be freed with
 * `redislock_cancel_free` once no acquire uses it. Errors: NULL_PARAMETER.
 */
redislock_result redislock_cancel_new(redislock_cancel **cancel_out);

/**
 * Cancels: every acquire waiting with this handle returns REDISLOCK_CANCELLED within about a
 * round trip, leaving no queue entry and no lock behind (a lock handed to it meanwhile is
 * passed on); later acquires with it fail at once. Errors: NULL_PARAMETER.
 */
redislock_result redislock_cancel_cancel(const redislock_cancel *cancel);

/**
 * Whether `redislock_cancel_cancel` was called (false for NULL).
 */
bool redislock_cancel_is_cancelled(const redislock_cancel *cancel);

/**
 * Frees a cancel handle. Requests given it keep a reference of their own and go on working,
 * now with nothing left to cancel them. NULL is a no-op.
 */
void redislock_cancel_free(redislock_cancel *cancel);

/**
 * A client with default settings for `url`, `redis://[user:password@]host:port/db`.
 * On success `*client_out` is a new client to free with `redislock_client_free`.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (bad URL).
 */
redislock_result redislock_client_new(const char *url, redislock_client **client_out);

/**
 * A client built from a config, after checking the URL and every setting. The config is not
 * consumed: free it with `redislock_config_free` when done.
 * On success `*client_out` is a new client to free with `redislock_client_free`.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (bad URL or setting; the last error names it).
 */
redislock_result redislock_client_from_config(const redislock_config *config,
                                              redislock_client **client_out);

/**
 * Frees a client. Its locks and requests stay usable (each keeps what it needs) and must still
 * be freed. When the client and its last lock and request are freed, every thread the client started
 * has ended and been joined, and its connections are closed (unless the client is persistent:
 * see `redislock_config_set_persistent`). No other thread may use the client during or after
 * this call. NULL is a no-op.
 */
void redislock_client_free(redislock_client *client);

/**
 * Releases the lock `name` whoever holds it (or hands it to the oldest waiter): an operator's
 * last resort for a holder that is gone. `*released_out` tells whether a holder was there.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (name), CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_force_release(const redislock_client *client,
                                         const uint8_t *name,
                                         size_t name_len,
                                         bool *released_out);

/**
 * Writes to `*owned_out` whether the lock `name` is held now with the owner token `owner`
 * (`owner_len` bytes); one round trip. The token is compared inside the library: no caller
 * learns another holder's token.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (name), CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_is_owned_by(const redislock_client *client,
                                       const uint8_t *name,
                                       size_t name_len,
                                       const uint8_t *owner,
                                       size_t owner_len,
                                       bool *owned_out);

/**
 * Starts a configuration for the Redis server at `url`,
 * `redis://[user:password@]host:port/db` (also `rediss://` and `unix://`), with every setting
 * at its default. The URL is checked, with all settings, by `redislock_client_from_config`.
 * On success `*config_out` is a new config to free with `redislock_config_free`.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (URL not UTF-8).
 */
redislock_result redislock_config_new(const char *url, redislock_config **config_out);

/**
 * Frees a config. Clients built from it are not affected. NULL is a no-op.
 */
void redislock_config_free(redislock_config *config);

/**
 * Connections for acquire, release, extend and renewal (default 16; 1 to 10000). Waiters use a
 * pool of their own (see `redislock_config_set_max_waiters`), so they never starve these.
 */
redislock_result redislock_config_set_pool_size(redislock_config *config, uint32_t n);

/**
 * Threads of this process that may block waiting for locks at the same time, each on a
 * connection of the waiter pool (default 128; 1 to 10000). Further waiters queue for a
 * connection.
 */
redislock_result redislock_config_set_max_waiters(redislock_config *config, uint32_t n);

/**
 * Whether clients built from this config share one backend (connections and renewal threads)
 * with every other persistent client of this process that has the same URL and connection
 * settings (default false: each client has its own, and its threads end when the client and
 * its last lock are freed). A persistent backend lives until the process exits, so a program
 * that makes a client per request connects and starts threads only once. Lock defaults and
 * the key prefix stay each client's own. At most 64 different settings per process; beyond
 * that, building fails with LIMIT_REACHED on first use.
 */
redislock_result redislock_config_set_persistent(redislock_config *config, bool on);

/**
 * Replicas that must acknowledge every lock write (acquire with its fencing counter, handoff,
 * extend, renewal) before it counts (default 0; 0 to 100): each such write is followed by
 * WAIT. An acquire that fewer replicas acknowledge in time is released again and fails with
 * CONNECTION. With Sentinel, an acknowledged lock survives the promotion of a replica.
 */
redislock_result redislock_config_set_min_replicas(redislock_config *config, uint32_t n);

/**
 * How long a lock write waits for the min_replicas acknowledgements, in milliseconds (default
 * 500; at least 1 and less than the read timeout).
 */
redislock_result redislock_config_set_replica_timeout_ms(redislock_config *config, uint64_t ms);

/**
 * TCP connect timeout in milliseconds (default 2000; 1 ms to 30 days).
 */
redislock_result redislock_config_set_connect_timeout_ms(redislock_config *config, uint64_t ms);

/**
 * Socket read timeout in milliseconds for every command (default 2000; 1 ms to 30 days). A
 * blocked waiter gets its block time added to it.
 */
redislock_result redislock_config_set_read_timeout_ms(redislock_config *config, uint64_t ms);

/**
 * Socket write timeout in milliseconds (default 2000; 1 ms to 30 days).
 */
redislock_result redislock_config_set_write_timeout_ms(redislock_config *config, uint64_t ms);

/**
 * The longest a call waits for a pooled connection, including connecting one, in
 * milliseconds (default 3000; 1 ms to 30 days).
 */
redislock_result redislock_config_set_checkout_timeout_ms(redislock_config *config, uint64_t ms);

/**
 * How long a release or an extend keeps trying while the server that holds the lock cannot
 * be reached (a Sentinel or Cluster failover), in milliseconds (default 10000; 0 to 30 days;
 * 0: no longer than its first try). Never past the lock's lease. A release still without an
 * answer at the bound returns its error and goes on trying on a thread of the library until
 * the lease ends; so does `redislock_lock_free` of a held lock, without blocking.
 */
redislock_result redislock_config_set_release_timeout_ms(redislock_config *config, uint64_t ms);

/**
 * Default lease of a lock in milliseconds (default 30000; 1 ms to 30 days, at least 100 ms
 * with auto-renewal). With auto-renewal the key is extended every lease/3 while held; without
 * it the lock simply expires after the lease.
 */
redislock_result redislock_config_set_lease_ms(redislock_config *config, uint64_t ms);

/**
 * Whether locks auto-renew by default (default true). Each auto-renewed lock has a renewal
 * thread while held.
 */
redislock_result redislock_config_set_auto_renew(redislock_config *config, bool on);

/**
 * Whether locks get fencing tokens by default (default false). Each fenced grant of a name
 * increments a counter kept next to the lock key and returns it.
 */
redislock_result redislock_config_set_fencing(redislock_config *config, bool on);

/**
 * A prefix put in front of every lock name to form its key (default empty; at most 4096
 * bytes). `prefix` points to `len` bytes, which are copied; it may be NULL when `len` is 0.
 */
redislock_result redislock_config_set_key_prefix(redislock_config *config,
                                                 const uint8_t *prefix,
                                                 size_t len);

/**
 * How often a waiter re-checks the lock when no release wakes it, in milliseconds (default
 * 1000; 1 ms to 30 days), never later than the lock's remaining lifetime. This only matters
 * when a holder vanishes or a foreign client releases with a plain DEL.
 */
redislock_result redislock_config_set_recheck_interval_ms(redislock_config *config, uint64_t ms);

/**
 * Random fraction (0 to 1) taken off each re-check interval so waiters spread out (default
 * 0.2).
 */
redislock_result redislock_config_set_recheck_jitter(redislock_config *config, double fraction);

/**
 * Upper bound on auto-renewed locks held at once through one client (default 4096; at most
 * 1000000). An acquire beyond it fails with REDISLOCK_LIMIT_REACHED before touching Redis.
 */
redislock_result redislock_config_set_max_renewed_locks(redislock_config *config, uint64_t n);

/**
 * Opens the resource `key` (`key_len` bytes, used as given: no key prefix) on the servers of
 * `client` (one server, a Sentinel group or a Cluster). Touches no network. On success
 * `*fenced_out` is a new handle to free with `redislock_fenced_free`.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (empty or oversized key; a Redlock client).
 */
redislock_result redislock_fenced_open(const redislock_client *client,
                                       const uint8_t *key,
                                       size_t key_len,
                                       redislock_fenced **fenced_out);

/**
 * Sets the resource to `value` (`value_len` bytes) if `token` is not older than the resource's
 * fence, and advances the fence to `token`, in one script. Errors: STALE (a later token wrote:
 * nothing written), NULL_PARAMETER, CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_fenced_set(const redislock_fenced *fenced,
                                      uint64_t token,
                                      const uint8_t *value,
                                      size_t value_len);

/**
 * Adds `n` to the resource's integer (0 when it has none) if `token` is not older than the
 * resource's fence, advances the fence to `token`, and writes the new value to `*value_out`.
 * Errors: STALE (nothing written), NULL_PARAMETER, CONNECTION (also when the connection
 * dropped after the write was sent: whether it applied is unknown), REDIS_ERROR (the value is
 * not an integer).
 */
redislock_result redislock_fenced_incr_by(const redislock_fenced *fenced,
                                          uint64_t token,
                                          int64_t n,
                                          int64_t *value_out);

/**
 * Writes the resource's fence to `*fence_out`: the largest fencing token a write to it was
 * applied with, 0 before the first (tokens start at 1). One round trip.
 * Errors: NULL_PARAMETER, CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_fenced_current_fence(const redislock_fenced *fenced,
                                                uint64_t *fence_out);

/**
 * Runs the caller's Lua `script` (NUL-terminated UTF-8: the body of a function, whose `return`
 * is the reply) if `token` is not older than the resource's fence, then advances the fence to
 * `token`, all in one script. The script sees the resource's key as `KEYS[1]`, then the
 * `keys_count` keys (key i is `keys_len[i]` bytes at `keys[i]`), and the `args_count`
 * arguments as `ARGV` (likewise); on a Cluster every key must share the resource's slot (give
 * them its hash tag). The script's reply is copied into `reply_buf`: a string as it is, an
 * integer in decimal, nil (or false) as nothing; at most `reply_buf_len - 1` bytes, then a NUL
 * (binary-safe: a reply holding NUL bytes is copied whole up to the cut); `reply_buf` may be
 * NULL when `reply_buf_len` is 0. `*reply_len_out` gets the whole reply's length: a value `>=
 * reply_buf_len` means it was cut. The script is not run again to fetch the rest, so size the
 * buffer for the replies the script gives. A script that fails leaves the fence as it was
 * (what it wrote before failing stays, as with any Redis script).
 * Errors: STALE (a later token wrote: the script did not run), NULL_PARAMETER (`script` or
 * `reply_len_out` NULL; `keys`, `keys_len`, `args` or `args_len` NULL with a count; an item
 * NULL with a length), INVALID_ARGUMENT (the script is not UTF-8; the script ran and the fence
 * advanced, but it replied with a table, which has no byte form), CONNECTION (also when the
 * connection dropped after the script was sent: whether it ran is unknown; it is never sent
 * twice), REDIS_ERROR (the script failed: a Lua error, a key of another slot).
 */
redislock_result redislock_fenced_eval(const redislock_fenced *fenced,
                                       uint64_t token,
                                       const char *script,
                                       const uint8_t *const *keys,
                                       const size_t *keys_len,
                                       size_t keys_count,
                                       const uint8_t *const *args,
                                       const size_t *args_len,
                                       size_t args_count,
                                       char *reply_buf,
                                       size_t reply_buf_len,
                                       size_t *reply_len_out);

/**
 * Frees the handle. NULL is a no-op.
 */
void redislock_fenced_free(redislock_fenced *fenced);

/**
 * Writes the failover epoch of the master that granted this fenced lock to `*epoch_out` (the
 * fencing token's high bits: token = epoch × 2^48 + counter) on a Sentinel group or a Cluster,
 * 0 on a single server. Errors: INVALID_ARGUMENT (acquired without fencing; a set or
 * permits), NULL_PARAMETER.
 */
redislock_result redislock_lock_fence_epoch(const redislock_lock *lock, uint64_t *epoch_out);

/**
 * Looks at the lock `name` (`name_len` bytes) without holding it: one round trip (with
 * Redlock, one to every master; held there means held by one owner on a majority). `kind` is
 * whose waiters are counted. On success `*inspect_out` is a new handle to free with
 * `redislock_inspect_free`.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (name; `kind` out of range; on Redlock, a `kind`
 * other than EXCLUSIVE and ANY), CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_client_inspect(const redislock_client *client,
                                          const uint8_t *name,
                                          size_t name_len,
                                          redislock_inspect_kind kind,
                                          redislock_inspect **inspect_out);

/**
 * Whether anything held the lock. false for NULL.
 */
bool redislock_inspect_is_held(const redislock_inspect *inspect);

/**
 * What held the lock; REDISLOCK_HELD_NONE when free, and for NULL.
 */
redislock_held_as redislock_inspect_held_as(const redislock_inspect *inspect);

/**
 * The name of a `redislock_held_as` value, as the command-line tool and the PHP package write
 * it: the enumerator's name without `REDISLOCK_HELD_`, in lower case ("exclusive" for
 * REDISLOCK_HELD_EXCLUSIVE). NULL for REDISLOCK_HELD_NONE and for a number that is no
 * `redislock_held_as`. A static NUL-terminated text: never free it.
 */
const char *redislock_held_as_name(uint32_t held_as);

/**
 * The names of the `redislock_inspect_kind` values in the order of their numbers, separated by
 * ", ": each the enumerator's name without `REDISLOCK_INSPECT_`, in lower case ("exclusive" for
 * REDISLOCK_INSPECT_EXCLUSIVE), as the command-line tool and the PHP package take them. A
 * static NUL-terminated text: never free it.
 */
const char *redislock_inspect_kind_names(void);

/**
 * How many grants held the lock: 1 for one owner, else the grants that `held_as` names (the
 * readers, the grants of permits, the owners of a reentrant lock); 0 when free or held by a
 * key of another type, and for NULL.
 */
uint32_t redislock_inspect_holders(const redislock_inspect *inspect);

/**
 * The permits held, of a name held by permits (0 otherwise, and for NULL).
 */
uint32_t redislock_inspect_permits_held(const redislock_inspect *inspect);

/**
 * The number of permits of a name held by permits, while something fixes it; 0 otherwise, and
 * for NULL.
 */
uint32_t redislock_inspect_permits(const redislock_inspect *inspect);

/**
 * Milliseconds until the lock frees itself if no holder renews it (with Redlock, the shortest
 * among the majority that holds it); 0 when free, and for NULL; UINT64_MAX for a key without
 * expiry.
 */
uint64_t redislock_inspect_remaining_ms(const redislock_inspect *inspect);

/**
 * Writes the number of waiters queued (of the kind asked for) to `*waiters_out`.
 * Errors: INVALID_ARGUMENT (Redlock, whose masters keep a queue each, with no agreed count),
 * NULL_PARAMETER.
 */
redislock_result redislock_inspect_waiters(const redislock_inspect *inspect, uint32_t *waiters_out);

/**
 * Writes the name's fencing counter (the token of the latest fenced grant; 0 before the first)
 * to `*counter_out`.
 * Errors: INVALID_ARGUMENT (Redlock, which has no fencing tokens), NULL_PARAMETER.
 */
redislock_result redislock_inspect_fencing_counter(const redislock_inspect *inspect,
                                                   uint64_t *counter_out);

/**
 * Frees the handle. NULL is a no-op.
 */
void redislock_inspect_free(redislock_inspect *inspect);

/**
 * Writes the detail of this thread's last failed call into `buf`: which lock, which server and
 * why (never a lock token; a password in the URL is masked). Empty when no call on this
 * thread has failed yet. Successful calls do not clear it, so read it right after the failure.
 *
 * Buffer convention: at most `buf_len` bytes are written, always NUL-terminated (the text is
 * cut if needed); `buf` may be NULL when `buf_len` is 0, to learn the length. Returns the length
 * of the whole text without the NUL: a value `>= buf_len` means the text was cut.
 */
size_t redislock_last_error_message(char *buf, size_t buf_len);

/**
 * A campaign for the leadership of the election `name` (`name_len` bytes, as for
 * `redislock_request_new`) under the identity `identity` (`identity_len` bytes, copied: UTF-8,
 * 1 to 256 bytes, no control characters, checked when it campaigns), which observers see; the
 * leader's token is never shown. Campaign with `redislock_request_try_acquire` (one attempt:
 * HELD when another leads) or `redislock_request_acquire` (waits up to its bound, woken by a
 * resign on the election's channel, or when the leader's lease runs out). The leadership is a
 * `redislock_lock`: `redislock_lock_is_held` says whether this process still leads (false once
 * its lease may have run out), `redislock_lock_epoch` gives its epoch, `redislock_lock_release`
 * resigns, `redislock_lock_on_lost` reports a loss. Lease, auto-renewal and cancel apply as to
 * a lock; the epoch is always fenced (`redislock_request_set_fencing` does not apply), and
 * Redlock URLs refuse elections. On success `*request_out` is a new request to free with
 * `redislock_request_free`. Errors: NULL_PARAMETER.
 */
redislock_result redislock_request_new_leader(const redislock_client *client,
                                              const uint8_t *name,
                                              size_t name_len,
                                              const uint8_t *identity,
                                              size_t identity_len,
                                              redislock_request **request_out);

/**
 * Writes the epoch of a leadership to `*epoch_out`: its fencing token, strictly larger than
 * every earlier leader's of the election (see `redislock_lock_fencing_token`). Pass it to the
 * resources the leader writes, which refuse an epoch smaller than one they saw.
 * Errors: INVALID_ARGUMENT (not a leadership), NULL_PARAMETER.
 */
redislock_result redislock_lock_epoch(const redislock_lock *lock, uint64_t *epoch_out);

/**
 * Who leads the election `name` (`name_len` bytes) now, without campaigning: one round trip.
 * On success `*info_out` is a new handle to free with `redislock_leader_info_free`, or NULL
 * when nobody leads. Errors: NULL_PARAMETER, INVALID_ARGUMENT (name; the name held as a plain
 * lock; a Redlock URL), CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_client_leader(const redislock_client *client,
                                         const uint8_t *name,
                                         size_t name_len,
                                         redislock_leader_info **info_out);

/**
 * Waits up to `timeout_ms` milliseconds (at most 30 days) until the election `name` is led by
 * another epoch than `since_epoch` (0: nobody led; else the epoch of the last
 * `redislock_leader_info`), woken by the change published on the election's channel, or when
 * the leader's lease runs out (a killed leader publishes nothing): no polling. On success
 * `*info_out` is who leads then (a new handle to free with `redislock_leader_info_free`), or
 * NULL when nobody does. Errors: WAIT_TIMEOUT (nothing changed in time), and those of
 * `redislock_client_leader`.
 */
redislock_result redislock_client_wait_leader_change(const redislock_client *client,
                                                     const uint8_t *name,
                                                     size_t name_len,
                                                     uint64_t since_epoch,
                                                     uint64_t timeout_ms,
                                                     redislock_leader_info **info_out);

/**
 * Writes the leader's identity (UTF-8) into `buf`, with the buffer convention of
 * `redislock_last_error_message`: at most `buf_len` bytes, NUL-terminated, `buf` may be NULL
 * when `buf_len` is 0. Returns the identity's length in bytes (0 for NULL `info`).
 */
size_t redislock_leader_info_identity(const redislock_leader_info *info, char *buf, size_t buf_len);

/**
 * The leader's epoch (see `redislock_lock_epoch`); 0 for NULL.
 */
uint64_t redislock_leader_info_epoch(const redislock_leader_info *info);

/**
 * Milliseconds left of the leader's lease when it was read (the leader renews it while it
 * leads); 0 for NULL.
 */
uint64_t redislock_leader_info_remaining_ms(const redislock_leader_info *info);

/**
 * Frees the handle. NULL is a no-op.
 */
void redislock_leader_info_free(redislock_leader_info *info);

/**
 * One attempt to acquire the lock `name` (`name_len` bytes at `name`; any bytes, 1 to 4096 of
 * them) with the client's defaults; a `redislock_request` takes a lock with settings of its
 * own. On success `*lock_out` is a new held lock to free with `redislock_lock_free`.
 * Errors: HELD (another owner holds it), NULL_PARAMETER (`name` NULL with a length),
 * INVALID_ARGUMENT (empty or oversized name), CONNECTION, REDIS_ERROR, LIMIT_REACHED
 * (max_renewed_locks auto-renewed locks held).
 */
redislock_result redislock_lock_try_acquire(const redislock_client *client,
                                            const uint8_t *name,
                                            size_t name_len,
                                            redislock_lock **lock_out);

/**
 * Acquires the lock `name` with the client's defaults like `redislock_lock_try_acquire`,
 * waiting up to `wait_ms` milliseconds (at most 30 days) for it. A waiter does not poll: the
 * holder's release hands the lock to the longest-waiting thread or process and wakes it.
 * `wait_ms` 0 makes one attempt, which fails with WAIT_TIMEOUT when the lock is held. On
 * success `*lock_out` is a new held lock to free with `redislock_lock_free`.
 * Errors: WAIT_TIMEOUT (not granted in time), and those of `redislock_lock_try_acquire` except
 * HELD.
 */
redislock_result redislock_lock_acquire(const redislock_client *client,
                                        const uint8_t *name,
                                        size_t name_len,
                                        uint64_t wait_ms,
                                        redislock_lock **lock_out);

/**
 * Releases the lock (or hands it to the longest waiter). Does not free the handle.
 * OK means it was still ours until now. While the server cannot be reached (a failover) it
 * tries again for up to the client's release timeout (`redislock_config_set_release_timeout_ms`),
 * never past the lease. Errors: NOT_HELD (released already, or its lease ran out, or it was lost
 * or taken over: the protected work may have overlapped another holder's), FORKED (in a child
 * process after fork()), NULL_PARAMETER, CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_lock_release(redislock_lock *lock);

/**
 * Releases the lock like `redislock_lock_release`, but without blocking on a server that
 * cannot be reached (a failover): one try; if it finds no server, CONNECTION is returned and
 * the release goes on on a thread of the library until it is answered or the lease ends (the
 * handle reports the lock held until then). What `redislock_lock_free` of a held lock does,
 * keeping the handle: for the end of a request, where nothing may wait.
 * Errors: NOT_HELD, FORKED, NULL_PARAMETER, CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_lock_release_in_background(redislock_lock *lock);

/**
 * Resets the lease to `lease_ms` milliseconds from now (1 ms to 30 days, at least 100 ms for an
 * auto-renewed lock), if the key still holds our token; auto-renewal goes on with the new lease.
 * Errors: NOT_HELD, FORKED, INVALID_ARGUMENT, NULL_PARAMETER, CONNECTION, REDIS_ERROR.
 */
redislock_result redislock_lock_extend(redislock_lock *lock, uint64_t lease_ms);

/**
 * Whether the lock is still ours as far as this process knows, without a round trip: not
 * released, not found lost by renewal, lease not run out, and this is the process that
 * acquired it. false for NULL.
 */
bool redislock_lock_is_held(const redislock_lock *lock);

/**
 * Milliseconds the lock is surely still ours (0 when not held, and for NULL). Counted from
 * before the acquiring request was sent, less a margin for clock drift.
 */
uint64_t redislock_lock_remaining_ms(const redislock_lock *lock);

/**
 * Writes the fencing token of this grant to `*token_out`: strictly larger than that of every
 * earlier fenced grant of the same name (for a read lock: larger than that of the writer
 * before it; readers holding at once are not ordered among themselves). On a Sentinel group or
 * a Cluster it is ordered first by the failover epoch of the master that granted it (epoch × 2^48 +
 * counter), so a split brain's old master grants below the new one. Pass it to the protected
 * resource, which should refuse writes carrying a smaller token than it has seen.
 * Errors: INVALID_ARGUMENT (the lock was acquired without fencing; permits, which have none;
 * a set, whose names each have one: see `redislock_lock_fencing_token_at`), NULL_PARAMETER.
 */
redislock_result redislock_lock_fencing_token(const redislock_lock *lock,
                                              uint64_t *token_out);

/**
 * Writes the fencing token of name `index` of a set (in the order the names were given to
 * `redislock_request_new_set`, from 0) to `*token_out`; each name's token comes from its own
 * counter. For any other lock, index 0 is its one token, as `redislock_lock_fencing_token`
 * gives it. Errors: INVALID_ARGUMENT (acquired without fencing, index out of range, permits),
 * NULL_PARAMETER.
 */
redislock_result redislock_lock_fencing_token_at(const redislock_lock *lock,
                                                 size_t index,
                                                 uint64_t *token_out);

/**
 * Turns a write lock into a read lock without a gap (one round trip): no writer can come in
 * between, and the readers waiting at the head of the queue are let in with it. On success
 * `*read_out` is a new read lock, with the write lock's lease, auto-renewal and fencing token,
 * to free with `redislock_lock_free`; `lock` is then no longer held (its release reports
 * NOT_HELD) but must still be freed. There is no upgrade: release the read lock and acquire
 * the write lock. Errors: INVALID_ARGUMENT (not a write lock), NOT_HELD (released already, or
 * lost), FORKED, NULL_PARAMETER, CONNECTION, REDIS_ERROR (on a failure for want of an answer,
 * the lock is left to its lease).
 */
redislock_result redislock_lock_downgrade(const redislock_lock *lock, redislock_lock **read_out);

/**
 * Writes the lock's owner token (the random value its key holds while the lock is ours) into
 * `buf`, with the buffer convention of `redislock_last_error_message`: at most `buf_len` bytes,
 * NUL-terminated; returns the token's whole length (0 for NULL). The token is a bearer secret:
 * whoever knows it can release the lock. Hand it only to the code that is to take the lock
 * over (`redislock_request_restore`), and never log it. Exclusive locks only: for any other
 * kind it writes an empty string, returns 0 and sets the last error (INVALID_ARGUMENT).
 */
size_t redislock_lock_owner_token(const redislock_lock *lock, char *buf, size_t buf_len);

/**
 * Lets the lock outlive its handle: it is no longer renewed, and freeing the handle does not
 * release it, so it ends with its lease unless someone with its owner token releases or
 * extends it first. The handle must still be freed; release and extend then report NOT_HELD.
 * Exclusive locks only. Errors: NOT_HELD (released, lost or detached already), FORKED,
 * INVALID_ARGUMENT (a read or write lock, permits, a set), NULL_PARAMETER.
 */
redislock_result redislock_lock_detach(redislock_lock *lock);

/**
 * Has `callback` called once if the lock is found lost: renewal found its key gone or taken
 * over, or could not reach Redis before the lease ran out (also when an extend or release finds
 * it gone; never for a release or detach). It runs on the thread that found the loss — usually
 * a library thread — so it must not block, and must not release, extend or free this lock
 * (it may set a flag, write to a pipe, signal a condition variable). When the lock is lost
 * already, it runs at once on this thread. NULL removes a callback set before.
 * Errors: NULL_PARAMETER (`lock`).
 */
redislock_result redislock_lock_on_lost(const redislock_lock *lock,
                                        redislock_lost_callback callback,
                                        void *user_data);

/**
 * Frees the handle, releasing the lock first if it is still held (one round trip; errors are
 * ignored: call `redislock_lock_release` first to learn them). In a child process after fork()
 * it only frees the handle: the parent's lock is left alone. NULL is a no-op.
 */
void redislock_lock_free(redislock_lock *lock);

/**
 * Sends the library's log records up to `max_level` to `callback` (NULL, or
 * REDISLOCK_LOG_OFF, turns logging off again; a later call replaces the callback). `user_data`
 * is passed back to every call, from any thread, until replaced. Records never hold a lock
 * token or a password.
 * Errors: INTERNAL when the process has another logger of the Rust `log` facade installed
 * (only possible in a Rust program that also uses this C API).
 */
redislock_result redislock_set_log_callback(redislock_log_callback callback,
                                            void *user_data,
                                            redislock_log_level max_level);

/**
 * Writes the metrics of the client's backend in this process as Prometheus text (exposition
 * format 0.0.4; every metric is listed in `docs/metrics.md`) into `buf`, NUL-terminated, and
 * the size it needs, NUL included, to `*needed_out`. Persistent clients with the same settings
 * share a backend, and so its numbers.
 *
 * When the text does not fit in `buf_len` bytes nothing but an empty string is written (a cut
 * text would be wrong, not short) and INVALID_ARGUMENT is returned: call again with a buffer
 * of `*needed_out` bytes (a little more, as the numbers may grow meanwhile). `buf` may be NULL
 * when `buf_len` is 0, to learn the size.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (buffer too small).
 */
redislock_result redislock_client_metrics_prometheus(const redislock_client *client,
                                                     char *buf,
                                                     size_t buf_len,
                                                     size_t *needed_out);

/**
 * Gives the lock `name` (`len` bytes, copied) metric series of its own (`redislock_name_*`);
 * a name ending in `*` is a prefix (`"jobs:*"`). At most 32 names or prefixes per client;
 * checked by `redislock_client_from_config`. No other name gets series of its own.
 * Errors: NULL_PARAMETER, INVALID_ARGUMENT (not UTF-8).
 */
redislock_result redislock_config_add_metric_name(redislock_config *config,
                                                  const uint8_t *name,
                                                  size_t len);

/**
 * A request for the lock `name` (`name_len` bytes at `name`; any bytes, 1 to 4096 of them,
 * checked when it is used) of `client`, with every setting at the client's default: its
 * exclusive lock, or a side of its read/write lock after `redislock_request_set_kind`. The name
 * is copied. On success `*request_out` is a new request to free with `redislock_request_free`.
 * Errors: NULL_PARAMETER.
 */
redislock_result redislock_request_new(const redislock_client *client,
                                       const uint8_t *name,
                                       size_t name_len,
                                       redislock_request **request_out);

/**
 * A request for permits of the semaphore `name` (`name_len` bytes, as for
 * `redislock_request_new`), which has `permits` permits (1 to 10,000; the first user of a name
 * fixes the number while anything is held or waiting, and a request giving another number
 * fails to acquire with INVALID_ARGUMENT). Each acquire takes one permit, or as many as
 * `redislock_request_set_permits` says, as one grant with its own lease and (by default)
 * auto-renewal; permits are granted in arrival order. Semaphores have no fencing tokens and no
 * owner tokens. The numbers are checked by the acquire. On success `*request_out` is a new
 * request to free with `redislock_request_free`. Errors: NULL_PARAMETER.
 */
redislock_result redislock_request_new_semaphore(const redislock_client *client,
                                                 const uint8_t *name,
                                                 size_t name_len,
                                                 uint32_t permits,
                                                 redislock_request **request_out);

/**
 * A request for the exclusive locks of `count` names at once (1 to 256 of them, no name twice,
 * each 1 to 4096 bytes: checked by the acquire): name i is `names_len[i]` bytes at `names[i]`.
 * The names are copied. An acquire takes all of them or none, in one round trip, and never
 * holds some while it waits for others; the lock it makes releases, extends and renews them
 * together, and is lost as a whole if any of them is. With fencing each name gets a token
 * from its own counter (`redislock_lock_fencing_token_at`). No owner tokens. On success
 * `*request_out` is a new request to free with `redislock_request_free`.
 * Errors: NULL_PARAMETER (`names` or `names_len` NULL with a count, a name NULL with a
 * length), INVALID_ARGUMENT (more than 256 names).
 */
redislock_result redislock_request_new_set(const redislock_client *client,
                                           const uint8_t *const *names,
                                           const size_t *names_len,
                                           size_t count,
                                           redislock_request **request_out);

/**
 * Frees a request. Locks acquired with it are not affected. NULL is a no-op.
 */
void redislock_request_free(redislock_request *request);

/**
 * The lease in milliseconds (default: the client's lease): 1 ms to 30 days, at least 100 ms
 * when the lock auto-renews. Checked by the acquire. Errors: NULL_PARAMETER.
 */
redislock_result redislock_request_set_lease_ms(redislock_request *request, uint64_t lease_ms);

/**
 * Whether a renewal thread keeps the lock alive, extending its lease every lease/3 until it is
 * released or found lost (default: the client's auto_renew). Errors: NULL_PARAMETER.
 */
redislock_result redislock_request_set_auto_renew(redislock_request *request, bool on);

/**
 * Whether each grant gets a fencing token (see `redislock_lock_fencing_token`; default: the
 * client's fencing). Readers and writers of a name share its counter with its exclusive lock:
 * a writer's token is larger than that of every grant before it, a reader's larger than that
 * of the writer before it. Errors: INVALID_ARGUMENT (a semaphore request: permits have no
 * fencing tokens), NULL_PARAMETER.
 */
redislock_result redislock_request_set_fencing(redislock_request *request, bool on);

/**
 * Which side of its name a request made by `redislock_request_new` takes: the exclusive lock
 * (the default), or a read or the write lock of the name's read/write lock. Readers share the
 * name; a writer (like an exclusive lock) is alone. Waiters are served in arrival order: a
 * reader arriving after a waiting writer queues behind it, and a release wakes exactly the
 * waiters that can proceed. A read or write lock of a name and its exclusive lock exclude each
 * other. REDISSON makes it Redisson's RLock of the name instead (docs/redisson.md): reentrant
 * per calling OS thread, shared with Java services that lock the name with Redisson.
 * Errors: INVALID_ARGUMENT (a number that is no `redislock_kind`; a semaphore or set request;
 * READ, WRITE or REDISSON for a request with an owner token; REDISSON for a request with
 * fencing set), NULL_PARAMETER.
 */
redislock_result redislock_request_set_kind(redislock_request *request, redislock_kind kind);

/**
 * How many permits each acquire of a semaphore request takes, as one grant (default 1; 1 to
 * the semaphore's number of permits, checked by the acquire). A request for k permits waits
 * its turn: later requests, even for fewer, do not overtake it.
 * Errors: INVALID_ARGUMENT (not a semaphore request), NULL_PARAMETER.
 */
redislock_result redislock_request_set_permits(redislock_request *request, uint32_t permits);

/**
 * Acquire with the owner token `owner` (`owner_len` bytes, copied: 16 to 256 printable ASCII
 * characters, no spaces, checked by the acquire) instead of a fresh random one: for
 * applications that name the owner themselves. The token is a bearer secret: make it as hard
 * to guess as a password. A lock acquired with it can be found with `redislock_is_owned_by`
 * and taken over with `redislock_request_restore`. Default: a random 128-bit token per
 * acquire. Exclusive locks only. Errors: INVALID_ARGUMENT (a request for a read or write
 * lock, a semaphore or a set), NULL_PARAMETER (`owner` NULL with a length).
 */
redislock_result redislock_request_set_owner_token(redislock_request *request,
                                                   const uint8_t *owner,
                                                   size_t owner_len);

/**
 * Holds each lock the request takes at least `at_least_ms` after it was granted (default: no
 * minimum): a release (or free) before then leaves the key holding the owner token until then,
 * its expiry set to the time left, so nobody takes the name before, even if the process exits;
 * renewal stops at the release all the same. Waiters get the name at their next re-check after
 * the key expires. A release after it frees the lock as usual. For jobs run on several hosts
 * that must run once per interval. 1 ms to 30 days, no longer than the request's at_most and,
 * without auto-renewal, than its lease: checked by the acquire (INVALID_ARGUMENT, nothing
 * held). Exclusive locks only. Errors: INVALID_ARGUMENT (a request for another kind),
 * NULL_PARAMETER.
 */
redislock_result redislock_request_set_at_least_ms(redislock_request *request,
                                                   uint64_t at_least_ms);

/**
 * Holds each lock the request takes at most `at_most_ms` after it was granted (default: no
 * maximum): renewal never extends the lease past then (a longer lease, and an extend, are cut
 * to it), and when that time comes the lock is reported lost (`redislock_lock_is_lost`, the
 * lost-lock callback; the metrics' reason `at_most`). 1 ms to 30 days, checked by the acquire.
 * Exclusive locks only. Errors: INVALID_ARGUMENT (a request for another kind), NULL_PARAMETER.
 */
redislock_result redislock_request_set_at_most_ms(redislock_request *request, uint64_t at_most_ms);

/**
 * Lets `cancel` end the request's waiting acquires from another thread: they then fail with
 * REDISLOCK_CANCELLED, leaving no queue entry and no lock behind, and once it is cancelled
 * every acquire of the request fails so at once. The request keeps its own reference: the
 * cancel handle may be freed before the request. NULL removes a cancel handle set before
 * (default: none). Errors: NULL_PARAMETER (`request`).
 */
redislock_result redislock_request_set_cancel(redislock_request *request,
                                              const redislock_cancel *cancel);

/**
 * One attempt to acquire what the request takes. On success `*lock_out` is a new held lock to
 * free with `redislock_lock_free`. Errors: HELD (another owner holds it; for a read lock, a
 * writer holds it or anyone waits; for permits, fewer are free or earlier requests wait; for a
 * set, any name is held), INVALID_ARGUMENT (empty or oversized name, bad lease, malformed
 * owner token; zero permits, more than the semaphore has, or a number of permits other than
 * the semaphore's; an empty set, or a name twice in it; a name in use as another kind of lock),
 * CANCELLED (its cancel handle was cancelled), NULL_PARAMETER, CONNECTION, REDIS_ERROR,
 * LIMIT_REACHED (max_renewed_locks auto-renewed locks held).
 */
redislock_result redislock_request_try_acquire(const redislock_request *request,
                                               redislock_lock **lock_out);

/**
 * Acquires what the request takes, waiting up to `wait_ms` milliseconds (at most 30 days) for
 * it. A waiter does not poll: a release hands the lock to the longest-waiting threads or
 * processes that can now proceed, and wakes them (a set waits without holding any of its
 * names). `wait_ms` 0 makes one attempt, which fails with WAIT_TIMEOUT when the
 * lock is held. On success `*lock_out` is a new held lock to free with `redislock_lock_free`.
 * Errors: WAIT_TIMEOUT (not granted in time), CANCELLED (ended through its cancel handle), and
 * those of `redislock_request_try_acquire` except HELD.
 */
redislock_result redislock_request_acquire(const redislock_request *request,
                                           uint64_t wait_ms,
                                           redislock_lock **lock_out);

/**
 * A handle for the request's lock, held now with the owner token `owner` (`owner_len` bytes,
 * from `redislock_lock_owner_token`, maybe in another process), to release or extend it: the
 * lease is reset to the request's lease (one round trip), and the lock auto-renews if the
 * request says so. The request's fencing, owner token and cancel handle do not apply; the
 * handle has no fencing token. On success `*lock_out` is a new held lock to free with
 * `redislock_lock_free`. Exclusive locks only. Errors: NOT_HELD (the key does not hold that
 * token), INVALID_ARGUMENT (also for a request for a read or write lock, a semaphore or a
 * set), NULL_PARAMETER, CONNECTION, REDIS_ERROR, LIMIT_REACHED.
 */
redislock_result redislock_request_restore(const redislock_request *request,
                                           const uint8_t *owner,
                                           size_t owner_len,
                                           redislock_lock **lock_out);

/**
 * Writes the static text of `code` into `buf` ("unknown result code" for a number that is no
 * code). Buffer convention: at most `buf_len` bytes are written, always NUL-terminated (the
 * text is cut if needed); `buf` may be NULL when `buf_len` is 0, to learn the length. Returns
 * the length of the whole text without the NUL: a value `>= buf_len` means the text was cut.
 */
size_t redislock_result_message(redislock_result code, char *buf, size_t buf_len);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* REDISLOCK_H */
