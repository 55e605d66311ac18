/* Fenced writes from C: a holder paused past its lease writes after the next holder did and is
 * refused with REDISLOCK_STALE, leaving the next holder's value; the caller's own script run as
 * a fenced write (redislock_fenced_eval): applied with its reply, refused when stale, and its
 * misuse. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>

#include "harness.h"

/* The value of a key as text ("" if it does not exist); returns 1 if it exists. */
static int get_key(const char *key, char *out, size_t cap) {
    resp_conn c;
    resp_reply r;
    const char *argv[2];
    int found = 0;
    out[0] = '\0';
    if (h_resp(&c) != 0) return 0;
    argv[0] = "GET";
    argv[1] = key;
    if (resp_command_str(&c, &r, 2, argv) != 0 || r.type != '$') {
        h_fail(__FILE__, __LINE__, "GET %s failed", key);
    } else if (!r.nil) {
        snprintf(out, cap, "%s", r.str);
        found = 1;
    }
    resp_close(&c);
    return found;
}

/* Holder A takes the fenced lock with a short lease and no renewal, and is paused past it (a
 * GC pause, a stopped VM); holder B takes the lock and writes; A wakes up and writes with its
 * token: refused, nothing written, the value is B's. */
void test_fenced_stale_holder(void) {
    redislock_client *client = h_client();
    redislock_fenced *res = NULL, *count = NULL;
    redislock_lock *a = NULL, *b = NULL;
    char name[128], key[128], count_key[128], value[64];
    uint64_t token_a = 0, token_b = 0;
    int64_t n = 0;

    h_name(name, sizeof name, "fenced-story");
    h_name(key, sizeof key, "fenced-story-res");
    h_name(count_key, sizeof count_key, "fenced-story-count");
    CHECK_RC(redislock_fenced_open(client, NAME(key), &res), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_open(client, NAME(count_key), &count), REDISLOCK_OK);

    CHECK_RC(h_try_acquire_with(client, NAME(name), 200, false, true, &a), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(a, &token_a), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_set(res, token_a, NAME("from-a")), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_incr_by(count, token_a, 1, &n), REDISLOCK_OK);
    CHECK(n == 1);

    /* A is paused past its lease: the lock frees itself and B takes it. */
    h_sleep_ms(500);
    CHECK(!redislock_lock_is_held(a));
    CHECK_RC(h_try_acquire_with(client, NAME(name), 10000, false, true, &b), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(b, &token_b), REDISLOCK_OK);
    CHECK(token_b > token_a);
    CHECK_RC(redislock_fenced_set(res, token_b, NAME("from-b")), REDISLOCK_OK);
    CHECK_RC(redislock_fenced_incr_by(count, token_b, 10, &n), REDISLOCK_OK);
    CHECK(n == 11);

    /* A wakes up and writes as if it still held the lock. */
    CHECK_RC(redislock_fenced_set(res, token_a, NAME("late-a")), REDISLOCK_STALE);
    CHECK(strstr(h_last_error(), "stale write") != NULL);
    n = -1;
    CHECK_RC(redislock_fenced_incr_by(count, token_a, 100, &n), REDISLOCK_STALE);
    CHECK(n == -1);
    CHECK(get_key(key, value, sizeof value) == 1);
    CHECK(strcmp(value, "from-b") == 0);
    CHECK(get_key(count_key, value, sizeof value) == 1);
    CHECK(strcmp(value, "11") == 0);
    /* The resource's fence is B's token; a resource never written has none (0). */
    CHECK_RC(redislock_fenced_current_fence(res, &token_a), REDISLOCK_OK);
    CHECK(token_a == token_b);
    redislock_fenced_free(count);
    h_name(count_key, sizeof count_key, "fenced-story-unwritten");
    CHECK_RC(redislock_fenced_open(client, NAME(count_key), &count), REDISLOCK_OK);
    token_a = 99;
    CHECK_RC(redislock_fenced_current_fence(count, &token_a), REDISLOCK_OK);
    CHECK(token_a == 0);
    CHECK_RC(redislock_fenced_current_fence(NULL, &token_a), REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_current_fence(count, NULL), REDISLOCK_NULL_PARAMETER);
    /* Its lock is gone too. */
    CHECK_RC(redislock_lock_release(a), REDISLOCK_NOT_HELD);

    CHECK_RC(redislock_lock_release(b), REDISLOCK_OK);
    redislock_lock_free(a);
    redislock_lock_free(b);
    redislock_fenced_free(res);
    redislock_fenced_free(count);
    redislock_client_free(client);
}

