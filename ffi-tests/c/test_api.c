/* The C API used as intended: every function, every setter, and the lock semantics. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static const redislock_result all_codes[] = {
    REDISLOCK_OK,           REDISLOCK_HELD,          REDISLOCK_WAIT_TIMEOUT,
    REDISLOCK_NOT_HELD,     REDISLOCK_INVALID_ARGUMENT, REDISLOCK_CONNECTION,
    REDISLOCK_REDIS_ERROR,  REDISLOCK_FORKED,        REDISLOCK_LIMIT_REACHED,
    REDISLOCK_INTERNAL,     REDISLOCK_NULL_PARAMETER, REDISLOCK_PANIC,
    REDISLOCK_CANCELLED,    REDISLOCK_STALE,
};

/* The value of a key as text ("" and 0 if it does not exist); returns 1 if it exists. */
static int key_value(resp_conn *c, const char *key, size_t key_len, char *out, size_t cap) {
    const char *argv[2];
    size_t lens[2];
    resp_reply r;
    argv[0] = "GET";
    lens[0] = 3;
    argv[1] = key;
    lens[1] = key_len;
    out[0] = '\0';
    if (resp_command(c, &r, 2, argv, lens) != 0 || r.type != '$') {
        h_fail(__FILE__, __LINE__, "GET failed");
        return 0;
    }
    if (r.nil) return 0;
    snprintf(out, cap, "%s", r.str);
    return 1;
}

static long long key_pttl(resp_conn *c, const char *key) {
    const char *argv[2];
    resp_reply r;
    argv[0] = "PTTL";
    argv[1] = key;
    if (resp_command_str(c, &r, 2, argv) != 0 || r.type != ':') return -100;
    return r.integer;
}

static int is_token(const char *s) {
    size_t i, n = strlen(s);
    if (n < 32) return 0;
    for (i = 0; i < n; i++) {
        if (strchr("0123456789abcdef", s[i]) == NULL) return 0;
    }
    return 1;
}

void test_version(void) {
    const char *v = redislock_version();
    CHECK(v != NULL);
    CHECK(v != NULL && strchr(v, '.') != NULL);
    CHECK(v == redislock_version()); /* static */
}

void test_result_messages(void) {
    size_t i, j;
    char buf[256], other[256], small[6];
    for (i = 0; i < sizeof all_codes / sizeof all_codes[0]; i++) {
        size_t n = redislock_result_message(all_codes[i], buf, sizeof buf);
        CHECK(n > 0 && n < sizeof buf && strlen(buf) == n);
        CHECK((unsigned)all_codes[i] == i); /* stable numbering */
        for (j = 0; j < i; j++) {
            redislock_result_message(all_codes[j], other, sizeof other);
            CHECK(strcmp(buf, other) != 0);
        }
    }
    /* Buffer convention: the full length is returned; the text is cut and NUL-terminated. */
    i = redislock_result_message(REDISLOCK_HELD, NULL, 0);
    CHECK(i == strlen("the lock is held by another owner"));
    memset(small, 'x', sizeof small);
    CHECK(redislock_result_message(REDISLOCK_HELD, small, sizeof small) == i);
    CHECK(strcmp(small, "the l") == 0);
    small[0] = 'x';
    CHECK(redislock_result_message(REDISLOCK_HELD, small, 1) == i && small[0] == '\0');
    small[0] = 'x';
    CHECK(redislock_result_message(REDISLOCK_HELD, small, 0) == i && small[0] == 'x');
    CHECK(redislock_result_message(REDISLOCK_HELD, NULL, 10) == i);
    /* A number that is no code. */
    redislock_result_message((redislock_result)999, buf, sizeof buf);
    CHECK(strcmp(buf, "unknown result code") == 0);
}

void test_last_error_messages(void) {
    redislock_client *client = NULL;
    char buf[8];
    size_t full;
    CHECK_RC(redislock_client_new("http://not-redis/", &client), REDISLOCK_INVALID_ARGUMENT);
    full = redislock_last_error_message(NULL, 0);
    CHECK(full > sizeof buf);
    CHECK(strstr(h_last_error(), "redis://") != NULL);
    memset(buf, 'x', sizeof buf);
    CHECK(redislock_last_error_message(buf, sizeof buf) == full);
    CHECK(strlen(buf) == sizeof buf - 1);
    /* A success does not clear it. */
    CHECK(strcmp(redislock_version(), "") != 0);
    CHECK(redislock_last_error_message(NULL, 0) == full);
}

static void *fresh_thread_error(void *arg) {
    size_t *len = arg;
    *len = redislock_last_error_message(NULL, 0);
    return NULL;
}

void test_last_error_is_per_thread(void) {
    pthread_t t;
    size_t len = 12345;
    redislock_client *client = NULL;
    CHECK_RC(redislock_client_new("", &client), REDISLOCK_INVALID_ARGUMENT);
    CHECK(redislock_last_error_message(NULL, 0) > 0);
    CHECK(pthread_create(&t, NULL, fresh_thread_error, &len) == 0);
    pthread_join(t, NULL);
    CHECK(len == 0);
}

