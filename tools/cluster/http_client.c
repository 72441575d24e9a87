/* http_client.c: one HTTP/1.1 GET over a plain socket, for reading a node's /v1/models. Every
 * wait is bounded (a connect deadline, then one deadline for the whole response), the response is
 * bounded in size, and the body is taken by Content-Length or up to the connection's close;
 * anything else (chunked encoding, a bad status line, a short body) is an error. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"

enum { MAX_HEADER_BYTES = 16 * 1024 };

void format_error(char *err, size_t err_size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_size, fmt, ap);
    va_end(ap);
}

static long long monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events or the deadline passes: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline_ms) {
    for (;;) {
        const long long left = deadline_ms - monotonic_ms();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        const int n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n > 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
    }
}

/* A non-blocking socket connected to one of host:port's addresses within timeout_ms, or -1. */
static int connect_to(const char *host, const char *port, int timeout_ms, char *err,
                      size_t err_size) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *addrs = NULL;
    const int gai = getaddrinfo(host, port, &hints, &addrs);
    if (gai != 0) {
        format_error(err, err_size, "cannot resolve '%s': %s", host, gai_strerror(gai));
        return -1;
    }
    const long long deadline = monotonic_ms() + timeout_ms;
    int fd = -1, cause = ECONNREFUSED;
    for (struct addrinfo *a = addrs; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            cause = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            cause = errno;
            if (cause == EINPROGRESS) {
                const int ready = wait_fd(fd, POLLOUT, deadline);
                socklen_t len = sizeof cause;
                if (ready == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &cause, &len) == 0 &&
                    cause == 0)
                    continue;
                if (ready == 0) cause = ETIMEDOUT;
                if (ready < 0) cause = errno;
            }
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(addrs);
    if (fd < 0 && cause == ETIMEDOUT)
        format_error(err, err_size, "cannot connect: no answer within %d ms", timeout_ms);
    else if (fd < 0)
        format_error(err, err_size, "cannot connect: %s", strerror(cause));
    return fd;
}

