/* The C API misused: NULLs, double release, absurd values, bad URLs, no server. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/* Checks that `expr` returns NULL_PARAMETER and that the last error names `param`. */
#define CHECK_NULL(expr, param)                                                                \
    do {                                                                                       \
        CHECK_RC(expr, REDISLOCK_NULL_PARAMETER);                                              \
        CHECK(strstr(h_last_error(), "`" param "`") != NULL);                                  \
    } while (0)

void test_null_parameters(void) {
    redislock_config *config = NULL, *config_sentinel = (redislock_config *)&config;
    redislock_client *client = h_client(), *client_sentinel = (redislock_client *)&client;
    redislock_lock *lock = NULL, *lock_sentinel = (redislock_lock *)&lock;
    uint64_t token = 99;
    char name[128];

    /* Text functions: NULL buffer is a length query. */
    CHECK(redislock_result_message(REDISLOCK_OK, NULL, 0) == strlen("success"));
    CHECK(redislock_result_message(REDISLOCK_OK, NULL, 100) == strlen("success"));
    CHECK(redislock_last_error_message(NULL, 100) == redislock_last_error_message(NULL, 0));

    /* Config. */
    CHECK_NULL(redislock_config_new(NULL, &config_sentinel), "url");
    CHECK(config_sentinel == (redislock_config *)&config);
    CHECK_NULL(redislock_config_new(h_url(), NULL), "config_out");
    redislock_config_free(NULL);
    CHECK_NULL(redislock_config_set_pool_size(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_max_waiters(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_connect_timeout_ms(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_read_timeout_ms(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_write_timeout_ms(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_checkout_timeout_ms(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_release_timeout_ms(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_lease_ms(NULL, 1000), "config");
    CHECK_NULL(redislock_config_set_auto_renew(NULL, true), "config");
    CHECK_NULL(redislock_config_set_fencing(NULL, true), "config");
    CHECK_NULL(redislock_config_set_key_prefix(NULL, NAME("p")), "config");
    CHECK_NULL(redislock_config_set_recheck_interval_ms(NULL, 1), "config");
    CHECK_NULL(redislock_config_set_recheck_jitter(NULL, 0.1), "config");
    CHECK_NULL(redislock_config_set_max_renewed_locks(NULL, 1), "config");
    CHECK_RC(redislock_config_new(h_url(), &config), REDISLOCK_OK);
    CHECK_NULL(redislock_config_set_key_prefix(config, NULL, 3), "prefix");
    CHECK_RC(redislock_config_set_key_prefix(config, NULL, 0), REDISLOCK_OK);

    /* Client. */
    CHECK_NULL(redislock_client_new(NULL, &client_sentinel), "url");
    CHECK_NULL(redislock_client_new(h_url(), NULL), "client_out");
    CHECK_NULL(redislock_client_from_config(NULL, &client_sentinel), "config");
    CHECK_NULL(redislock_client_from_config(config, NULL), "client_out");
    CHECK(client_sentinel == (redislock_client *)&client);
    redislock_client_free(NULL);
    redislock_config_free(config);

    /* Acquire. */
    h_name(name, sizeof name, "nulls");
    CHECK_NULL(redislock_lock_try_acquire(NULL, NAME(name), &lock_sentinel), "client");
    CHECK_NULL(redislock_lock_try_acquire(client, NULL, 5, &lock_sentinel), "name");
    CHECK_NULL(redislock_lock_try_acquire(client, NAME(name), NULL), "lock_out");
    CHECK_NULL(redislock_lock_acquire(NULL, NAME(name), 10, &lock_sentinel), "client");
    CHECK_NULL(redislock_lock_acquire(client, NULL, 5, 10, &lock_sentinel), "name");
    CHECK_NULL(redislock_lock_acquire(client, NAME(name), 10, NULL), "lock_out");
    CHECK(lock_sentinel == (redislock_lock *)&lock);
    /* NULL with length 0 is an empty name: invalid, not a NULL pointer. */
    CHECK_RC(redislock_lock_try_acquire(client, NULL, 0, &lock_sentinel),
             REDISLOCK_INVALID_ARGUMENT);

    /* Lock. */
    CHECK_NULL(redislock_lock_release(NULL), "lock");
    CHECK_NULL(redislock_lock_release_in_background(NULL), "lock");
    CHECK_NULL(redislock_lock_extend(NULL, 1000), "lock");
    CHECK(!redislock_lock_is_held(NULL));
    CHECK(redislock_lock_remaining_ms(NULL) == 0);
    CHECK_NULL(redislock_lock_fencing_token(NULL, &token), "lock");
    CHECK(token == 99);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 5000, true, true, &lock), REDISLOCK_OK);
    CHECK_NULL(redislock_lock_fencing_token(lock, NULL), "token_out");
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_lock_free(NULL);
    redislock_client_free(client);
}

void test_release_twice(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    char name[128];

    h_name(name, sizeof name, "twice");
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_NOT_HELD);
    CHECK(strstr(h_last_error(), "released already") != NULL);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_NOT_HELD);
    CHECK_RC(redislock_lock_extend(lock, 1000), REDISLOCK_NOT_HELD);
    redislock_lock_free(lock); /* after release: frees only */
    redislock_client_free(client);
}

void test_zero_and_absurd_leases(void) {
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    char name[128];

    h_name(name, sizeof name, "leases");
    CHECK_RC(h_try_acquire_with(client, NAME(name), 0, false, false, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "lease") != NULL);
    CHECK_RC(h_try_acquire_with(client, NAME(name), UINT64_MAX, false, false, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(h_acquire_with(client, NAME(name), UINT64_MAX, false, false, 100, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 31ull * 24 * 3600 * 1000 /* 31 days */,
                                false, false, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    /* renewed leases need >= 100 ms */
    CHECK_RC(h_try_acquire_with(client, NAME(name), 50, true, false, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock == NULL);
    /* An absurd wait bound. */
    CHECK_RC(redislock_lock_acquire(client, NAME(name), UINT64_MAX, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock == NULL);

    CHECK_RC(h_try_acquire_with(client, NAME(name), 1000, false, false, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_extend(lock, 0), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_extend(lock, UINT64_MAX), REDISLOCK_INVALID_ARGUMENT);
    CHECK(redislock_lock_is_held(lock)); /* a refused extend changes nothing */
    CHECK_RC(redislock_lock_extend(lock, 1), REDISLOCK_OK); /* 1 ms is a valid lease */
    h_sleep_ms(50);
    CHECK(!redislock_lock_is_held(lock));
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_NOT_HELD);
    redislock_lock_free(lock);
    redislock_client_free(client);
}

void test_empty_and_huge_names(void) {
    enum { MIB = 1024 * 1024 };
    redislock_client *client = h_client();
    redislock_lock *lock = NULL;
    uint8_t *big = malloc(MIB);
    char prefix[128];

    CHECK(big != NULL);
    if (big == NULL) return;
    CHECK_RC(redislock_lock_try_acquire(client, (const uint8_t *)"x", 0, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "empty") != NULL);
    CHECK_RC(redislock_lock_acquire(client, (const uint8_t *)"x", 0, 10, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_try_acquire(client, NULL, 0, &lock), REDISLOCK_INVALID_ARGUMENT);
    /* 1 MiB name: refused before anything is sent. */
    h_name(prefix, sizeof prefix, "big");
    memset(big, 'n', MIB);
    memcpy(big, prefix, strlen(prefix));
    CHECK_RC(redislock_lock_try_acquire(client, big, MIB, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "longer than 4096") != NULL);
    CHECK(strlen(h_last_error()) < 400); /* the name is shown cut */
    /* A length no buffer can have. */
    CHECK_RC(redislock_lock_try_acquire(client, big, SIZE_MAX, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock == NULL);
    /* The longest accepted name. */
    CHECK_RC(redislock_lock_try_acquire(client, big, 4096, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_try_acquire(client, big, 4097, &lock),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    free(big);
    redislock_client_free(client);
}

void test_request_misuse(void) {
    enum { BIG = 5000 };
    static uint8_t big[BIG];
    static const char not_utf8[] = "\xff\xfe" "0123456789abcdef";
    redislock_client *client = h_client();
    redislock_request *req = NULL, *req_sentinel = (redislock_request *)&req;
    redislock_lock *lock = NULL, *lock_sentinel = (redislock_lock *)&lock;
    char name[128];

    if (client == NULL) return;
    h_name(name, sizeof name, "request-misuse");
    /* NULL anywhere: named, and no out-parameter written. */
    CHECK_NULL(redislock_request_new(NULL, NAME(name), &req_sentinel), "client");
    CHECK_NULL(redislock_request_new(client, NULL, 4, &req_sentinel), "name");
    CHECK_NULL(redislock_request_new(client, NAME(name), NULL), "request_out");
    CHECK(req_sentinel == (redislock_request *)&req);
    CHECK_NULL(redislock_request_set_lease_ms(NULL, 1000), "request");
    CHECK_NULL(redislock_request_set_auto_renew(NULL, true), "request");
    CHECK_NULL(redislock_request_set_fencing(NULL, true), "request");
    CHECK_NULL(redislock_request_set_owner_token(NULL, NAME("order-1-0123456789")), "request");
    CHECK_NULL(redislock_request_set_cancel(NULL, NULL), "request");
    CHECK_NULL(redislock_request_try_acquire(NULL, &lock_sentinel), "request");
    CHECK_NULL(redislock_request_acquire(NULL, 10, &lock_sentinel), "request");
    CHECK_NULL(redislock_request_restore(NULL, NAME("order-1-0123456789"), &lock_sentinel),
               "request");
    redislock_request_free(NULL);

    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_NULL(redislock_request_set_owner_token(req, NULL, 20), "owner");
    CHECK_NULL(redislock_request_try_acquire(req, NULL), "lock_out");
    CHECK_NULL(redislock_request_acquire(req, 10, NULL), "lock_out");
    CHECK_NULL(redislock_request_restore(req, NULL, 20, &lock_sentinel), "owner");
    CHECK_NULL(redislock_request_restore(req, NAME("order-1-0123456789"), NULL), "lock_out");
    CHECK(lock_sentinel == (redislock_lock *)&lock);

    /* Bad values are recorded, refused by the acquire, and a good value replaces them. */
    CHECK_RC(redislock_request_set_lease_ms(req, 0), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock_sentinel), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "lease") != NULL);
    CHECK_RC(redislock_request_set_lease_ms(req, 99), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_acquire(req, 10, &lock_sentinel), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "99 ms") != NULL);
    CHECK_RC(redislock_request_acquire(req, UINT64_MAX, &lock_sentinel),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_lease_ms(req, 2000), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_owner_token(req, NAME("short")), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock_sentinel), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "owner token") != NULL);
    CHECK_RC(redislock_request_set_owner_token(req, NAME(not_utf8)), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock_sentinel), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_restore(req, NAME("short"), &lock_sentinel),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock_sentinel == (redislock_lock *)&lock);
    CHECK_RC(redislock_request_set_owner_token(req, NAME("order-1-0123456789")), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_request_free(req);

    /* Names are checked by the acquire: empty, and longer than 4096 bytes. */
    CHECK_RC(redislock_request_new(client, NULL, 0, &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock_sentinel), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "empty") != NULL);
    redislock_request_free(req);
    memset(big, 'b', sizeof big);
    CHECK_RC(redislock_request_new(client, big, sizeof big, &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_acquire(req, 10, &lock_sentinel), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "longer than 4096") != NULL);
    CHECK_RC(redislock_request_restore(req, NAME("order-1-0123456789"), &lock_sentinel),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(lock_sentinel == (redislock_lock *)&lock);
    redislock_request_free(req);
    redislock_client_free(client);
}

void test_invalid_urls(void) {
    static const char *const bad[] = {
        "", "http://127.0.0.1:6379/", "127.0.0.1:6379", "redis://127.0.0.1:notaport/",
        "redis://u:s3cr3t@127.0.0.1:notaport/", "\xff\xfe",
    };
    redislock_client *client = NULL;
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(redislock_client_new(bad[i], &client), REDISLOCK_INVALID_ARGUMENT);
        CHECK(client == NULL);
        CHECK(strstr(h_last_error(), "s3cr3t") == NULL); /* passwords are masked */
    }
}

/* A loopback TCP port nobody listens on (bound, read, closed). */
static int unused_port(void) {
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int port = 0, fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
        getsockname(fd, (struct sockaddr *)&addr, &len) == 0) {
        port = ntohs(addr.sin_port);
    }
    if (fd >= 0) close(fd);
    return port;
}

void test_server_down(void) {
    redislock_config *config = NULL;
    redislock_client *client = NULL;
    redislock_lock *lock = NULL;
    char url[64], name[128], where[32];
    int port = unused_port();
    long long start, took;

    CHECK(port > 0);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/", port);
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    CHECK_RC(redislock_config_new(url, &config), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_connect_timeout_ms(config, 200), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_read_timeout_ms(config, 200), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_write_timeout_ms(config, 200), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_checkout_timeout_ms(config, 500), REDISLOCK_OK);
    /* Building never touches the network. */
    CHECK_RC(redislock_client_from_config(config, &client), REDISLOCK_OK);
    redislock_config_free(config);
    h_name(name, sizeof name, "down");

    start = h_now_ms();
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &lock), REDISLOCK_CONNECTION);
    took = h_now_ms() - start;
    CHECK(took < 3000);
    CHECK(strstr(h_last_error(), where) != NULL);
    start = h_now_ms();
    CHECK_RC(redislock_lock_acquire(client, NAME(name), 1000, &lock), REDISLOCK_CONNECTION);
    took = h_now_ms() - start;
    CHECK(took < 3000);
    CHECK(lock == NULL);
    redislock_client_free(client);
}