void test_config_every_setter(void) {
    redislock_config *config = NULL;
    redislock_client *client = NULL, *second = NULL;
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128], key[160], value[128];

    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_pool_size(config, 4), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_max_waiters(config, 8), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_connect_timeout_ms(config, 1500), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_read_timeout_ms(config, 1500), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_write_timeout_ms(config, 1500), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_checkout_timeout_ms(config, 2500), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_release_timeout_ms(config, 5000), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_lease_ms(config, 7000), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_auto_renew(config, false), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_fencing(config, true), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_key_prefix(config, NAME("cfg:")), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_recheck_interval_ms(config, 200), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_recheck_jitter(config, 0.5), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_max_renewed_locks(config, 10), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
    /* A config can build several clients; freeing it leaves them alone. */
    CHECK_RC(redislock_client_from_config(config, &second), REDISLOCK_OK);
    redislock_config_free(config);

    /* The settings are in effect: prefix, lease, fencing. */
    h_name(name, sizeof name, "cfg");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_OK);
    if (lock != NULL && h_resp(&c) == 0) {
        uint64_t token = 0;
        long long pttl;
        snprintf(key, sizeof key, "cfg:%s", name);
        CHECK(key_value(&c, key, strlen(key), value, sizeof value));
        pttl = key_pttl(&c, key);
        CHECK(pttl > 5000 && pttl <= 7000);
        CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_OK);
        CHECK(token >= 1);
        CHECK_RC(redislock_lock_try_acquire(second, NAME(name), &lock), REDISLOCK_HELD);
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        CHECK(!key_value(&c, key, strlen(key), value, sizeof value));
        resp_close(&c);
    }
    redislock_lock_free(lock);
    redislock_client_free(second);
    redislock_client_free(client);
}

/* Builds a client from a config changed by `set`, expecting INVALID_ARGUMENT whose message
 * names `what`. */
#define CHECK_INVALID_SETTING(set, what)                                                       \
    do {                                                                                       \
        redislock_config *cfg_ = NULL;                                                         \
        redislock_client *client_ = NULL;                                                      \
        CHECK_RC(redislock_config_new(h_url(), &cfg_), REDISLOCK_OK);                          \
        CHECK_RC(set, REDISLOCK_OK);                                                           \
        CHECK_RC(redislock_client_from_config(cfg_, &client_), REDISLOCK_INVALID_ARGUMENT);   \
        CHECK(client_ == NULL);                                                                \
        CHECK(strstr(h_last_error(), what) != NULL);                                           \
        redislock_config_free(cfg_);                                                           \
    } while (0)

void test_config_invalid_settings(void) {
    static uint8_t long_prefix[5000];
    redislock_config *config = NULL;
    redislock_client *client = NULL;
    CHECK_INVALID_SETTING(redislock_config_set_pool_size(cfg_, 0), "pool_size");
    CHECK_INVALID_SETTING(redislock_config_set_pool_size(cfg_, 100000), "pool_size");
    CHECK_INVALID_SETTING(redislock_config_set_max_waiters(cfg_, 0), "max_waiters");
    CHECK_INVALID_SETTING(redislock_config_set_connect_timeout_ms(cfg_, 0), "connect_timeout");
    CHECK_INVALID_SETTING(redislock_config_set_read_timeout_ms(cfg_, 0), "read_timeout");
    CHECK_INVALID_SETTING(redislock_config_set_write_timeout_ms(cfg_, UINT64_MAX),
                          "write_timeout");
    CHECK_INVALID_SETTING(redislock_config_set_checkout_timeout_ms(cfg_, 0), "checkout_timeout");
    CHECK_INVALID_SETTING(redislock_config_set_release_timeout_ms(cfg_, UINT64_MAX),
                          "release_timeout");
    CHECK_INVALID_SETTING(redislock_config_set_lease_ms(cfg_, 0), "lease");
    CHECK_INVALID_SETTING(redislock_config_set_lease_ms(cfg_, UINT64_MAX), "lease");
    CHECK_INVALID_SETTING(redislock_config_set_lease_ms(cfg_, 50), "lease"); /* auto-renewed */
    CHECK_INVALID_SETTING(redislock_config_set_recheck_interval_ms(cfg_, 0), "recheck_interval");
    CHECK_INVALID_SETTING(redislock_config_set_recheck_jitter(cfg_, 1.5), "recheck_jitter");
    CHECK_INVALID_SETTING(redislock_config_set_recheck_jitter(cfg_, -0.1), "recheck_jitter");
    CHECK_INVALID_SETTING(redislock_config_set_recheck_jitter(cfg_, nan("")), "recheck_jitter");
    CHECK_INVALID_SETTING(redislock_config_set_max_renewed_locks(cfg_, UINT64_MAX),
                          "max_renewed_locks");
    CHECK_INVALID_SETTING(redislock_config_set_key_prefix(cfg_, long_prefix, sizeof long_prefix),
                          "key_prefix");
    /* The URL is checked when building, too. */
    CHECK_RC(redislock_config_new("redis://127.0.0.1:notaport/", &config), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_INVALID_ARGUMENT);
    CHECK(client == NULL);
    /* A 50 ms lease is fine without auto-renewal. */
    CHECK_RC(redislock_config_set_key_prefix(config, NULL, 0), REDISLOCK_OK);
    redislock_config_free(config);
    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_lease_ms(config, 50), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_auto_renew(config, false), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
    redislock_client_free(client);
    redislock_config_free(config);
}

