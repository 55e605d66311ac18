/* The other kinds of lock from C: read/write locks, semaphores and sets of locks, taken
 * through requests; their invalid input and the calls that do not apply to them. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* A request for one name of the given kind (fails the test and returns NULL if it cannot be
 * made). */
static redislock_request *kind_request(const redislock_client *client, const char *name,
                                       redislock_kind kind) {
    redislock_request *req = NULL;
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    if (req != NULL) CHECK_RC(redislock_request_set_kind(req, kind), REDISLOCK_OK);
    return req;
}

static redislock_request *semaphore_request(const redislock_client *client, const char *name,
                                            uint32_t permits, uint32_t take) {
    redislock_request *req = NULL;
    CHECK_RC(redislock_request_new_semaphore(client, NAME(name), permits, &req), REDISLOCK_OK);
    if (req != NULL) CHECK_RC(redislock_request_set_permits(req, take), REDISLOCK_OK);
    return req;
}

static redislock_request *set_request(const redislock_client *client, const char *const *names,
                                      size_t count) {
    const uint8_t *ptrs[8];
    size_t lens[8];
    size_t i;
    redislock_request *req = NULL;
    for (i = 0; i < count && i < 8; i++) {
        ptrs[i] = (const uint8_t *)names[i];
        lens[i] = strlen(names[i]);
    }
    CHECK_RC(redislock_request_new_set(client, ptrs, lens, count, &req), REDISLOCK_OK);
    return req;
}

/* Whether a single attempt at the exclusive lock `name` is refused as held. */
static int exclusive_is_held(const redislock_client *client, const char *name) {
    redislock_lock *lock = NULL;
    redislock_result rc = redislock_lock_try_acquire(client, NAME(name), &lock);
    if (rc == REDISLOCK_OK) {
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        redislock_lock_free(lock);
        return 0;
    }
    CHECK_RC(rc, REDISLOCK_HELD);
    return 1;
}

/* --- read/write locks: readers share, a writer is alone --------------------------------------- */

enum { RW_READERS = 4, RW_WRITERS = 2, RW_ROUNDS = 6 };

struct rw_check {
    redislock_request *read, *write;
    pthread_mutex_t mu;
    int readers, writers;       /* holding now */
    int max_readers, overlaps;  /* seen at some moment */
};

static void rw_enter(struct rw_check *c, int writer) {
    pthread_mutex_lock(&c->mu);
    if (writer) {
        if (c->readers != 0 || c->writers != 0) c->overlaps++;
        c->writers++;
    } else {
        if (c->writers != 0) c->overlaps++;
        c->readers++;
        if (c->readers > c->max_readers) c->max_readers = c->readers;
    }
    pthread_mutex_unlock(&c->mu);
}

static void rw_leave(struct rw_check *c, int writer) {
    pthread_mutex_lock(&c->mu);
    if (writer) c->writers--;
    else c->readers--;
    pthread_mutex_unlock(&c->mu);
}

static void rw_worker(struct rw_check *c, int writer) {
    int i;
    for (i = 0; i < RW_ROUNDS; i++) {
        redislock_lock *lock = NULL;
        CHECK_RC(redislock_request_acquire(writer ? c->write : c->read, 60000, &lock),
                 REDISLOCK_OK);
        if (lock == NULL) return;
        rw_enter(c, writer);
        h_sleep_ms(writer ? 2 : 20);
        rw_leave(c, writer);
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        redislock_lock_free(lock);
    }
}

static void *rw_reader(void *arg) {
    rw_worker(arg, 0);
    return NULL;
}

static void *rw_writer(void *arg) {
    rw_worker(arg, 1);
    return NULL;
}

