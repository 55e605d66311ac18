#define _POSIX_C_SOURCE 200809L

#include "harness.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_VALGRIND_H
#include <valgrind/valgrind.h>
#endif

static pthread_mutex_t h_mutex = PTHREAD_MUTEX_INITIALIZER;
static int h_failed = 0;
static unsigned h_counter = 0;

void h_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    pthread_mutex_lock(&h_mutex);
    h_failed++;
    fprintf(stderr, "    FAILED at %s:%d (pid %ld): ", file, line, (long)getpid());
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    pthread_mutex_unlock(&h_mutex);
}

void h_fail_rc(const char *file, int line, const char *expr, redislock_result got,
               redislock_result want) {
    h_fail(file, line, "%s returned %s (%u), expected %s (%u); last error: %s", expr,
           h_code_name(got), (unsigned)got, h_code_name(want), (unsigned)want, h_last_error());
}

int h_failures(void) {
    int n;
    pthread_mutex_lock(&h_mutex);
    n = h_failed;
    pthread_mutex_unlock(&h_mutex);
    return n;
}

const char *h_url(void) {
    const char *url = getenv("REDISLOCK_TEST_URL");
    return url != NULL ? url : "";
}

char *h_name(char *buf, size_t cap, const char *what) {
    unsigned n;
    pthread_mutex_lock(&h_mutex);
    n = ++h_counter;
    pthread_mutex_unlock(&h_mutex);
    snprintf(buf, cap, "ctest:%ld:%u:%s", (long)getpid(), n, what);
    return buf;
}

redislock_client *h_client(void) {
    redislock_client *client = NULL;
    CHECK_RC(redislock_client_new(h_url(), &client), REDISLOCK_OK);
    return client;
}

/* A request with all three settings, or NULL (with the failure recorded) for a NULL client. */
static redislock_request *request_with(redislock_client *client, const uint8_t *name,
                                       size_t name_len, uint64_t lease_ms, bool auto_renew,
                                       bool fencing, redislock_result *rc) {
    redislock_request *req = NULL;
    *rc = redislock_request_new(client, name, name_len, &req);
    if (*rc != REDISLOCK_OK) return NULL;
    CHECK_RC(redislock_request_set_lease_ms(req, lease_ms), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, auto_renew), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, fencing), REDISLOCK_OK);
    return req;
}

redislock_result h_try_acquire_with(redislock_client *client, const uint8_t *name,
                                    size_t name_len, uint64_t lease_ms, bool auto_renew,
                                    bool fencing, redislock_lock **lock_out) {
    redislock_result rc;
    redislock_request *req =
        request_with(client, name, name_len, lease_ms, auto_renew, fencing, &rc);
    if (req == NULL) return rc;
    rc = redislock_request_try_acquire(req, lock_out);
    redislock_request_free(req);
    return rc;
}

redislock_result h_acquire_with(redislock_client *client, const uint8_t *name, size_t name_len,
                                uint64_t lease_ms, bool auto_renew, bool fencing,
                                uint64_t wait_ms, redislock_lock **lock_out) {
    redislock_result rc;
    redislock_request *req =
        request_with(client, name, name_len, lease_ms, auto_renew, fencing, &rc);
    if (req == NULL) return rc;
    rc = redislock_request_acquire(req, wait_ms, lock_out);
    redislock_request_free(req);
    return rc;
}

int h_resp(resp_conn *c) {
    if (resp_connect(c, h_url()) != 0) {
        h_fail(__FILE__, __LINE__, "cannot connect to %s", h_url());
        return -1;
    }
    return 0;
}

long long h_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int h_fork(void) {
    const char *timeout = getenv("REDISLOCK_TEST_CHILD_TIMEOUT_S");
    pid_t pid;
    fflush(NULL);
    pid = fork();
    if (pid < 0) h_fail(__FILE__, __LINE__, "fork failed");
    if (pid == 0) alarm(timeout != NULL ? (unsigned)atoi(timeout) : 120);
    return (int)pid;
}