void test_acquire_release_basics(void) {
    redislock_client *client = h_client(), *other = h_client();
    redislock_lock *lock = NULL, *second = (redislock_lock *)&lock;
    resp_conn c;
    char name[128], value[128];
    uint64_t remaining;

    h_name(name, sizeof name, "basics");
    CHECK_RC(h_try_acquire_with(client, NAME(name), 10000, false, false, &lock), REDISLOCK_OK);
    CHECK(redislock_lock_is_held(lock));
    remaining = redislock_lock_remaining_ms(lock);
    CHECK(remaining > 5000 && remaining <= 10000);
    if (h_resp(&c) == 0) {
        /* The classic layout: the key N holds a random token with a millisecond expiry. */
        CHECK(key_value(&c, name, strlen(name), value, sizeof value));
        CHECK(is_token(value));
        CHECK(key_pttl(&c, name) > 5000);
        /* Another owner is refused; the out-parameter is left alone. */
        CHECK_RC(redislock_lock_try_acquire(other, NAME(name), &second), REDISLOCK_HELD);
        CHECK(second == (redislock_lock *)&lock);
        CHECK(strstr(h_last_error(), name) != NULL);
        CHECK(strstr(h_last_error(), value) == NULL); /* never the token */
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        CHECK(!key_value(&c, name, strlen(name), value, sizeof value));
        CHECK(!redislock_lock_is_held(lock));
        CHECK(redislock_lock_remaining_ms(lock) == 0);
        /* Free now: the other client gets it at once. */
        CHECK_RC(redislock_lock_try_acquire(other, NAME(name), &second), REDISLOCK_OK);
        CHECK(redislock_lock_is_held(second));
        /* The release for the end of a request: on a reachable server, the same. */
        CHECK_RC(redislock_lock_release_in_background(second), REDISLOCK_OK);
        CHECK(!redislock_lock_is_held(second));
        CHECK(!key_value(&c, name, strlen(name), value, sizeof value));
        CHECK_RC(redislock_lock_release_in_background(second), REDISLOCK_NOT_HELD);
        redislock_lock_free(second);
        resp_close(&c);
    }
    redislock_lock_free(lock);
    redislock_client_free(other);
    redislock_client_free(client);
}

/* The Prometheus text of a client's metrics: the size asked first, a buffer too small refused
 * with the size it needs, the counts of what was done, a tracked name's own series. */
void test_metrics_prometheus_text(void) {
    redislock_config *cfg = NULL;
    redislock_client *client = NULL;
    redislock_lock *lock = NULL, *busy = NULL;
    char name[128], series[256], small[16];
    char *text;
    size_t needed = 0, again = 0;

    h_name(name, sizeof name, "metrics");
    CHECK_RC(redislock_config_new(h_url(), &cfg), REDISLOCK_OK);
    CHECK_RC(redislock_config_add_metric_name(cfg, (const uint8_t *)name, strlen(name)),
             REDISLOCK_OK);
    CHECK_RC(redislock_config_add_metric_name(cfg, (const uint8_t *)"\xff", 1),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_client_from_config(cfg, &client), REDISLOCK_OK);
    redislock_config_free(cfg);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 10000, false, false, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &busy), REDISLOCK_HELD);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);

    CHECK_RC(redislock_client_metrics_prometheus(client, NULL, 0, &needed),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(needed > 1000);
    CHECK_RC(redislock_client_metrics_prometheus(client, small, sizeof small, &again),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(again == needed);
    CHECK(small[0] == '\0');
    CHECK(strstr(h_last_error(), "bytes") != NULL);
    CHECK_RC(redislock_client_metrics_prometheus(client, NULL, 10, &again),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_metrics_prometheus(client, small, sizeof small, NULL),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_metrics_prometheus(NULL, small, sizeof small, &again),
             REDISLOCK_NULL_PARAMETER);

    text = malloc(needed);
    CHECK_RC(redislock_client_metrics_prometheus(client, text, needed, &again), REDISLOCK_OK);
    CHECK(again == needed);
    CHECK(strlen(text) + 1 == needed);
    CHECK(strstr(text, "# TYPE redislock_acquisitions_total counter\n") != NULL);
    CHECK(strstr(text, "redislock_acquisitions_total{kind=\"exclusive\",outcome=\"immediate\"} 1\n") != NULL);
    CHECK(strstr(text, "redislock_acquisitions_total{kind=\"exclusive\",outcome=\"busy\"} 1\n") != NULL);
    CHECK(strstr(text, "redislock_hold_seconds_count{kind=\"exclusive\"} 1\n") != NULL);
    snprintf(series, sizeof series,
             "redislock_name_acquisitions_total{name=\"%s\",outcome=\"busy\"} 1\n", name);
    CHECK(strstr(text, series) != NULL);
    free(text);
    redislock_client_free(client);
}

void test_one_liners_take_the_client_defaults(void) {
    redislock_config *config = NULL;
    redislock_client *client = h_client(), *fenced = NULL;
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128];
    uint64_t token = 0;

    /* The library's defaults: a 30 s lease, auto-renewed, no fencing. */
    h_name(name, sizeof name, "defaults");
    CHECK_RC(redislock_lock_acquire(client, NAME(name), 1000, &lock), REDISLOCK_OK);
    CHECK(redislock_lock_remaining_ms(lock) > 25000);
    CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    lock = NULL;

    /* A client's own defaults. */
    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_lease_ms(config, 4000), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_fencing(config, true), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &fenced), REDISLOCK_OK);
    redislock_config_free(config);
    CHECK_RC(redislock_lock_try_acquire(fenced, NAME(name), &lock), REDISLOCK_OK);
    CHECK(redislock_lock_remaining_ms(lock) <= 4000);
    CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_OK);
    CHECK(token >= 1);
    if (h_resp(&c) == 0) {
        long long pttl = key_pttl(&c, name);
        CHECK(pttl > 2000 && pttl <= 4000);
        resp_close(&c);
    }
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_client_free(fenced);
    redislock_client_free(client);
}

