/*
 * cluster.h: `synapse cluster-config`, the HAProxy configuration for `synapse serve` nodes.
 *
 *   http_client.c          a small HTTP/1.1 GET client: connect and read timeouts, a size bound,
 *                          bodies delimited by Content-Length or by the connection's close
 *   nodes.c                node URLs, and what each node holds: its /v1/models as residencies
 *   haproxy_config.c       the configuration text for a set of residencies
 *   cmd_cluster_config.c   options, the one-shot run and the --watch loop (atomic rewrite of the
 *                          file, SIGUSR2 to the HAProxy master)
 *
 * Nothing a node answers is trusted: a response that is too large, truncated, slow, not JSON or
 * not shaped like /v1/models is an error naming the node, never a crash or a hang.
 */
#ifndef SYNAPSE_CLUSTER_H
#define SYNAPSE_CLUSTER_H

#include "common/text.h"
#include "synapse.h"
#include <stdbool.h>
#include <stddef.h>

/* ---- http_client.c ---- */

/* Writes the message into err[err_size] (truncated to fit): how the functions here report why
 * they failed. */
void format_error(char *err, size_t err_size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

typedef struct http_response {
    int status; /* e.g. 200 */
    char *body; /* [body_len] + a NUL; malloc'd */
    size_t body_len;
} http_response;

/* GET http://host:port/path with "Connection: close" (and "Authorization: Bearer KEY" when
 * bearer is not NULL). The connection must be made within timeout_ms, and the whole response must
 * then arrive within timeout_ms more; a body over max_body bytes is refused. 0 with *resp filled
 * (free it with http_response_free), or -1 with a short reason in err. */
int http_get(const char *host, const char *port, const char *path, const char *bearer,
             int timeout_ms, size_t max_body, http_response *resp, char *err, size_t err_size);
void http_response_free(http_response *resp);

/* ---- nodes.c ---- */

/* A node, from its URL http://HOST:PORT. */
typedef struct node_addr {
    char url[300];  /* normalised: "http://HOST:PORT", no trailing slash */
    char host[256]; /* an IPv6 address without its brackets */
    char port[6];
    bool ipv6;
} node_addr;

/* One model resident on one node. */
typedef struct residency {
    char model[MODEL_ALIAS_MAX + 1];
    size_t node; /* index into the node list */
    long slots;  /* the model's requests decoding at once on that node (its n_parallel) */
} residency;

/* What the nodes answered in one poll. */
typedef struct cluster_view {
    const node_addr *nodes;
    size_t n_nodes;
    bool *answered; /* [n_nodes]: the node's /v1/models was read */
    residency *res; /* [n_res], sorted by model, then node */
    size_t n_res, cap_res;
} cluster_view;

/* Parses "http://HOST:PORT" (one trailing '/' allowed); HOST is a name, an IPv4 address or a
 * bracketed IPv6 address. 0, or -1 with the reason in err. */
int node_parse_url(const char *url, node_addr *out, char *err, size_t err_size);

/* Whether s is HOST:PORT for HAProxy's bind line: as in a node URL, or "*" for every address. */
bool listen_address_valid(const char *s);

/* Reads what node `index` of view->nodes holds and adds it to view (answered[index] set).
 * 0, or -1 with the reason in err (view unchanged). */
int node_read_models(cluster_view *view, size_t index, const char *api_key, int timeout_ms,
                     char *err, size_t err_size);

/* An empty view of the nodes (all unanswered). 0, or -1 out of memory. */
int cluster_view_init(cluster_view *view, const node_addr *nodes, size_t n_nodes);
/* Sorts the residencies by model, then node (the order of the configuration). */
void cluster_view_sort(cluster_view *view);
void cluster_view_free(cluster_view *view);

/* ---- haproxy_config.c ---- */

/* The HAProxy configuration routing each model to the answered nodes holding it; listen is the
 * validated "HOST:PORT" clients connect to. A malloc'd string, or NULL out of memory. The text
 * depends only on its inputs (no dates), so equal texts mean equal clusters. */
char *haproxy_config(const char *listen, const cluster_view *view);

#endif