void test_rw_readers_share_writers_exclude(void) {
    redislock_client *client = h_client();
    struct rw_check c;
    pthread_t threads[RW_READERS + RW_WRITERS];
    char name[128];
    int i;

    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    h_name(name, sizeof name, "rw");
    c.read = kind_request(client, name, REDISLOCK_KIND_READ);
    c.write = kind_request(client, name, REDISLOCK_KIND_WRITE);
    for (i = 0; i < RW_READERS + RW_WRITERS; i++) {
        pthread_create(&threads[i], NULL, i < RW_READERS ? rw_reader : rw_writer, &c);
    }
    for (i = 0; i < RW_READERS + RW_WRITERS; i++) pthread_join(threads[i], NULL);
    CHECK(c.overlaps == 0);
    /* Readers held together at some point: 4 readers holding 20 ms each, 6 times. */
    CHECK(c.max_readers >= 2);
    /* Nothing is left: the exclusive lock of the name is free. */
    CHECK(!exclusive_is_held(client, name));
    redislock_request_free(c.read);
    redislock_request_free(c.write);
    pthread_mutex_destroy(&c.mu);
    redislock_client_free(client);
}

void test_rw_lock_basics_and_downgrade(void) {
    redislock_client *client = h_client();
    redislock_request *read, *write;
    redislock_lock *r1 = NULL, *r2 = NULL, *w = NULL, *down = NULL, *other = NULL, *x = NULL;
    uint64_t wtoken = 0, rtoken = 0;
    char name[128], buf[64];

    h_name(name, sizeof name, "rw-basics");
    read = kind_request(client, name, REDISLOCK_KIND_READ);
    write = kind_request(client, name, REDISLOCK_KIND_WRITE);
    CHECK_RC(redislock_request_set_fencing(read, true), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(write, true), REDISLOCK_OK);

    /* Two readers at once; a writer and an exclusive lock are kept out. */
    CHECK_RC(redislock_request_try_acquire(read, &r1), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(read, &r2), REDISLOCK_OK);
    CHECK(redislock_lock_is_held(r1) && redislock_lock_is_held(r2));
    CHECK(redislock_lock_remaining_ms(r1) > 0);
    CHECK_RC(redislock_request_try_acquire(write, &w), REDISLOCK_HELD);
    CHECK(exclusive_is_held(client, name));
    CHECK_RC(redislock_lock_extend(r1, 20000), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(r1, &rtoken), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(r1), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(r2), REDISLOCK_OK);
    redislock_lock_free(r1);
    redislock_lock_free(r2);

    /* A writer: alone, with a larger fencing token than the readers before it. */
    CHECK_RC(redislock_request_try_acquire(write, &w), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(w, &wtoken), REDISLOCK_OK);
    CHECK(wtoken > rtoken);
    CHECK_RC(redislock_lock_fencing_token_at(w, 0, &rtoken), REDISLOCK_OK);
    CHECK(rtoken == wtoken);
    CHECK_RC(redislock_request_try_acquire(read, &other), REDISLOCK_HELD);
    CHECK(exclusive_is_held(client, name));
    /* Owner tokens and detach are for exclusive locks only. */
    memset(buf, 'x', sizeof buf);
    CHECK(redislock_lock_owner_token(w, buf, sizeof buf) == 0);
    CHECK(buf[0] == '\0');
    CHECK(strstr(h_last_error(), "an owner token does not apply to a write lock") != NULL);
    CHECK_RC(redislock_lock_detach(w), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "detach does not apply") != NULL);
    CHECK(redislock_lock_is_held(w));

    /* Downgrade: the write handle is no longer held, the read one is, with the same token;
     * other readers get in at once, writers still do not. */
    CHECK_RC(redislock_lock_downgrade(w, NULL), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_lock_downgrade(w, &down), REDISLOCK_OK);
    CHECK(down != NULL);
    CHECK(!redislock_lock_is_held(w));
    CHECK(redislock_lock_is_held(down));
    CHECK_RC(redislock_lock_fencing_token(down, &rtoken), REDISLOCK_OK);
    CHECK(rtoken == wtoken);
    CHECK_RC(redislock_lock_release(w), REDISLOCK_NOT_HELD);
    CHECK_RC(redislock_lock_downgrade(w, &x), REDISLOCK_NOT_HELD);
    CHECK(x == NULL);
    redislock_lock_free(w);
    CHECK_RC(redislock_request_try_acquire(read, &other), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(write, &x), REDISLOCK_HELD);
    /* Only a write lock downgrades. */
    CHECK_RC(redislock_lock_downgrade(down, &x), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "downgrade does not apply to a read lock") != NULL);
    CHECK(x == NULL);
    CHECK_RC(redislock_lock_release(down), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(other), REDISLOCK_OK);
    redislock_lock_free(down);
    redislock_lock_free(other);

    /* All released: the exclusive lock of the name is free, and does not downgrade. */
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name), &x), REDISLOCK_OK);
    CHECK_RC(redislock_lock_downgrade(x, &other), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "an exclusive lock") != NULL);
    redislock_lock_free(x);
    redislock_request_free(read);
    redislock_request_free(write);
    redislock_client_free(client);
}