/* A client whose defaults differ from the library's in every lock setting. */
static redislock_client *client_with_defaults(uint64_t lease_ms, bool auto_renew, bool fencing) {
    redislock_config *config = NULL;
    redislock_client *client = NULL;
    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_lease_ms(config, lease_ms), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_auto_renew(config, auto_renew), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_fencing(config, fencing), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
    redislock_config_free(config);
    return client;
}

void test_request_unset_settings_are_the_clients(void) {
    /* Client defaults: a 6 s fixed lease with fencing. */
    redislock_client *client = client_with_defaults(6000, false, true);
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128], value[128];
    uint64_t token = 0;

    if (client == NULL || h_resp(&c) != 0) return;
    h_name(name, sizeof name, "unset");

    /* Nothing set: everything is the client's. */
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK(key_pttl(&c, name) > 4000 && key_pttl(&c, name) <= 6000);
    CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    lock = NULL;

    /* Only the lease set: still fenced and not renewed, as the client says. */
    CHECK_RC(redislock_request_set_lease_ms(req, 300), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK(key_pttl(&c, name) <= 300);
    CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_OK);
    h_sleep_ms(600); /* twice the lease: nothing renewed it */
    CHECK(!key_value(&c, name, strlen(name), value, sizeof value));
    CHECK(!redislock_lock_is_held(lock));
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_NOT_HELD);
    redislock_lock_free(lock);
    lock = NULL;
    redislock_request_free(req);

    /* Only fencing set (off): the lease is still the client's 6 s. */
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, false), REDISLOCK_OK);
    CHECK_RC(redislock_request_acquire(req, 1000, &lock), REDISLOCK_OK);
    CHECK(key_pttl(&c, name) > 4000);
    CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_request_free(req);
    resp_close(&c);
    redislock_client_free(client);
}

void test_request_each_setter(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128], value[128], token[300];
    uint64_t fence = 0;
    static const char owner[] = "job-7-0123456789abcdef";

    if (client == NULL || h_resp(&c) != 0) return;
    h_name(name, sizeof name, "setters");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);

    /* Lease: the key's expiry. Auto-renewal: kept past three leases. Fencing: a token. */
    CHECK_RC(redislock_request_set_lease_ms(req, 1000), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK(key_pttl(&c, name) <= 1000);
    CHECK_RC(redislock_lock_fencing_token(lock, &fence), REDISLOCK_OK);
    CHECK(fence >= 1);
    h_sleep_ms(3500);
    CHECK(redislock_lock_is_held(lock));
    CHECK(key_value(&c, name, strlen(name), value, sizeof value));
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    lock = NULL;

    /* Owner token: the key holds it, and the lock reports it. */
    CHECK_RC(redislock_request_set_owner_token(req, NAME(owner)), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, false), REDISLOCK_OK);
    CHECK_RC(redislock_request_acquire(req, 1000, &lock), REDISLOCK_OK);
    CHECK(key_value(&c, name, strlen(name), value, sizeof value));
    CHECK(strcmp(value, owner) == 0);
    CHECK(redislock_lock_owner_token(lock, token, sizeof token) == strlen(owner));
    CHECK(strcmp(token, owner) == 0);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    /* The cancel setter is exercised by cancel_a_waiting_acquire. */
    redislock_request_free(req);
    resp_close(&c);
    redislock_client_free(client);
}

/* At least: a release before it leaves the key ours with the time left; at most: the lease is
 * cut at it and the lock is reported lost then. Bad bounds and other kinds are refused. */
