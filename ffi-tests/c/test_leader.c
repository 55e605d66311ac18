/* Leader election from C: a campaign is a request (redislock_request_new_leader), its leadership
 * a lock with an epoch; observers read redislock_leader_info handles and wait for a change. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define ID(s) (const uint8_t *)(s), strlen(s)

static redislock_request *leader_request(const redislock_client *client, const char *name,
                                         const char *identity) {
    redislock_request *req = NULL;
    CHECK_RC(redislock_request_new_leader(client, NAME(name), ID(identity), &req), REDISLOCK_OK);
    return req;
}

struct observer {
    redislock_client *client;
    const char *name;
    uint64_t since;
    redislock_result rc;
    redislock_leader_info *info;
    long long woken_ms;
};

static void *observe(void *arg) {
    struct observer *o = arg;
    o->rc = redislock_client_wait_leader_change(o->client, NAME(o->name), o->since, 60000,
                                                &o->info);
    o->woken_ms = h_now_ms();
    return NULL;
}

void test_leader_campaign_observe_resign(void) {
    char name[128];
    char id[64];
    redislock_client *client = h_client();
    redislock_request *a, *b;
    redislock_lock *leader = NULL, *second = NULL;
    redislock_leader_info *info = (redislock_leader_info *)1;
    uint64_t epoch = 0, epoch2 = 0, token = 0;
    struct observer o;
    pthread_t t;
    long long resigned;
    h_name(name, sizeof name, "leader");

    /* Nobody leads: NULL info. */
    CHECK_RC(redislock_client_leader(client, NAME(name), &info), REDISLOCK_OK);
    CHECK(info == NULL);

    a = leader_request(client, name, "node-a");
    b = leader_request(client, name, "node-b");
    CHECK_RC(redislock_request_set_lease_ms(a, 60000), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(a, &leader), REDISLOCK_OK);
    CHECK(redislock_lock_is_held(leader));
    CHECK_RC(redislock_lock_epoch(leader, &epoch), REDISLOCK_OK);
    CHECK(epoch >= 1);
    CHECK_RC(redislock_lock_fencing_token(leader, &token), REDISLOCK_OK);
    CHECK(token == epoch);
    CHECK_RC(redislock_request_try_acquire(b, &second), REDISLOCK_HELD);

    /* An observer sees the leader: identity, epoch, lease. */
    CHECK_RC(redislock_client_leader(client, NAME(name), &info), REDISLOCK_OK);
    CHECK(info != NULL);
    CHECK(redislock_leader_info_identity(info, id, sizeof id) == 6);
    CHECK(strcmp(id, "node-a") == 0);
    CHECK(redislock_leader_info_identity(info, NULL, 0) == 6);
    CHECK(redislock_leader_info_identity(info, id, 3) == 6 && strcmp(id, "no") == 0);
    CHECK(redislock_leader_info_epoch(info) == epoch);
    CHECK(redislock_leader_info_remaining_ms(info) > 50000);
    redislock_leader_info_free(info);

    /* Nothing changes: the wait runs out. */
    info = NULL;
    CHECK_RC(redislock_client_wait_leader_change(client, NAME(name), epoch, 200, &info),
             REDISLOCK_WAIT_TIMEOUT);
    CHECK(info == NULL);

    /* A waiting observer is woken by the resign, long before the lease. */
    o.client = client;
    o.name = name;
    o.since = epoch;
    o.info = NULL;
    CHECK(pthread_create(&t, NULL, observe, &o) == 0);
    h_sleep_ms(300);
    resigned = h_now_ms();
    CHECK_RC(redislock_lock_release(leader), REDISLOCK_OK);
    CHECK(!redislock_lock_is_held(leader));
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_RC(o.rc, REDISLOCK_OK);
    CHECK(o.info == NULL); /* nobody leads after the resign */
    CHECK(o.woken_ms - resigned < 3000);
    redislock_lock_free(leader);

    /* The next leader has a larger epoch. */
    CHECK_RC(redislock_request_acquire(b, 1000, &second), REDISLOCK_OK);
    CHECK_RC(redislock_lock_epoch(second, &epoch2), REDISLOCK_OK);
    CHECK(epoch2 > epoch);
    CHECK_RC(redislock_client_wait_leader_change(client, NAME(name), epoch, 1000, &info),
             REDISLOCK_OK);
    CHECK(info != NULL && redislock_leader_info_epoch(info) == epoch2);
    redislock_leader_info_free(info);
    CHECK_RC(redislock_lock_release(second), REDISLOCK_OK);
    redislock_lock_free(second);
    redislock_request_free(a);
    redislock_request_free(b);
    redislock_client_free(client);
}

