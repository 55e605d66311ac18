/*
 * A C client of the network-fault matrix (tests/network_faults.rs): one process, one thread,
 * racing the test's Rust clients (and its PHP client) on one name with the exclusive lock and
 * fencing, each holder incrementing the case's fenced file resource exactly as
 * `FencedResource::increment` does (testkit/src/history.rs). It records what it asked and what
 * it was told as JSON lines, with CLOCK_MONOTONIC timestamps, which the test imports into its
 * history (`History::import_json_lines`) so that the checker judges every client together.
 *
 * Settings come from the environment (every one required, times in milliseconds):
 *   NF_URL, NF_NAME            the deployment and the lock name
 *   NF_MIN_REPLICAS            the client's min_replicas
 *   NF_LEASE_MS, NF_WAIT_MS    the lease (no renewal) and the acquire's wait
 *   NF_CONNECT_MS, NF_READ_MS, NF_CHECKOUT_MS, NF_RELEASE_TIMEOUT_MS, NF_REPLICA_TIMEOUT_MS
 *                              the client's timeouts (the read timeout is the write timeout too)
 *   NF_WORK_MS                 how long a holder works between its read and its write
 *   NF_ACQUIRE_BOUND_MS, NF_RELEASE_BOUND_MS
 *                              the bounds recorded with each call's duration
 *   NF_RESOURCE                the resource file: "<value> <highest token>\n", under flock
 *   NF_EVENTS                  where the events go (created; one JSON object a line)
 *   NF_STOP                    the loop ends once this file exists
 *   NF_MAX_RUN_MS              and in any case after this long
 *
 * Prints "ready" once its client is made. Exits 0 after the loop, 1 on a broken resource file
 * or setting, 2 when the client cannot be made.
 *
 * Events (t: CLOCK_MONOTONIC in nanoseconds):
 *   {"t":..,"op":"acquire","wait_ms":W}          an acquire call begins
 *   {"t":..,"op":"call_end","call":"acquire","took_ns":N,"bound_ms":B}
 *   {"t":..,"op":"granted","token":T,"valid_ms":V}
 *   {"t":..,"op":"accepted","token":T,"read":R}   {"t":..,"op":"rejected","token":T}
 *   {"t":..,"op":"release"}  {"t":..,"op":"lost"}  {"t":..,"op":"error","call":C,"what":"..."}
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "redislock.h"

static FILE *events;

/* Set by the library when it finds the held lock lost (Rust's `is_lost`). */
static int lost_flag;

static void on_lost(void *user_data, const uint8_t *name, size_t name_len, const char *reason) {
    (void)name;
    (void)name_len;
    (void)reason;
    __atomic_store_n((int *)user_data, 1, __ATOMIC_SEQ_CST);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static const char *setting(const char *name) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        fprintf(stderr, "client.c: %s is not set\n", name);
        exit(1);
    }
    return v;
}

static uint64_t number(const char *name) {
    const char *v = setting(name);
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0') {
        fprintf(stderr, "client.c: %s=%s is not a number\n", name, v);
        exit(1);
    }
    return (uint64_t)n;
}

/* One event line, flushed: `fields` is the JSON after "op" (starting with a comma), or "". */
static void record(const char *op, const char *fields) {
    fprintf(events, "{\"t\":%" PRIu64 ",\"op\":\"%s\"%s}\n", now_ns(), op, fields);
    fflush(events);
}

/* An error event: the result's text and the thread's last error message, JSON-escaped. */
static void record_error(const char *call, redislock_result rc) {
    char code[128], detail[512], text[700], fields[1600];
    redislock_result_message(rc, code, sizeof code);
    redislock_last_error_message(detail, sizeof detail);
    snprintf(text, sizeof text, "%s: %s", code, detail);
    size_t n = (size_t)snprintf(fields, sizeof fields, ",\"call\":\"%s\",\"what\":\"", call);
    for (const char *p = text; *p != '\0' && n + 8 < sizeof fields; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            fields[n++] = '\\';
            fields[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(fields + n, sizeof fields - n, "\\u%04x", c);
        } else {
            fields[n++] = (char)c;
        }
    }
    fields[n++] = '"';
    fields[n] = '\0';
    record("error", fields);
}

static void record_call_end(const char *call, uint64_t start, uint64_t bound_ms) {
    char fields[128];
    snprintf(fields, sizeof fields, ",\"call\":\"%s\",\"took_ns\":%" PRIu64 ",\"bound_ms\":%" PRIu64,
             call, now_ns() - start, bound_ms);
    record("call_end", fields);
}

/*
 * One step of the resource under an exclusive flock: reads "<value> <highest>", and unless
 * `token` is below highest writes "<value or write_value> <token>". Returns 1 if the token was
 * taken (and the file written), 0 if rejected; *value_out gets the value read.
 */
static int resource_step(const char *path, uint64_t token, int write_phase, uint64_t read,
                         uint64_t *value_out) {
    int fd = open(path, O_RDWR);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        fprintf(stderr, "client.c: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    char buf[128];
    ssize_t len = pread(fd, buf, sizeof buf - 1, 0);
    if (len <= 0) {
        fprintf(stderr, "client.c: %s: cannot read\n", path);
        exit(1);
    }
    buf[len] = '\0';
    uint64_t value, highest;
    if (sscanf(buf, "%" SCNu64 " %" SCNu64, &value, &highest) != 2) {
        fprintf(stderr, "client.c: %s: not \"<value> <highest>\": %s\n", path, buf);
        exit(1);
    }
    *value_out = value;
    int ok = token >= highest;
    if (ok) {
        int n = snprintf(buf, sizeof buf, "%" PRIu64 " %" PRIu64 "\n",
                         write_phase ? read + 1 : value, token);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
            fprintf(stderr, "client.c: %s: cannot write: %s\n", path, strerror(errno));
            exit(1);
        }
    }
    close(fd); /* ends the flock */
    return ok;
}

