/* cors.c: Cross-Origin Resource Sharing for `synapse serve`: which origins a browser page may call
 * the API from, the headers every response carries for them, and the answer to a preflight. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server.h"

/* How long a browser may reuse a preflight's answer: Chromium's own cap (Firefox allows a day). */
#define CORS_MAX_AGE_S "7200"

/* Whether s is an origin as browsers send it: scheme://host[:port], no path, or "*". */
static bool origin_valid(const char *s, size_t len) {
    if (len == 1 && s[0] == '*') return true;
    size_t skip = 0;
    if (len > 7 && strncasecmp(s, "http://", 7) == 0) skip = 7;
    if (len > 8 && strncasecmp(s, "https://", 8) == 0) skip = 8;
    if (skip == 0) return false;
    for (size_t i = skip; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr(".-:[]_", s[i])) return false;
    return true;
}

int cors_parse_origins(server_opts *o, const char *value, char *err, size_t cap) {
    const char *p = value;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && isspace((unsigned char)*p))
            p++, len--;
        while (len > 0 && isspace((unsigned char)p[len - 1]))
            len--;
        if (!origin_valid(p, len)) {
            snprintf(err, cap,
                     "--cors-origin '%.*s': expected an origin as browsers send it, "
                     "scheme://host[:port] without a path (http://localhost:3000), or *",
                     (int)len, p);
            return -1;
        }
        char **grown = realloc(o->cors_origins, (o->n_cors_origins + 1) * sizeof *grown);
        char *copy = strndup(p, len);
        if (grown) o->cors_origins = grown;
        if (!grown || !copy) {
            free(copy);
            snprintf(err, cap, "out of memory");
            return -1;
        }
        o->cors_origins[o->n_cors_origins++] = copy;
        if (!end) return 0;
        p = end + 1;
    }
}

/* The Access-Control-Allow-Origin value for the request's Origin; NULL: no CORS headers (the
 * browser then refuses the page the response). Without --cors-origin any origin may call, unless
 * an API key guards the server: then only configured origins may. */
static const char *allowed_origin(const http_request *hr, bool *restricted) {
    const server_opts *o = &hr->srv->opts;
    *restricted = false;
    if (o->n_cors_origins == 0) return o->api_key ? NULL : "*";
    const char *origin = MHD_lookup_connection_value(hr->conn, MHD_HEADER_KIND, "Origin");
    for (size_t i = 0; i < o->n_cors_origins; i++)
        if (strcmp(o->cors_origins[i], "*") == 0) return "*";
    *restricted = true; /* the answer depends on the Origin: caches must key on it */
    for (size_t i = 0; origin && i < o->n_cors_origins; i++)
        if (strcasecmp(o->cors_origins[i], origin) == 0) return origin;
    return NULL;
}

void cors_add_headers(const http_request *hr, struct MHD_Response *resp) {
    bool restricted;
    const char *allow = allowed_origin(hr, &restricted);
    if (restricted) MHD_add_response_header(resp, "Vary", "Origin");
    if (allow) MHD_add_response_header(resp, "Access-Control-Allow-Origin", allow);
}

struct MHD_Response *cors_preflight_response(const http_request *hr, const char *methods) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    bool restricted;
    if (!resp || !allowed_origin(hr, &restricted)) return resp;
    MHD_add_response_header(resp, "Access-Control-Allow-Methods", methods);
    /* Whatever headers the page's client sends (the openai SDK's x-stainless-*, say): the API
     * key, not a header list, is what guards the API. */
    const char *asked =
        MHD_lookup_connection_value(hr->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                            asked && *asked ? asked : "Authorization, Content-Type");
    MHD_add_response_header(resp, "Access-Control-Max-Age", CORS_MAX_AGE_S);
    return resp;
}