void h_wait_child(int pid) {
    int status = 0;
    if (pid <= 0) return;
    if (waitpid((pid_t)pid, &status, 0) != (pid_t)pid) {
        h_fail(__FILE__, __LINE__, "waitpid(%d) failed", pid);
    } else if (WIFSIGNALED(status)) {
        h_fail(__FILE__, __LINE__, "child %d was killed by signal %d%s", pid, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (SIGALRM: it hung)" : "");
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        h_fail(__FILE__, __LINE__, "child %d exited with status %d", pid, WEXITSTATUS(status));
    }
}

void h_child_exit(int failures_before) {
#ifdef HAVE_VALGRIND_H
    /* A child forked from a multi-threaded process inherits memory that only the parent's
     * other threads point to (their stacks and registers, which valgrind does not scan in the
     * child, where those threads do not exist): the renewal threads' closures, the pools'
     * worker threads, the parent's client state the child replaced. Valgrind's exit-time leak
     * check would report it all as "definitely lost" although nothing leaked, and no
     * suppression could tell those records from a real leak in the parent (same allocation
     * stacks). So in children only the leak check is turned off; every memory error is still
     * reported and fails the run. A no-op when not running under valgrind. */
    VALGRIND_CLO_CHANGE("--leak-check=no");
#endif
    /* _exit: no atexit handlers, no flushing of stdio buffers inherited from the parent. */
    _exit(h_failures() == failures_before ? 0 : 1);
}

const char *h_last_error(void) {
    static __thread char buf[1024];
    redislock_last_error_message(buf, sizeof buf);
    return buf;
}

const char *h_code_name(redislock_result code) {
    /* By number; src/ffi/drift_tests.rs checks this table against the header's enum. */
    static const char *const names[] = {
        "REDISLOCK_OK",           "REDISLOCK_HELD",          "REDISLOCK_WAIT_TIMEOUT",
        "REDISLOCK_NOT_HELD",     "REDISLOCK_INVALID_ARGUMENT", "REDISLOCK_CONNECTION",
        "REDISLOCK_REDIS_ERROR",  "REDISLOCK_FORKED",        "REDISLOCK_LIMIT_REACHED",
        "REDISLOCK_INTERNAL",     "REDISLOCK_NULL_PARAMETER", "REDISLOCK_PANIC",
        "REDISLOCK_CANCELLED",    "REDISLOCK_STALE",
    };
    return (unsigned)code < sizeof names / sizeof names[0] ? names[code] : "(unknown code)";
}

struct h_test {
    const char *name;
    void (*run)(void);
};

#define H_ENTRY(name) {#name, test_##name},
static const struct h_test h_all[] = {H_TESTS(H_ENTRY)};
#undef H_ENTRY

/* A test runs when its name contains one of the arguments (or there are none), unless its name
 * is listed in $REDISLOCK_TEST_SKIP (space-separated exact names). */
static int selected(const char *name, int argc, char **argv) {
    int i;
    const char *skip = getenv("REDISLOCK_TEST_SKIP");
    if (skip != NULL) {
        size_t len = strlen(name);
        const char *at = skip;
        while ((at = strstr(at, name)) != NULL) {
            if ((at == skip || at[-1] == ' ') && (at[len] == '\0' || at[len] == ' ')) return 0;
            at += len;
        }
    }
    if (argc < 2) return 1;
    for (i = 1; i < argc; i++) {
        if (strstr(name, argv[i]) != NULL) return 1;
    }
    return 0;
}

/* Runs the selected tests (see selected()). Prints one
 * line per test and a final "N passed, M failed"; exits non-zero if any test failed. */
int main(int argc, char **argv) {
    size_t i;
    int passed = 0, failed = 0;
    const char *timeout = getenv("REDISLOCK_TEST_TIMEOUT_S");

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (h_url()[0] == '\0') {
        fprintf(stderr, "REDISLOCK_TEST_URL is not set (redis://127.0.0.1:PORT/ of a test "
                        "server); run scripts/ci/c-tests.sh\n");
        return 2;
    }
    /* Nothing may hang: a stuck run is killed by SIGALRM and counts as failed. */
    alarm(timeout != NULL ? (unsigned)atoi(timeout) : 600);
    printf("redislock %s C tests against %s\n", redislock_version(), h_url());
    for (i = 0; i < sizeof h_all / sizeof h_all[0]; i++) {
        int before = h_failures();
        long long start;
        if (!selected(h_all[i].name, argc, argv)) continue;
        start = h_now_ms();
        h_all[i].run();
        if (h_failures() == before) {
            passed++;
            printf("ok   %-34s %6lld ms\n", h_all[i].name, h_now_ms() - start);
        } else {
            failed++;
            printf("FAIL %-34s %6lld ms\n", h_all[i].name, h_now_ms() - start);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}