/* FencedResource::increment: register the token and read, work, write read + 1. */
static void increment(const char *path, uint64_t token, uint64_t work_ms) {
    char fields[96];
    uint64_t read, now;
    if (!resource_step(path, token, 0, 0, &read)) {
        snprintf(fields, sizeof fields, ",\"token\":%" PRIu64, token);
        record("rejected", fields);
        return;
    }
    sleep_ms(work_ms);
    if (resource_step(path, token, 1, read, &now)) {
        snprintf(fields, sizeof fields, ",\"token\":%" PRIu64 ",\"read\":%" PRIu64, token, read);
        record("accepted", fields);
    } else {
        snprintf(fields, sizeof fields, ",\"token\":%" PRIu64, token);
        record("rejected", fields);
    }
}

int main(void) {
    const char *url = setting("NF_URL");
    const char *name = setting("NF_NAME");
    const char *resource = setting("NF_RESOURCE");
    const char *stop = setting("NF_STOP");
    uint64_t wait_ms = number("NF_WAIT_MS"), work_ms = number("NF_WORK_MS");
    uint64_t acquire_bound = number("NF_ACQUIRE_BOUND_MS");
    uint64_t release_bound = number("NF_RELEASE_BOUND_MS");
    uint64_t deadline = now_ns() + number("NF_MAX_RUN_MS") * 1000000u;
    events = fopen(setting("NF_EVENTS"), "w");
    if (events == NULL) {
        fprintf(stderr, "client.c: %s: %s\n", getenv("NF_EVENTS"), strerror(errno));
        return 1;
    }

    redislock_config *config;
    redislock_client *client;
    if (redislock_config_new(url, &config) != REDISLOCK_OK ||
        redislock_config_set_min_replicas(config, (uint32_t)number("NF_MIN_REPLICAS")) ||
        redislock_config_set_replica_timeout_ms(config, number("NF_REPLICA_TIMEOUT_MS")) ||
        redislock_config_set_connect_timeout_ms(config, number("NF_CONNECT_MS")) ||
        redislock_config_set_read_timeout_ms(config, number("NF_READ_MS")) ||
        redislock_config_set_write_timeout_ms(config, number("NF_READ_MS")) ||
        redislock_config_set_checkout_timeout_ms(config, number("NF_CHECKOUT_MS")) ||
        redislock_config_set_release_timeout_ms(config, number("NF_RELEASE_TIMEOUT_MS")) ||
        redislock_config_set_lease_ms(config, number("NF_LEASE_MS")) ||
        redislock_config_set_auto_renew(config, false) ||
        redislock_config_set_fencing(config, true) ||
        redislock_client_from_config(config, &client) != REDISLOCK_OK) {
        char detail[512];
        redislock_last_error_message(detail, sizeof detail);
        fprintf(stderr, "client.c: cannot make the client of %s: %s\n", url, detail);
        return 2;
    }
    redislock_config_free(config);
    printf("ready\n");
    fflush(stdout);

    char fields[128];
    while (access(stop, F_OK) != 0 && now_ns() < deadline) {
        snprintf(fields, sizeof fields, ",\"wait_ms\":%" PRIu64, wait_ms);
        record("acquire", fields);
        redislock_lock *lock;
        uint64_t start = now_ns();
        redislock_result rc = redislock_lock_acquire(client, (const uint8_t *)name, strlen(name),
                                                     wait_ms, &lock);
        record_call_end("acquire", start, acquire_bound);
        if (rc != REDISLOCK_OK) {
            record_error("acquire", rc);
            if (rc != REDISLOCK_WAIT_TIMEOUT) sleep_ms(20);
            continue;
        }
        uint64_t token = 0;
        uint64_t valid_ms = redislock_lock_remaining_ms(lock);
        if (redislock_lock_fencing_token(lock, &token) == REDISLOCK_OK) {
            snprintf(fields, sizeof fields, ",\"token\":%" PRIu64 ",\"valid_ms\":%" PRIu64, token,
                     valid_ms);
        } else {
            snprintf(fields, sizeof fields, ",\"token\":null,\"valid_ms\":%" PRIu64, valid_ms);
        }
        record("granted", fields);
        __atomic_store_n(&lost_flag, 0, __ATOMIC_SEQ_CST);
        redislock_lock_on_lost(lock, on_lost, &lost_flag);
        increment(resource, token, work_ms);
        if (__atomic_load_n(&lost_flag, __ATOMIC_SEQ_CST)) record("lost", "");
        record("release", "");
        start = now_ns();
        rc = redislock_lock_release(lock);
        /* Freeing is part of the call, as dropping the guard is in Rust's release(self). */
        redislock_lock_free(lock);
        record_call_end("release", start, release_bound);
        if (rc == REDISLOCK_NOT_HELD) {
            record("lost", "");
        } else if (rc != REDISLOCK_OK) {
            record_error("release", rc);
        }
    }
    redislock_client_free(client);
    fclose(events);
    return 0;
}