static int send_all(int fd, const char *data, size_t len, long long deadline, char *err,
                    size_t err_size) {
    while (len > 0) {
        const ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
        if (n > 0) {
            data += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline) != 1) {
                format_error(err, err_size, "cannot send the request: timed out");
                return -1;
            }
        } else {
            format_error(err, err_size, "cannot send the request: %s", strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* The length of the header block (up to and including the blank line) in buf, or 0 when it has
 * not all arrived. */
static size_t header_end(const char *buf, size_t len) {
    for (size_t i = 3; i < len; i++)
        if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
            return i + 1;
    return 0;
}

/* The value of header `name` in the header block, or NULL (*value_len set). */
static const char *find_header(const char *head, size_t head_len, const char *name,
                               size_t *value_len) {
    const size_t name_len = strlen(name);
    const char *end = head + head_len;
    for (const char *line = memchr(head, '\n', head_len); line && line + 1 < end;
         line = memchr(line + 1, '\n', (size_t)(end - line - 1))) {
        const char *p = line + 1;
        if ((size_t)(end - p) > name_len && strncasecmp(p, name, name_len) == 0 &&
            p[name_len] == ':') {
            const char *v = p + name_len + 1, *eol = memchr(v, '\r', (size_t)(end - v));
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            while (eol > v && (eol[-1] == ' ' || eol[-1] == '\t'))
                eol--;
            *value_len = (size_t)(eol - v);
            return v;
        }
    }
    return NULL;
}

/* Parses the status line and the framing headers: the status, and the body length or -1 when the
 * body runs to the connection's close. 0, or -1 with err. */
static int parse_head(const char *head, size_t head_len, int *status, long long *content_length,
                      char *err, size_t err_size) {
    if (head_len < 12 || memcmp(head, "HTTP/1.", 7) != 0 || (head[7] != '0' && head[7] != '1') ||
        head[8] != ' ' || head[9] < '1' || head[9] > '5' || head[10] < '0' || head[10] > '9' ||
        head[11] < '0' || head[11] > '9') {
        format_error(err, err_size, "not an HTTP/1.x response");
        return -1;
    }
    *status = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
    size_t len;
    if (find_header(head, head_len, "Transfer-Encoding", &len)) {
        format_error(err, err_size,
                     "the response uses Transfer-Encoding, which this client does not read");
        return -1;
    }
    const char *cl = find_header(head, head_len, "Content-Length", &len);
    *content_length = -1;
    if (!cl) return 0;
    long long v = 0;
    size_t digits = 0;
    while (digits < len && cl[digits] >= '0' && cl[digits] <= '9' && v <= INT32_MAX)
        v = v * 10 + (cl[digits++] - '0');
    if (len == 0 || digits != len || v > INT32_MAX) {
        format_error(err, err_size, "the Content-Length is not a number up to 2^31");
        return -1;
    }
    *content_length = v;
    return 0;
}

/* Reads the response into a malloc'd buffer until the body is complete (by Content-Length or the
 * peer's close), within the deadline and the size bound. */
static int read_response(int fd, long long deadline, size_t max_body, http_response *resp,
                         char *err, size_t err_size) {
    const size_t limit = MAX_HEADER_BYTES + max_body;
    size_t len = 0, cap = 4096, head_len = 0;
    long long content_length = -1;
    char *buf = malloc(cap + 1);
    if (!buf) {
        format_error(err, err_size, "out of memory");
        return -1;
    }
    for (;;) {
        if (head_len && content_length >= 0 && len - head_len >= (size_t)content_length) break;
        if (len == cap) {
            if (cap >= limit + 1) {
                format_error(err, err_size, "the response is larger than %zu bytes", limit);
                goto fail;
            }
            cap = cap * 2 > limit + 1 ? limit + 1 : cap * 2;
            char *grown = realloc(buf, cap + 1);
            if (!grown) {
                format_error(err, err_size, "out of memory");
                goto fail;
            }
            buf = grown;
        }
        const ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n == 0) break; /* the peer closed */
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                format_error(err, err_size, "cannot read the response: %s", strerror(errno));
                goto fail;
            }
            if (wait_fd(fd, POLLIN, deadline) != 1) {
                format_error(err, err_size, "no complete response in time (%zu bytes came)", len);
                goto fail;
            }
            continue;
        }
        len += (size_t)n;
        if (!head_len) {
            head_len = header_end(buf, len);
            if (!head_len && len >= MAX_HEADER_BYTES) {
                format_error(err, err_size, "the response headers are larger than %d bytes",
                             MAX_HEADER_BYTES);
                goto fail;
            }
            if (head_len &&
                parse_head(buf, head_len, &resp->status, &content_length, err, err_size) != 0)
                goto fail;
            if (head_len && content_length > (long long)max_body) {
                format_error(err, err_size,
                             "the response body (%lld bytes) is larger than %zu bytes",
                             content_length, max_body);
                goto fail;
            }
        }
        if (head_len && len - head_len > max_body) { /* a body delimited by close, too long */
            format_error(err, err_size, "the response body is larger than %zu bytes", max_body);
            goto fail;
        }
    }
    if (!head_len) {
        format_error(err, err_size,
                     len ? "the connection closed inside the response headers"
                         : "the connection closed without a response");
        goto fail;
    }
    const size_t body_len = len - head_len;
    if (content_length >= 0 && body_len < (size_t)content_length) {
        format_error(err, err_size, "truncated response: %zu of %lld body bytes", body_len,
                     content_length);
        goto fail;
    }
    resp->body_len = content_length >= 0 ? (size_t)content_length : body_len;
    memmove(buf, buf + head_len, resp->body_len);
    buf[resp->body_len] = '\0';
    resp->body = buf;
    return 0;
fail:
    free(buf);
    return -1;
}

int http_get(const char *host, const char *port, const char *path, const char *bearer,
             int timeout_ms, size_t max_body, http_response *resp, char *err, size_t err_size) {
    *resp = (http_response){0};
    const int fd = connect_to(host, port, timeout_ms, err, err_size);
    if (fd < 0) return -1;
    const long long deadline = monotonic_ms() + timeout_ms;
    const bool ipv6 = strchr(host, ':') != NULL;
    char request[1024];
    const int n = snprintf(request, sizeof request,
                           "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nAccept: application/json\r\n"
                           "User-Agent: synapse-cluster-config\r\nConnection: close\r\n%s%s%s\r\n",
                           path, ipv6 ? "[" : "", host, ipv6 ? "]" : "", port,
                           bearer ? "Authorization: Bearer " : "", bearer ? bearer : "",
                           bearer ? "\r\n" : "");
    int rc = -1;
    if (n < 0 || (size_t)n >= sizeof request)
        format_error(err, err_size, "the request is too long (a very long API key?)");
    else if (send_all(fd, request, (size_t)n, deadline, err, err_size) == 0)
        rc = read_response(fd, deadline, max_body, resp, err, err_size);
    close(fd);
    return rc;
}

void http_response_free(http_response *resp) {
    free(resp->body);
    *resp = (http_response){0};
}
