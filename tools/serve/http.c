/* http.c: the HTTP layer of `synapse serve` on libmicrohttpd: accepting, bounding and routing
 * requests, the API key, the response helpers and the one log line per request. */
#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"
#include "common/text.h"
#include "openai_request.h"
#include "server.h"
#include "synapse_internal.h"

static enum MHD_Result queue(http_request *hr, unsigned status, struct MHD_Response *resp) {
    if (!resp) return MHD_NO;
    cors_add_headers(hr, resp); /* which origins' pages may read it */
    enum MHD_Result r = MHD_queue_response(hr->conn, status, resp);
    MHD_destroy_response(resp);
    hr->status = status;
    hr->responded = true;
    return r;
}

enum MHD_Result http_send_text(http_request *hr, unsigned status, const char *content_type,
                               const char *text, size_t len) {
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (resp) MHD_add_response_header(resp, "Content-Type", content_type);
    return queue(hr, status, resp);
}

/* A JSON response (steals body; NULL body: a 500 about memory). */
static struct MHD_Response *json_response(json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\","
                      "\"param\":null,\"code\":null}}");
    struct MHD_Response *resp =
        text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
    if (!resp) {
        free(text);
        return NULL;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    return resp;
}

enum MHD_Result http_send_json(http_request *hr, unsigned status, json_t *body) {
    struct MHD_Response *resp = json_response(body);
    if (resp && status == 503) MHD_add_response_header(resp, "Retry-After", "1");
    return queue(hr, status, resp);
}

/* The error body for status and the message: OpenAI's shape, or Anthropic's on its paths (the
 * Messages API's clients read that); NULL: no memory. */
static json_t *error_body(const http_request *hr, unsigned status, const char *type,
                          const char *param, const char *code, const char *fmt, va_list ap) {
    oa_error err;
    oa_error_set(&err, (int)status, type, param, code, "%s", "");
    vsnprintf(err.message, sizeof err.message, fmt, ap);
    return hr->anthropic ? anthropic_error_body(status, err.message) : oa_error_body(&err);
}

enum MHD_Result http_send_error(http_request *hr, unsigned status, const char *type,
                                const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *body = error_body(hr, status, type, param, code, fmt, ap);
    va_end(ap);
    return http_send_json(hr, status, body);
}

static json_t *error_bodyf(const http_request *hr, unsigned status, const char *type,
                           const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static json_t *error_bodyf(const http_request *hr, unsigned status, const char *type,
                           const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    json_t *body = error_body(hr, status, type, param, code, fmt, ap);
    va_end(ap);
    return body;
}

/* 405 with the Allow header. */
static enum MHD_Result send_method_not_allowed(http_request *hr, const char *allowed) {
    json_t *body = error_bodyf(hr, 405, "invalid_request_error", NULL, "method_not_allowed",
                               "%s %s is not allowed; use %s", hr->method, hr->path, allowed);
    struct MHD_Response *resp = json_response(body);
    if (resp) MHD_add_response_header(resp, "Allow", allowed);
    return queue(hr, 405, resp);
}

bool http_client_alive(http_request *hr) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(hr->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!info) return false;
    /* The client sends nothing more once its request is read: readable now means it closed (EOF)
     * or reset the connection. */
    struct pollfd p = {.fd = info->connect_fd, .events = POLLIN | POLLRDHUP};
    return poll(&p, 1, 0) == 0;
}

/* The API key: "Authorization: Bearer KEY", or "x-api-key: KEY" as Anthropic's clients send it. */
static bool authorized(http_request *hr) {
    const char *key = hr->srv->opts.api_key;
    if (!key) return true;
    const char *auth = MHD_lookup_connection_value(hr->conn, MHD_HEADER_KIND, "Authorization");
    const char *x_key = MHD_lookup_connection_value(hr->conn, MHD_HEADER_KIND, "x-api-key");
    return (auth && strncmp(auth, "Bearer ", 7) == 0 && strcmp(auth + 7, key) == 0) ||
           (x_key && strcmp(x_key, key) == 0);
}

static bool route_matches(const http_route *r, const char *path) {
    if (!r->prefix) return strcmp(r->path, path) == 0;
    const size_t n = strlen(r->path);
    return strncmp(r->path, path, n) == 0 && path[n] != '\0';
}

/* Whether path is one of Anthropic's (its errors take Anthropic's shape, even a 413 or 405). */
static bool anthropic_path(const server *srv, const char *path) {
    for (size_t i = 0; i < srv->n_routes; i++)
        if (srv->routes[i].anthropic && route_matches(&srv->routes[i], path)) return true;
    return false;
}

/* The methods routes serve path with, as "GET, POST" into buf; how many routes match path. */
static size_t path_methods(const server *srv, const char *path, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < srv->n_routes; i++) {
        if (!route_matches(&srv->routes[i], path)) continue;
        const char *m = srv->routes[i].method;
        if (!strstr(buf, m))
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", n ? ", " : "", m);
        n++;
    }
    return n;
}

