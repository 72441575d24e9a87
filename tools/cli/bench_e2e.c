/* bench_e2e.c: `synapse bench --e2e`: wall time, time to first token and peak RSS of whole
 * `synapse run` processes, started from this very binary (/proc/self/exe). */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "bench.h"
#include "common/args.h"
#include "common/options.h"
#include "common/output.h"
#include "common/text.h"
#include "synapse_internal.h"

extern char **environ;

/* One process's figures. */
typedef struct e2e_run {
    double wall_ms;   /* spawn to reaped */
    double ttft_ms;   /* the child's own ttft_ms: prompt start to the first sampled token */
    double load_ms;   /* the child's model load */
    double decode_ts; /* the child's decode tok/s */
    double rss_mib;   /* peak resident set (wait4's ru_maxrss) */
    char isa[32];     /* the tier the child ran */
} e2e_run;

/* The series of -r runs of one configuration, for the statistics. */
typedef struct e2e_series {
    double *wall_ms, *ttft_ms, *load_ms, *decode_ts, *rss_mib; /* each [reps] */
    char isa[32];
} e2e_series;

/* The first line of f without the child's "synapse: error: " prefix (or "" when empty). */
static void first_error_line(FILE *f, char *buf, size_t cap) {
    static const char prefix[] = "synapse: error: ";
    buf[0] = '\0';
    rewind(f);
    if (!fgets(buf, (int)cap, f)) return;
    buf[strcspn(buf, "\n")] = '\0';
    if (strncmp(buf, prefix, sizeof prefix - 1) == 0)
        memmove(buf, buf + sizeof prefix - 1, strlen(buf) - (sizeof prefix - 1) + 1);
}

/* Reads the child's --json output into run. */
static int parse_child_json(FILE *out, int32_t n_gen, e2e_run *run) {
    rewind(out);
    json_error_t jerr;
    json_t *root = json_loadf(out, 0, &jerr);
    if (!root)
        return fail_runtime("--e2e: cannot parse the output of synapse run: %s (line %d)",
                            jerr.text, jerr.line);
    json_t *t = json_object_get(root, "timings");
    json_t *gen = json_object_get(root, "generated_ids");
    const char *isa = json_string_value(json_object_get(root, "isa"));
    int rc = EXIT_OK;
    if (!json_is_object(t) || !json_is_array(gen) || !isa ||
        !json_is_number(json_object_get(t, "ttft_ms")) ||
        !json_is_number(json_object_get(t, "load_ms")) ||
        !json_is_number(json_object_get(t, "decode_tok_s"))) {
        rc = fail_runtime("--e2e: the output of synapse run lacks timings, generated_ids or isa");
    } else if (json_array_size(gen) != (size_t)n_gen) {
        rc = fail_runtime("--e2e: synapse run generated %zu tokens, not %d", json_array_size(gen),
                          n_gen);
    } else {
        run->ttft_ms = json_number_value(json_object_get(t, "ttft_ms"));
        run->load_ms = json_number_value(json_object_get(t, "load_ms"));
        run->decode_ts = json_number_value(json_object_get(t, "decode_tok_s"));
        snprintf(run->isa, sizeof run->isa, "%s", isa);
    }
    json_decref(root);
    return rc;
}