struct waiting_reader {
    redislock_request *read;
    redislock_result rc;
    long long granted_at;
};

static void *wait_for_read(void *arg) {
    struct waiting_reader *w = arg;
    redislock_lock *lock = NULL;
    w->rc = redislock_request_acquire(w->read, 30000, &lock);
    w->granted_at = h_now_ms();
    if (lock != NULL) {
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        redislock_lock_free(lock);
    }
    return NULL;
}

void test_rw_reader_waits_for_the_writer(void) {
    redislock_client *client = h_client();
    redislock_request *write;
    redislock_lock *w = NULL;
    struct waiting_reader reader;
    pthread_t thread;
    long long released_at;
    char name[128];

    h_name(name, sizeof name, "rw-wait");
    write = kind_request(client, name, REDISLOCK_KIND_WRITE);
    reader.read = kind_request(client, name, REDISLOCK_KIND_READ);
    reader.rc = REDISLOCK_INTERNAL;
    reader.granted_at = 0;
    CHECK_RC(redislock_request_try_acquire(write, &w), REDISLOCK_OK);
    pthread_create(&thread, NULL, wait_for_read, &reader);
    h_sleep_ms(300);
    released_at = h_now_ms();
    CHECK_RC(redislock_lock_release(w), REDISLOCK_OK);
    pthread_join(thread, NULL);
    CHECK_RC(reader.rc, REDISLOCK_OK);
    /* The reader got the lock only after the writer released it. */
    CHECK(reader.granted_at >= released_at);
    redislock_lock_free(w);
    redislock_request_free(write);
    redislock_request_free(reader.read);
    redislock_client_free(client);
}

/* --- semaphores: never more permits out than there are --------------------------------------- */

enum { SEM_THREADS = 6, SEM_PERMITS = 3, SEM_ROUNDS = 5 };

struct sem_check {
    redislock_request *one, *two;
    pthread_mutex_t mu;
    int in_use, max_in_use, over;
};

static void *sem_worker(void *arg) {
    struct sem_check *c = arg;
    int i;
    for (i = 0; i < SEM_ROUNDS; i++) {
        /* Every other grant takes 2 permits. */
        int k = (i % 2) + 1;
        redislock_lock *lock = NULL;
        CHECK_RC(redislock_request_acquire(k == 1 ? c->one : c->two, 60000, &lock), REDISLOCK_OK);
        if (lock == NULL) return NULL;
        pthread_mutex_lock(&c->mu);
        c->in_use += k;
        if (c->in_use > SEM_PERMITS) c->over++;
        if (c->in_use > c->max_in_use) c->max_in_use = c->in_use;
        pthread_mutex_unlock(&c->mu);
        h_sleep_ms(10);
        pthread_mutex_lock(&c->mu);
        c->in_use -= k;
        pthread_mutex_unlock(&c->mu);
        CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
        redislock_lock_free(lock);
    }
    return NULL;
}

void test_semaphore_never_over_granted(void) {
    redislock_client *client = h_client();
    struct sem_check c;
    pthread_t threads[SEM_THREADS];
    char name[128];
    int i;

    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.mu, NULL);
    h_name(name, sizeof name, "sem");
    c.one = semaphore_request(client, name, SEM_PERMITS, 1);
    c.two = semaphore_request(client, name, SEM_PERMITS, 2);
    for (i = 0; i < SEM_THREADS; i++) pthread_create(&threads[i], NULL, sem_worker, &c);
    for (i = 0; i < SEM_THREADS; i++) pthread_join(threads[i], NULL);
    CHECK(c.over == 0);
    CHECK(c.max_in_use <= SEM_PERMITS);
    CHECK(c.max_in_use >= 2); /* grants overlapped: it is a semaphore, not a mutex */
    redislock_request_free(c.one);
    redislock_request_free(c.two);
    pthread_mutex_destroy(&c.mu);
    redislock_client_free(client);
}