void test_request_at_least_and_at_most(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL, *other = NULL;
    redislock_lock *lock = NULL, *next = NULL;
    resp_conn c;
    char name[128], value[128], token[300];
    long long pttl;

    if (client == NULL || h_resp(&c) != 0) return;
    h_name(name, sizeof name, "at-least");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_lease_ms(req, 300), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_at_least_ms(req, 1500), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK(redislock_lock_owner_token(lock, token, sizeof token) > 0);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    lock = NULL;
    /* Released, but the key keeps our token for what is left of the 1.5 s. */
    CHECK(key_value(&c, name, strlen(name), value, sizeof value));
    CHECK(strcmp(value, token) == 0);
    pttl = key_pttl(&c, name);
    CHECK(pttl > 1000 && pttl <= 1500);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 1000, false, false, &next), REDISLOCK_HELD);
    h_sleep_ms(1700);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 1000, false, false, &next), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(next), REDISLOCK_OK);
    redislock_lock_free(next);

    /* At most 1 s: renewed (lease 300 ms) until then, never past it, then lost. */
    CHECK_RC(redislock_request_new(client, NAME(name), &other), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_lease_ms(other, 300), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(other, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_at_most_ms(other, 1000), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(other, &lock), REDISLOCK_OK);
    h_sleep_ms(600);
    CHECK(redislock_lock_is_held(lock));
    pttl = key_pttl(&c, name);
    CHECK(pttl > 0 && pttl <= 450);
    h_sleep_ms(900);
    CHECK(!redislock_lock_is_held(lock));
    CHECK(key_pttl(&c, name) == -2);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_NOT_HELD);
    redislock_lock_free(lock);
    lock = NULL;

    /* Bad bounds: refused by the acquire, nothing held. */
    CHECK_RC(redislock_request_set_at_most_ms(other, 0), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(other, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock == NULL);
    CHECK_RC(redislock_request_set_at_most_ms(other, 1000), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_at_least_ms(other, 2000), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(other, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock == NULL);
    CHECK(key_pttl(&c, name) == -2);
    /* Exclusive locks only: not for another side, nor switched to one once set. */
    CHECK_RC(redislock_request_set_kind(other, REDISLOCK_KIND_READ), REDISLOCK_INVALID_ARGUMENT);
    redislock_request_free(other);
    CHECK_RC(redislock_request_new(client, NAME(name), &other), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_kind(other, REDISLOCK_KIND_WRITE), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_at_least_ms(other, 1000), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_at_most_ms(other, 1000), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_at_least_ms(NULL, 1000), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_set_at_most_ms(NULL, 1000), REDISLOCK_NULL_PARAMETER);
    redislock_request_free(other);
    redislock_request_free(req);
    resp_close(&c);
    redislock_client_free(client);
}

struct reuse_shop {
    const redislock_request *req; /* shared by all threads */
    int stock;                    /* guarded by the lock */
    int sold;
    int oversold;
};

static void *buy_with_request(void *arg) {
    struct reuse_shop *shop = arg;
    int i;
    for (i = 0; i < 20; i++) {
        redislock_lock *lock = NULL;
        int seen;
        CHECK_RC(redislock_request_acquire(shop->req, 30000, &lock), REDISLOCK_OK);
        if (lock == NULL) continue;
        seen = shop->stock;
        h_sleep_ms(1);
        if (seen > 0) {
            shop->stock = seen - 1;
            shop->sold++;
        }
        if (shop->stock < 0) shop->oversold = 1;
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        redislock_lock_free(lock);
    }
    return NULL;
}

void test_request_reuse(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *first = NULL, *second = NULL, *third = NULL;
    struct reuse_shop shop;
    pthread_t threads[4];
    char name[128];
    uint64_t a = 0, b = 0;
    int i;

    if (client == NULL) return;
    h_name(name, sizeof name, "reuse");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_OK);
    /* One after the other: each acquire is a new grant, with a larger fencing token. */
    CHECK_RC(redislock_request_try_acquire(req, &first), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(first, &a), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &second), REDISLOCK_HELD);
    CHECK(second == NULL);
    CHECK_RC(redislock_lock_release(first), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &second), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(second, &b), REDISLOCK_OK);
    CHECK(b > a);
    /* A setter changes the acquires after it only. */
    CHECK_RC(redislock_request_set_fencing(req, false), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(second, &b), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(second), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &third), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(third, &b), REDISLOCK_INVALID_ARGUMENT);
    /* Freeing the request leaves its lock held. */
    redislock_request_free(req);
    CHECK(redislock_lock_is_held(third));
    CHECK_RC(redislock_lock_release(third), REDISLOCK_OK);
    redislock_lock_free(first);
    redislock_lock_free(second);
    redislock_lock_free(third);

    /* One request shared by four threads: every acquire is a lock of its own. */
    h_name(name, sizeof name, "reuse-threads");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_lease_ms(req, 10000), REDISLOCK_OK);
    shop.req = req;
    shop.stock = 60;
    shop.sold = 0;
    shop.oversold = 0;
    for (i = 0; i < 4; i++) CHECK(pthread_create(&threads[i], NULL, buy_with_request, &shop) == 0);
    for (i = 0; i < 4; i++) pthread_join(threads[i], NULL);
    CHECK(shop.sold == 60);
    CHECK(shop.stock == 0);
    CHECK(!shop.oversold);
    redislock_request_free(req);
    redislock_client_free(client);
}