/* Spawns `synapse run` with argv, waits for it and fills run. */
static int spawn_run(char *const *argv, int32_t n_gen, e2e_run *run) {
    FILE *out = tmpfile(), *err = tmpfile();
    posix_spawn_file_actions_t fa;
    int rc = EXIT_OK;
    if (!out || !err) {
        rc = fail_runtime("--e2e: cannot create a temporary file: %s", strerror(errno));
        goto done;
    }
    int e = posix_spawn_file_actions_init(&fa);
    if (e == 0) e = posix_spawn_file_actions_adddup2(&fa, fileno(out), 1);
    if (e == 0) e = posix_spawn_file_actions_adddup2(&fa, fileno(err), 2);
    fflush(stdout); /* nothing buffered may be written twice */
    pid_t pid = 0;
    double t0 = syn_now_ms();
    if (e == 0) e = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        rc = fail_runtime("--e2e: cannot start /proc/self/exe: %s", strerror(e));
        goto done;
    }
    int status = 0;
    struct rusage ru;
    pid_t got;
    while ((got = wait4(pid, &status, 0, &ru)) < 0 && errno == EINTR) {
    }
    run->wall_ms = syn_now_ms() - t0;
    if (got < 0) {
        rc = fail_runtime("--e2e: cannot wait for synapse run: %s", strerror(errno));
        goto done;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char line[512];
        first_error_line(err, line, sizeof line);
        rc = WIFEXITED(status)
                 ? fail_runtime("--e2e: synapse run exited with status %d: %s", WEXITSTATUS(status),
                                line)
                 : fail_runtime("--e2e: synapse run was killed by signal %d", WTERMSIG(status));
        goto done;
    }
    run->rss_mib = (double)ru.ru_maxrss / 1024.0; /* Linux reports KiB */
    rc = parse_child_json(out, n_gen, run);
done:
    if (out) fclose(out);
    if (err) fclose(err);
    return rc;
}

/* One warm-up and o->reps counted runs of T threads and N tokens into s. */
static int run_series(const bench_opts *o, int32_t n_threads, int32_t n_gen, e2e_series *s) {
    char n_buf[16], t_buf[16], c_buf[16];
    snprintf(n_buf, sizeof n_buf, "%d", n_gen);
    snprintf(t_buf, sizeof t_buf, "%d", n_threads);
    snprintf(c_buf, sizeof c_buf, "%u", o->g.n_ctx);
    const char *argv[] = {"synapse",
                          "run",
                          "-m",
                          o->g.model_path,
                          "--tokens",
                          BENCH_E2E_PROMPT,
                          "-n",
                          n_buf,
                          "--temp",
                          "0",
                          "--ignore-eos",
                          "-t",
                          t_buf,
                          "-c",
                          c_buf,
                          "--backend",
                          backend_name(o->g.backend),
                          "--isa",
                          syn_isa_tier_name(o->g.isa),
                          "--kv-type",
                          o->g.kv_type == SYN_KV_F16 ? "f16" : "f32",
                          "--json",
                          NULL,
                          NULL,
                          NULL};
    size_t n_args = 0;
    while (argv[n_args])
        n_args++;
    if (!o->g.huge_pages) argv[n_args++] = "--no-huge-pages";
    if (!o->g.interleave) argv[n_args++] = "--no-interleave";
    for (int32_t rep = -1; rep < o->reps; rep++) {
        e2e_run run = {0};
        /* posix_spawn takes char *const[] for historical reasons; it does not write them. */
        int rc = spawn_run((char *const *)argv, n_gen, &run);
        if (rc != EXIT_OK) return rc;
        if (rep < 0) continue; /* the warm-up: page cache and CPU frequency settle */
        s->wall_ms[rep] = run.wall_ms;
        s->ttft_ms[rep] = run.ttft_ms;
        s->load_ms[rep] = run.load_ms;
        s->decode_ts[rep] = run.decode_ts;
        s->rss_mib[rep] = run.rss_mib;
        memcpy(s->isa, run.isa, sizeof s->isa);
    }
    return EXIT_OK;
}

static const char *file_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

static int print_header(void) {
    printf("| %-30s | %-9s | %-11s | %7s | %5s | %-8s | %8s | %8s | %8s | %10s | %8s |\n", "model",
           "backend", "isa", "threads", "n_ctx", "test", "wall s", "ttft ms", "load ms",
           "decode t/s", "peak RSS");
    printf(
        "| ------------------------------ | --------- | ----------- | ------: | ----: | -------- "
        "| -------: | -------: | -------: | ---------: | -------: |\n");
    return check_stdout();
}