void test_semaphore_basics_and_invalid_input(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL, *other = NULL;
    redislock_lock *a = NULL, *b = NULL, *c = NULL;
    uint64_t token = 0;
    char name[128], buf[64];

    h_name(name, sizeof name, "sem-basics");
    req = semaphore_request(client, name, 3, 2);
    CHECK_RC(redislock_request_try_acquire(req, &a), REDISLOCK_OK);
    /* 1 left: a second grant of 2 does not fit, one of 1 does. */
    CHECK_RC(redislock_request_try_acquire(req, &b), REDISLOCK_HELD);
    CHECK_RC(redislock_request_set_permits(req, 1), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &b), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &c), REDISLOCK_HELD);
    CHECK(redislock_lock_is_held(a) && redislock_lock_is_held(b));
    CHECK_RC(redislock_lock_extend(a, 15000), REDISLOCK_OK);
    /* Permits have no fencing token, no owner token, no detach, no downgrade. */
    CHECK_RC(redislock_lock_fencing_token(a, &token), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_fencing_token_at(a, 0, &token), REDISLOCK_INVALID_ARGUMENT);
    CHECK(redislock_lock_owner_token(a, buf, sizeof buf) == 0);
    CHECK_RC(redislock_lock_detach(a), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_downgrade(a, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK(c == NULL);
    /* A user with another number of permits, or the name used as a read/write lock, while the
     * semaphore is in use: clear errors. */
    other = semaphore_request(client, name, 4, 1);
    CHECK_RC(redislock_request_try_acquire(other, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "has 3 permits, not 4") != NULL);
    redislock_request_free(other);
    other = kind_request(client, name, REDISLOCK_KIND_READ);
    CHECK_RC(redislock_request_try_acquire(other, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "another kind of lock") != NULL);
    redislock_request_free(other);
    CHECK(c == NULL);
    CHECK_RC(redislock_lock_release(a), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(a), REDISLOCK_NOT_HELD);
    redislock_lock_free(a);
    redislock_lock_free(b); /* releases it */

    /* Zero permits, more than the semaphore has, a semaphore of zero permits. */
    CHECK_RC(redislock_request_set_permits(req, 0), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "a request for 0 permits") != NULL);
    CHECK_RC(redislock_request_set_permits(req, 4), REDISLOCK_OK);
    CHECK_RC(redislock_request_acquire(req, 100, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "which has 3") != NULL);
    redislock_request_free(req);
    req = semaphore_request(client, name, 0, 1);
    CHECK_RC(redislock_request_try_acquire(req, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "permits, got 0") != NULL);
    CHECK(c == NULL);
    redislock_request_free(req);

    /* Nothing held or waiting: the next user may choose another number. */
    req = semaphore_request(client, name, 5, 5);
    CHECK_RC(redislock_request_try_acquire(req, &c), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(c), REDISLOCK_OK);
    redislock_lock_free(c);
    redislock_request_free(req);
    redislock_client_free(client);
}

/* --- sets of locks: all or none --------------------------------------------------------------- */

struct set_waiter {
    redislock_request *set;
    redislock_result rc;
    redislock_lock *lock;
};

static void *wait_for_set(void *arg) {
    struct set_waiter *w = arg;
    w->rc = redislock_request_acquire(w->set, 30000, &w->lock);
    return NULL;
}

