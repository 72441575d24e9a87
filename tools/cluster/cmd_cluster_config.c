/* cmd_cluster_config.c: `synapse cluster-config`: reads every node's /v1/models and writes the
 * HAProxy configuration for them, once, or (--watch) again whenever what the nodes hold changes,
 * reloading HAProxy each time. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cluster.h"
#include "commands.h"
#include "common/args.h"
#include "common/output.h"
#include "common/text.h"

const char usage_cluster_config[] =
    "synapse cluster-config [options] NODE_URL...\n"
    "  Reads GET /v1/models of each `synapse serve` node (NODE_URL: http://HOST:PORT) and writes "
    "an\n"
    "  HAProxy configuration that sends each completion to a healthy node holding its model, the\n"
    "  least loaded first, a conversation to the node with its prefix cache (deploy/README.md).\n"
    "  A node that does not answer is an error (exit 1), except with --watch.\n"
    "  --listen HOST:PORT      where HAProxy accepts clients (default 127.0.0.1:8000; *:PORT: "
    "every\n"
    "                          address)\n"
    "  -o, --output FILE       write FILE (a temporary file renamed over it) instead of stdout\n"
    "  --api-key KEY           send 'Authorization: Bearer KEY' to the nodes (their --api-key)\n"
    "  --timeout SEC           how long a node may take to connect, then to answer, 1..300\n"
    "                          (default 5)\n"
    "  --watch SEC             poll the nodes every SEC seconds (1..86400) until SIGINT/SIGTERM;\n"
    "                          when what they hold changes, rewrite FILE and reload HAProxy; a "
    "node\n"
    "                          that does not answer is left out (and logged). Needs -o and\n"
    "                          --haproxy-pid-file\n"
    "  --haproxy-pid-file FILE the HAProxy master's pid file (haproxy -W -p FILE): the reload is\n"
    "                          SIGUSR2 to it, which drops no connection\n";

typedef struct cluster_opts {
    const char *listen;
    const char *output; /* NULL: stdout */
    const char *api_key;
    int timeout_ms;
    long watch_s; /* 0: write once */
    const char *pid_file;
    node_addr *nodes;
    size_t n_nodes;
} cluster_opts;

static int parse_args(int argc, char **argv, cluster_opts *o) {
    *o = (cluster_opts){.listen = "127.0.0.1:8000", .timeout_ms = 5000};
    o->nodes = calloc((size_t)argc, sizeof *o->nodes);
    if (!o->nodes) return fail_runtime("out of memory");
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    while ((arg = args_next(&it)) != NULL) {
        long l;
        const char *v;
        if (args_is_help(arg)) {
            fputs(usage_cluster_config, stdout);
            return ARGS_HELP;
        } else if (strcmp(arg, "--listen") == 0) {
            if ((rc = args_value(&it, arg, &o->listen)) != EXIT_OK) return rc;
            if (!listen_address_valid(o->listen))
                return fail_usage(
                    "--listen: '%s' must be HOST:PORT (HOST a name, an address, * or [IPv6]; PORT "
                    "1..65535)",
                    o->listen);
        } else if (strcmp(arg, "-o") == 0 || strcmp(arg, "--output") == 0) {
            if ((rc = args_value(&it, arg, &o->output)) != EXIT_OK) return rc;
            if (!o->output[0]) return fail_usage("%s must not be empty", arg);
        } else if (strcmp(arg, "--api-key") == 0) {
            if ((rc = args_value(&it, arg, &o->api_key)) != EXIT_OK) return rc;
            if (!o->api_key[0] || strpbrk(o->api_key, "\r\n"))
                return fail_usage("--api-key must be a non-empty single line");
        } else if (strcmp(arg, "--timeout") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK ||
                (rc = parse_long(arg, v, 1, 300, &l)) != EXIT_OK)
                return rc;
            o->timeout_ms = (int)l * 1000;
        } else if (strcmp(arg, "--watch") == 0) {
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK ||
                (rc = parse_long(arg, v, 1, 86400, &o->watch_s)) != EXIT_OK)
                return rc;
        } else if (strcmp(arg, "--haproxy-pid-file") == 0) {
            if ((rc = args_value(&it, arg, &o->pid_file)) != EXIT_OK) return rc;
            if (!o->pid_file[0]) return fail_usage("%s must not be empty", arg);
        } else if (arg[0] == '-') {
            return args_unknown(arg);
        } else {
            char err[512];
            node_addr *node = &o->nodes[o->n_nodes];
            if (node_parse_url(arg, node, err, sizeof err) != 0) return fail_usage("%s", err);
            for (size_t i = 0; i < o->n_nodes; i++)
                if (strcmp(o->nodes[i].url, node->url) == 0)
                    return fail_usage("node %s is given twice", node->url);
            o->n_nodes++;
        }
    }
    if (o->n_nodes == 0)
        return fail_usage("missing NODE_URL (http://HOST:PORT of a synapse serve node)");
    if (o->watch_s && (!o->output || !o->pid_file))
        return fail_usage("--watch needs -o FILE and --haproxy-pid-file FILE");
    if (o->pid_file && !o->watch_s)
        return fail_usage("--haproxy-pid-file is only used with --watch");
    return EXIT_OK;
}

