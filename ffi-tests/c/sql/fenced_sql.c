/* Fenced writes to a SQL row from C with libpq (docs/guarantees.md, "Fenced writes"): the row
 * keeps the fence of its last write, and a write carrying an older fencing token affects no
 * row (PQcmdTuples says "0"). Holder A pauses past its lease, B takes the lock and writes, A's
 * late UPDATE and INSERT ... ON CONFLICT are refused, and B writing again with its own token is
 * applied.
 *
 * A program of its own, linked with -lpq (so it sits apart from the C files of ffi-tests/c, which
 * scripts/ci/c-tests.sh builds into one program): tests/ffi_c.rs builds it and runs it through
 * ffi-tests/c/run.sh (plain, ASan + UBSan, valgrind) with REDISLOCK_TEST_URL (Redis) and
 * REDISLOCK_TEST_PG_URL (PostgreSQL, postgres://user@host:port/db). */

#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "redislock.h"

#define LEASE_MS 300
#define WAIT_MS 10000
#define ACCOUNT "7"

static int checks, failures;

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        checks++;                                                                              \
        if (!(cond)) {                                                                         \
            failures++;                                                                        \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);           \
        }                                                                                      \
    } while (0)

#define CHECK_RC(expr, want)                                                                   \
    do {                                                                                       \
        redislock_result rc_ = (expr);                                                         \
        checks++;                                                                              \
        if (rc_ != (want)) {                                                                   \
            char msg_[512];                                                                    \
            redislock_last_error_message(msg_, sizeof msg_);                                   \
            failures++;                                                                        \
            fprintf(stderr, "%s:%d: %s returned %d, not %d: %s\n", __FILE__, __LINE__, #expr,  \
                    (int)rc_, (int)(want), msg_);                                              \
        }                                                                                      \
    } while (0)

static char table[64];

static void sleep_ms(long ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Runs a statement without parameters; records a failure if it fails. */
static void exec(PGconn *db, const char *sql) {
    PGresult *res = PQexec(db, sql);
    checks++;
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        failures++;
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(db));
    }
    PQclear(res);
}

/* Runs `sql` with three text parameters; returns the rows it affected, -1 on an error. */
static int affected(PGconn *db, const char *sql, const char *p1, const char *p2, const char *p3) {
    const char *params[3] = {p1, p2, p3};
    PGresult *res = PQexecParams(db, sql, 3, NULL, params, NULL, NULL, 0);
    int rows = -1;
    if (PQresultStatus(res) == PGRES_COMMAND_OK) {
        rows = atoi(PQcmdTuples(res));
    } else {
        fprintf(stderr, "%s: %s", sql, PQerrorMessage(db));
    }
    PQclear(res);
    return rows;
}

/* The conditional update: 1 row when written, 0 when the row's fence is newer (or no row). */
static int fenced_update(PGconn *db, const char *balance, uint64_t token) {
    char sql[256], tok[24];
    snprintf(sql, sizeof sql,
             "UPDATE %s SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2", table);
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    return affected(db, sql, balance, tok, ACCOUNT);
}

/* The same for a row that may not exist yet: 0 rows only when the row's fence is newer. */
static int fenced_upsert(PGconn *db, const char *balance, uint64_t token) {
    char sql[512], tok[24];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (id, balance, fence) VALUES ($3, $1, $2) ON CONFLICT (id) "
             "DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence "
             "WHERE %s.fence <= EXCLUDED.fence",
             table, table);
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    return affected(db, sql, balance, tok, ACCOUNT);
}

/* Whether the row holds `balance` and `token`. */
static bool row_is(PGconn *db, const char *balance, uint64_t token) {
    char sql[128], tok[24];
    PGresult *res;
    bool same = false;
    snprintf(sql, sizeof sql, "SELECT balance, fence FROM %s WHERE id = " ACCOUNT, table);
    snprintf(tok, sizeof tok, "%" PRIu64, token);
    res = PQexec(db, sql);
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
        same = strcmp(PQgetvalue(res, 0, 0), balance) == 0 && strcmp(PQgetvalue(res, 0, 1), tok) == 0;
        if (!same)
            fprintf(stderr, "the row holds (%s, %s), not (%s, %s)\n", PQgetvalue(res, 0, 0),
                    PQgetvalue(res, 0, 1), balance, tok);
    } else {
        fprintf(stderr, "%s: %s (%d rows)\n", sql, PQerrorMessage(db), PQntuples(res));
    }
    PQclear(res);
    return same;
}