void test_set_all_or_none(void) {
    redislock_client *client = h_client();
    redislock_request *req;
    redislock_lock *b = NULL, *set = NULL;
    struct set_waiter waiter;
    pthread_t thread;
    uint64_t t0 = 0, t1 = 0, t2 = 0;
    char name_a[128], name_b[128], name_c[128], buf[64];
    const char *names[3];

    h_name(name_a, sizeof name_a, "set-a");
    h_name(name_b, sizeof name_b, "set-b");
    h_name(name_c, sizeof name_c, "set-c");
    names[0] = name_a;
    names[1] = name_b;
    names[2] = name_c;
    req = set_request(client, names, 3);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_OK);

    /* b is held: the set gets none of the names, not even a and c. */
    CHECK_RC(redislock_lock_try_acquire(client, NAME(name_b), &b), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &set), REDISLOCK_HELD);
    CHECK(set == NULL);
    CHECK(!exclusive_is_held(client, name_a));
    CHECK(!exclusive_is_held(client, name_c));

    /* A waiting set holds nothing while it waits, and gets all three when b is released. */
    waiter.set = req;
    waiter.rc = REDISLOCK_INTERNAL;
    waiter.lock = NULL;
    pthread_create(&thread, NULL, wait_for_set, &waiter);
    h_sleep_ms(300);
    CHECK(!exclusive_is_held(client, name_a));
    CHECK_RC(redislock_lock_release(b), REDISLOCK_OK);
    redislock_lock_free(b);
    pthread_join(thread, NULL);
    CHECK_RC(waiter.rc, REDISLOCK_OK);
    set = waiter.lock;
    CHECK(set != NULL && redislock_lock_is_held(set));
    CHECK(exclusive_is_held(client, name_a));
    CHECK(exclusive_is_held(client, name_b));
    CHECK(exclusive_is_held(client, name_c));

    /* One fencing token per name, by index; none for the set as a whole. */
    CHECK_RC(redislock_lock_fencing_token_at(set, 0, &t0), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token_at(set, 1, &t1), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token_at(set, 2, &t2), REDISLOCK_OK);
    CHECK(t0 >= 1 && t1 >= 1 && t2 >= 1);
    CHECK_RC(redislock_lock_fencing_token_at(set, 3, &t0), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "out of range") != NULL);
    CHECK_RC(redislock_lock_fencing_token(set, &t0), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "a set of locks") != NULL);
    CHECK(redislock_lock_owner_token(set, buf, sizeof buf) == 0);
    CHECK_RC(redislock_lock_detach(set), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_lock_extend(set, 20000), REDISLOCK_OK);

    /* One release frees them all. */
    CHECK_RC(redislock_lock_release(set), REDISLOCK_OK);
    CHECK(!exclusive_is_held(client, name_a));
    CHECK(!exclusive_is_held(client, name_b));
    CHECK(!exclusive_is_held(client, name_c));
    redislock_lock_free(set);
    redislock_request_free(req);
    redislock_client_free(client);
}

