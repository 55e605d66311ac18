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
 * The server is $REDIS_URL, else redis://127.0.0.1:6379/. REDIS_URL is a plain URL,
 * redis://[[user]:password@]host:port/db, a Sentinel URL,
 * redis-sentinel://[[user]:password@]host1:port1,host2:port2[/db]#master, or a Cluster URL,
 * redis-cluster://[[user]:password@]host1:port1,host2:port2: the locks get the URL as it is
 * (and follow failovers), and the stock is kept on the master the sentinels name at the start,
 * or on the cluster's master for the demo's keys. With a Redlock URL,
 * redlock://[[user]:password@]host1:port1,host2:port2,host3:port3[/db], the locks live on a
 * majority of the masters and the stock on the first one; the marks waiters leave on the
 * masters expire within about two seconds. The demo sends its own GET and SET over a tiny RESP
 * client below, which has no TLS: rediss://, rediss-sentinel://, rediss-cluster:// and
 * rediss-redlock:// URLs do not work with this demo.
 *
 * The demo only touches keys under its own "redislock-demo:{<pid>-<random>}:" prefix (its hash
 * tag keeps them in one cluster slot) and deletes them by name at the end: it never lists or
 * flushes keys.
 * Exit code: 0 when the locked run sold exactly the stock, 1 when it did not or failed, 2 when
 * no Redis server answered.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
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

/* ---- a tiny blocking RESP client: one connection per thread, short values only ------------ */

/* A data server: its address, and what to send after connecting. */
typedef struct {
    char host[256], port[16];
    char user[128], pass[256]; /* AUTH [user] pass, when pass is not empty */
    char db[16];               /* SELECT db, when not empty or "0" */
} server;

typedef struct {
    int fd;
} conn;

