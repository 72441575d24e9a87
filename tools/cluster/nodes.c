/* nodes.c: node URLs, and what a node holds: its GET /v1/models read into residencies (model,
 * node, slots). The answer is checked before use: a model's id must be routable and its
 * meta.n_parallel a sane slot count, or the whole answer is refused with the reason. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* /v1/models lists each resident model in a few hundred bytes: 1 MiB is thousands of models. */
enum { MODELS_MAX_BODY = 1 << 20, MAX_SLOTS = 65535 };

/* At most out_size - 1 bytes of s with control bytes as '?': text from a node, quoted in one
 * error line. */
static const char *printable(const char *s, char *out, size_t out_size) {
    size_t n = 0;
    for (; s[n] && n + 1 < out_size; n++)
        out[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
    out[n] = '\0';
    return out;
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.';
}

static bool is_ipv6_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
           c == '.';
}

/* HOST:PORT as parsed by parse_host_port. */
typedef struct host_port {
    const char *host; /* [host_len], without an IPv6 address's brackets */
    size_t host_len;
    bool ipv6;
    long port;       /* 1..65535 */
    const char *end; /* just after the port */
} host_port;

/* HOST:PORT at the start of s: HOST a name or an IPv4 address, a bracketed IPv6 address, or (with
 * allow_any) "*"; PORT 1..65535. 0 with *hp set, or -1. */
static int parse_host_port(const char *s, bool allow_any, host_port *hp) {
    *hp = (host_port){.host = s};
    const char *p = s;
    if (*p == '[') {
        hp->host = ++p;
        while (is_ipv6_char(*p))
            p++;
        if (*p != ']') return -1;
        hp->host_len = (size_t)(p++ - hp->host);
        hp->ipv6 = true;
    } else if (allow_any && *p == '*') {
        hp->host_len = 1;
        p++;
    } else {
        while (is_name_char(*p))
            p++;
        hp->host_len = (size_t)(p - s);
    }
    if (hp->host_len == 0 || *p++ != ':') return -1;
    const char *digits = p;
    while (*p >= '0' && *p <= '9' && p - digits < 5)
        hp->port = hp->port * 10 + (*p++ - '0');
    hp->end = p;
    return p > digits && hp->port >= 1 && hp->port <= 65535 ? 0 : -1;
}

bool listen_address_valid(const char *s) {
    host_port hp;
    return parse_host_port(s, true, &hp) == 0 && *hp.end == '\0';
}

int node_parse_url(const char *url, node_addr *out, char *err, size_t err_size) {
    static const char scheme[] = "http://";
    host_port hp;
    *out = (node_addr){0};
    /* One '/' may end the URL; a path may not. */
    if (strncmp(url, scheme, sizeof scheme - 1) != 0 ||
        parse_host_port(url + sizeof scheme - 1, false, &hp) != 0 ||
        (*hp.end != '\0' && strcmp(hp.end, "/") != 0) || hp.host_len >= sizeof out->host) {
        format_error(err, err_size,
                     "node URL '%s' must be http://HOST:PORT (PORT 1..65535, no path)", url);
        return -1;
    }
    memcpy(out->host, hp.host, hp.host_len);
    out->ipv6 = hp.ipv6;
    snprintf(out->port, sizeof out->port, "%ld", hp.port);
    snprintf(out->url, sizeof out->url, "http://%s%s%s:%s", out->ipv6 ? "[" : "", out->host,
             out->ipv6 ? "]" : "", out->port);
    return 0;
}

int cluster_view_init(cluster_view *view, const node_addr *nodes, size_t n_nodes) {
    *view = (cluster_view){.nodes = nodes,
                           .n_nodes = n_nodes,
                           .answered = calloc(n_nodes ? n_nodes : 1, sizeof(bool))};
    return view->answered ? 0 : -1;
}

void cluster_view_free(cluster_view *view) {
    free(view->answered);
    free(view->res);
    *view = (cluster_view){0};
}

static int compare_residency(const void *a, const void *b) {
    const residency *x = a, *y = b;
    const int by_model = strcmp(x->model, y->model);
    if (by_model != 0) return by_model;
    return (x->node > y->node) - (x->node < y->node);
}

void cluster_view_sort(cluster_view *view) {
    if (view->n_res > 1) qsort(view->res, view->n_res, sizeof *view->res, compare_residency);
}

