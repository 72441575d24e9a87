/* cmd_serve.c: `synapse serve`: options, start-up, and the graceful stop on SIGINT/SIGTERM. The
 * HTTP daemon starts before the model loads, so /health answers 503 ("loading") meanwhile. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "common/args.h"
#include "common/options.h"
#include "common/text.h"
#include "server.h"
#include "synapse_internal.h"

const char usage_serve[] =
    "synapse serve -m MODEL [--alias NAME] [-m MODEL [--alias NAME] ...] [options]\n"
    "  An OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions\n"
    "  (streaming or not), /v1/embeddings, GET /v1/models, /health, /metrics, POST /tokenize,\n"
    "  /detokenize, and a chat page at /. One line per request on stderr.\n"
    "  -m, --model PATH        a GGUF file to serve (at least one; several -m serve several\n"
    "                          models, on the same compute threads)\n"
    "  --alias NAME            the id in the API of the -m before it: letters, digits, -_.:\n"
    "                          (default: the file name without .gguf)\n"
    "  --host HOST             address to listen on (default 127.0.0.1)\n"
    "  --port N                TCP port, 0..65535 (default 8080; 0: any free port, printed)\n"
    "  --parallel N            requests decoding at once per model, 1..256 (default 4)\n"
    "  -t, --threads N         compute threads (default: one per core)\n"
    "  --api-key KEY           require 'Authorization: Bearer KEY' on the API and /admin (not\n"
    "                          on /, /health and /metrics)\n"
    "  --cors-origin ORIGIN    let browser pages from ORIGIN (http://host:port; repeatable or a\n"
    "                          comma list; * for any) call the API. Default: any origin\n"
    "                          without --api-key, none with it\n"
    "  --pooling mean|last|cls how POST /v1/embeddings pools a model's hidden states (default:\n"
    "                          each file's pooling_type; without one, last)\n"
    "  --slots-show-prompts    llama-server's GET /slots shows the running requests' prompts\n"
    "                          (README: its /props, /slots, /apply-template, /completion)\n"
    "  -c, --ctx-size N        most tokens of one request, prompt + generated (default: the\n"
    "                          model's training context)\n"
    "  --chat-template-file F  render chats with the Jinja template in file F instead of each\n"
    "                          model's tokenizer.chat_template\n"
    "  --kv-budget MiB         KV-cache memory of a model's requests and its prefix cache\n"
    "                          (default 1024)\n"
    "  --max-queue N           requests waiting for a slot before 503 (default 64)\n"
    "  --timeout SEC           close a connection idle this long, e.g. a stalled upload\n"
    "                          (default 600)\n"
    "  --grace SEC             on SIGINT/SIGTERM, how long running requests may finish (default "
    "10)\n"
    "  --max-body MiB          largest request body, else 413 (default 8)\n"
    "  --max-connections N     open connections at most (default 256)\n"
    "  --isa TIER, --kv-type TYPE, --no-huge-pages, --no-interleave   as for run\n"
    "  Models can also be loaded and removed while serving: POST /admin/models {\"path\",\n"
    "  \"alias\"} and DELETE /admin/models/ALIAS (README \"Serving over HTTP\").\n";

/* The numeric serve options: EXIT_OK, EXIT_USAGE (printed) or OPT_NOMATCH. */
static int parse_serve_number(arg_iter *it, const char *arg, server_opts *o) {
    static const struct {
        const char *name;
        long min, max;
    } opts[] = {{"--port", 0, 65535},         {"--parallel", 1, SYN_ENGINE_MAX_PARALLEL},
                {"--kv-budget", 1, 1L << 20}, {"--max-queue", 0, 1L << 20},
                {"--timeout", 1, 86400},      {"--grace", 0, 3600},
                {"--max-body", 1, 1024},      {"--max-connections", 1, 10000}};
    size_t k = 0;
    while (k < sizeof opts / sizeof opts[0] && strcmp(arg, opts[k].name) != 0)
        k++;
    if (k == sizeof opts / sizeof opts[0]) return OPT_NOMATCH;
    const char *v;
    long l;
    int rc;
    if ((rc = args_value(it, arg, &v)) != EXIT_OK ||
        (rc = parse_long(arg, v, opts[k].min, opts[k].max, &l)) != EXIT_OK)
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

/* -m PATH and --alias NAME (naming the -m before it): EXIT_OK, EXIT_USAGE or OPT_NOMATCH. */
static int parse_model_arg(arg_iter *it, const char *arg, server_opts *o) {
    const bool is_model = strcmp(arg, "-m") == 0 || strcmp(arg, "--model") == 0;
    if (!is_model && strcmp(arg, "--alias") != 0) return OPT_NOMATCH;
    const char *v;
    int rc = args_value(it, arg, &v);
    if (rc != EXIT_OK) return rc;
    if (is_model) {
        model_arg *grown = realloc(o->models, (o->n_models + 1) * sizeof *grown);
        if (!grown) return fail_runtime("out of memory");
        o->models = grown;
        o->models[o->n_models++] = (model_arg){.path = v};
        return EXIT_OK;
    }
    if (o->n_models == 0)
        return fail_usage("--alias '%s' comes before any -m: it names the -m before it", v);
    model_arg *m = &o->models[o->n_models - 1];
    if (m->alias) return fail_usage("-m %s has two aliases ('%s' and '%s')", m->path, m->alias, v);
    if (!model_alias_valid(v))
        return fail_usage("--alias '%s': use 1..64 letters, digits or -_.:", v);
    m->alias = v;
    return EXIT_OK;
}

static int parse_serve_args(int argc, char **argv, server_opts *o, gen_opts *g) {
    gen_opts_init(g, 0);
    *o = (server_opts){.host = "127.0.0.1",
                       .port = 8080,
                       .n_parallel = 4,
                       .kv_budget_mib = 1024,
                       .max_queue = 64,
                       .timeout_s = 600,
                       .grace_s = 10,
                       .max_body_bytes = 8u << 20,
                       .max_connections = 256,
                       .pooling = SYN_POOLING_MODEL};
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    while ((arg = args_next(&it))) {
        int rc;
        if (args_is_help(arg)) {
            fputs(usage_serve, stdout);
            return ARGS_HELP;
        }
        if ((rc = parse_model_arg(&it, arg, o)) != OPT_NOMATCH ||
            (rc = parse_gen_opt(&it, arg, GEN_COMPUTE | GEN_CTX | GEN_TEMPLATE, g)) !=
                OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
            continue;
        }
        if ((rc = parse_serve_number(&it, arg, o)) != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
            continue;
        }
        if (strcmp(arg, "--pooling") == 0) {
            const char *v;
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            o->pooling = strcmp(v, "mean") == 0   ? SYN_POOLING_MEAN
                         : strcmp(v, "last") == 0 ? SYN_POOLING_LAST
                         : strcmp(v, "cls") == 0  ? SYN_POOLING_CLS
                                                  : SYN_POOLING_MODEL;
            if (o->pooling == SYN_POOLING_MODEL)
                return fail_usage("--pooling '%s': use mean, last or cls", v);
            continue;
        }
        if (strcmp(arg, "--slots-show-prompts") == 0) {
            o->slots_show_prompts = true;
            continue;
        }
        if (strcmp(arg, "--cors-origin") == 0) {
            const char *v;
            char err[256];
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if (cors_parse_origins(o, v, err, sizeof err) != 0) return fail_usage("%s", err);
            continue;
        }
        const char **text = strcmp(arg, "--host") == 0      ? &o->host
                            : strcmp(arg, "--api-key") == 0 ? &o->api_key
                                                            : NULL;
        if (!text) return args_unknown(arg);
        if ((rc = args_value(&it, arg, text)) != EXIT_OK) return rc;
        if (**text == '\0') return fail_usage("%s must not be empty", arg);
    }
    if (o->n_models == 0) return fail_usage("missing -m MODEL (a GGUF file to serve)");
    if (g->backend != SYN_BACKEND_OPTIMIZED)
        return fail_usage("serve runs on the optimized backend only");
    o->n_threads = g->n_threads;
    o->n_ctx = g->n_ctx;
    o->isa = g->isa;
    o->kv_type = g->kv_type;
    o->huge_pages = g->huge_pages;
    o->interleave = g->interleave;
    o->chat_template = g->chat_template;
    g->chat_template = NULL;
    return EXIT_OK;
}

static void free_serve_opts(server_opts *o) {
    free(o->models);
    free(o->chat_template);
    for (size_t i = 0; i < o->n_cors_origins; i++)
        free(o->cors_origins[i]);
    free(o->cors_origins);
}

/* The default alias: the file name without its directory and ".gguf". */
static char *default_alias(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    if (len > 5 && strcmp(base + len - 5, ".gguf") == 0) len -= 5;
    return strndup(base, len);
}

/* Starts the shared compute threads and loads the command line's models; the daemon already
 * answers (503 until ready). */
static int start_models(server *srv) {
    if (syn_compute_pool_new(srv->opts.n_threads, &srv->pool) != SYN_OK)
        return fail_lib("cannot start %d compute threads", srv->opts.n_threads);
    for (size_t i = 0; i < srv->opts.n_models; i++) {
        const model_arg *a = &srv->opts.models[i];
        char *alias = a->alias ? strdup(a->alias) : default_alias(a->path), err[1024];
        if (!alias) return fail_runtime("out of memory");
        if (!model_alias_valid(alias)) {
            int rc = fail_usage("the file name of -m %s is no valid alias: give --alias", a->path);
            free(alias);
            return rc;
        }
        const int rc = models_load(srv, a->path, alias, err, sizeof err);
        if (rc == 0)
            fprintf(stderr, "synapse serve: model '%s' ready (%d slots)\n", alias,
                    srv->opts.n_parallel);
        free(alias);
        if (rc != 0) return fail_runtime("%s", err);
    }
    atomic_store(&srv->ready, true);
    return EXIT_OK;
}

/* SIGINT/SIGTERM: stop accepting, let running requests finish for up to grace_s, then cancel the
 * rest (syn_engine_free) and close every connection. */
static void stop_gracefully(server *srv, int sig) {
    fprintf(stderr,
            "synapse serve: %s: no new connections; waiting up to %u s for %u running requests\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", srv->opts.grace_s,
            atomic_load(&srv->active_completions));
    atomic_store(&srv->stopping, true);
    MHD_socket listener = MHD_quiesce_daemon(srv->daemon);
    const double deadline = syn_now_ms() + 1000.0 * srv->opts.grace_s;
    while (atomic_load(&srv->active_completions) > 0 && syn_now_ms() < deadline)
        usleep(10 * 1000);
    /* What is left is cancelled; its clients get their last event (a 503 error) before the
     * daemon closes every connection, within a second. */
    completions_cancel_all(srv);
    const double flushed = syn_now_ms() + 1000.0;
    while (atomic_load(&srv->active_completions) > 0 && syn_now_ms() < flushed)
        usleep(10 * 1000);
    http_stop(srv);
    if (listener != MHD_INVALID_SOCKET) close(listener);
}

int cmd_serve(int argc, char **argv) {
    server srv = {0};
    gen_opts g;
    int rc = parse_serve_args(argc, argv, &srv.opts, &g);
    if (rc != EXIT_OK) {
        free_serve_opts(&srv.opts);
        gen_opts_free(&g);
        return rc == ARGS_HELP ? EXIT_OK : rc;
    }
    pthread_mutex_init(&srv.models_lock, NULL);
    pthread_mutex_init(&srv.completions_lock, NULL);
    pthread_cond_init(&srv.models_idle, NULL);

    /* Every thread started from here on inherits the blocked signals; only sigwait sees them. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    rc = http_start(&srv, serve_routes, serve_n_routes);
    if (rc == EXIT_OK) {
        fprintf(stderr, "synapse serve: listening on http://%s:%u/ (model loading)\n",
                srv.opts.host, http_port(&srv));
        rc = start_models(&srv);
    }
    if (rc == EXIT_OK) {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        stop_gracefully(&srv, sig);
        fprintf(stderr, "synapse serve: stopped\n");
    }
    http_stop(&srv);
    models_free_all(&srv);
    syn_compute_pool_free(srv.pool);
    pthread_cond_destroy(&srv.models_idle);
    pthread_mutex_destroy(&srv.models_lock);
    pthread_mutex_destroy(&srv.completions_lock);
    free_serve_opts(&srv.opts);
    return rc;
}
