/* cmd_serve.c: `synapse serve`: options, start-up, and the graceful stop on SIGINT/SIGTERM. The
 * HTTP daemon starts before the model loads, so /health answers 503 ("loading") meanwhile. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../commands.h"
#include "../common.h"
#include "server.h"

const char usage_serve[] =
    "synapse serve -m MODEL [options]\n"
    "  An OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions\n"
    "  (streaming or not), GET /v1/models, /health, /metrics, POST /tokenize, /detokenize,\n"
    "  and a chat page at /. One line per request on stderr.\n"
    "  -m, --model PATH        GGUF file to serve (required)\n"
    "  --alias NAME            the model's id in the API (default: the file name without .gguf)\n"
    "  --host HOST             address to listen on (default 127.0.0.1)\n"
    "  --port N                TCP port, 0..65535 (default 8080; 0: any free port, printed)\n"
    "  --parallel N            requests decoding at once, 1..256 (default 4)\n"
    "  -t, --threads N         compute threads (default: one per core)\n"
    "  --api-key KEY           require 'Authorization: Bearer KEY' on the API (not on /,\n"
    "                          /health and /metrics)\n"
    "  -c, --ctx-size N        most tokens of one request, prompt + generated (default: the\n"
    "                          model's training context)\n"
    "  --kv-budget MiB         KV-cache memory of all requests and the prefix cache (default 1024)\n"
    "  --max-queue N           requests waiting for a slot before 503 (default 64)\n"
    "  --timeout SEC           close a connection idle this long, e.g. a stalled upload\n"
    "                          (default 600)\n"
    "  --grace SEC             on SIGINT/SIGTERM, how long running requests may finish (default 10)\n"
    "  --max-body MiB          largest request body, else 413 (default 8)\n"
    "  --max-connections N     open connections at most (default 256)\n"
    "  --isa TIER, --kv-type TYPE, --no-huge-pages   as for run\n";

/* The numeric serve options: EXIT_OK, EXIT_USAGE (printed) or OPT_NOMATCH. */
static int parse_serve_number(arg_iter *it, const char *arg, server_opts *o) {
    static const struct {
        const char *name;
        long min, max;
    } opts[] = {{"--port", 0, 65535},    {"--parallel", 1, SYN_ENGINE_MAX_PARALLEL},
                {"--kv-budget", 1, 1L << 20}, {"--max-queue", 0, 1L << 20},
                {"--timeout", 1, 86400}, {"--grace", 0, 3600},
                {"--max-body", 1, 1024}, {"--max-connections", 1, 10000}};
    size_t k = 0;
    while (k < sizeof opts / sizeof opts[0] && strcmp(arg, opts[k].name) != 0) k++;
    if (k == sizeof opts / sizeof opts[0]) return OPT_NOMATCH;
    const char *v;
    long l;
    int rc;
    if ((rc = args_value(it, arg, &v)) != EXIT_OK || (rc = parse_long(arg, v, opts[k].min, opts[k].max, &l)) != EXIT_OK)
        return rc;
    switch (k) { /* in the order of opts */
    case 0: o->port = (uint16_t)l; break;
    case 1: o->n_parallel = (int32_t)l; break;
    case 2: o->kv_budget_mib = (uint32_t)l; break;
    case 3: o->max_queue = (uint32_t)l; break;
    case 4: o->timeout_s = (uint32_t)l; break;
    case 5: o->grace_s = (uint32_t)l; break;
    case 6: o->max_body_bytes = (size_t)l << 20; break;
    default: o->max_connections = (uint32_t)l; break;
    }
    return EXIT_OK;
}

