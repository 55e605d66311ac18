/* What a client leaves running: threads end with the last handle of a private client; a
 * persistent client made per "request" shares one backend; owner tokens (detach, restore, a
 * given owner). */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Threads of this process named redislock-timer / redislock-renew*: the library's. */
static int library_threads(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    int n = 0;
    if (d == NULL) return -1;
    while ((e = readdir(d)) != NULL) {
        char path[300], name[64] = "";
        FILE *f;
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        f = fopen(path, "r");
        if (f == NULL) continue;
        if (fgets(name, sizeof name, f) != NULL &&
            (strncmp(name, "redislock-timer", 15) == 0 || strncmp(name, "redislock-renew", 15) == 0))
            n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

static redislock_client *client_with(bool persistent, uint64_t lease_ms) {
    redislock_config *cfg = NULL;
    redislock_client *c = NULL;
    CHECK_RC(redislock_config_new(h_url(), &cfg), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_persistent(cfg, persistent), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_lease_ms(cfg, lease_ms), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(cfg, &c), REDISLOCK_OK);
    redislock_config_free(cfg);
    return c;
}

void test_private_client_threads_end_with_it(void) {
    char name[128];
    redislock_client *c;
    redislock_lock *l = NULL;
    int before = library_threads(), during;
    h_name(name, sizeof name, "private");
    c = client_with(false, 300);
    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_OK);
    h_sleep_ms(250); /* past its first renewal: a renewal thread has it */
    during = library_threads();
    CHECK(during > before);
    redislock_client_free(c); /* the lock keeps the backend running */
    CHECK(redislock_lock_is_held(l));
    CHECK_RC(redislock_lock_release(l), REDISLOCK_OK);
    redislock_lock_free(l);
    /* Ended and joined when the last handle went. The kernel takes a joined thread out of
     * /proc/self/task a moment after the join returns: up to a second is allowed for that. */
    for (int i = 0; i < 200 && library_threads() > before; i++) h_sleep_ms(5);
    CHECK(library_threads() <= before);
}

void test_persistent_clients_share_a_backend(void) {
    /* A persistent backend lives until the process exits: run it in a child, whose threads
     * the leak check of valgrind must not count against the parent. */
    int failures = h_failures();
    int pid = h_fork();
    if (pid == 0) {
        char name[128];
        int i, most = 0;
        h_name(name, sizeof name, "persistent");
        for (i = 0; i < 200; i++) {
            redislock_client *c = client_with(true, 300);
            redislock_lock *l = NULL;
            int n;
            CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_OK);
            if (i % 50 == 0) h_sleep_ms(150);
            CHECK_RC(redislock_lock_release(l), REDISLOCK_OK);
            redislock_lock_free(l);
            redislock_client_free(c);
            n = library_threads();
            if (n > most) most = n;
        }
        CHECK(most <= 3);
        h_child_exit(failures);
    }
    h_wait_child(pid);
}

