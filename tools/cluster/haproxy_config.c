/* haproxy_config.c: the HAProxy configuration text (HAProxy 2.6, master-worker mode) for the
 * models resident on the nodes that answered. The comments written into the file explain each
 * section; deploy/README.md explains the same at more length. Model ids are routable aliases
 * (model_alias_valid) and node hosts and ports were validated, so nothing here needs quoting. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"

/* A growing text; once an allocation fails every later append is a no-op and the text is lost. */
typedef struct text {
    char *data;
    size_t len, cap;
    bool failed;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    if (t->failed) return;
    va_list ap;
    va_start(ap, fmt);
    const int n =
        vsnprintf(t->data ? t->data + t->len : NULL, t->data ? t->cap - t->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        t->failed = true;
        return;
    }
    if (t->len + (size_t)n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 8192;
        while (cap < t->len + (size_t)n + 1)
            cap *= 2;
        char *grown = realloc(t->data, cap);
        if (!grown) {
            t->failed = true;
            return;
        }
        t->data = grown;
        t->cap = cap;
        va_start(ap, fmt);
        vsnprintf(t->data + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
    }
    t->len += (size_t)n;
}

/* "server NAME ADDRESS [maxconn N]" for a node: NAME is HOST:PORT (unique per node, as hosts and
 * ports are normalised; it shows in logs and in the X-Synapse-Node response header), ADDRESS is
 * HOST:PORT or [IPV6]:PORT. */
static void add_server(text *t, const node_addr *node, long maxconn) {
    const char *open = node->ipv6 ? "[" : "", *close = node->ipv6 ? "]" : "";
    add(t, "    server %s:%s %s%s%s:%s", node->host, node->port, open, node->host, close,
        node->port);
    if (maxconn > 0) add(t, " maxconn %ld", maxconn);
    add(t, "\n");
}

/* Whether residency r is its model's first (they are sorted by model): one per model. */
static bool first_of_model(const cluster_view *v, size_t r) {
    return r == 0 || strcmp(v->res[r].model, v->res[r - 1].model) != 0;
}

/* The body of an OpenAI-style error, as HAProxy takes a single-quoted string (no ' inside). */
#define OPENAI_ERROR(message, type, param, code)                                                   \
    "'{\"error\":{\"message\":\"" message "\",\"type\":\"" type "\",\"param\":" param              \
    ",\"code\":\"" code "\"}}'"

static void add_header(text *t, const cluster_view *v) {
    add(t, "# HAProxy configuration for a Synapse cluster, written by `synapse cluster-config` "
           "from the\n"
           "# nodes' GET /v1/models. Regenerate it rather than edit it (deploy/README.md explains "
           "every\n"
           "# section). Run HAProxy in master-worker mode, `haproxy -W -f FILE -p PIDFILE`: "
           "SIGUSR2 to the\n"
           "# master loads a new version of this file without dropping a connection.\n"
           "#\n"
           "# Nodes and the models resident on them (slots: requests each decodes at once):\n");
    for (size_t i = 0; i < v->n_nodes; i++) {
        add(t, "#   %s", v->nodes[i].url);
        if (!v->answered[i]) {
            add(t, "  did not answer: left out\n");
            continue;
        }
        const char *sep = "  ";
        for (size_t r = 0; r < v->n_res; r++) {
            if (v->res[r].node != i) continue;
            add(t, "%s%s (%ld slots)", sep, v->res[r].model, v->res[r].slots);
            sep = ", ";
        }
        add(t, "%s\n", sep[0] == ' ' ? "  no model" : "");
    }
    add(t, "\n");
}

static void add_global_and_defaults(text *t) {
    add(t,
        "global\n"
        "    # SIGUSR2 to the master process re-reads this file and starts new workers; the old\n"
        "    # workers stop accepting, finish the requests they carry (streams included), then "
        "exit.\n"
        "    master-worker\n"
        "    # A request body is read into one buffer before routing: \"model\" (and \"user\") "
        "must be in\n"
        "    # its first 256 KiB, and a request is retried on another node only when all of it "
        "fits.\n"
        "    tune.bufsize 262144\n"
        "    log stderr format raw local0 info\n"
        "\n"
        "defaults\n"
        "    mode http\n"
        "    log global\n"
        "    option httplog\n"
        "    option dontlognull\n"
        "    # Generations are long: a non-streamed completion sends nothing until it is done, and "
        "a\n"
        "    # stream may pause while its node is busy. The connect and queue limits stay short.\n"
        "    timeout connect 2s\n"
        "    timeout client 10m\n"
        "    timeout server 10m\n"
        "    timeout http-request 30s\n"
        "    timeout http-keep-alive 30s\n"
        "    # How long a request may wait for a free slot on a node holding its model, then 503.\n"
        "    timeout queue 60s\n"
        "    timeout check 2s\n"
        "    # Streaming: responses are forwarded as they arrive (no compression, no buffering) "
        "and\n"
        "    # without waiting to fill packets, so each token leaves as soon as its node sends "
        "it.\n"
        "    option http-no-delay\n"
        "    # A client gone while its request waits in the queue never reaches a node.\n"
        "    option abortonclose\n"
        "    # Failures before a response starts (connection refused or reset, node closed "
        "without\n"
        "    # answering: a dead node) are retried, each time on another node holding the model.\n"
        "    # Once a response has started it is never retried.\n"
        "    retries 3\n"
        "    retry-on conn-failure empty-response\n"
        "    option redispatch 1\n"
        "    # Health: GET /health every second; 2 failures take a node out, 2 successes bring it\n"
        "    # back. A refused or failed connection takes it out at once (observe layer4), so "
        "that\n"
        "    # the retries of a dead node's requests go to the others.\n"
        "    option httpchk GET /health\n"
        "    http-check expect status 200\n"
        "    default-server check inter 1s fall 2 rise 2 observe layer4 error-limit 1 on-error "
        "mark-down\n"
        "    # Errors HAProxy itself answers are OpenAI-style JSON, never its HTML pages.\n"
        "    http-error status 400 content-type application/json string " OPENAI_ERROR(
            "the load balancer could not parse the request", "invalid_request_error", "null",
            "bad_request") "\n"
                           "    http-error status 408 content-type application/json "
                           "string " OPENAI_ERROR(
                               "the request did not arrive in time", "invalid_request_error",
                               "null",
                               "request_timeout") "\n"
                                                  "    http-error status 500 content-type "
                                                  "application/json string " OPENAI_ERROR(
                                                      "internal error in the load balancer",
                                                      "server_error", "null",
                                                      "internal_error") "\n"
                                                                        "    http-error status 502 "
                                                                        "content-type "
                                                                        "application/json "
                                                                        "string " OPENAI_ERROR(
                                                                            "the node sent no "
                                                                            "valid response",
                                                                            "server_error", "null",
                                                                            "bad_gateway") "\n"
                                                                                           "    "
                                                                                           "http-"
                                                                                           "error "
                                                                                           "status "
                                                                                           "503 "
                                                                                           "content"
                                                                                           "-type "
                                                                                           "applica"
                                                                                           "tion/"
                                                                                           "json "
                                                                                           "hdr "
                                                                                           "Retry-"
                                                                                           "After "
                                                                                           "1 "
                                                                                           "string"
                                                                                           " " OPENAI_ERROR(
                                                                                               "no "
                                                                                               "nod"
                                                                                               "e "
                                                                                               "is "
                                                                                               "ava"
                                                                                               "ila"
                                                                                               "ble"
                                                                                               " fo"
                                                                                               "r "
                                                                                               "thi"
                                                                                               "s "
                                                                                               "req"
                                                                                               "ues"
                                                                                               "t",
                                                                                               "ser"
                                                                                               "ver"
                                                                                               "_er"
                                                                                               "ro"
                                                                                               "r",
                                                                                               "nul"
                                                                                               "l",
                                                                                               "una"
                                                                                               "vai"
                                                                                               "lab"
                                                                                               "le") "\n"
                                                                                                     "    http-error status 504 content-type application/json string " OPENAI_ERROR(
                                                                                                         "the node did not answer in time",
                                                                                                         "server_error",
                                                                                                         "null",
                                                                                                         "gateway_timeout") "\n"
                                                                                                                            "\n");
}

static void add_frontend(text *t, const char *listen, const cluster_view *v) {
    add(t,
        "frontend synapse\n"
        "    bind %s\n"
        "    # Wait for the body (up to tune.bufsize): the model to route to is in it.\n"
        "    option http-buffer-request\n"
        "    acl completion path /v1/chat/completions /v1/completions\n"
        "    http-request set-var(txn.model) req.body,json_query('$.model') if METH_POST\n"
        "    # The conversation key for session affinity: the X-Session-Id header, else the "
        "body's\n"
        "    # \"user\" field. Turns of one conversation then go to the node holding their prefix "
        "cache.\n"
        "    http-request set-var(txn.conversation) req.body,json_query('$.user') if METH_POST\n"
        "    http-request set-var(txn.conversation) req.hdr(X-Session-Id) if { "
        "req.hdr(X-Session-Id) -m len gt 0 }\n"
        "    # Loading and unloading models is per node: call the node itself, not the balancer.\n"
        "    http-request return status 404 content-type application/json string " OPENAI_ERROR(
            "the /admin endpoints are per node: call the node, not the load balancer",
            "invalid_request_error", "null",
            "not_found") " if { path_beg /admin/ }\n"
                         "    http-request return status 400 content-type application/json "
                         "string " OPENAI_ERROR("the body must name a \\\"model\\\" within its "
                                                "first 256 KiB: the load balancer routes on it",
                                                "invalid_request_error", "\"model\"",
                                                "model_required") " if METH_POST completion !{ "
                                                                  "var(txn.model) -m found }\n",
        listen);
    /* Every model held somewhere (with none, every model is unknown); a request naming another
     * gets 503 here, with its name. */
    add(t, "    # A model no node holds: 503 (it may be loaded on a node later), naming it.\n");
    if (v->n_res > 0) add(t, "    acl known_model var(txn.model) -m str");
    for (size_t r = 0; r < v->n_res; r++)
        if (first_of_model(v, r)) add(t, " %s", v->res[r].model);
    add(t,
        "%s"
        "    http-request return status 503 content-type application/json lf-string "
        "'{\"error\":{\"message\":\"no node holds the model %%[var(txn.model),json(utf8s)]\","
        "\"type\":\"invalid_request_error\",\"param\":\"model\",\"code\":\"model_not_found\"}}' "
        "if { var(txn.model) -m found }%s\n",
        v->n_res > 0 ? "\n" : "", v->n_res > 0 ? " !known_model" : "");
    /* The cluster's models, not one node's: aliases need no JSON escaping (model_alias_valid). */
    add(t, "    # GET /v1/models lists every model some node holds, as the cluster serves them.\n"
           "    http-request return status 200 content-type application/json string "
           "'{\"object\":\"list\",\"data\":[");
    for (size_t r = 0, n = 0; r < v->n_res; r++)
        if (first_of_model(v, r))
            add(t, "%s{\"id\":\"%s\",\"object\":\"model\",\"owned_by\":\"synapse\"}",
                n++ ? "," : "", v->res[r].model);
    add(t, "]}' if METH_GET { path /v1/models /models }\n");
    add(t, "    # Which node answered, for debugging placement and affinity.\n"
           "    http-response set-header X-Synapse-Node %%[srv_name]\n");
    for (size_t r = 0; r < v->n_res; r++)
        if (first_of_model(v, r))
            add(t, "    use_backend model_%s if { var(txn.model) -m str %s }\n", v->res[r].model,
                v->res[r].model);
    add(t, "    # Everything else (/health, /metrics, /tokenize, the chat page): any node.\n"
           "    default_backend all_nodes\n"
           "\n");
}

static void add_backends(text *t, const cluster_view *v) {
    add(t, "# Every node that answered.\n"
           "backend all_nodes\n"
           "    balance leastconn\n");
    for (size_t i = 0; i < v->n_nodes; i++)
        if (v->answered[i]) add_server(t, &v->nodes[i], 0);
    if (v->n_res == 0) return;
    add(t,
        "\n"
        "# One backend per model, with exactly the nodes where it is resident.\n"
        "# - balance leastconn: the node with the fewest of the model's requests in flight.\n"
        "# - maxconn: the node's slots for the model. A node never queues; HAProxy does, and "
        "hands\n"
        "#   each request to the first node with a free slot (or 503 after timeout queue).\n"
        "# - stick on: a conversation key seen before goes back to the node that served it (its\n"
        "#   prefix cache), unless that node is down. Requests without a key are balanced.\n"
        "# - retry-on also 404 and 503: a node that has just unloaded the model (404) or is\n"
        "#   shutting down (503) has started nothing, so the request goes to another node.\n"
        "# - http-error 503: every node of the model down, or no slot freed in time.\n");
    for (size_t r = 0; r < v->n_res; r++) {
        if (!first_of_model(v, r)) continue;
        const char *model = v->res[r].model;
        add(t,
            "\n"
            "backend model_%s\n"
            "    balance leastconn\n"
            "    retry-on conn-failure empty-response 404 503\n"
            "    stick-table type string len 128 size 100k expire 30m\n"
            "    stick on var(txn.conversation) if { var(txn.conversation) -m len gt 0 }\n"
            "    http-error status 503 content-type application/json hdr Retry-After 1 string "
            "'{\"error\":{\"message\":\"no node holding the model %s is up, or none had a free "
            "slot within "
            "the queue "
            "timeout\",\"type\":\"server_error\",\"param\":\"model\",\"code\":\"model_"
            "unavailable\"}}'\n",
            model, model);
        for (size_t k = r; k < v->n_res && strcmp(v->res[k].model, model) == 0; k++)
            add_server(t, &v->nodes[v->res[k].node], v->res[k].slots);
    }
}

char *haproxy_config(const char *listen, const cluster_view *v) {
    text t = {0};
    add_header(&t, v);
    add_global_and_defaults(&t);
    add_frontend(&t, listen, v);
    add_backends(&t, v);
    if (t.failed) {
        free(t.data);
        return NULL;
    }
    return t.data;
}