static int parse_serve_args(int argc, char **argv, server_opts *o, gen_opts *g) {
    gen_opts_init(g, 0);
    *o = (server_opts){.host = "127.0.0.1", .port = 8080, .n_parallel = 4, .kv_budget_mib = 1024,
                       .max_queue = 64, .timeout_s = 600, .grace_s = 10, .max_body_bytes = 8u << 20,
                       .max_connections = 256};
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    while ((arg = args_next(&it))) {
        int rc;
        if (args_is_help(arg)) {
            fputs(usage_serve, stdout);
            return ARGS_HELP;
        }
        rc = parse_gen_opt(&it, arg, GEN_MODEL | GEN_COMPUTE | GEN_CTX, g);
        if (rc != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
            continue;
        }
        if ((rc = parse_serve_number(&it, arg, o)) != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
            continue;
        }
        const char **text = strcmp(arg, "--alias") == 0     ? &o->alias
                            : strcmp(arg, "--host") == 0    ? &o->host
                            : strcmp(arg, "--api-key") == 0 ? &o->api_key
                                                            : NULL;
        if (!text) return args_unknown(arg);
        if ((rc = args_value(&it, arg, text)) != EXIT_OK) return rc;
        if (**text == '\0') return fail_usage("%s must not be empty", arg);
    }
    if (require_model(g) != EXIT_OK) return EXIT_USAGE;
    if (g->backend != SYN_BACKEND_OPTIMIZED) return fail_usage("serve runs on the optimized backend only");
    o->model_path = g->model_path;
    o->n_threads = g->n_threads;
    o->n_ctx = g->n_ctx;
    o->isa = g->isa;
    o->kv_type = g->kv_type;
    o->huge_pages = g->huge_pages;
    return EXIT_OK;
}

/* The default alias: the file name without its directory and ".gguf". */
static char *default_alias(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".gguf") == 0) len -= 5;
    return strndup(base, len);
}

/* Loads the model and starts the engine; the daemon already answers. */
static int start_model(server *srv) {
    const server_opts *o = &srv->opts;
    int rc = load_model(o->model_path, prefetch_pays(o->n_threads), o->huge_pages, &srv->model);
    if (rc != EXIT_OK) return rc;
    srv->tok = syn_model_tokenizer(srv->model);
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = o->n_parallel;
    ep.n_threads = o->n_threads;
    ep.isa = o->isa;
    ep.kv_type = o->kv_type;
    ep.n_ctx = o->n_ctx;
    ep.kv_budget_mib = o->kv_budget_mib;
    if (syn_engine_new(srv->model, &ep, &srv->engine) != SYN_OK)
        return fail_lib("cannot start an engine with %d slots", ep.n_parallel);
    srv->created = (long long)time(NULL);
    atomic_store(&srv->ready, true);
    return EXIT_OK;
}

/* SIGINT/SIGTERM: stop accepting, let running requests finish for up to grace_s, then cancel the
 * rest (syn_engine_free) and close every connection. */
static void stop_gracefully(server *srv, int sig) {
    fprintf(stderr, "synapse serve: %s: no new connections; waiting up to %u s for %u running requests\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", srv->opts.grace_s, atomic_load(&srv->active_completions));
    atomic_store(&srv->stopping, true);
    MHD_socket listener = MHD_quiesce_daemon(srv->daemon);
    const double deadline = now_ms() + 1000.0 * srv->opts.grace_s;
    while (atomic_load(&srv->active_completions) > 0 && now_ms() < deadline) usleep(10 * 1000);
    syn_engine_free(srv->engine); /* cancels what is left; handles stay valid */
    srv->engine = NULL;
    http_stop(srv);
    if (listener != MHD_INVALID_SOCKET) close(listener);
}

int cmd_serve(int argc, char **argv) {
    server srv = {0};
    gen_opts g;
    int rc = parse_serve_args(argc, argv, &srv.opts, &g);
    if (rc != EXIT_OK) return rc == ARGS_HELP ? EXIT_OK : rc;
    srv.alias = srv.opts.alias ? strdup(srv.opts.alias) : default_alias(srv.opts.model_path);
    if (!srv.alias) return fail_runtime("out of memory");

    /* Every thread started from here on inherits the blocked signals; only sigwait sees them. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    rc = http_start(&srv);
    if (rc == EXIT_OK) {
        fprintf(stderr, "synapse serve: listening on http://%s:%u/ (model loading)\n", srv.opts.host, http_port(&srv));
        rc = start_model(&srv);
    }
    if (rc == EXIT_OK) {
        fprintf(stderr, "synapse serve: model '%s' ready (%d slots)\n", srv.alias, srv.opts.n_parallel);
        int sig = 0;
        sigwait(&stop_signals, &sig);
        stop_gracefully(&srv, sig);
        fprintf(stderr, "synapse serve: stopped\n");
    }
    http_stop(&srv);
    syn_engine_free(srv.engine);
    syn_model_free(srv.model);
    free(srv.alias);
    return rc;
}