void test_key_prefix_and_binary_names(void) {
    /* Prefix and name are bytes, NULs and non-UTF-8 included. */
    static const uint8_t prefix[] = {'p', 0, 0xff, ':'};
    static const uint8_t tail[] = {0, 'x', 0xfe, '}', '{'};
    redislock_config *config = NULL;
    redislock_client *client = NULL;
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128], value[128];
    uint8_t full_name[160], key[170];
    size_t name_len, key_len;

    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_key_prefix(config, prefix, sizeof prefix), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
    redislock_config_free(config);

    h_name(name, sizeof name, "bin");
    name_len = strlen(name);
    memcpy(full_name, name, name_len);
    memcpy(full_name + name_len, tail, sizeof tail);
    name_len += sizeof tail;
    memcpy(key, prefix, sizeof prefix);
    memcpy(key + sizeof prefix, full_name, name_len);
    key_len = sizeof prefix + name_len;

    CHECK_RC(redislock_lock_try_acquire(client, full_name, name_len, &lock), REDISLOCK_OK);
    if (h_resp(&c) == 0) {
        CHECK(key_value(&c, (const char *)key, key_len, value, sizeof value));
        CHECK(is_token(value));
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        CHECK(!key_value(&c, (const char *)key, key_len, value, sizeof value));
        resp_close(&c);
    }
    redislock_lock_free(lock);
    redislock_client_free(client);
}

struct holder {
    redislock_lock *lock;
    long hold_ms;
    redislock_result released;
};

static void *release_later(void *arg) {
    struct holder *h = arg;
    h_sleep_ms(h->hold_ms);
    h->released = redislock_lock_release(h->lock);
    return NULL;
}

void test_acquire_waits_for_release(void) {
    redislock_client *client = h_client();
    redislock_lock *first = NULL, *second = NULL;
    struct holder holder;
    pthread_t t;
    char name[128];
    long long start, waited;

    h_name(name, sizeof name, "wait");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &first), REDISLOCK_OK);
    holder.lock = first;
    holder.hold_ms = 300;
    holder.released = REDISLOCK_PANIC;
    CHECK(pthread_create(&t, NULL, release_later, &holder) == 0);
    start = h_now_ms();
    CHECK_RC(redislock_lock_acquire(client, NAME(name), 10000, &second), REDISLOCK_OK);
    waited = h_now_ms() - start;
    pthread_join(t, NULL);
    CHECK(holder.released == REDISLOCK_OK);
    CHECK(waited >= 250);
    CHECK(waited < 5000); /* woken by the release, not by a re-check */
    CHECK(redislock_lock_is_held(second));
    CHECK_RC(redislock_lock_release(second), REDISLOCK_OK);
    redislock_lock_free(first);
    redislock_lock_free(second);
    redislock_client_free(client);
}

void test_acquire_wait_timeout(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL, *other = NULL;
    char name[128];
    long long start, waited;

    h_name(name, sizeof name, "timeout");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_OK);
    start = h_now_ms();
    CHECK_RC(redislock_lock_acquire(client, NAME(name), 300, &other), REDISLOCK_WAIT_TIMEOUT);
    waited = h_now_ms() - start;
    CHECK(other == NULL);
    CHECK(waited >= 250 && waited < 5000);
    /* wait 0: one attempt, reported as a wait timeout. */
    CHECK_RC(redislock_lock_acquire(client, NAME(name), 0, &other), REDISLOCK_WAIT_TIMEOUT);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_client_free(client);
}

void test_extend_resets_lease(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128];

    h_name(name, sizeof name, "extend");
    CHECK_RC(h_try_acquire_with(client, NAME(name), 500, false, false, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_extend(lock, 20000), REDISLOCK_OK);
    CHECK(redislock_lock_remaining_ms(lock) > 15000);
    if (h_resp(&c) == 0) {
        CHECK(key_pttl(&c, name) > 15000);
        resp_close(&c);
    }
    h_sleep_ms(700); /* past the first lease */
    CHECK(redislock_lock_is_held(lock));
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_extend(lock, 20000), REDISLOCK_NOT_HELD);
    redislock_lock_free(lock);
    redislock_client_free(client);
}

void test_expired_lock_is_not_held(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL, *next = NULL;
    char name[128];

    h_name(name, sizeof name, "expire");
    CHECK_RC(h_try_acquire_with(client, NAME(name), 100, false, false, &lock), REDISLOCK_OK);
    h_sleep_ms(300);
    CHECK(!redislock_lock_is_held(lock));
    CHECK(redislock_lock_remaining_ms(lock) == 0);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 100, false, false, &next), REDISLOCK_OK);
    CHECK_RC(redislock_lock_extend(lock, 1000), REDISLOCK_NOT_HELD);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_NOT_HELD);
    /* The new owner's lock is untouched by the old owner's attempts. */
    CHECK(redislock_lock_is_held(next));
    CHECK_RC(redislock_lock_release(next), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_lock_free(next);
    redislock_client_free(client);
}

