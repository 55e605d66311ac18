/*
 * The oversell demo in C: why a shop needs a lock around "read the stock, check it, write it
 * back". The same race as the Rust demo (examples/oversell.rs).
 *
 * A stock of 100 units is put in Redis. 32 threads then buy units as fast as they can, each
 * purchase being the classic non-atomic read-modify-write: GET stock; if it is above zero,
 * pause 200 us (standing in for real work, such as charging a card) and SET stock to one less.
 *
 * - Without a lock, threads read the same stock and overwrite each other's updates: far more
 *   than 100 units are sold.
 * - With redislock around each purchase (one client shared by all threads; a waiter is woken by
 *   the holder's release), exactly 100 units are sold and the stock ends at 0.
 *
 * Build and run, from the repository root:
 *
 *   cargo build --release
 *   gcc -std=c99 -O2 -Wall -Wextra -Iinclude examples/c/oversell.c \
 *       -Ltarget/release -lredislock -lpthread -o oversell
 *   LD_LIBRARY_PATH=target/release ./oversell
 *
 * (or link with -Wl,-rpath,$PWD/target/release instead of setting LD_LIBRARY_PATH).
 *
 * The server is $REDIS_URL (redis://[:password@]host:port/db), else redis://127.0.0.1:6379/.
 * The demo only touches keys under its own "redislock-demo:<pid>-<random>:" prefix and deletes
 * them by name at the end: it never lists or flushes keys. It sends its own GET and SET over a
 * tiny RESP client below (no password support there; use a server without one).
 * Exit code: 0 when the locked run sold exactly the stock, 1 when it did not or failed, 2 when
 * no Redis server answered.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "redislock.h"

enum { STOCK = 100, THREADS = 32 };
static const long RACE_WINDOW_NS = 200000; /* 200 us */
static const uint64_t LOCK_WAIT_MS = 10000;

/* ---- a tiny blocking RESP client: one connection per thread, GET/SET/DEL of short values ---- */

typedef struct {
    int fd;
} conn;

static int conn_open(conn *c, const char *url) {
    char host[256] = "127.0.0.1", port[16] = "6379";
    const char *p = strstr(url, "://"), *colon, *end;
    struct addrinfo hints, *res = NULL, *ai;
    struct timeval tv = {2, 0};
    int one = 1;

    c->fd = -1;
    p = p != NULL ? p + 3 : url;
    if (strchr(p, '@') != NULL) p = strchr(p, '@') + 1;
    colon = strchr(p, ':');
    end = p + strcspn(p, ":/");
    if ((size_t)(end - p) < sizeof host && end > p) {
        memcpy(host, p, (size_t)(end - p));
        host[end - p] = '\0';
    }
    if (colon != NULL && colon == end) {
        size_t n = strcspn(colon + 1, "/");
        if (n > 0 && n < sizeof port) {
            memcpy(port, colon + 1, n);
            port[n] = '\0';
        }
    }
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
    for (ai = res; ai != NULL && c->fd < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) continue;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            c->fd = fd;
        } else {
            close(fd);
        }
    }
    freeaddrinfo(res);
    return c->fd >= 0 ? 0 : -1;
}