static void copy_text(char *dst, size_t cap, const char *src) {
    size_t n = strlen(src);
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* How many CRLF-ended lines a reply takes, told by its first line: a bulk string 2, an array
 * of n bulk strings 1 + 2n, anything else 1. */
static int reply_lines(const char *in) {
    long n = atol(in + 1);
    if (in[0] == '$' && n >= 0) return 2;
    if (in[0] == '*' && n > 0) return 1 + 2 * (int)n;
    return 1;
}

static int count_lines(const char *in) {
    int n = 0;
    for (; (in = strstr(in, "\r\n")) != NULL; in += 2) n++;
    return n;
}

/* Sends a command of NUL-terminated arguments and reads a short reply into reply: a simple or
 * bulk string ("" for nil), or an array of bulk strings joined by spaces. Returns 0, or -1 on
 * an I/O error or an error reply (whose text is then in reply). */
static int conn_cmd(conn *c, char *reply, size_t cap, int argc, const char *const *argv) {
    char out[1024], in[1024], *line, *next;
    size_t len, got = 0, used = 0;
    int i, lines = 0;

    len = (size_t)snprintf(out, sizeof out, "*%d\r\n", argc);
    for (i = 0; i < argc && len < sizeof out; i++) {
        len += (size_t)snprintf(out + len, sizeof out - len, "$%zu\r\n%s\r\n", strlen(argv[i]),
                                argv[i]);
    }
    if (len >= sizeof out || write(c->fd, out, len) != (ssize_t)len) return -1;
    reply[0] = '\0'; /* only now: an argument may live in reply */
    do {
        ssize_t n = read(c->fd, in + got, sizeof in - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += (size_t)n;
        in[got] = '\0';
        lines = count_lines(in);
    } while (lines == 0 || lines < reply_lines(in));
    *strstr(in, "\r\n") = '\0';
    if (in[0] != '$' && in[0] != '*') {
        copy_text(reply, cap, in + 1);
        return in[0] == '-' ? -1 : 0;
    }
    /* The data of the bulk string, or of each one in the array (after its "$len" line). */
    lines = reply_lines(in);
    line = in + strlen(in) + 2;
    for (i = 1; i < lines; i++, line = next + 2) {
        next = strstr(line, "\r\n");
        *next = '\0';
        if (in[0] == '*' && i % 2 == 1) continue;
        if (used > 0 && used + 1 < cap) reply[used++] = ' ';
        copy_text(reply + used, cap - used, line);
        used += strlen(reply + used);
    }
    return 0;
}

/* Connects to srv with 2 s timeouts, then sends AUTH and SELECT if srv has them. */
static int conn_open(conn *c, const server *srv) {
    struct addrinfo hints, *res = NULL, *ai;
    struct timeval tv = {2, 0};
    char reply[256];
    const char *auth[3], *select[2];
    int one = 1;

    c->fd = -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(srv->host, srv->port, &hints, &res) != 0) return -1;
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
    if (c->fd < 0) return -1;
    auth[0] = "AUTH";
    auth[1] = srv->user[0] != '\0' ? srv->user : srv->pass;
    auth[2] = srv->pass;
    select[0] = "SELECT";
    select[1] = srv->db;
    if ((srv->pass[0] != '\0' &&
         conn_cmd(c, reply, sizeof reply, srv->user[0] != '\0' ? 3 : 2, auth) != 0) ||
        (srv->db[0] != '\0' && strcmp(srv->db, "0") != 0 &&
         conn_cmd(c, reply, sizeof reply, 2, select) != 0)) {
        fprintf(stderr, "%s:%s: %s\n", srv->host, srv->port, reply[0] ? reply : "no answer");
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

/* ---- finding the data server ---------------------------------------------------------------- */

/* Decodes %XX escapes in place. */
static void percent_decode(char *s) {
    char *out = s;
    for (; *s != '\0'; s++) {
        if (s[0] == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
            char hex[3];
            hex[0] = s[1];
            hex[1] = s[2];
            hex[2] = '\0';
            *out++ = (char)strtol(hex, NULL, 16);
            s += 2;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/* Puts "host[:port]" into srv's address (127.0.0.1 when the host is empty). */
static void set_addr(server *srv, const char *host_port, const char *default_port) {
    const char *colon = strrchr(host_port, ':');
    size_t host_len = colon != NULL ? (size_t)(colon - host_port) : strlen(host_port);
    copy_text(srv->port, sizeof srv->port, colon != NULL ? colon + 1 : default_port);
    copy_text(srv->host, sizeof srv->host, host_len > 0 ? host_port : "127.0.0.1");
    if (host_len > 0 && host_len < sizeof srv->host) srv->host[host_len] = '\0';
}

/* Splits scheme://[[user]:password@]hosts[/db][#master] into srv (user, password, db) and
 * hosts: "host:port", or a Sentinel or Redlock URL's "host1:port1,host2:port2". */
static void split_url(const char *url, server *srv, char *hosts, size_t cap) {
    char rest[1024], *at, *colon, *h, *path;
    const char *p = strstr(url, "://");

    memset(srv, 0, sizeof *srv);
    copy_text(rest, sizeof rest, p != NULL ? p + 3 : url);
    if (strrchr(rest, '#') != NULL) *strrchr(rest, '#') = '\0';
    at = strrchr(rest, '@');
    if (at != NULL) {
        *at = '\0';
        colon = strchr(rest, ':');
        if (colon != NULL) {
            *colon = '\0';
            copy_text(srv->pass, sizeof srv->pass, colon + 1);
            percent_decode(srv->pass);
        }
        copy_text(srv->user, sizeof srv->user, rest);
        percent_decode(srv->user);
    }
    h = at != NULL ? at + 1 : rest;
    path = h + strcspn(h, "/?");
    if (path[0] == '/') {
        copy_text(srv->db, sizeof srv->db, path + 1);
        srv->db[strcspn(srv->db, "?")] = '\0';
    }
    *path = '\0';
    copy_text(hosts, cap, h);
}

/* Asks the sentinel at "host[:port]" for the address of the master called name (SENTINEL
 * GET-MASTER-ADDR-BY-NAME) and puts it into srv. Returns 0, or -1 if it does not name it. */
static int ask_sentinel(const char *sentinel, const char *name, server *srv) {
    server at;
    conn c;
    char reply[300];
    const char *argv[3];
    int rc;

    memset(&at, 0, sizeof at);
    set_addr(&at, sentinel, "26379");
    if (conn_open(&c, &at) != 0) return -1;
    argv[0] = "SENTINEL";
    argv[1] = "GET-MASTER-ADDR-BY-NAME";
    argv[2] = name;
    rc = conn_cmd(&c, reply, sizeof reply, 3, argv);
    close(c.fd);
    if (rc != 0 || sscanf(reply, "%255s %15s", srv->host, srv->port) != 2) return -1;
    return 0;
}

/* Asks the cluster node at "host[:port]" which master serves key: a GET of it answers from
 * that master, or is redirected there ("MOVED slot host:port"). Puts the master's address into
 * srv. Returns 0, or -1 if the node does not answer. */
static int ask_cluster_node(const char *node, const char *key, server *srv) {
    conn c;
    char reply[300], slot[16], addr[280];
    const char *argv[2];
    int rc;

    set_addr(srv, node, "6379");
    if (conn_open(&c, srv) != 0) return -1;
    argv[0] = "GET";
    argv[1] = key;
    rc = conn_cmd(&c, reply, sizeof reply, 2, argv);
    close(c.fd);
    if (rc == 0) return 0;
    if (sscanf(reply, "MOVED %15s %279s", slot, addr) != 2) return -1;
    set_addr(srv, addr, "6379");
    return 0;
}

/* Finds the server that keeps the stock (stock_key), as a client of the URL's topology would:
 * a redis:// URL names it; for a Sentinel URL the sentinels are asked in order for the master,
 * and the first that names it wins; for a Cluster URL the nodes are asked in order for the
 * master that serves the slot of the stock key (whose {hash tag} keeps the demo's keys in one
 * slot); for a Redlock URL it is the first master. Returns 0, or -1. */
static int find_data_server(const char *url, const char *stock_key, server *srv) {
    char hosts[512], *sentinel, *node, *more;
    const char *name = strrchr(url, '#');

    split_url(url, srv, hosts, sizeof hosts);
    if (strncmp(url, "redis-cluster://", 16) == 0 || strncmp(url, "rediss-cluster://", 17) == 0) {
        for (node = strtok_r(hosts, ",", &more); node != NULL; node = strtok_r(NULL, ",", &more)) {
            if (ask_cluster_node(node, stock_key, srv) == 0) {
                printf("Redis: cluster master %s:%s serves the demo's keys, as the node at %s "
                       "says\n", srv->host, srv->port, node);
                return 0;
            }
            fprintf(stderr, "the cluster node at %s does not answer\n", node);
        }
        return -1;
    }
    if (strncmp(url, "redlock://", 10) == 0) {
        hosts[strcspn(hosts, ",")] = '\0';
        set_addr(srv, hosts, "6379");
        printf("Redis: the first master of the Redlock URL, %s:%s\n", srv->host, srv->port);
        return 0;
    }
    if (strncmp(url, "redis-sentinel://", 17) != 0 &&
        strncmp(url, "rediss-sentinel://", 18) != 0) {
        set_addr(srv, hosts, "6379");
        return 0;
    }
    if (name == NULL) return -1;
    for (sentinel = strtok_r(hosts, ",", &more); sentinel != NULL;
         sentinel = strtok_r(NULL, ",", &more)) {
        if (ask_sentinel(sentinel, name + 1, srv) == 0) {
            printf("Redis: master \"%s\" at %s:%s, as the sentinel at %s says\n", name + 1,
                   srv->host, srv->port, sentinel);
            return 0;
        }
        fprintf(stderr, "the sentinel at %s does not name a master \"%s\"\n", sentinel, name + 1);
    }
    return -1;
}

/* ---- the shop --------------------------------------------------------------------------------- */

struct race {
    const server *data_server;
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

    if (conn_open(&c, race->data_server) != 0) {
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
                    LOCK_WAIT_MS, &lock);
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
    server data_server;
    FILE *urandom;
    int ok, i;

    if (url == NULL || url[0] == '\0') url = "redis://127.0.0.1:6379/";
    urandom = fopen("/dev/urandom", "rb");
    if (urandom == NULL || fread(&random_part, sizeof random_part, 1, urandom) != 1) {
        random_part = (unsigned)time(NULL);
    }
    if (urandom != NULL) fclose(urandom);
    snprintf(prefix, sizeof prefix, "redislock-demo:{%ld-%08x}:", (long)getpid(), random_part);
    snprintf(stock_key, sizeof stock_key, "%sstock", prefix);
    snprintf(lock_name, sizeof lock_name, "%slock", prefix);
    if (find_data_server(url, stock_key, &data_server) != 0) {
        fprintf(stderr, "No sentinel of REDIS_URL names its master "
                        "(redis-sentinel://host:port,host:port/#master), or no node of its "
                        "cluster answers (redis-cluster://host:port,host:port).\n");
        return 2;
    }
    if (conn_open(&data, &data_server) != 0) {
        if (getenv("REDIS_URL") != NULL && getenv("REDIS_URL")[0] != '\0') {
            fprintf(stderr, "No Redis server answers at %s:%s, the server REDIS_URL names: it is "
                            "unreachable. Check that it runs at that host and port, that a "
                            "firewall lets it through, and the URL's password and database.\n",
                    data_server.host, data_server.port);
        } else {
            fprintf(stderr, "No Redis server answers at %s:%s. Start one (apt-get install "
                            "redis-server) or point REDIS_URL at one.\n", data_server.host,
                    data_server.port);
        }
        return 2;
    }

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
    race.data_server = &data_server;
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
     * companion keys (fencing counter, waiter queue, Redlock's waiter queue; a waiter's own keys
     * expire by themselves; the lock name has the prefix's hash tag, so they are the name and a
     * suffix, see src/base/keys.rs). */
    snprintf(keys[0], sizeof keys[0], "%s", stock_key);
    snprintf(keys[1], sizeof keys[1], "%s", lock_name);
    snprintf(keys[2], sizeof keys[2], "%s:fence", lock_name);
    snprintf(keys[3], sizeof keys[3], "%s:q", lock_name);
    snprintf(keys[4], sizeof keys[4], "%s:rq", lock_name);
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
