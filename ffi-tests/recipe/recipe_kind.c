/*
 * The recipe kind (a library built with the cargo feature `recipe-kind`) through the C ABI:
 * chosen with redislock_request_set_kind, refused options, one attempt, a waiter woken by the
 * release, extend and release. Built and run by tests/recipe_kind.rs against the libredislock.so
 * of its build, with REDISLOCK_TEST_URL naming a test server; prints "recipe kind: ok".
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "redislock.h"

#define CHECK(expr)                                                                      \
    do {                                                                                 \
        if (!(expr)) {                                                                   \
            char detail_[512];                                                           \
            redislock_last_error_message(detail_, sizeof detail_);                      \
            fprintf(stderr, "%s:%d: %s failed (last error: %s)\n", __FILE__, __LINE__,   \
                    #expr, detail_);                                                     \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

static const uint8_t NAME[] = "recipe:c";
#define NAME_LEN (sizeof NAME - 1)

struct waiter {
    redislock_request *req;
    redislock_result rc;
    redislock_lock *lock;
};

static void *wait_for_it(void *arg) {
    struct waiter *w = arg;
    w->rc = redislock_request_acquire(w->req, 8000, &w->lock);
    return NULL;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void) {
    const char *url = getenv("REDISLOCK_TEST_URL");
    CHECK(url != NULL);
    redislock_client *client;
    CHECK(redislock_client_new(url, &client) == REDISLOCK_OK);

    redislock_request *req;
    CHECK(redislock_request_new(client, NAME, NAME_LEN, &req) == REDISLOCK_OK);
    CHECK(redislock_request_set_kind(req, REDISLOCK_KIND_RECIPE) == REDISLOCK_OK);
    /* What its descriptor does not offer is refused by the setters. */
    CHECK(redislock_request_set_fencing(req, true) == REDISLOCK_INVALID_ARGUMENT);
    CHECK(redislock_request_set_owner_token(req, (const uint8_t *)"0123456789abcdef0123", 20) ==
          REDISLOCK_INVALID_ARGUMENT);
    CHECK(redislock_request_set_lease_ms(req, 10000) == REDISLOCK_OK);
    CHECK(redislock_request_set_auto_renew(req, false) == REDISLOCK_OK);

    redislock_lock *first;
    CHECK(redislock_request_try_acquire(req, &first) == REDISLOCK_OK);
    CHECK(redislock_lock_is_held(first));
    redislock_lock *second = NULL;
    CHECK(redislock_request_try_acquire(req, &second) == REDISLOCK_HELD);
    /* The exclusive lock of the name is the same key: refused too. */
    redislock_lock *exclusive = NULL;
    CHECK(redislock_lock_try_acquire(client, NAME, NAME_LEN, &exclusive) == REDISLOCK_HELD);

    /* A waiter, woken by the release. */
    struct waiter w = {req, REDISLOCK_INTERNAL, NULL};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, wait_for_it, &w) == 0);
    sleep_ms(300);
    CHECK(redislock_lock_release(first) == REDISLOCK_OK);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(w.rc == REDISLOCK_OK);
    CHECK(redislock_lock_is_held(w.lock));

    CHECK(redislock_lock_extend(w.lock, 30000) == REDISLOCK_OK);
    CHECK(redislock_lock_remaining_ms(w.lock) > 20000);
    CHECK(redislock_lock_release(w.lock) == REDISLOCK_OK);
    CHECK(redislock_lock_release(w.lock) == REDISLOCK_NOT_HELD);

    redislock_lock_free(w.lock);
    redislock_lock_free(first);
    redislock_request_free(req);
    redislock_client_free(client);
    printf("recipe kind: ok\n");
    return 0;
}