/* The models of one /v1/models body, checked, into res[*n] (malloc'd). 0, or -1 with err. */
static int parse_models(const char *body, size_t len, size_t node, residency **res, size_t *n,
                        char *err, size_t err_size) {
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *data = json_object_get(root, "data");
    char shown[81];
    int rc = -1;
    *res = NULL;
    *n = 0;
    if (!root) {
        format_error(err, err_size, "/v1/models is not JSON: %s",
                     printable(jerr.text, shown, sizeof shown));
        goto done;
    }
    if (!json_is_array(data)) {
        format_error(err, err_size, "/v1/models has no \"data\" array");
        goto done;
    }
    *res = calloc(json_array_size(data) ? json_array_size(data) : 1, sizeof **res);
    if (!*res) {
        format_error(err, err_size, "out of memory");
        goto done;
    }
    size_t i;
    json_t *entry;
    json_array_foreach(data, i, entry) {
        const char *id = json_string_value(json_object_get(entry, "id"));
        json_t *slots = json_object_get(json_object_get(entry, "meta"), "n_parallel");
        if (!id) {
            format_error(err, err_size, "/v1/models: data[%zu] has no \"id\" string", i);
            goto done;
        }
        if (!model_alias_valid(id) ||
            strlen(id) != json_string_length(json_object_get(entry, "id"))) {
            format_error(err, err_size,
                         "/v1/models: model id '%s' is not 1..%d letters, digits or -_.: (HAProxy "
                         "routes on it)",
                         printable(id, shown, sizeof shown), MODEL_ALIAS_MAX);
            goto done;
        }
        if (!json_is_integer(slots) || json_integer_value(slots) < 1 ||
            json_integer_value(slots) > MAX_SLOTS) {
            format_error(
                err, err_size,
                "/v1/models: model '%s' has no meta.n_parallel in 1..%d (is this a synapse serve "
                "node?)",
                id, MAX_SLOTS);
            goto done;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp((*res)[k].model, id) == 0) {
                format_error(err, err_size, "/v1/models lists model '%s' twice", id);
                goto done;
            }
        }
        residency *r = &(*res)[i];
        memcpy(r->model, id, strlen(id) + 1);
        r->node = node;
        r->slots = (long)json_integer_value(slots);
    }
    *n = json_array_size(data);
    rc = 0;
done:
    if (rc != 0) {
        free(*res);
        *res = NULL;
    }
    json_decref(root);
    return rc;
}

/* The "error.message" of an OpenAI-style error body, or "". */
static const char *error_message(const char *body, size_t len, json_t **root) {
    *root = json_loadb(body, len, 0, NULL);
    const char *msg =
        json_string_value(json_object_get(json_object_get(*root, "error"), "message"));
    return msg ? msg : "";
}

int node_read_models(cluster_view *view, size_t index, const char *api_key, int timeout_ms,
                     char *err, size_t err_size) {
    const node_addr *node = &view->nodes[index];
    http_response resp;
    if (http_get(node->host, node->port, "/v1/models", api_key, timeout_ms, MODELS_MAX_BODY, &resp,
                 err, err_size) != 0)
        return -1;
    if (resp.status != 200) {
        json_t *root;
        char shown[201];
        const char *msg =
            printable(error_message(resp.body, resp.body_len, &root), shown, sizeof shown);
        format_error(err, err_size, "GET /v1/models answered HTTP %d%s%s%s", resp.status,
                     msg[0] ? " (" : "", msg, msg[0] ? ")" : "");
        json_decref(root);
        http_response_free(&resp);
        return -1;
    }
    residency *found;
    size_t n_found;
    const int rc = parse_models(resp.body, resp.body_len, index, &found, &n_found, err, err_size);
    http_response_free(&resp);
    if (rc != 0) return -1;
    if (view->n_res + n_found > view->cap_res) {
        size_t cap = view->cap_res ? view->cap_res : 16;
        while (cap < view->n_res + n_found)
            cap *= 2;
        residency *grown = realloc(view->res, cap * sizeof *grown);
        if (!grown) {
            free(found);
            format_error(err, err_size, "out of memory");
            return -1;
        }
        view->res = grown;
        view->cap_res = cap;
    }
    if (n_found) memcpy(view->res + view->n_res, found, n_found * sizeof *found);
    view->n_res += n_found;
    view->answered[index] = true;
    free(found);
    return 0;
}