void test_leader_bad_input_and_null(void) {
    char name[128];
    char long_id[300];
    redislock_client *client = h_client();
    redislock_request *req = NULL;
    redislock_lock *lock = NULL;
    redislock_leader_info *info = NULL;
    uint64_t epoch = 0;
    h_name(name, sizeof name, "leader-bad");
    memset(long_id, 'x', sizeof long_id - 1);
    long_id[sizeof long_id - 1] = '\0';

    /* Identities: empty, too long, not UTF-8, a control character. */
    req = leader_request(client, name, "");
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "identity is empty") != NULL);
    redislock_request_free(req);
    req = leader_request(client, name, long_id);
    CHECK_RC(redislock_request_acquire(req, 100, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "more than 256") != NULL);
    redislock_request_free(req);
    req = leader_request(client, name, "\xff\xfe");
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "not UTF-8") != NULL);
    redislock_request_free(req);
    req = leader_request(client, name, "a\tb");
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_INVALID_ARGUMENT);
    redislock_request_free(req);

    /* Leases; setters that do not apply. */
    req = leader_request(client, name, "node-a");
    CHECK_RC(redislock_request_set_lease_ms(req, 0), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_lease_ms(req, UINT64_MAX), REDISLOCK_OK);
    CHECK_RC(redislock_request_try_acquire(req, &lock), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_fencing(req, false), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_kind(req, REDISLOCK_KIND_READ), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_owner_token(req, ID("0123456789abcdef0123")),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_request_set_permits(req, 2), REDISLOCK_INVALID_ARGUMENT);
    redislock_request_free(req);
    /* Nothing was held. */
    CHECK_RC(redislock_client_leader(client, NAME(name), &info), REDISLOCK_OK);
    CHECK(info == NULL);
    CHECK(lock == NULL);

    /* An epoch is a leadership's only; a plain lock is not an election. */
    CHECK_RC(h_try_acquire_with(client, NAME(name), 20000, false, true, &lock), REDISLOCK_OK);
    CHECK_RC(redislock_lock_epoch(lock, &epoch), REDISLOCK_INVALID_ARGUMENT);
    CHECK_RC(redislock_client_leader(client, NAME(name), &info), REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "not by the leader") != NULL);
    CHECK_RC(redislock_lock_release(lock), REDISLOCK_OK);
    redislock_lock_free(lock);
    CHECK_RC(redislock_client_wait_leader_change(client, NAME(name), 0, UINT64_MAX, &info),
             REDISLOCK_INVALID_ARGUMENT);

    /* NULL everywhere. */
    CHECK_RC(redislock_request_new_leader(NULL, NAME(name), ID("a"), &req),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_leader(client, NULL, 3, ID("a"), &req),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_leader(client, NAME(name), NULL, 1, &req),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_request_new_leader(client, NAME(name), ID("a"), NULL),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_lock_epoch(NULL, &epoch), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_leader(NULL, NAME(name), &info), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_leader(client, NAME(name), NULL), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_wait_leader_change(NULL, NAME(name), 0, 10, &info),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_wait_leader_change(client, NULL, 1, 0, 10, &info),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_client_wait_leader_change(client, NAME(name), 0, 10, NULL),
             REDISLOCK_NULL_PARAMETER);
    CHECK(redislock_leader_info_identity(NULL, NULL, 0) == 0);
    CHECK(redislock_leader_info_epoch(NULL) == 0);
    CHECK(redislock_leader_info_remaining_ms(NULL) == 0);
    redislock_leader_info_free(NULL);
    redislock_client_free(client);
}
