/*
 * A minimal blocking Redis client (RESP2 over TCP) for the C tests and the example: just enough
 * to GET, SET, DEL and inspect keys beside the lock library, on a connection of its own.
 */
#ifndef REDISLOCK_TEST_RESP_H
#define REDISLOCK_TEST_RESP_H

#include <stddef.h>

typedef struct resp_conn {
    int fd;
    char buf[4096];
    size_t len, pos;
} resp_conn;

/* One reply. `type` is '+', '-', ':', '$' or '*' (0 after an I/O error). For '+', '-' and '$'
 * the text is in `str` (NUL-terminated, cut to fit; `str_len` is its full length); a nil bulk
 * string has `nil` set. For ':' and '*' the integer or element count is in `integer`; the
 * elements of an array are read and dropped. */
typedef struct resp_reply {
    char type;
    int nil;
    long long integer;
    char str[512];
    size_t str_len;
} resp_reply;

/* Connects to the server of a redis://host:port/ URL, with 5 s socket timeouts.
 * Returns 0 on success, -1 on failure. */
int resp_connect(resp_conn *c, const char *url);
void resp_close(resp_conn *c);

/* Sends one command (argc binary-safe arguments: pointers and lengths) and reads its reply.
 * Returns 0 on success (the reply may still be an error reply), -1 on I/O or protocol error. */
int resp_command(resp_conn *c, resp_reply *r, int argc, const char *const *argv,
                 const size_t *lens);

/* The same with NUL-terminated arguments. */
int resp_command_str(resp_conn *c, resp_reply *r, int argc, const char *const *argv);

/* GET key as an integer: 0 on success with *value set, 1 if the key does not exist, -1 on error. */
int resp_get_int(resp_conn *c, const char *key, long long *value);
/* SET key value (an integer). Returns 0 on success, -1 on error. */
int resp_set_int(resp_conn *c, const char *key, long long value);

#endif