void test_auto_renew_keeps_lock(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    resp_conn c;
    char name[128], value[128];

    h_name(name, sizeof name, "renew");
    /* A lease long enough that renewal keeps up under valgrind on a loaded machine. */
    CHECK_RC(h_try_acquire_with(client, NAME(name), 1000, true, false, &lock), REDISLOCK_OK);
    h_sleep_ms(3500); /* three and a half leases */
    CHECK(redislock_lock_is_held(lock));
    if (h_resp(&c) == 0) {
        CHECK(key_value(&c, name, strlen(name), value, sizeof value));
        resp_close(&c);
    }
    CHECK_RC(redislock_lock_extend(lock, 50), REDISLOCK_INVALID_ARGUMENT); /* < 100 ms renewed */
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_client_free(client);
}

void test_fencing_tokens_increase(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    char name[128];
    uint64_t last = 0, token = 0;
    int i;

    h_name(name, sizeof name, "fence");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_OK);
    for (i = 0; i < 3; i++) {
        CHECK_RC(redislock_request_acquire(req, 1000, &lock), REDISLOCK_OK);
        CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_OK);
        CHECK(token > last);
        last = token;
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        /* The token stays readable after release. */
        CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_OK);
        CHECK(token == last);
        redislock_lock_free(lock);
        lock = NULL;
    }
    redislock_request_free(req);
    redislock_client_free(client);
}

void test_fencing_token_without_fencing(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    char name[128];
    uint64_t token = 77;

    h_name(name, sizeof name, "nofence");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(lock, &token), REDISLOCK_INVALID_ARGUMENT);
    CHECK(token == 77);
    CHECK(strstr(h_last_error(), "fencing") != NULL);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_client_free(client);
}

/* Fenced writes: the current token writes, an equal one writes again, an older one is refused
 * with REDISLOCK_STALE and changes nothing. */
void test_fenced_writes(void) {
    redislock_client *client = h_client();
    redislock_fenced *res = NULL;
    redislock_lock *a = NULL, *b = NULL;
    char name[128], key[128], value[32];
    uint64_t old = 0, cur = 0, epoch = 1;
    int64_t n = 0;
    resp_conn c;

    h_name(name, sizeof name, "fenced-lock");
    h_name(key, sizeof key, "fenced-res");
    CHECK_RC(redislock_fenced_open(client, NAME(key), &res), REDISLOCK_OK);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 10000, false, true, &a), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(a, &old), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fence_epoch(a, &epoch), REDISLOCK_OK);
    CHECK(epoch == 0); /* a single server */
    CHECK_RC(redislock_lock_release(a), REDISLOCK_OK);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 10000, false, true, &b), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(b, &cur), REDISLOCK_OK);
    CHECK(cur > old);

    CHECK_RC(redislock_fenced_set(res, cur, NAME("from-b")), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_set(res, cur, NAME("again")), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_set(res, old, NAME("from-a")), REDISLOCK_STALE);
    CHECK(strstr(h_last_error(), "stale write") != NULL);
    if (h_resp(&c) == 0) {
        CHECK(key_value(&c, key, strlen(key), value, sizeof value) == 1);
        CHECK(strcmp(value, "again") == 0);
        resp_close(&c);
    }

    redislock_fenced_free(res);
    h_name(key, sizeof key, "fenced-count");
    CHECK_RC(redislock_fenced_open(client, NAME(key), &res), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_incr_by(res, cur, 5, &n), REDISLOCK_OK);
    CHECK(n == 5);
    n = 0;
    CHECK_RC(redislock_fenced_incr_by(res, old, 5, &n), REDISLOCK_STALE);
    CHECK(n == 0);

    /* Misuse. */
    CHECK_RC(redislock_fenced_open(client, NULL, 3, &res), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_open(NULL, NAME(key), &res), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_open(client, (const uint8_t *)"", 0, &res),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_fenced_set(NULL, cur, NAME("x")), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_incr_by(res, cur, 1, NULL), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_lock_fence_epoch(NULL, &epoch), REDISLOCK_NULL_PARAMETER);
    redislock_fenced_free(res);
    redislock_fenced_free(NULL);
    redislock_lock_free(a);
    CHECK_RC(redislock_lock_release(b), REDISLOCK_OK);
    redislock_lock_free(b);
    redislock_client_free(client);
}

void test_free_releases_held_lock(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL, *next = NULL;
    resp_conn c;
    char name[128], value[128];

    h_name(name, sizeof name, "free");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    if (h_resp(&c) == 0) {
        CHECK(!key_value(&c, name, strlen(name), value, sizeof value));
        resp_close(&c);
    }
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &next), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(next), REDISLOCK_OK);
    redislock_lock_free(next);
    redislock_client_free(client);
}

void test_lock_outlives_client(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    char name[128];

    h_name(name, sizeof name, "outlive");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_OK);
    redislock_client_free(client);
    CHECK(redislock_lock_is_held(lock));
    CHECK_RC(redislock_lock_extend(lock, 10000), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
}