void test_owner_tokens(void) {
    char name[128], token[300], again[300];
    redislock_client *c = h_client();
    redislock_request *req = NULL, *as_order = NULL, *as_other = NULL;
    redislock_lock *l = NULL, *r = NULL, *o = NULL;
    size_t n;
    h_name(name, sizeof name, "owner");
    if (c == NULL) return;

    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_OK);
    n = redislock_lock_owner_token(l, token, sizeof token);
    CHECK(n == 32 && strlen(token) == 32);
    CHECK(redislock_lock_owner_token(l, NULL, 0) == 32);
    CHECK(redislock_lock_owner_token(NULL, token, sizeof token) == 0);
    /* Detached: freeing the handle leaves the lock to its lease. */
    CHECK_RC(redislock_lock_detach(l), REDISLOCK_OK);
    CHECK_RC(redislock_lock_detach(l), REDISLOCK_NOT_HELD);
    CHECK_RC(redislock_lock_release(l), REDISLOCK_NOT_HELD);
    redislock_lock_owner_token(l, again, sizeof again);
    redislock_lock_free(l);
    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_HELD);

    /* Restored by its token (another "process" would do the same) and released. */
    CHECK_RC(redislock_request_new(c, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_lease_ms(req, 2000), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, false), REDISLOCK_OK);
    CHECK_RC(redislock_request_restore(req, NAME(again), &r), REDISLOCK_OK);
    CHECK(redislock_lock_is_held(r));
    CHECK(redislock_lock_remaining_ms(r) <= 2000);
    CHECK_RC(redislock_lock_release(r), REDISLOCK_OK);
    redislock_lock_free(r);
    r = NULL;
    CHECK_RC(redislock_request_restore(req, NAME(again), &r), REDISLOCK_NOT_HELD);
    CHECK(r == NULL);
    CHECK(strstr(h_last_error(), again) == NULL);

    /* A given owner token: one attempt, or a wait. */
    CHECK_RC(redislock_request_new(c, NAME(name), &as_order), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_owner_token(as_order, NAME("order-42-0123456789")),
             REDISLOCK_OK);
    CHECK_RC(redislock_request_new(c, NAME(name), &as_other), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_owner_token(as_other, NAME("someone-else-0123456789")),
             REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(as_order, &o), REDISLOCK_OK);
    redislock_lock_owner_token(o, token, sizeof token);
    CHECK(strcmp(token, "order-42-0123456789") == 0);
    CHECK_RC(redislock_request_try_acquire(as_other, &l), REDISLOCK_HELD);
    CHECK_RC(redislock_request_acquire(as_other, 50, &l), REDISLOCK_WAIT_TIMEOUT);
    {
        bool owned = false, released = false;
        CHECK_RC(redislock_is_owned_by(c, NAME(name), NAME("order-42-0123456789"), &owned), REDISLOCK_OK);
        CHECK(owned);
        CHECK_RC(redislock_is_owned_by(c, NAME(name), NAME("someone-else-0123456789"), &owned),
                 REDISLOCK_OK);
        CHECK(!owned);
        CHECK_RC(redislock_force_release(c, NAME(name), &released), REDISLOCK_OK);
        CHECK(released);
        CHECK_RC(redislock_force_release(c, NAME(name), &released), REDISLOCK_OK);
        CHECK(!released);
        CHECK_RC(redislock_lock_release(o), REDISLOCK_NOT_HELD);
        CHECK_RC(redislock_force_release(NULL, NAME(name), &released), REDISLOCK_NULL_PARAMETER);
        CHECK_RC(redislock_is_owned_by(c, NAME(name), NULL, 3, &owned), REDISLOCK_NULL_PARAMETER);
    }
    redislock_lock_free(o);
    /* The owner given to a request takes the lock over from a handle that was freed. */
    CHECK_RC(redislock_request_try_acquire(as_order, &o), REDISLOCK_OK);
    CHECK_RC(redislock_lock_detach(o), REDISLOCK_OK);
    redislock_lock_free(o);
    CHECK_RC(redislock_request_restore(req, NAME("order-42-0123456789"), &r), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(r), REDISLOCK_OK);
    redislock_lock_free(r);
    CHECK_RC(redislock_request_set_owner_token(as_order, NAME("short")), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(as_order, &l), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_owner_token(as_order, NULL, 5), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_restore(req, NULL, 5, &l), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_lock_detach(NULL), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_config_set_persistent(NULL, true), REDISLOCK_NULL_PARAMETER);
    redislock_request_free(as_other);
    redislock_request_free(as_order);
    redislock_request_free(req);
    redislock_client_free(c);
}

/* What the callbacks below saw. */
struct seen {
    pthread_mutex_t mu;
    int calls;
    char name[128];
    char text[512];
};

