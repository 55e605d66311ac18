/* Threads and forked processes racing for one lock, and a lock inherited across fork(). */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

enum { STOCK = 40, THREADS = 8, PROCESSES = 4 };

struct shop {
    const redislock_client *client;
    const char *lock_name;
    const char *stock_key;
    int sold;
};

/* Buys one item at a time until the stock is gone: GET, think, SET under the lock. The pause
 * between read and write makes any lost update (an oversell) all but certain without the lock. */
static void buy_until_sold_out(struct shop *shop) {
    resp_conn c;
    if (h_resp(&c) != 0) return;
    for (;;) {
        redislock_lock *lock = NULL;
        long long stock = -1;
        int done = 0;
        CHECK_RC(redislock_lock_acquire(shop->client, NAME(shop->lock_name), 30000, &lock),
                 REDISLOCK_OK);
        if (lock == NULL) break;
        if (resp_get_int(&c, shop->stock_key, &stock) != 0) {
            h_fail(__FILE__, __LINE__, "GET %s failed", shop->stock_key);
            done = 1;
        } else if (stock <= 0) {
            done = 1;
        } else {
            h_sleep_ms(1);
            CHECK(resp_set_int(&c, shop->stock_key, stock - 1) == 0);
            shop->sold++;
        }
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        redislock_lock_free(lock);
        if (done) break;
    }
    resp_close(&c);
}

static void *buyer_thread(void *arg) {
    buy_until_sold_out(arg);
    return NULL;
}

static void stock_up(const char *stock_key) {
    resp_conn c;
    if (h_resp(&c) != 0) return;
    CHECK(resp_set_int(&c, stock_key, STOCK) == 0);
    resp_close(&c);
}

static long long stock_left(const char *stock_key) {
    resp_conn c;
    long long stock = -1;
    if (h_resp(&c) != 0) return -1;
    CHECK(resp_get_int(&c, stock_key, &stock) == 0);
    resp_close(&c);
    return stock;
}

void test_threads_oversell(void) {
    redislock_client *client = h_client();
    struct shop shops[THREADS];
    pthread_t threads[THREADS];
    char lock_name[128], stock_key[128];
    int i, sold = 0;

    h_name(lock_name, sizeof lock_name, "shop-lock");
    h_name(stock_key, sizeof stock_key, "shop-stock");
    stock_up(stock_key);
    for (i = 0; i < THREADS; i++) {
        shops[i].client = client;
        shops[i].lock_name = lock_name;
        shops[i].stock_key = stock_key;
        shops[i].sold = 0;
        CHECK(pthread_create(&threads[i], NULL, buyer_thread, &shops[i]) == 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        sold += shops[i].sold;
    }
    CHECK(sold == STOCK);
    CHECK(stock_left(stock_key) == 0);
    redislock_client_free(client);
}

void test_forked_processes_oversell(void) {
    /* The children use the client they inherited; the parent buys at the same time. */
    redislock_client *client = h_client();
    struct shop parent_shop;
    redislock_lock *warm = NULL;
    int pids[PROCESSES];
    int pipes[PROCESSES][2];
    char lock_name[128], stock_key[128];
    int i, sold = 0;

    h_name(lock_name, sizeof lock_name, "fork-lock");
    h_name(stock_key, sizeof stock_key, "fork-stock");
    stock_up(stock_key);
    /* Use the client first, so the children inherit live connections and renewal threads. */
    CHECK_RC(redislock_lock_try_acquire(client, NAME(lock_name), &warm), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(warm), REDISLOCK_OK);
    redislock_lock_free(warm);

    for (i = 0; i < PROCESSES; i++) {
        CHECK(pipe(pipes[i]) == 0);
        pids[i] = h_fork();
        if (pids[i] == 0) {
            struct shop shop;
            int failures_before = h_failures();
            shop.client = client;
            shop.lock_name = lock_name;
            shop.stock_key = stock_key;
            shop.sold = 0;
            close(pipes[i][0]);
            buy_until_sold_out(&shop);
            CHECK(write(pipes[i][1], &shop.sold, sizeof shop.sold) == (ssize_t)sizeof shop.sold);
            h_child_exit(failures_before);
        }
        close(pipes[i][1]);
    }
    parent_shop.client = client;
    parent_shop.lock_name = lock_name;
    parent_shop.stock_key = stock_key;
    parent_shop.sold = 0;
    buy_until_sold_out(&parent_shop);
    sold += parent_shop.sold;
    for (i = 0; i < PROCESSES; i++) {
        int child_sold = 0;
        if (pids[i] <= 0) continue;
        if (read(pipes[i][0], &child_sold, sizeof child_sold) == (ssize_t)sizeof child_sold) {
            sold += child_sold;
        }
        close(pipes[i][0]);
        h_wait_child(pids[i]);
    }
    CHECK(sold == STOCK);
    CHECK(stock_left(stock_key) == 0);
    redislock_client_free(client);
}

void test_lock_inherited_across_fork(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    resp_conn c;
    resp_reply r;
    const char *argv[2];
    char name[128], token_before[sizeof r.str];
    int pid;
    uint64_t fence = 0;

    h_name(name, sizeof name, "inherited");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_lease_ms(req, 1000), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    if (lock == NULL || h_resp(&c) != 0) {
        redislock_request_free(req);
        return;
    }
    argv[0] = "GET";
    argv[1] = name;
    CHECK(resp_command_str(&c, &r, 2, argv) == 0 && r.type == '$' && !r.nil);
    snprintf(token_before, sizeof token_before, "%s", r.str);
    CHECK_RC(redislock_lock_fencing_token(lock, &fence), REDISLOCK_OK);

    pid = h_fork();
    if (pid == 0) {
        int failures_before = h_failures();
        redislock_lock *mine = NULL;
        uint64_t child_fence = 0;
        /* Not the child's lock: not held here, cannot be released or extended. */
        CHECK(!redislock_lock_is_held(lock));
        CHECK(redislock_lock_remaining_ms(lock) == 0);
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_FORKED);
        CHECK(strstr(h_last_error(), "parent") != NULL);
        CHECK_RC(redislock_lock_extend(lock, 5000), REDISLOCK_FORKED);
        CHECK_RC(redislock_lock_fencing_token(lock, &child_fence), REDISLOCK_OK);
        CHECK(child_fence == fence);
        /* Freeing it must leave the parent's lock alone. */
        redislock_lock_free(lock);
        /* The inherited client works in the child, and the lock is still the parent's. */
        CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &mine), REDISLOCK_HELD);
        /* So does a request made by the parent. */
        CHECK_RC(redislock_request_try_acquire(req, &mine), REDISLOCK_HELD);
        redislock_request_free(req);
        redislock_client_free(client);
        h_child_exit(failures_before);
    }
    h_wait_child(pid);

    /* The parent's lock survived, and its renewal thread still keeps it past its lease. */
    h_sleep_ms(1500);
    CHECK(redislock_lock_is_held(lock));
    CHECK(resp_command_str(&c, &r, 2, argv) == 0 && r.type == '$' && !r.nil);
    CHECK(strcmp(r.str, token_before) == 0);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    CHECK(resp_command_str(&c, &r, 2, argv) == 0 && r.type == '$' && r.nil);
    redislock_lock_free(lock);
    redislock_request_free(req);
    resp_close(&c);
    redislock_client_free(client);
}