static int print_row(const bench_opts *o, int32_t n_threads, int32_t n_gen, const e2e_series *s) {
    size_t n = (size_t)o->reps;
    char test[32], rss[32];
    snprintf(test, sizeof test, "p%d+tg%d", BENCH_E2E_PROMPT_LEN, n_gen);
    snprintf(rss, sizeof rss, "%.0f MiB", bench_stats_of(s->rss_mib, n).median);
    printf(
        "| %-30.30s | %-9s | %-11s | %7d | %5u | %-8s | %8.3f | %8.1f | %8.1f | %10.2f | %8s |\n",
        file_name(o->g.model_path), backend_name(o->g.backend), s->isa, n_threads, o->g.n_ctx, test,
        bench_stats_of(s->wall_ms, n).median / 1e3, bench_stats_of(s->ttft_ms, n).median,
        bench_stats_of(s->load_ms, n).median, bench_stats_of(s->decode_ts, n).median, rss);
    return check_stdout();
}

static json_t *series_json(const bench_opts *o, int32_t n_threads, int32_t n_gen,
                           const e2e_series *s) {
    size_t n = (size_t)o->reps;
    char cpu[160];
    syn_cpu_describe(cpu, sizeof cpu);
    return json_pack("{s:o, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f, "
                     "s:o, s:o, s:o, s:o}",
                     "model_file", json_text(o->g.model_path), "backend",
                     backend_name(o->g.backend), "isa", s->isa, "kv_type",
                     o->g.kv_type == SYN_KV_F16 ? "f16" : "f32", "n_threads", n_threads, "n_ctx",
                     (int)o->g.n_ctx, "n_prompt", BENCH_E2E_PROMPT_LEN, "n_gen", n_gen, "reps",
                     o->reps, "median_wall_ms", bench_stats_of(s->wall_ms, n).median,
                     "median_ttft_ms", bench_stats_of(s->ttft_ms, n).median, "median_load_ms",
                     bench_stats_of(s->load_ms, n).median, "median_decode_ts",
                     bench_stats_of(s->decode_ts, n).median, "median_peak_rss_mib",
                     bench_stats_of(s->rss_mib, n).median, "max_peak_rss_mib",
                     bench_stats_of(s->rss_mib, n).max, "samples_wall_ms",
                     json_doubles(s->wall_ms, n), "samples_ttft_ms", json_doubles(s->ttft_ms, n),
                     "samples_peak_rss_mib", json_doubles(s->rss_mib, n), "cpu", json_text(cpu));
}

int bench_e2e(const bench_opts *o) {
    size_t n = (size_t)o->reps;
    double *mem = calloc(5 * n, sizeof *mem);
    json_t *arr = o->json ? json_array() : NULL;
    if (!mem || (o->json && !arr)) {
        free(mem);
        json_decref(arr);
        return fail_runtime("out of memory");
    }
    e2e_series s = {mem, mem + n, mem + 2 * n, mem + 3 * n, mem + 4 * n, ""};
    int rc = o->json ? EXIT_OK : print_header();
    for (size_t t = 0; rc == EXIT_OK && t < o->n_threads; t++) {
        for (size_t g = 0; rc == EXIT_OK && g < o->n_gens; g++) {
            if (o->gens[g] == 0) continue;
            if ((rc = run_series(o, o->threads[t], o->gens[g], &s)) != EXIT_OK) break;
            if (!o->json)
                rc = print_row(o, o->threads[t], o->gens[g], &s);
            else if (json_array_append_new(arr, series_json(o, o->threads[t], o->gens[g], &s)) != 0)
                rc = fail_runtime("out of memory building the JSON output");
        }
    }
    if (rc == EXIT_OK && !o->json)
        printf("\nmedians of %d runs after one warm-up; wall: spawn to exit; ttft: the run's own "
               "ttft_ms (prompt start to first token); peak RSS: wait4 ru_maxrss\n",
               o->reps);
    if (rc == EXIT_OK && o->json) {
        rc = print_json(arr);
        arr = NULL;
    }
    json_decref(arr);
    free(mem);
    return rc;
}
