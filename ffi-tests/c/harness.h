/*
 * A small test harness for the C tests of redislock: checks that record failures (from any
 * thread, and from forked children through their exit status), named tests, and helpers.
 *
 * The Redis server comes from the environment variable REDISLOCK_TEST_URL
 * (redis://127.0.0.1:PORT/), set by scripts/ci/c-tests.sh or tests/ffi_c.rs.
 */
#ifndef REDISLOCK_TEST_HARNESS_H
#define REDISLOCK_TEST_HARNESS_H

#include <stdint.h>
#include <string.h>

#include "redislock.h"
#include "resp.h"

/* Records a failure of the current test unless `cond` holds. */
#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) h_fail(__FILE__, __LINE__, "%s", #cond);                                  \
    } while (0)

/* Records a failure unless `expr` returns the result code `want`; shows both codes and the
 * thread's last error message. */
#define CHECK_RC(expr, want)                                                                   \
    do {                                                                                       \
        redislock_result h_rc_ = (expr);                                                       \
        if (h_rc_ != (redislock_result)(want)) h_fail_rc(__FILE__, __LINE__, #expr, h_rc_, want); \
    } while (0)

/* A lock name given as pointer and length: NAME("stock:1") */
#define NAME(s) (const uint8_t *)(s), strlen(s)

void h_fail(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void h_fail_rc(const char *file, int line, const char *expr, redislock_result got,
               redislock_result want);

/* Failures recorded so far in this process (all tests). */
int h_failures(void);

/* The test server's URL (REDISLOCK_TEST_URL). */
const char *h_url(void);

/* A unique lock or key name for this test run: "ctest:<pid>:<n>:<what>". Static storage per
 * call site is not used: the name is written into buf (at least 128 bytes). */
char *h_name(char *buf, size_t cap, const char *what);

/* A client with default settings for the test server; fails the test and returns NULL if it
 * cannot be made. */
redislock_client *h_client(void);

/* A lock with a lease, auto-renewal and fencing of its own, taken through a request made and
 * freed here: one attempt (h_try_acquire_with) or a wait of up to wait_ms (h_acquire_with).
 * Returns the acquire's result; *lock_out is written only on success. */
redislock_result h_try_acquire_with(redislock_client *client, const uint8_t *name,
                                    size_t name_len, uint64_t lease_ms, bool auto_renew,
                                    bool fencing, redislock_lock **lock_out);
redislock_result h_acquire_with(redislock_client *client, const uint8_t *name, size_t name_len,
                                uint64_t lease_ms, bool auto_renew, bool fencing,
                                uint64_t wait_ms, redislock_lock **lock_out);

/* A RESP connection to the test server; fails the test if it cannot connect. */
int h_resp(resp_conn *c);

/* Milliseconds on a monotonic clock. */
long long h_now_ms(void);
void h_sleep_ms(long ms);

/* fork() for a test: in the child, arms a watchdog (alarms are not inherited) so that a child
 * that hangs dies by SIGALRM instead of outliving the test run. */
int h_fork(void);

/* Waits for a child from h_fork() and records a failure unless it exited with status 0
 * (a child killed by SIGALRM hung). */
void h_wait_child(int pid);

/* Ends a forked child with _exit(0) if it recorded no failure since `failures_before`, else
 * _exit(1). Under valgrind it first turns off the exit-time leak check (see harness.c). */
void h_child_exit(int failures_before)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* This thread's last error message, in a static-per-thread buffer. */
const char *h_last_error(void);

/* The name of a result code ("REDISLOCK_HELD"). */
const char *h_code_name(redislock_result code);

/* The test functions, one per file section. */
#define H_TESTS(X)                                                                             \
    X(version)                                                                                 \
    X(result_messages)                                                                         \
    X(last_error_messages)                                                                     \
    X(last_error_is_per_thread)                                                                \
    X(config_every_setter)                                                                     \
    X(config_invalid_settings)                                                                 \
    X(acquire_release_basics)                                                                  \
    X(metrics_prometheus_text)                                                                 \
    X(one_liners_take_the_client_defaults)                                                     \
    X(request_unset_settings_are_the_clients)                                                  \
    X(request_each_setter)                                                                     \
    X(request_reuse)                                                                           \
    X(request_at_least_and_at_most)                                                            \
    X(key_prefix_and_binary_names)                                                             \
    X(acquire_waits_for_release)                                                               \
    X(acquire_wait_timeout)                                                                    \
    X(extend_resets_lease)                                                                     \
    X(expired_lock_is_not_held)                                                                \
    X(auto_renew_keeps_lock)                                                                   \
    X(fencing_tokens_increase)                                                                 \
    X(fencing_token_without_fencing)                                                           \
    X(fenced_writes)                                                                           \
    X(fenced_stale_holder)                                                                     \
    X(fenced_eval)                                                                             \
    X(free_releases_held_lock)                                                                 \
    X(lock_outlives_client)                                                                    \
    X(limit_reached)                                                                           \
    X(redis_error_reply)                                                                       \
    X(tls_misconfiguration)                                             \
    X(null_parameters)                                                                         \
    X(release_twice)                                                                           \
    X(zero_and_absurd_leases)                                                                  \
    X(empty_and_huge_names)                                                                    \
    X(request_misuse)                                                                          \
    X(invalid_urls)                                                                            \
    X(server_down)                                                                             \
    X(threads_oversell)                                                                        \
    X(forked_processes_oversell)                                                               \
    X(lock_inherited_across_fork)                                                              \
    X(private_client_threads_end_with_it)                                                      \
    X(persistent_clients_share_a_backend)                                                      \
    X(owner_tokens)                                                                            \
    X(lost_lock_callback_and_log)                                                              \
    X(cancel_a_waiting_acquire)                                                                \
    X(min_replicas_without_replicas)                                                           \
    X(rw_readers_share_writers_exclude)                                                        \
    X(rw_lock_basics_and_downgrade)                                                            \
    X(rw_reader_waits_for_the_writer)                                                          \
    X(semaphore_never_over_granted)                                                            \
    X(semaphore_basics_and_invalid_input)                                                      \
    X(set_all_or_none)                                                                         \
    X(set_invalid_input)                                                                       \
    X(kind_setters_that_do_not_apply)                                                          \
    X(inspect_a_lock_without_holding_it)                                                       \
    X(leader_campaign_observe_resign)                                                          \
    X(leader_bad_input_and_null)

#define H_DECLARE(name) void test_##name(void);
H_TESTS(H_DECLARE)
#undef H_DECLARE

#endif