void test_limit_reached(void) {
    redislock_config *config = NULL;
    redislock_client *client = NULL;
    redislock_lock *a = NULL, *b = NULL, *fixed_lock = NULL;
    char name_a[128], name_b[128], name_c[128];

    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_max_renewed_locks(config, 1), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
    redislock_config_free(config);
    h_name(name_a, sizeof name_a, "limit-a");
    h_name(name_b, sizeof name_b, "limit-b");
    h_name(name_c, sizeof name_c, "limit-c");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name_a), &a), REDISLOCK_OK);
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name_b), &b), REDISLOCK_LIMIT_REACHED);
    CHECK(b == NULL);
    /* Locks without renewal do not count. */
    CHECK_RC(h_try_acquire_with(client, NAME(name_c), 5000, false, false, &fixed_lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(a), REDISLOCK_OK);
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name_b), &b), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(b), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(fixed_lock), REDISLOCK_OK);
    redislock_lock_free(a);
    redislock_lock_free(b);
    redislock_lock_free(fixed_lock);
    redislock_client_free(client);
}

/* A loopback port that accepts connections (the kernel's backlog) and never answers; its
 * socket in *fd_out. 0 on failure. */
static int silent_port(int *fd_out) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    *fd_out = fd;
    return ntohs(a.sin_port);
}

/* rediss:// to the plain test server and to a port that never answers: REDISLOCK_CONNECTION
 * within twice the connect timeout, the message naming TLS. */
void test_tls_misconfiguration(void) {
    const char *under_valgrind = getenv("LD_PRELOAD");
    /* The connection's timeouts (and the checkout's, which bounds a connect too); under
     * valgrind 3 s, where setting up a TLS client (its root certificates) alone takes 0.3-3.5 s:
     * when that takes the whole timeout, the error still names TLS. */
    uint64_t timeout = 300;
    long long bound;
    char urls[2][128];
    int fd = -1, port = silent_port(&fd), i;
    CHECK(port > 0);
    if (port <= 0) return;
    if (under_valgrind != NULL && strstr(under_valgrind, "vgpreload") != NULL) timeout = 3000;
    bound = 2 * (long long)timeout;
    snprintf(urls[0], sizeof urls[0], "rediss://%s", strstr(h_url(), "://") + 3);
    snprintf(urls[1], sizeof urls[1], "rediss://127.0.0.1:%d/", port);
    for (i = 0; i < 2; i++) {
        redislock_config *config = NULL;
        redislock_client *client = NULL;
        redislock_lock *lock = NULL;
        long long start;
        char name[128];
        CHECK_RC(redislock_config_new(urls[i], &config), REDISLOCK_OK);
        CHECK_RC(redislock_config_set_connect_timeout_ms(config, timeout), REDISLOCK_OK);
        CHECK_RC(redislock_config_set_read_timeout_ms(config, timeout), REDISLOCK_OK);
        CHECK_RC(redislock_config_set_write_timeout_ms(config, timeout), REDISLOCK_OK);
        /* The checkout bounds a connect too (3 s by default). */
        CHECK_RC(redislock_config_set_checkout_timeout_ms(config, timeout), REDISLOCK_OK);
        CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
        redislock_config_free(config);
        if (client == NULL) continue;
        start = h_now_ms();
        CHECK_RC(h_try_acquire_with(client, NAME(h_name(name, sizeof name, "tls")), 5000, false,
                                    false, &lock),
                 REDISLOCK_CONNECTION);
        CHECK(h_now_ms() - start < bound);
        if (strstr(h_last_error(), "TLS") == NULL) {
            fprintf(stderr, "    %s: %s\n", urls[i], h_last_error());
        }
        CHECK(strstr(h_last_error(), "TLS") != NULL);
        CHECK(lock == NULL);
        redislock_client_free(client);
    }
    close(fd);
}

void test_redis_error_reply(void) {
    /* A fenced acquire increments the counter "{name}:fence"; make it no number. */
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    resp_conn c;
    resp_reply r;
    char name[128], fence_key[160];
    const char *argv[3];

    h_name(name, sizeof name, "rediserr");
    snprintf(fence_key, sizeof fence_key, "{%s}:fence", name);
    if (h_resp(&c) != 0) return;
    argv[0] = "SET";
    argv[1] = fence_key;
    argv[2] = "not-a-number";
    CHECK(resp_command_str(&c, &r, 3, argv) == 0 && r.type == '+');
    CHECK_RC(h_try_acquire_with(client, NAME(name), 2000, false, true, &lock), REDISLOCK_REDIS_ERROR);
    CHECK(lock == NULL);
    CHECK(strstr(h_last_error(), "ERR") != NULL);
    argv[0] = "DEL";
    CHECK(resp_command_str(&c, &r, 2, argv) == 0 && r.type == ':');
    argv[1] = name;
    CHECK(resp_command_str(&c, &r, 2, argv) == 0 && r.type == ':');
    resp_close(&c);
    redislock_client_free(client);
}