void test_set_invalid_input(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    const uint8_t *ptrs[2];
    size_t lens[2];
    const char *twice[3];
    char name[128];

    /* Empty: refused by the acquire. */
    CHECK_RC(redislock_request_new_set(client, NULL, NULL, 0, &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "empty") != NULL);
    redislock_request_free(req);

    /* A name twice. */
    h_name(name, sizeof name, "set-twice");
    twice[0] = name;
    twice[1] = "other";
    twice[2] = name;
    req = set_request(client, twice, 3);
    CHECK_RC(redislock_request_acquire(req, 100, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "given twice") != NULL);
    CHECK(!exclusive_is_held(client, name));
    redislock_request_free(req);
    req = NULL;

    /* NULLs and too many names: refused at once, nothing written. */
    ptrs[0] = (const uint8_t *)name;
    ptrs[1] = NULL;
    lens[0] = strlen(name);
    lens[1] = 3;
    CHECK_RC(redislock_request_new_set(client, ptrs, lens, 2, &req), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_set(client, NULL, lens, 2, &req), REDISLOCK_NULL_PARAMETER);
    CHECK(strstr(h_last_error(), "`names`") != NULL);
    CHECK_RC(redislock_request_new_set(client, ptrs, NULL, 2, &req), REDISLOCK_NULL_PARAMETER);
    CHECK(strstr(h_last_error(), "`names_len`") != NULL);
    CHECK_RC(redislock_request_new_set(NULL, ptrs, lens, 1, &req), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_set(client, ptrs, lens, 1, NULL), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_set(client, ptrs, lens, 257, &req),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(req == NULL);
    CHECK(lock == NULL);
    redislock_client_free(client);
}

/* --- setters that do not apply, and NULLs ------------------------------------------------------ */

void test_kind_setters_that_do_not_apply(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    const char owner[] = "order-42-0123456789";
    char name[128];

    h_name(name, sizeof name, "kind-setters");
    CHECK_RC(redislock_request_new(client, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_kind(req, (redislock_kind)7), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "7 is not a redislock_kind") != NULL);
    CHECK_RC(redislock_request_set_permits(req, 1), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_kind(req, REDISLOCK_KIND_READ), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_owner_token(req, NAME(owner)), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "an owner token does not apply to a request for a read lock")
          != NULL);
    CHECK_RC(redislock_request_restore(req, NAME(owner), &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_kind(req, REDISLOCK_KIND_EXCLUSIVE), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_owner_token(req, NAME(owner)), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_kind(req, REDISLOCK_KIND_WRITE), REDISLOCK_INVALID_ARGUMENT);
    /* Refused setters changed nothing: this is an exclusive lock with the owner token. */
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK(redislock_lock_owner_token(lock, name, sizeof name) == strlen(owner));
    CHECK(strcmp(name, owner) == 0);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    redislock_request_free(req);

    req = NULL;
    CHECK_RC(redislock_request_new_semaphore(client, NAME("kind-setters-sem"), 2, &req),
             REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_kind(req, REDISLOCK_KIND_WRITE), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_owner_token(req, NAME(owner)), REDISLOCK_INVALID_ARGUMENT);
    redislock_request_free(req);

    /* NULLs. */
    req = NULL;
    CHECK_RC(redislock_request_set_kind(NULL, REDISLOCK_KIND_READ), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_set_permits(NULL, 1), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_semaphore(NULL, NAME("x"), 2, &req), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_semaphore(client, NULL, 3, 2, &req),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_semaphore(client, NAME("x"), 2, NULL),
             REDISLOCK_NULL_PARAMETER);
    CHECK(req == NULL);
    CHECK_RC(redislock_lock_downgrade(NULL, &lock), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_lock_fencing_token_at(NULL, 0, NULL), REDISLOCK_NULL_PARAMETER);
    redislock_client_free(client);
}

/* --- a look at a lock without holding it ------------------------------------------------------ */

void test_inspect_a_lock_without_holding_it(void) {
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_inspect *info = NULL;
    redislock_lock *lock = NULL, *reader = NULL;
    uint64_t fence = 0, counter = 0;
    uint32_t waiters = 99;
    char name[128];

    h_name(name, sizeof name, "inspect");
    CHECK_RC(redislock_client_inspect(client, NAME(name), REDISLOCK_INSPECT_ANY, &info),
             REDISLOCK_OK);
    CHECK(!redislock_inspect_is_held(info));
    CHECK(redislock_inspect_held_as(info) == REDISLOCK_HELD_NONE);
    CHECK(redislock_inspect_holders(info) == 0 && redislock_inspect_remaining_ms(info) == 0);
    redislock_inspect_free(info);

    CHECK_RC(h_try_acquire_with(client, NAME(name), 20000, true, true, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(lock, &fence), REDISLOCK_OK);
    CHECK_RC(redislock_client_inspect(client, NAME(name), REDISLOCK_INSPECT_EXCLUSIVE, &info),
             REDISLOCK_OK);
    CHECK(redislock_inspect_is_held(info));
    CHECK(redislock_inspect_held_as(info) == REDISLOCK_HELD_EXCLUSIVE);
    CHECK(redislock_inspect_holders(info) == 1);
    CHECK(redislock_inspect_remaining_ms(info) > 10000 &&
          redislock_inspect_remaining_ms(info) <= 20000);
    CHECK(redislock_inspect_permits(info) == 0 && redislock_inspect_permits_held(info) == 0);
    CHECK_RC(redislock_inspect_waiters(info, &waiters), REDISLOCK_OK);
    CHECK(waiters == 0);
    CHECK_RC(redislock_inspect_fencing_counter(info, &counter), REDISLOCK_OK);
    CHECK(counter == fence);
    CHECK_RC(redislock_inspect_waiters(info, NULL), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_inspect_fencing_counter(NULL, &counter), REDISLOCK_NULL_PARAMETER);
    redislock_inspect_free(info);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);

    /* Readers; an out-of-range kind; NULL everywhere. */
    req = kind_request(client, name, REDISLOCK_KIND_READ);
    CHECK_RC(redislock_request_try_acquire(req, &reader), REDISLOCK_OK);
    CHECK_RC(redislock_client_inspect(client, NAME(name), REDISLOCK_INSPECT_RWLOCK, &info),
             REDISLOCK_OK);
    CHECK(redislock_inspect_held_as(info) == REDISLOCK_HELD_READERS);
    redislock_inspect_free(info);
    redislock_lock_free(reader);
    redislock_request_free(req);
    req = semaphore_request(client, name, 3, 2);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_client_inspect(client, NAME(name), REDISLOCK_INSPECT_SEMAPHORE, &info),
             REDISLOCK_OK);
    CHECK(redislock_inspect_held_as(info) == REDISLOCK_HELD_SEMAPHORE);
    CHECK(redislock_inspect_permits(info) == 3 && redislock_inspect_permits_held(info) == 2);
    redislock_inspect_free(info);
    redislock_lock_free(lock);
    redislock_request_free(req);

    /* Redisson's lock: its hash's fields are its holders; a plain lock is refused, waiting or
     * not, as the name is in use as another kind. */
    req = kind_request(client, name, REDISLOCK_KIND_REDISSON);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_client_inspect(client, NAME(name), REDISLOCK_INSPECT_ANY, &info),
             REDISLOCK_OK);
    CHECK(redislock_inspect_is_held(info));
    CHECK(redislock_inspect_held_as(info) == REDISLOCK_HELD_REDISSON);
    CHECK(redislock_inspect_holders(info) == 1);
    redislock_inspect_free(info);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 20000, false, false, &reader),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "another kind of lock") != NULL);
    redislock_lock_free(lock);
    redislock_request_free(req);

    info = NULL;
    CHECK_RC(redislock_client_inspect(client, NAME(name), 7, &info), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "not a redislock_inspect_kind") != NULL);
    CHECK_RC(redislock_client_inspect(NULL, NAME(name), 0, &info), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_inspect(client, NAME(name), 0, NULL), REDISLOCK_NULL_PARAMETER);
    CHECK(info == NULL);
    CHECK(!redislock_inspect_is_held(NULL) && redislock_inspect_holders(NULL) == 0);
    CHECK(redislock_inspect_held_as(NULL) == REDISLOCK_HELD_NONE);
    CHECK(redislock_inspect_permits(NULL) == 0 && redislock_inspect_permits_held(NULL) == 0);

    /* The names of the enums' values, as the command-line tool and the PHP package say them. */
    CHECK(strcmp(redislock_held_as_name(REDISLOCK_HELD_EXCLUSIVE), "exclusive") == 0);
    CHECK(strcmp(redislock_held_as_name(REDISLOCK_HELD_READERS), "readers") == 0);
    CHECK(strcmp(redislock_held_as_name(REDISLOCK_HELD_SEMAPHORE), "semaphore") == 0);
    CHECK(strcmp(redislock_held_as_name(REDISLOCK_HELD_REDISSON), "redisson") == 0);
    CHECK(strcmp(redislock_held_as_name(REDISLOCK_HELD_OTHER), "other") == 0);
    CHECK(redislock_held_as_name(REDISLOCK_HELD_NONE) == NULL);
    CHECK(redislock_held_as_name(1000) == NULL);
    CHECK(strcmp(redislock_inspect_kind_names(), "exclusive, rwlock, semaphore, any") == 0);
    CHECK(redislock_inspect_remaining_ms(NULL) == 0);
    redislock_inspect_free(NULL);
    redislock_client_free(client);
}