static void on_lost(void *user_data, const uint8_t *name, size_t name_len, const char *reason) {
    struct seen *s = user_data;
    pthread_mutex_lock(&s->mu);
    s->calls++;
    snprintf(s->name, sizeof s->name, "%.*s", (int)name_len, (const char *)name);
    snprintf(s->text, sizeof s->text, "%s", reason);
    pthread_mutex_unlock(&s->mu);
}

static void on_log(void *user_data, redislock_log_level level, const char *message) {
    struct seen *s = user_data;
    pthread_mutex_lock(&s->mu);
    if (level == REDISLOCK_LOG_WARN && strstr(message, "lost") != NULL) {
        s->calls++;
        snprintf(s->text, sizeof s->text, "%s", message);
    }
    pthread_mutex_unlock(&s->mu);
}

static int calls(struct seen *s) {
    int n;
    pthread_mutex_lock(&s->mu);
    n = s->calls;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void test_lost_lock_callback_and_log(void) {
    static struct seen lost = {PTHREAD_MUTEX_INITIALIZER, 0, "", ""};
    static struct seen logged = {PTHREAD_MUTEX_INITIALIZER, 0, "", ""};
    char name[128], token[64];
    const char *del[2];
    resp_conn rc;
    resp_reply r;
    redislock_client *c = client_with(false, 300);
    redislock_lock *l = NULL;
    long long deadline;
    h_name(name, sizeof name, "lost-callback");
    CHECK_RC(redislock_set_log_callback(on_log, &logged, REDISLOCK_LOG_WARN), REDISLOCK_OK);
    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_OK);
    CHECK_RC(redislock_lock_on_lost(l, on_lost, &lost), REDISLOCK_OK);
    CHECK_RC(redislock_lock_on_lost(NULL, on_lost, &lost), REDISLOCK_NULL_PARAMETER);
    redislock_lock_owner_token(l, token, sizeof token);
    if (h_resp(&rc) == 0) {
        del[0] = "DEL";
        del[1] = name;
        CHECK(resp_command_str(&rc, &r, 2, del) == 0);
        resp_close(&rc);
    }
    /* Renewal (every 100 ms) finds the key gone and calls back on its thread. */
    deadline = h_now_ms() + 3000;
    while (calls(&lost) == 0 && h_now_ms() < deadline) h_sleep_ms(10);
    CHECK(calls(&lost) == 1);
    CHECK(strcmp(lost.name, name) == 0);
    CHECK(strstr(lost.text, "gone") != NULL);
    CHECK(strstr(lost.text, token) == NULL);
    CHECK(!redislock_lock_is_held(l));
    CHECK_RC(redislock_lock_release(l), REDISLOCK_NOT_HELD);
    CHECK(calls(&lost) == 1); /* once */
    /* Set on a lock lost already: called at once. */
    CHECK_RC(redislock_lock_on_lost(l, on_lost, &lost), REDISLOCK_OK);
    CHECK(calls(&lost) == 2);
    CHECK(calls(&logged) >= 1);
    CHECK(strstr(logged.text, name) != NULL);
    CHECK(strstr(logged.text, token) == NULL);
    CHECK_RC(redislock_set_log_callback(NULL, NULL, REDISLOCK_LOG_OFF), REDISLOCK_OK);
    redislock_lock_free(l);
    redislock_client_free(c);
}

struct cancel_args {
    const redislock_request *req;
    redislock_result rc;
    long long took_ms;
};

static void *wait_cancellable(void *p) {
    struct cancel_args *a = p;
    redislock_lock *l = NULL;
    long long t = h_now_ms();
    a->rc = redislock_request_acquire(a->req, 30000, &l);
    a->took_ms = h_now_ms() - t;
    redislock_lock_free(l);
    return NULL;
}