/* A script that appends ARGV[1] to the resource and writes ARGV[2] to its second key, and
 * replies the resource's new length. */
static const char *const APPEND_SCRIPT =
    "redis.call('SET', KEYS[2], ARGV[2])\n"
    "return redis.call('APPEND', KEYS[1], ARGV[1])";

void test_fenced_eval(void) {
    redislock_client *client = h_client();
    redislock_fenced *res = NULL;
    redislock_lock *a = NULL, *b = NULL;
    char name[128], key[128], side[160], value[64], reply[32];
    const uint8_t *keys[1], *args[2];
    size_t keys_len[1], args_len[2], reply_len = 0;
    uint64_t token_a = 0, token_b = 0;

    h_name(name, sizeof name, "fenced-eval");
    h_name(key, sizeof key, "fenced-eval-res");
    /* In the resource's Cluster slot: its hash tag. */
    snprintf(side, sizeof side, "{%s}:side", key);
    CHECK_RC(redislock_fenced_open(client, NAME(key), &res), REDISLOCK_OK);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 200, false, true, &a), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(a, &token_a), REDISLOCK_OK);
    keys[0] = (const uint8_t *)side;
    keys_len[0] = strlen(side);
    args[0] = (const uint8_t *)"ab";
    args_len[0] = 2;
    args[1] = (const uint8_t *)"side-a";
    args_len[1] = 6;

    /* Applied: the script ran, its integer reply in decimal. */
    CHECK_RC(redislock_fenced_eval(res, token_a, APPEND_SCRIPT, keys, keys_len, 1, args,
                                   args_len, 2, reply, sizeof reply, &reply_len),
             REDISLOCK_OK);
    CHECK(reply_len == 1 && strcmp(reply, "2") == 0);
    CHECK(get_key(key, value, sizeof value) == 1 && strcmp(value, "ab") == 0);
    CHECK(get_key(side, value, sizeof value) == 1 && strcmp(value, "side-a") == 0);

    /* A is paused past its lease; B takes the lock and runs the script. */
    h_sleep_ms(500);
    CHECK_RC(h_try_acquire_with(client, NAME(name), 10000, false, true, &b), REDISLOCK_OK);
    CHECK_RC(redislock_lock_fencing_token(b, &token_b), REDISLOCK_OK);
    CHECK(token_b > token_a);
    args[1] = (const uint8_t *)"side-b";
    CHECK_RC(redislock_fenced_eval(res, token_b, APPEND_SCRIPT, keys, keys_len, 1, args,
                                   args_len, 2, reply, sizeof reply, &reply_len),
             REDISLOCK_OK);
    CHECK(strcmp(reply, "4") == 0);

    /* Stale: A's script does not run at all, its out-parameter is left alone. */
    args[1] = (const uint8_t *)"side-x";
    reply_len = 99;
    strcpy(reply, "untouched");
    CHECK_RC(redislock_fenced_eval(res, token_a, APPEND_SCRIPT, keys, keys_len, 1, args,
                                   args_len, 2, reply, sizeof reply, &reply_len),
             REDISLOCK_STALE);
    CHECK(strstr(h_last_error(), "stale write") != NULL);
    CHECK(reply_len == 99 && strcmp(reply, "untouched") == 0);
    CHECK(get_key(key, value, sizeof value) == 1 && strcmp(value, "abab") == 0);
    CHECK(get_key(side, value, sizeof value) == 1 && strcmp(value, "side-b") == 0);

    /* A string reply, cut to the buffer: the whole length tells. No keys or args beyond the
     * resource's own: NULL arrays with a count of 0. */
    CHECK_RC(redislock_fenced_eval(res, token_b, "return redis.call('GET', KEYS[1])", NULL,
                                   NULL, 0, NULL, NULL, 0, reply, 3, &reply_len),
             REDISLOCK_OK);
    CHECK(reply_len == 4 && strcmp(reply, "ab") == 0);
    /* No buffer: only the length. A nil reply: nothing. */
    CHECK_RC(redislock_fenced_eval(res, token_b, "return redis.call('GET', KEYS[1])", NULL,
                                   NULL, 0, NULL, NULL, 0, NULL, 0, &reply_len),
             REDISLOCK_OK);
    CHECK(reply_len == 4);
    CHECK_RC(redislock_fenced_eval(res, token_b, "return nil", NULL, NULL, 0, NULL, NULL, 0,
                                   reply, sizeof reply, &reply_len),
             REDISLOCK_OK);
    CHECK(reply_len == 0 && reply[0] == '\0');
    /* A table has no byte form: the script ran all the same. */
    CHECK_RC(redislock_fenced_eval(res, token_b, "redis.call('APPEND', KEYS[1], 'c') return {1, 2}",
                                   NULL, NULL, 0, NULL, NULL, 0, reply, sizeof reply,
                                   &reply_len),
             REDISLOCK_INVALID_ARGUMENT);
    CHECK(strstr(h_last_error(), "the script ran") != NULL);
    CHECK(get_key(key, value, sizeof value) == 1 && strcmp(value, "ababc") == 0);
    /* A script that fails: a Redis error. */
    CHECK_RC(redislock_fenced_eval(res, token_b, "return redis.call('NOSUCHCOMMAND')", NULL,
                                   NULL, 0, NULL, NULL, 0, reply, sizeof reply, &reply_len),
             REDISLOCK_REDIS_ERROR);

    /* Misuse. */
    CHECK_RC(redislock_fenced_eval(NULL, token_b, "return 1", NULL, NULL, 0, NULL, NULL, 0,
                                   reply, sizeof reply, &reply_len),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_eval(res, token_b, NULL, NULL, NULL, 0, NULL, NULL, 0, reply,
                                   sizeof reply, &reply_len),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_eval(res, token_b, "return 1", NULL, NULL, 0, NULL, NULL, 0,
                                   reply, sizeof reply, NULL),
             REDISLOCK_NULL_PARAMETER);
    CHECK_RC(redislock_fenced_eval(res, token_b, "return 1", NULL, keys_len, 1, NULL, NULL, 0,
                                   reply, sizeof reply, &reply_len),
             REDISLOCK_NULL_PARAMETER);
    CHECK(strstr(h_last_error(), "keys") != NULL);
    CHECK_RC(redislock_fenced_eval(res, token_b, "return 1", NULL, NULL, 0, args, NULL, 1,
                                   reply, sizeof reply, &reply_len),
             REDISLOCK_NULL_PARAMETER);
    CHECK(strstr(h_last_error(), "args_len") != NULL);
    CHECK_RC(redislock_fenced_eval(res, token_b, "\xff", NULL, NULL, 0, NULL, NULL, 0, reply,
                                   sizeof reply, &reply_len),
             REDISLOCK_INVALID_ARGUMENT);
    /* None of these ran: the value is as it was. */
    CHECK(get_key(key, value, sizeof value) == 1 && strcmp(value, "ababc") == 0);

    CHECK_RC(redislock_lock_release(b), REDISLOCK_OK);
    redislock_lock_free(a);
    redislock_lock_free(b);
    redislock_fenced_free(res);
    redislock_client_free(client);
}
