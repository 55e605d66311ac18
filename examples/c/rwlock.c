/*
 * A read/write lock and a semaphore from C, in a few lines. Readers share "doc:7", a writer is
 * alone and downgrades to a reader with no gap; "renderers" lets 3 holders in at once.
 *
 *   cargo build --release
 *   cc -std=c99 -Wall -Iinclude examples/c/rwlock.c -Ltarget/release -lredislock -o rwlock
 *   LD_LIBRARY_PATH=target/release ./rwlock [redis://127.0.0.1:6379/]
 */
#include <stdio.h>
#include <string.h>

#include "redislock.h"

#define NAME(s) (const uint8_t *)(s), strlen(s)

int main(int argc, char **argv) {
    redislock_client *client;
    redislock_request *doc, *renderers;
    redislock_lock *w = NULL, *r = NULL, *permit = NULL;
    if (redislock_client_new(argc > 1 ? argv[1] : "redis://127.0.0.1:6379/", &client)) return 2;
    redislock_request_new(client, NAME("redislock-example:doc:7"), &doc);
    redislock_request_set_kind(doc, REDISLOCK_KIND_WRITE);
    if (redislock_request_acquire(doc, 5000, &w) == REDISLOCK_OK) {
        puts("writing alone");
        if (redislock_lock_downgrade(w, &r) == REDISLOCK_OK) puts("reading, readers let in");
        redislock_lock_free(w);
        redislock_lock_free(r); /* releases the read lock */
    }
    redislock_request_new_semaphore(client, NAME("redislock-example:renderers"), 3, &renderers);
    if (redislock_request_acquire(renderers, 5000, &permit) == REDISLOCK_OK) {
        puts("one of 3 renderers");
        redislock_lock_release(permit);
        redislock_lock_free(permit);
    }
    redislock_request_free(doc);
    redislock_request_free(renderers);
    redislock_client_free(client);
    return 0;
}
