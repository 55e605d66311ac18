/*
 * C soak worker: worker <lock_url> <resource_file> <lock_name> <seconds> <threads>
 * Same loop as soak/src/main.rs, over the C API, with pthreads. Prints one STATS line.
 * Build: gcc -std=c11 -O2 -Wall -Wextra -I../include worker.c -L<dir of libredislock.so>
 *        -lredislock -lpthread -Wl,-rpath,<that dir> -o worker
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "redislock.h"

#define WAIT_MS 2000
#define LEASE_MS 1500
#define MAX_ITERATIONS 10000000ULL
/* The redislock_result codes by number, without the REDISLOCK_ prefix; src/ffi/drift_tests.rs
 * checks this table against include/redislock.h. A code beyond it is counted in the last entry. */
static const char *const CODE_NAMES[] = {
    "OK", "HELD", "WAIT_TIMEOUT", "NOT_HELD", "INVALID_ARGUMENT", "CONNECTION",
    "REDIS_ERROR", "FORKED", "LIMIT_REACHED", "INTERNAL", "NULL_PARAMETER", "PANIC", "CANCELLED", "STALE"};
#define NCODES ((int)(sizeof CODE_NAMES / sizeof CODE_NAMES[0]))

static redislock_client *client;
static const char *file_path, *lock_name;
static double deadline;
static pthread_mutex_t total_mu = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    unsigned long long iterations, increments, lost, stale_reads, stale_writes;
    unsigned long long acquire_err[NCODES], release_err[NCODES];
} stats;
static stats total;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The fencing-checked resource (see soak/src/main.rs): returns 1 and the value when the token
 * is >= the highest seen (registering it; with set, storing new_value), 0 when stale. */
static int resource(unsigned long long token, int set, unsigned long long new_value,
                    unsigned long long *value_out) {
    char buf[128];
    unsigned long long value, highest;
    ssize_t n;
    int fd = open(file_path, O_RDWR);
    if (fd < 0) { perror("open resource"); exit(3); }
    if (flock(fd, LOCK_EX) != 0) { perror("flock"); exit(3); }
    n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) { fprintf(stderr, "resource read failed\n"); exit(3); }
    buf[n] = '\0';
    if (sscanf(buf, "%llu %llu", &value, &highest) != 2) { fprintf(stderr, "bad resource\n"); exit(3); }
    if (token < highest) { close(fd); return 0; }
    if (set) value = new_value;
    n = snprintf(buf, sizeof buf, "%llu %llu\n", value, token);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) { perror("write resource"); exit(3); }
    close(fd); /* releases the flock */
    *value_out = value;
    return 1;
}

static void *run(void *arg) {
    stats st;
    unsigned int seed = (unsigned int)(getpid() * 131 + (long)arg);
    /* One request, shared by every iteration: a fixed lease with a fencing token. */
    redislock_request *req;
    if (redislock_request_new(client, (const uint8_t *)lock_name, strlen(lock_name), &req)
        != REDISLOCK_OK) {
        fprintf(stderr, "request_new failed\n");
        exit(3);
    }
    redislock_request_set_lease_ms(req, LEASE_MS);
    redislock_request_set_auto_renew(req, false);
    redislock_request_set_fencing(req, true);
    memset(&st, 0, sizeof st);
    while (now() < deadline && st.iterations < MAX_ITERATIONS) {
        redislock_lock *lock;
        unsigned long long token, v, ignored;
        uint64_t tok;
        redislock_result r;
        st.iterations++;
        r = redislock_request_acquire(req, WAIT_MS, &lock);
        if (r != REDISLOCK_OK) {
            st.acquire_err[r < NCODES ? r : NCODES - 1]++;
            if (r != REDISLOCK_WAIT_TIMEOUT) usleep(50000);
            continue;
        }
        if (redislock_lock_fencing_token(lock, &tok) != REDISLOCK_OK) {
            fprintf(stderr, "fenced lock without a token\n");
            exit(3);
        }
        token = tok;
        if (!resource(token, 0, 0, &v)) {
            st.stale_reads++;
        } else {
            usleep((useconds_t)(rand_r(&seed) % 3001));
            if (resource(token, 1, v + 1, &ignored)) st.increments++;
            else st.stale_writes++;
        }
        r = redislock_lock_release(lock);
        if (r == REDISLOCK_NOT_HELD) st.lost++;
        else if (r != REDISLOCK_OK) st.release_err[r < NCODES ? r : NCODES - 1]++;
        redislock_lock_free(lock);
    }
    redislock_request_free(req);
    pthread_mutex_lock(&total_mu);
    total.iterations += st.iterations;
    total.increments += st.increments;
    total.lost += st.lost;
    total.stale_reads += st.stale_reads;
    total.stale_writes += st.stale_writes;
    for (int i = 0; i < NCODES; i++) {
        total.acquire_err[i] += st.acquire_err[i];
        total.release_err[i] += st.release_err[i];
    }
    pthread_mutex_unlock(&total_mu);
    return NULL;
}

int main(int argc, char **argv) {
    redislock_config *cfg;
    pthread_t th[64];
    int threads, printed = 0;
    if (argc != 6) {
        fprintf(stderr, "usage: worker <lock_url> <resource_file> <lock_name> <seconds> <threads>\n");
        return 2;
    }
    file_path = argv[2];
    lock_name = argv[3];
    deadline = now() + atof(argv[4]);
    threads = atoi(argv[5]);
    if (threads < 1 || threads > 64) return 2;
    if (redislock_config_new(argv[1], &cfg) != REDISLOCK_OK ||
        redislock_config_set_connect_timeout_ms(cfg, 500) != REDISLOCK_OK ||
        redislock_config_set_read_timeout_ms(cfg, 1000) != REDISLOCK_OK ||
        redislock_config_set_write_timeout_ms(cfg, 1000) != REDISLOCK_OK ||
        redislock_config_set_checkout_timeout_ms(cfg, 2000) != REDISLOCK_OK ||
        redislock_client_from_config(cfg, &client) != REDISLOCK_OK) {
        char msg[512];
        redislock_last_error_message(msg, sizeof msg);
        fprintf(stderr, "client: %s\n", msg);
        return 2;
    }
    redislock_config_free(cfg);
    for (long i = 0; i < threads; i++) pthread_create(&th[i], NULL, run, (void *)i);
    for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
    redislock_client_free(client);
    printf("STATS lang=c workers=%d iterations=%llu increments=%llu lost=%llu stale_reads=%llu "
           "stale_writes=%llu errors=",
           threads, total.iterations, total.increments, total.lost, total.stale_reads,
           total.stale_writes);
    for (int i = 1; i < NCODES; i++) {
        if (total.acquire_err[i]) {
            printf("%sacquire:%s=%llu", printed++ ? "," : "", CODE_NAMES[i], total.acquire_err[i]);
        }
    }
    for (int i = 1; i < NCODES; i++) {
        if (total.release_err[i]) {
            printf("%srelease:%s=%llu", printed++ ? "," : "", CODE_NAMES[i], total.release_err[i]);
        }
    }
    printf("%s\n", printed ? "" : "-");
    return 0;
}