static redislock_lock *acquire(redislock_request *req) {
    redislock_lock *lock = NULL;
    CHECK_RC(redislock_request_acquire(req, WAIT_MS, &lock), REDISLOCK_OK);
    return lock;
}

static void story(PGconn *db, redislock_client *client) {
    char name[64], sql[256];
    redislock_request *req = NULL;
    redislock_lock *a, *b;
    uint64_t token_a = 0, token_b = 0;

    snprintf(name, sizeof name, "ctest:%ld:account:" ACCOUNT, (long)getpid());
    CHECK_RC(redislock_request_new(client, (const uint8_t *)name, strlen(name), &req), REDISLOCK_OK);
    if (req == NULL) return;
    CHECK_RC(redislock_request_set_lease_ms(req, LEASE_MS), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_auto_renew(req, false), REDISLOCK_OK);
    CHECK_RC(redislock_request_set_fencing(req, true), REDISLOCK_OK);

    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (id bigint PRIMARY KEY, balance bigint NOT NULL, "
             "fence bigint NOT NULL)",
             table);
    exec(db, sql);

    a = acquire(req);
    if (a != NULL) CHECK_RC(redislock_lock_fencing_token(a, &token_a), REDISLOCK_OK);
    sleep_ms(LEASE_MS + 200); /* A pauses past its lease */
    b = acquire(req);
    if (b != NULL) CHECK_RC(redislock_lock_fencing_token(b, &token_b), REDISLOCK_OK);
    CHECK(token_a > 0 && token_b > token_a);

    /* B creates the row; A's late UPDATE and upsert affect no row and change nothing. */
    CHECK(fenced_upsert(db, "70", token_b) == 1);
    CHECK(fenced_update(db, "130", token_a) == 0);
    CHECK(fenced_upsert(db, "130", token_a) == 0);
    CHECK(row_is(db, "70", token_b));
    /* The same holder writing again (an equal token) is applied. */
    CHECK(fenced_update(db, "60", token_b) == 1);
    CHECK(row_is(db, "60", token_b));

    if (b != NULL) {
        CHECK_RC(redislock_lock_release(b), REDISLOCK_OK);
        redislock_lock_free(b);
    }
    if (a != NULL) {
        /* Its lease ran out long ago. */
        CHECK_RC(redislock_lock_release(a), REDISLOCK_NOT_HELD);
        redislock_lock_free(a);
    }
    redislock_request_free(req);
    snprintf(sql, sizeof sql, "DROP TABLE %s", table);
    exec(db, sql);
}

int main(void) {
    const char *redis_url = getenv("REDISLOCK_TEST_URL");
    const char *pg_url = getenv("REDISLOCK_TEST_PG_URL");
    redislock_client *client = NULL;
    PGconn *db;

    if (redis_url == NULL || pg_url == NULL || *pg_url == '\0') {
        fprintf(stderr, "fenced_sql: REDISLOCK_TEST_URL (Redis) and REDISLOCK_TEST_PG_URL "
                        "(PostgreSQL) must be set\n");
        return 2;
    }
    snprintf(table, sizeof table, "accounts_c_%ld", (long)getpid());
    db = PQconnectdb(pg_url);
    if (PQstatus(db) != CONNECTION_OK) {
        fprintf(stderr, "fenced_sql: cannot connect to %s: %s", pg_url, PQerrorMessage(db));
        PQfinish(db);
        return 1;
    }
    CHECK_RC(redislock_client_new(redis_url, &client), REDISLOCK_OK);
    if (client != NULL) {
        story(db, client);
        redislock_client_free(client);
    }
    PQfinish(db);
    printf("fenced_sql: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