static void copy_text(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Sends a command of NUL-terminated arguments and reads a one-line or short bulk reply into
 * reply ("" for nil). Returns 0, or -1 on an error or an error reply. */
static int conn_cmd(conn *c, char *reply, size_t cap, int argc, const char *const *argv) {
    char out[1024], in[1024];
    size_t len, got = 0;
    int i;
    char *line_end;

    len = (size_t)snprintf(out, sizeof out, "*%d\r\n", argc);
    for (i = 0; i < argc && len < sizeof out; i++) {
        len += (size_t)snprintf(out + len, sizeof out - len, "$%zu\r\n%s\r\n", strlen(argv[i]),
                                argv[i]);
    }
    if (len >= sizeof out || write(c->fd, out, len) != (ssize_t)len) return -1;
    /* Read until the reply is complete: one line, or a bulk header line plus its data line. */
    for (;;) {
        ssize_t n = read(c->fd, in + got, sizeof in - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
        in[got] = '\0';
        line_end = strstr(in, "\r\n");
        if (line_end == NULL) continue;
        if (in[0] != '$' || atol(in + 1) < 0) break;
        if (strstr(line_end + 2, "\r\n") != NULL) break;
    }
    *line_end = '\0';
    if (in[0] == '-') return -1;
    if (in[0] == '$') {
        if (atol(in + 1) < 0) {
            reply[0] = '\0';
        } else {
            char *data = line_end + 2;
            data[strcspn(data, "\r")] = '\0';
            copy_text(reply, cap, data);
        }
    } else {
        copy_text(reply, cap, in + 1);
    }
    return 0;
}

/* ---- the shop --------------------------------------------------------------------------------- */

struct race {
    const char *url;
    const char *stock_key;
    const char *lock_name;           /* NULL: no lock */
    const redislock_client *client;  /* with lock_name */
    pthread_mutex_t mutex;
    long sold, attempts, errors;
};

/* One purchase, a non-atomic read-modify-write. 1: bought, 0: sold out, -1: error. */
static int buy(conn *c, const char *stock_key) {
    char value[64];
    const char *get[2], *set[3];
    struct timespec pause = {0, 0};
    long stock;
    get[0] = "GET";
    get[1] = stock_key;
    if (conn_cmd(c, value, sizeof value, 2, get) != 0) return -1;
    stock = atol(value);
    if (stock <= 0) return 0;
    pause.tv_nsec = RACE_WINDOW_NS;
    nanosleep(&pause, NULL);
    snprintf(value, sizeof value, "%ld", stock - 1);
    set[0] = "SET";
    set[1] = stock_key;
    set[2] = value;
    return conn_cmd(c, value, sizeof value, 3, set) == 0 ? 1 : -1;
}

static void *buyer(void *arg) {
    struct race *race = arg;
    conn c;
    long sold = 0, attempts = 0, errors = 0;
    int bought;

    if (conn_open(&c, race->url) != 0) {
        errors++;
    } else {
        do {
            attempts++;
            if (race->lock_name == NULL) {
                bought = buy(&c, race->stock_key);
            } else {
                redislock_lock *lock = NULL;
                redislock_result rc = redislock_lock_acquire(
                    race->client, (const uint8_t *)race->lock_name, strlen(race->lock_name),
                    NULL, LOCK_WAIT_MS, &lock);
                if (rc != REDISLOCK_OK) {
                    char why[256];
                    redislock_last_error_message(why, sizeof why);
                    fprintf(stderr, "acquire failed: %s\n", why);
                    bought = -1;
                } else {
                    bought = buy(&c, race->stock_key);
                    /* NOT_HELD here would mean the lock expired during the purchase. */
                    if (redislock_lock_release(lock) != REDISLOCK_OK) bought = -1;
                    redislock_lock_free(lock);
                }
            }
            if (bought == 1) sold++;
            if (bought < 0) errors++;
        } while (bought == 1);
        close(c.fd);
    }
    pthread_mutex_lock(&race->mutex);
    race->sold += sold;
    race->attempts += attempts;
    race->errors += errors;
    pthread_mutex_unlock(&race->mutex);
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs one race; prints a table row; returns the final stock (or -1000 on error). */
static long run_race(struct race *race, conn *data) {
    pthread_t threads[THREADS];
    char value[64], stock_text[16];
    const char *set[3], *get[2];
    double started, secs;
    long stock;
    int i, started_threads = 0;

    snprintf(stock_text, sizeof stock_text, "%d", STOCK);
    set[0] = "SET";
    set[1] = race->stock_key;
    set[2] = stock_text;
    if (conn_cmd(data, value, sizeof value, 3, set) != 0) return -1000;
    race->sold = race->attempts = race->errors = 0;
    started = now_s();
    for (i = 0; i < THREADS; i++) {
        if (pthread_create(&threads[i], NULL, buyer, race) == 0) started_threads++;
    }
    for (i = 0; i < started_threads; i++) pthread_join(threads[i], NULL);
    secs = now_s() - started;
    get[0] = "GET";
    get[1] = race->stock_key;
    if (conn_cmd(data, value, sizeof value, 2, get) != 0) return -1000;
    stock = atol(value);
    if (race->lock_name != NULL) {
        printf("%-12s %7d %6ld %12ld %9ld %6.0f ms %20.0f\n", "redislock", THREADS, race->sold,
               stock, race->sold - STOCK, secs * 1e3, (double)race->attempts / secs);
    } else {
        printf("%-12s %7d %6ld %12ld %9ld %6.0f ms %20s\n", "no lock", THREADS, race->sold, stock,
               race->sold - STOCK, secs * 1e3, "-");
    }
    if (race->errors > 0 || started_threads < THREADS) {
        fprintf(stderr, "%ld buyer errors\n", race->errors);
        return -1000;
    }
    return stock;
}

int main(void) {
    const char *url = getenv("REDIS_URL");
    char prefix[96], stock_key[128], lock_name[128], keys[5][160], reply[64];
    redislock_config *config = NULL;
    redislock_client *client = NULL;
    struct race race;
    conn data;
    unsigned random_part = 0;
    long unlocked_stock, locked_stock, unlocked_sold, lost;
    FILE *urandom;
    int ok, i;

    if (url == NULL || url[0] == '\0') url = "redis://127.0.0.1:6379/";
    if (conn_open(&data, url) != 0) {
        fprintf(stderr, "No Redis server answers at %s. Start one (apt-get install redis-server) "
                        "or point REDIS_URL at one.\n", url);
        return 2;
    }
    urandom = fopen("/dev/urandom", "rb");
    if (urandom == NULL || fread(&random_part, sizeof random_part, 1, urandom) != 1) {
        random_part = (unsigned)time(NULL);
    }
    if (urandom != NULL) fclose(urandom);
    snprintf(prefix, sizeof prefix, "redislock-demo:%ld-%08x:", (long)getpid(), random_part);
    snprintf(stock_key, sizeof stock_key, "%sstock", prefix);
    snprintf(lock_name, sizeof lock_name, "%slock", prefix);

    /* One client for all threads, with a connection per thread. */
    if (redislock_config_new(url, &config) != REDISLOCK_OK ||
        redislock_config_set_pool_size(config, THREADS) != REDISLOCK_OK ||
        redislock_client_from_config(config, &client) != REDISLOCK_OK) {
        char why[256];
        redislock_last_error_message(why, sizeof why);
        fprintf(stderr, "error: %s\n", why);
        redislock_config_free(config);
        close(data.fd);
        return 1;
    }
    redislock_config_free(config);

    printf("%d threads buy from a stock of %d (keys %s*), redislock %s\n\n", THREADS, STOCK,
           prefix, redislock_version());
    printf("run          threads   sold  final stock  oversold     time  lock acquisitions/s\n");
    memset(&race, 0, sizeof race);
    pthread_mutex_init(&race.mutex, NULL);
    race.url = url;
    race.stock_key = stock_key;
    race.client = client;

    race.lock_name = NULL;
    unlocked_stock = run_race(&race, &data);
    unlocked_sold = race.sold;
    race.lock_name = lock_name;
    locked_stock = run_race(&race, &data);
    ok = unlocked_stock != -1000 && locked_stock == 0 && race.sold == STOCK;

    if (unlocked_stock != -1000) {
        lost = unlocked_sold - (STOCK - unlocked_stock);
        printf("\nWithout a lock: %ld stock updates were overwritten by concurrent buyers.\n", lost);
    }
    if (ok) {
        printf("With redislock: exactly %d sold, stock 0. Correct.\n", STOCK);
    } else {
        fprintf(stderr, "error: the locked run did not sell exactly the stock\n");
    }

    /* Delete what the demo created, by exact name: the stock, the lock key and the lock's
     * companion keys (fencing counter, waiter queue and entries). */
    snprintf(keys[0], sizeof keys[0], "%s", stock_key);
    snprintf(keys[1], sizeof keys[1], "%s", lock_name);
    snprintf(keys[2], sizeof keys[2], "{%s}:fence", lock_name);
    snprintf(keys[3], sizeof keys[3], "{%s}:q", lock_name);
    snprintf(keys[4], sizeof keys[4], "{%s}:w", lock_name);
    for (i = 0; i < 5; i++) {
        const char *del[2];
        del[0] = "DEL";
        del[1] = keys[i];
        conn_cmd(&data, reply, sizeof reply, 2, del);
    }
    close(data.fd);
    redislock_client_free(client);
    pthread_mutex_destroy(&race.mutex);
    return ok ? 0 : 1;
}
