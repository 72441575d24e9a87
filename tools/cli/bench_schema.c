/* bench_schema.c: `synapse bench --json-schema FILE`: decode speed of requests constrained by a
 * JSON Schema against unconstrained ones, in alternating rounds on one engine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "synapse_internal.h"

enum { PROMPT_LEN = 5 };

/* Runs p once; rep < 0 is the warm-up. The decode tok/s and the tokens generated go to ts, n. */
static int run_one(syn_engine *e, const syn_request_params *p, const char *what, int32_t rep,
                   double *ts, double *n) {
    syn_request *r = NULL;
    syn_run_stats rs;
    if (syn_engine_run(e, p, 1, &r, &rs) != SYN_OK)
        return fail_lib("--json-schema: cannot run the %s request", what);
    syn_request_result res;
    syn_request_wait(r, &res);
    int rc = EXIT_OK;
    if (res.finish == SYN_FINISH_ERROR || res.finish == SYN_FINISH_CANCELLED || res.n_tokens < 2)
        rc = fail_runtime("--json-schema: the %s request finished as %s after %zu tokens%s%s", what,
                          syn_finish_reason_name(res.finish), res.n_tokens,
                          res.error[0] ? ": " : "", res.error);
    syn_request_free(r);
    if (rc == EXIT_OK && rep >= 0) {
        ts[rep] = rs.decode_tok_per_s;
        n[rep] = (double)res.n_tokens;
    }
    return rc;
}

int bench_schema(const bench_opts *o) {
    const int32_t n_threads = o->threads[0], n_gen = o->gens[0];
    char *schema = NULL;
    size_t len = 0;
    int rc = read_file(o->json_schema, &schema, &len);
    if (rc != EXIT_OK) return rc;
    syn_model *model = NULL;
    if ((rc = load_model(o->g.model_path, false, o->g.huge_pages, o->g.interleave, &model)) !=
        EXIT_OK) {
        free(schema);
        return rc;
    }
    bench_model m;
    bench_describe_model(model, o->g.model_path, &m);
    int32_t ids[PROMPT_LEN];
    bench_random_tokens(ids, PROMPT_LEN, m.info.n_vocab);
    double *v = calloc((size_t)o->reps * 4, sizeof *v);
    double *plain_ts = v, *schema_ts = v + o->reps, *plain_n = v + 2 * o->reps,
           *schema_n = v + 3 * o->reps;
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = 1;
    ep.n_threads = n_threads;
    ep.isa = o->g.isa;
    ep.kv_type = o->g.kv_type;
    ep.n_ctx = PROMPT_LEN + (uint32_t)n_gen;
    ep.prefix_cache = false;
    syn_engine *e = NULL;
    if (!v) rc = fail_runtime("out of memory");
    if (rc == EXIT_OK && syn_engine_new(model, &ep, &e) != SYN_OK)
        rc = fail_lib("--json-schema: cannot start an engine");
    /* The same sampled request with and without the schema; the plain one never stops early,
     * the constrained one may end where the schema lets it (tok/s counts the tokens it made). */
    syn_request_params plain = syn_request_default_params();
    plain.prompt_tokens = ids;
    plain.n_prompt_tokens = PROMPT_LEN;
    plain.max_tokens = n_gen;
    plain.ignore_eos = true;
    plain.sampling.seed = 1;
    syn_request_params constrained = plain;
    constrained.ignore_eos = false;
    constrained.json_schema = schema;
    for (int32_t rep = -1; rc == EXIT_OK && rep < o->reps; rep++) {
        rc = run_one(e, &plain, "plain", rep, plain_ts, plain_n);
        if (rc == EXIT_OK) rc = run_one(e, &constrained, "constrained", rep, schema_ts, schema_n);
        plain.sampling.seed = constrained.sampling.seed = (uint64_t)rep + 2;
    }
    if (rc == EXIT_OK) {
        const bench_stats p = bench_stats_of(plain_ts, (size_t)o->reps),
                          s = bench_stats_of(schema_ts, (size_t)o->reps),
                          sn = bench_stats_of(schema_n, (size_t)o->reps);
        char cpu[160];
        syn_cpu_describe(cpu, sizeof cpu);
        printf("| %-20s | %7s | %-14s | %18s | %18s | %7s |\n", "model", "threads", "test",
               "plain decode t/s", "schema decode t/s", "ratio");
        printf("| -------------------- | ------: | -------------- | -----------------: | "
               "-----------------: | ------: |\n");
        char test[32], a[48], b[48];
        snprintf(test, sizeof test, "p%d+tg%d", PROMPT_LEN, n_gen);
        snprintf(a, sizeof a, "%.2f ± %.2f", p.median, p.stddev);
        snprintf(b, sizeof b, "%.2f ± %.2f", s.median, s.stddev);
        printf("| %-20s | %7d | %-14s | %19s | %19s | %6.1f%% |\n", m.type, n_threads, test, a, b,
               p.median > 0 ? 100.0 * s.median / p.median : 0.0);
        printf("schema: %s (constrained requests made a median of %.0f tokens)\n", o->json_schema,
               sn.median);
        printf("decode t/s: tokens / time of the engine steps that only decoded (the grammar's "
               "mask included);\nmedian ± sample standard deviation of %d alternating rounds "
               "after one warm-up each; sampled\n(temperature 0.8, top-k 40, the same seed on "
               "both sides of a round).\ncpu: %s\n",
               o->reps, cpu);
        rc = check_stdout();
    }
    syn_engine_free(e);
    free(v);
    free(schema);
    syn_model_free(model);
    return rc;
}