/* Writes text to path through a temporary file in the same directory renamed over it, so HAProxy
 * never reads half a file. 0, or -1 with the reason in err. */
static int write_atomically(const char *path, const char *text, char *err, size_t err_size) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) {
        format_error(err, err_size, "cannot write '%s': path too long", path);
        return -1;
    }
    const int fd = mkstemp(tmp);
    if (fd < 0) {
        format_error(err, err_size, "cannot create a temporary file beside '%s': %s", path,
                     strerror(errno));
        return -1;
    }
    size_t left = strlen(text);
    const char *p = text;
    int saved = 0;
    while (left > 0 && !saved) {
        const ssize_t n = write(fd, p, left);
        if (n < 0 && errno != EINTR) saved = errno;
        if (n > 0) {
            p += n;
            left -= (size_t)n;
        }
    }
    /* mkstemp makes the file 0600; HAProxy may run as another user. */
    if (!saved && (fchmod(fd, 0644) != 0 || fsync(fd) != 0)) saved = errno;
    if (close(fd) != 0 && !saved) saved = errno;
    if (!saved && rename(tmp, path) != 0) saved = errno;
    if (saved) {
        unlink(tmp);
        format_error(err, err_size, "cannot write '%s': %s", path, strerror(saved));
        return -1;
    }
    return 0;
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("synapse cluster-config: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* One run: writes the configuration once; every node must answer. */
static int write_once(const cluster_opts *o) {
    cluster_view view;
    if (cluster_view_init(&view, o->nodes, o->n_nodes) != 0) return fail_runtime("out of memory");
    char err[512];
    for (size_t i = 0; i < o->n_nodes; i++) {
        if (node_read_models(&view, i, o->api_key, o->timeout_ms, err, sizeof err) != 0) {
            cluster_view_free(&view);
            return fail_runtime("node %s: %s", o->nodes[i].url, err);
        }
    }
    cluster_view_sort(&view);
    char *config = haproxy_config(o->listen, &view);
    cluster_view_free(&view);
    if (!config) return fail_runtime("out of memory");
    int rc = EXIT_OK;
    if (!o->output) {
        fputs(config, stdout);
        rc = check_stdout();
    } else if (write_atomically(o->output, config, err, sizeof err) != 0) {
        rc = fail_runtime("%s", err);
    }
    free(config);
    return rc;
}

/* One log line per residency that differs between the view the file showed and the new one. */
static void log_changes(const cluster_view *was, const cluster_view *now) {
    size_t i = 0, k = 0;
    while (i < was->n_res || k < now->n_res) {
        const residency *a = i < was->n_res ? &was->res[i] : NULL,
                        *b = k < now->n_res ? &now->res[k] : NULL;
        int order = !a ? 1 : !b ? -1 : strcmp(a->model, b->model);
        if (order == 0) order = (a->node > b->node) - (a->node < b->node);
        if (order < 0) {
            log_line("model %s is no longer on %s", a->model, now->nodes[a->node].url);
            i++;
        } else if (order > 0) {
            log_line("model %s is on %s (%ld slots)", b->model, now->nodes[b->node].url, b->slots);
            k++;
        } else {
            if (a->slots != b->slots)
                log_line("model %s on %s: %ld slots (was %ld)", b->model, now->nodes[b->node].url,
                         b->slots, a->slots);
            i++;
            k++;
        }
    }
}

typedef enum { RELOADED, HAPROXY_NOT_RUNNING, RELOAD_FAILED } reload_result;

/* SIGUSR2 to the HAProxy master named by the pid file (*pid set). Not running: no pid file, or
 * its process gone or not HAProxy (a stale file's pid reused: never signal that one). */
static reload_result reload_haproxy(const char *pid_file, long *pid, char *err, size_t err_size) {
    FILE *f = fopen(pid_file, "r");
    if (!f) {
        const int cause = errno;
        format_error(err, err_size, "cannot open '%s': %s", pid_file, strerror(cause));
        return cause == ENOENT ? HAPROXY_NOT_RUNNING : RELOAD_FAILED;
    }
    char line[32] = "";
    const bool read_ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    char *end = NULL;
    *pid = read_ok ? strtol(line, &end, 10) : 0;
    if (!read_ok || end == line || (*end != '\n' && *end != '\0') || *pid <= 1 || *pid > INT_MAX) {
        format_error(err, err_size, "'%s' does not hold a process id", pid_file);
        return RELOAD_FAILED;
    }
    char comm_path[64], comm[32] = "";
    snprintf(comm_path, sizeof comm_path, "/proc/%ld/comm", *pid);
    const bool exists = (f = fopen(comm_path, "r")) != NULL;
    if (exists) {
        if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
        fclose(f);
    }
    if (strncmp(comm, "haproxy", 7) != 0) {
        format_error(err, err_size, "process %ld (from '%s') is %s", *pid, pid_file,
                     exists ? "not HAProxy" : "gone");
        return HAPROXY_NOT_RUNNING;
    }
    if (kill((pid_t)*pid, SIGUSR2) != 0) {
        const int cause = errno;
        format_error(err, err_size, "cannot signal HAProxy (pid %ld from '%s'): %s", *pid, pid_file,
                     strerror(cause));
        return cause == ESRCH ? HAPROXY_NOT_RUNNING : RELOAD_FAILED;
    }
    return RELOADED;
}

/* Whether SIGINT or SIGTERM (blocked while watching) is waiting. */
static bool stop_pending(void) {
    sigset_t pending;
    return sigpending(&pending) == 0 &&
           (sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1);
}

/* Polls every node once into *now, logging the nodes that stop or start answering. False when a
 * stop signal came meanwhile (the poll is abandoned). */
static bool poll_nodes(const cluster_opts *o, cluster_view *now, bool *last_answered, bool first) {
    char err[512];
    for (size_t i = 0; i < o->n_nodes; i++) {
        if (stop_pending()) return false;
        const bool answered =
            node_read_models(now, i, o->api_key, o->timeout_ms, err, sizeof err) == 0;
        if (!answered && (first || last_answered[i]))
            log_line("node %s left out: %s", o->nodes[i].url, err);
        else if (answered && !first && !last_answered[i])
            log_line("node %s answers again", o->nodes[i].url);
        last_answered[i] = answered;
    }
    cluster_view_sort(now);
    return true;
}

/* --watch: polls the nodes every watch_s seconds; when the configuration they call for differs
 * from the file, rewrites the file and reloads HAProxy. Runs until SIGINT or SIGTERM (exit 0). */
static int watch(const cluster_opts *o) {
    /* Blocked, the stop signals wait for sigtimedwait between polls instead of killing a write. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop, NULL);

    char *current = NULL; /* the file's text, as last written or found */
    size_t current_len;
    if (access(o->output, F_OK) == 0 && read_file(o->output, &current, &current_len) != EXIT_OK)
        current = NULL;
    cluster_view shown, now; /* what the file shows; this poll */
    bool *last_answered = calloc(o->n_nodes, sizeof *last_answered);
    if (!last_answered || cluster_view_init(&shown, o->nodes, o->n_nodes) != 0) {
        free(last_answered);
        free(current);
        return fail_runtime("out of memory");
    }
    log_line("watching %zu node%s every %ld s; configuration %s, HAProxy pid file %s", o->n_nodes,
             o->n_nodes == 1 ? "" : "s", o->watch_s, o->output, o->pid_file);
    bool first = true, some_answered = false, reload_pending = false, reload_failing = false;
    char err[512];
    for (;;) {
        if (cluster_view_init(&now, o->nodes, o->n_nodes) != 0) {
            log_line("out of memory: skipping a poll");
        } else if (!poll_nodes(o, &now, last_answered, first)) {
            cluster_view_free(&now);
            break;
        } else {
            size_t n_answered = 0;
            for (size_t i = 0; i < o->n_nodes; i++)
                n_answered += now.answered[i];
            bool file_shows_now = false;
            char *config = NULL;
            if (n_answered == 0 && current) {
                /* Nowhere to move their models: HAProxy's health checks find the nodes when
                 * they come back, without a reload. (With no file yet, one without nodes is
                 * written below, so that HAProxy can start, answering 503.) */
                if (first || some_answered)
                    log_line("no node answers: %s left as it is", o->output);
            } else if (!(config = haproxy_config(o->listen, &now))) {
                log_line("out of memory writing the configuration");
            } else if (current && strcmp(config, current) == 0) {
                if (first) log_line("%s is up to date", o->output);
                file_shows_now = true;
            } else if (write_atomically(o->output, config, err, sizeof err) != 0) {
                log_line("%s", err);
            } else {
                log_changes(&shown, &now);
                log_line("wrote %s", o->output);
                free(current);
                current = config;
                config = NULL;
                file_shows_now = reload_pending = true;
            }
            free(config);
            some_answered = n_answered > 0;
            cluster_view_free(file_shows_now ? &shown : &now);
            if (file_shows_now) shown = now;
        }
        if (reload_pending) {
            long pid;
            const reload_result r = reload_haproxy(o->pid_file, &pid, err, sizeof err);
            if (r == RELOADED) log_line("reloaded HAProxy (SIGUSR2 to pid %ld)", pid);
            if (r == HAPROXY_NOT_RUNNING)
                log_line("HAProxy is not running (%s): it reads %s when it starts", err, o->output);
            if (r == RELOAD_FAILED && !reload_failing)
                log_line("cannot reload HAProxy, will retry every poll: %s", err);
            reload_pending = reload_failing = r == RELOAD_FAILED;
        }
        first = false;
        const struct timespec period = {.tv_sec = o->watch_s};
        const int sig = sigtimedwait(&stop, NULL, &period);
        if (sig == SIGINT || sig == SIGTERM) break;
    }
    log_line("stopping");
    cluster_view_free(&shown);
    free(last_answered);
    free(current);
    return EXIT_OK;
}

int cmd_cluster_config(int argc, char **argv) {
    cluster_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK) rc = o.watch_s ? watch(&o) : write_once(&o);
    free(o.nodes);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}
