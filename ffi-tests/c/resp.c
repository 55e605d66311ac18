#define _POSIX_C_SOURCE 200809L

#include "resp.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int resp_connect(resp_conn *c, const char *url) {
    char host[256], port[16];
    const char *p = strstr(url, "://");
    const char *colon, *end;
    struct addrinfo hints, *res = NULL, *ai;
    struct timeval tv = {5, 0};
    int one = 1;

    c->fd = -1;
    c->len = c->pos = 0;
    if (p == NULL) return -1;
    p += 3;
    if (strchr(p, '@') != NULL) p = strchr(p, '@') + 1; /* skip user:password@ */
    colon = strchr(p, ':');
    if (colon == NULL || (size_t)(colon - p) >= sizeof host) return -1;
    memcpy(host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    end = colon + 1 + strcspn(colon + 1, "/");
    if ((size_t)(end - colon - 1) >= sizeof port || end == colon + 1) return -1;
    memcpy(port, colon + 1, (size_t)(end - colon - 1));
    port[end - colon - 1] = '\0';

    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0) return -1;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd < 0) continue;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            c->fd = fd;
            break;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return c->fd >= 0 ? 0 : -1;
}

void resp_close(resp_conn *c) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
}

static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_byte(resp_conn *c, char *out) {
    if (c->pos == c->len) {
        ssize_t n;
        do {
            n = read(c->fd, c->buf, sizeof c->buf);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) return -1;
        c->len = (size_t)n;
        c->pos = 0;
    }
    *out = c->buf[c->pos++];
    return 0;
}

/* Reads a line up to CRLF into line (NUL-terminated, at most cap-1 bytes kept). */
static int read_line(resp_conn *c, char *line, size_t cap, size_t *full_len) {
    size_t n = 0;
    char ch, prev = 0;
    for (;;) {
        if (read_byte(c, &ch) != 0) return -1;
        if (prev == '\r' && ch == '\n') break;
        if (prev != 0) {
            if (n + 1 < cap) line[n] = prev;
            n++;
        }
        prev = ch;
    }
    line[n + 1 < cap ? n : cap - 1] = '\0';
    if (full_len != NULL) *full_len = n;
    return 0;
}

static int read_reply(resp_conn *c, resp_reply *r) {
    char line[512];
    char ch;
    long long i;

    memset(r, 0, sizeof *r);
    if (read_byte(c, &ch) != 0) return -1;
    r->type = ch;
    switch (ch) {
    case '+':
    case '-':
        return read_line(c, r->str, sizeof r->str, &r->str_len);
    case ':':
        if (read_line(c, line, sizeof line, NULL) != 0) return -1;
        r->integer = strtoll(line, NULL, 10);
        return 0;
    case '$':
        if (read_line(c, line, sizeof line, NULL) != 0) return -1;
        r->integer = strtoll(line, NULL, 10);
        if (r->integer < 0) {
            r->nil = 1;
            return 0;
        }
        r->str_len = (size_t)r->integer;
        for (i = 0; i < r->integer + 2; i++) { /* the data and its CRLF */
            if (read_byte(c, &ch) != 0) return -1;
            if ((size_t)i < sizeof r->str - 1) r->str[i] = ch;
        }
        r->str[r->str_len < sizeof r->str - 1 ? r->str_len : sizeof r->str - 1] = '\0';
        return 0;
    case '*': {
        resp_reply element;
        if (read_line(c, line, sizeof line, NULL) != 0) return -1;
        r->integer = strtoll(line, NULL, 10);
        if (r->integer < 0) r->nil = 1;
        for (i = 0; i < r->integer; i++) {
            if (read_reply(c, &element) != 0) return -1;
        }
        return 0;
    }
    default:
        return -1;
    }
}

int resp_command(resp_conn *c, resp_reply *r, int argc, const char *const *argv,
                 const size_t *lens) {
    /* The whole command in one write: small writes in a row would meet Nagle's algorithm and
     * the server's delayed ACK (40 ms each). */
    size_t cap = 32, len, i;
    char *out;
    int rc;

    for (i = 0; i < (size_t)argc; i++) cap += lens[i] + 32;
    out = malloc(cap);
    if (out == NULL) return -1;
    len = (size_t)snprintf(out, cap, "*%d\r\n", argc);
    for (i = 0; i < (size_t)argc; i++) {
        len += (size_t)snprintf(out + len, cap - len, "$%zu\r\n", lens[i]);
        memcpy(out + len, argv[i], lens[i]);
        len += lens[i];
        memcpy(out + len, "\r\n", 2);
        len += 2;
    }
    rc = write_all(c->fd, out, len);
    free(out);
    if (rc != 0) return -1;
    return read_reply(c, r);
}

int resp_command_str(resp_conn *c, resp_reply *r, int argc, const char *const *argv) {
    size_t lens[16];
    int i;
    if (argc > 16) return -1;
    for (i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    return resp_command(c, r, argc, argv, lens);
}

int resp_get_int(resp_conn *c, const char *key, long long *value) {
    const char *argv[2];
    resp_reply r;
    argv[0] = "GET";
    argv[1] = key;
    if (resp_command_str(c, &r, 2, argv) != 0 || r.type != '$') return -1;
    if (r.nil) return 1;
    *value = strtoll(r.str, NULL, 10);
    return 0;
}

int resp_set_int(resp_conn *c, const char *key, long long value) {
    char text[32];
    const char *argv[3];
    resp_reply r;
    snprintf(text, sizeof text, "%lld", value);
    argv[0] = "SET";
    argv[1] = key;
    argv[2] = text;
    if (resp_command_str(c, &r, 3, argv) != 0 || r.type != '+') return -1;
    return 0;
}