void test_cancel_a_waiting_acquire(void) {
    char name[128];
    redislock_client *c = h_client();
    redislock_request *req = NULL;
    redislock_lock *held = NULL, *l = NULL;
    redislock_cancel *cancel = NULL;
    struct cancel_args args[2];
    pthread_t t[2];
    int i;
    if (c == NULL) return;
    h_name(name, sizeof name, "cancel");
    CHECK_RC(redislock_cancel_new(&cancel), REDISLOCK_OK);
    CHECK(!redislock_cancel_is_cancelled(cancel));
    CHECK_RC(redislock_request_new(c, NAME(name), &req), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_cancel(req, cancel), REDISLOCK_OK);
    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &held), REDISLOCK_OK);
    /* Two threads wait with the one request; one cancel ends both. */
    for (i = 0; i < 2; i++) {
        args[i].req = req;
        args[i].rc = REDISLOCK_OK;
        args[i].took_ms = 0;
        CHECK(pthread_create(&t[i], NULL, wait_cancellable, &args[i]) == 0);
    }
    h_sleep_ms(300);
    CHECK_RC(redislock_cancel_cancel(cancel), REDISLOCK_OK);
    for (i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        CHECK(args[i].rc == REDISLOCK_CANCELLED);
        CHECK(args[i].took_ms < 5000);
    }
    CHECK(redislock_cancel_is_cancelled(cancel));
    /* Later acquires with it fail at once, also after the handle is freed (the request keeps
     * its own reference); without it, the wait works as usual. */
    CHECK_RC(redislock_request_acquire(req, 1000, &l), REDISLOCK_CANCELLED);
    redislock_cancel_free(cancel);
    CHECK_RC(redislock_request_try_acquire(req, &l), REDISLOCK_CANCELLED);
    CHECK_RC(redislock_request_set_cancel(req, NULL), REDISLOCK_OK);
    CHECK_RC(redislock_request_acquire(req, 50, &l), REDISLOCK_WAIT_TIMEOUT);
    CHECK(l == NULL);
    CHECK_RC(redislock_lock_release(held), REDISLOCK_OK);
    redislock_lock_free(held);
    CHECK_RC(redislock_cancel_cancel(NULL), REDISLOCK_NULL_PARAMETER);
    CHECK(!redislock_cancel_is_cancelled(NULL));
    CHECK_RC(redislock_cancel_new(NULL), REDISLOCK_NULL_PARAMETER);
    redislock_cancel_free(NULL);
    redislock_request_free(req);
    redislock_client_free(c);
}

void test_min_replicas_without_replicas(void) {
    char name[128];
    redislock_config *cfg = NULL;
    redislock_client *c = NULL;
    redislock_lock *l = NULL;
    h_name(name, sizeof name, "min-replicas");
    CHECK_RC(redislock_config_new(h_url(), &cfg), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_min_replicas(cfg, 1), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_replica_timeout_ms(cfg, 50), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(cfg, &c), REDISLOCK_OK);
    /* The test server has no replica: no write is acknowledged, no lock is granted. */
    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_CONNECTION);
    CHECK(strstr(h_last_error(), "replicas") != NULL);
    redislock_client_free(c);
    c = NULL;
    /* Nothing was left behind: a client without min_replicas takes the lock at once. */
    c = h_client();
    CHECK_RC(redislock_lock_try_acquire(c, NAME(name), &l), REDISLOCK_OK);
    CHECK_RC(redislock_lock_release(l), REDISLOCK_OK);
    redislock_lock_free(l);
    redislock_client_free(c);
    c = NULL;
    /* Out of range settings. */
    CHECK_RC(redislock_config_set_replica_timeout_ms(cfg, 5000), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(cfg, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_config_set_replica_timeout_ms(cfg, 100), REDISLOCK_OK);
    CHECK_RC(redislock_config_set_min_replicas(cfg, 101), REDISLOCK_OK);
    CHECK_RC(redislock_client_from_config(cfg, &c), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_config_set_min_replicas(NULL, 1), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_config_set_replica_timeout_ms(NULL, 1), REDISLOCK_NULL_PARAMETER);
    redislock_config_free(cfg);
}