static enum MHD_Result dispatch(http_request *hr) {
    const http_route *routes = hr->srv->routes;
    for (size_t i = 0; i < hr->srv->n_routes; i++)
        if (route_matches(&routes[i], hr->path) && strcmp(routes[i].method, hr->method) == 0) {
            if (routes[i].needs_key && !authorized(hr))
                return http_send_error(
                    hr, 401, "invalid_request_error", NULL, "invalid_api_key",
                    "a missing or wrong API key: send 'Authorization: Bearer KEY' or "
                    "'x-api-key: KEY'");
            return routes[i].handle(hr);
        }
    char methods[64];
    if (path_methods(hr->srv, hr->path, methods, sizeof methods) == 0)
        return http_send_error(hr, 404, "invalid_request_error", NULL, "not_found",
                               "no route %s %s", hr->method, hr->path);
    if (strcmp(hr->method, "OPTIONS") == 0) { /* a CORS preflight: it carries no API key */
        strncat(methods, ", OPTIONS", sizeof methods - strlen(methods) - 1);
        return queue(hr, 204, cors_preflight_response(hr, methods));
    }
    return send_method_not_allowed(hr, methods);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
    (void)version;
    server *srv = cls;
    http_request *hr = *req_cls;
    if (!hr) { /* the headers are in: set up, and refuse a declared oversized body at once */
        hr = calloc(1, sizeof *hr);
        if (!hr) return MHD_NO;
        hr->srv = srv;
        hr->conn = conn;
        hr->start_ms = syn_now_ms();
        snprintf(hr->method, sizeof hr->method, "%s", method);
        snprintf(hr->path, sizeof hr->path, "%s", url);
        hr->anthropic = anthropic_path(srv, hr->path);
        *req_cls = hr;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > srv->opts.max_body_bytes) {
            hr->body_too_large = true;
            return http_send_error(hr, 413, "invalid_request_error", NULL, "body_too_large",
                                   "the body of %s bytes is over the limit of %zu bytes", cl,
                                   srv->opts.max_body_bytes);
        }
        return MHD_YES;
    }
    if (*upload_size > 0) { /* more of the body */
        size_t n = *upload_size;
        *upload_size = 0;
        if (hr->responded) return MHD_YES; /* a 413 is on its way; discard the rest */
        if (hr->body.len + n >
            srv->opts.max_body_bytes) { /* drop it; the 413 goes out at the end */
            hr->body_too_large = true;
            free(hr->body.data);
            hr->body = (text_buf){0};
            return MHD_YES;
        }
        return text_append(&hr->body, upload, n) == EXIT_OK ? MHD_YES : MHD_NO;
    }
    if (hr->responded) return MHD_YES;
    if (hr->body_too_large)
        return http_send_error(hr, 413, "invalid_request_error", NULL, "body_too_large",
                               "the body is over the limit of %zu bytes", srv->opts.max_body_bytes);
    return dispatch(hr);
}

/* The one log line per request, when libmicrohttpd is done with it. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode why) {
    server *srv = cls;
    http_request *hr = *req_cls;
    if (!hr) return;
    const unsigned status = hr->status;
    if (status < sizeof srv->counters.by_status / sizeof srv->counters.by_status[0])
        atomic_fetch_add(&srv->counters.by_status[status], 1);
    fprintf(stderr, "synapse serve: %s %s %u prompt=%llu completion=%llu %.1f ms%s\n", hr->method,
            hr->path, status, (unsigned long long)hr->prompt_tokens,
            (unsigned long long)hr->completion_tokens, syn_now_ms() - hr->start_ms,
            why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    free(hr->body.data);
    free(hr);
    *req_cls = NULL;
    /* A completion lifted the idle limit while it generated (completions.c). */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, srv->opts.timeout_s);
}

int http_start(server *srv, const http_route *routes, size_t n_routes) {
    const server_opts *o = &srv->opts;
    srv->routes = routes;
    srv->n_routes = n_routes;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE},
                    *addr = NULL;
    char port[8];
    snprintf(port, sizeof port, "%u", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &addr);
    if (gai != 0) return fail_runtime("cannot resolve --host '%s': %s", o->host, gai_strerror(gai));
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    if (addr->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    srv->daemon = MHD_start_daemon(
        flags, o->port, NULL, NULL, on_request, srv, MHD_OPTION_SOCK_ADDR, addr->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)o->timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv, MHD_OPTION_END);
    freeaddrinfo(addr);
    if (!srv->daemon)
        return fail_runtime("cannot listen on %s:%u (in use, or not an address of this machine)",
                            o->host, o->port);
    return EXIT_OK;
}

uint16_t http_port(const server *srv) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : srv->opts.port;
}

void http_stop(server *srv) {
    if (srv->daemon) MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}
