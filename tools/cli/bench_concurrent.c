/* bench_concurrent.c: `synapse bench --concurrent`: aggregate throughput of N simultaneous
 * requests on one engine per N, measured in interleaved rounds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/args.h"
#include "common/output.h"
#include "common/setup.h"
#include "synapse_internal.h"

enum { PROMPT_LEN = 5 };

/* One N: its engine, its requests' parameters and the figures of every round. */
typedef struct conc_case {
    int32_t n; /* simultaneous requests = the engine's slots */
    syn_engine *engine;
    syn_request_params *params; /* [n] */
    syn_request **reqs;         /* [n] handles of the round in progress */
    double *ts, *decode_ts;     /* [reps] aggregate and decode-step tok/s */
    bench_stats st, decode_st;
} conc_case;

static void free_cases(conc_case *cases, size_t n) {
    for (size_t i = 0; cases && i < n; i++) {
        syn_engine_free(cases[i].engine);
        free(cases[i].params);
        free(cases[i].reqs);
        free(cases[i].ts);
        free(cases[i].decode_ts);
    }
    free(cases);
}

/* Runs c's n requests once; rep < 0 is the warm-up, whose figures are not kept. */
static int run_round(conc_case *c, int32_t n_gen, int32_t rep) {
    syn_run_stats rs;
    if (syn_engine_run(c->engine, c->params, (size_t)c->n, c->reqs, &rs) != SYN_OK)
        return fail_lib("--concurrent %d: cannot run the requests", c->n);
    int rc = EXIT_OK;
    for (int32_t i = 0; i < c->n; i++) {
        syn_request_result res;
        syn_request_wait(c->reqs[i], &res);
        /* Every request must have generated exactly n_gen tokens, or the figures mean nothing. */
        if (rc == EXIT_OK && (res.finish != SYN_FINISH_LENGTH || res.n_tokens != (size_t)n_gen))
            rc = fail_runtime(
                "--concurrent %d: request %d finished as %s after %zu of %d tokens%s%s", c->n, i,
                syn_finish_reason_name(res.finish), res.n_tokens, n_gen, res.error[0] ? ": " : "",
                res.error);
        syn_request_free(c->reqs[i]);
        c->reqs[i] = NULL;
    }
    if (rc == EXIT_OK && rep >= 0) {
        c->ts[rep] = rs.tok_per_s;
        c->decode_ts[rep] = rs.decode_tok_per_s;
    }
    return rc;
}

/* Creates c's engine and requests: prompts are c->n distinct 5-token slices of ids. */
static int setup_case(const syn_model *model, const bench_opts *o, int32_t n_threads, int32_t n_gen,
                      const int32_t *ids, conc_case *c) {
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = c->n;
    ep.n_threads = n_threads;
    ep.isa = o->g.isa;
    ep.kv_type = o->g.kv_type;
    ep.n_ctx = PROMPT_LEN + (uint32_t)n_gen;
    ep.prefix_cache = false; /* every round must compute its prompts */
    if (syn_engine_new(model, &ep, &c->engine) != SYN_OK)
        return fail_lib("--concurrent %d: cannot start an engine", c->n);
    c->params = calloc((size_t)c->n, sizeof *c->params);
    c->reqs = calloc((size_t)c->n, sizeof *c->reqs);
    c->ts = calloc((size_t)o->reps, sizeof *c->ts);
    c->decode_ts = calloc((size_t)o->reps, sizeof *c->decode_ts);
    if (!c->params || !c->reqs || !c->ts || !c->decode_ts)
        return fail_runtime("out of memory for %d requests", c->n);
    for (int32_t i = 0; i < c->n; i++) {
        syn_request_params *p = &c->params[i];
        *p = syn_request_default_params();
        p->prompt_tokens = ids + (size_t)i * PROMPT_LEN;
        p->n_prompt_tokens = PROMPT_LEN;
        p->max_tokens = n_gen;
        p->ignore_eos = true;
        p->sampling.temperature = 0.0f;
    }
    return EXIT_OK;
}

/* The tier the engine resolves SYN_TIER_AUTO to: a context with the same options tells. */
static int resolved_isa(const syn_model *model, const bench_opts *o, const char **isa) {
    syn_context *ctx = NULL;
    int rc = new_context(model, &o->g, PROMPT_LEN, &ctx);
    if (rc == EXIT_OK) *isa = syn_context_isa_name(ctx);
    syn_context_free(ctx);
    return rc;
}

static const conc_case *find_one(const conc_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (cases[i].n == 1) return &cases[i];
    return NULL;
}

static void print_table(const bench_model *m, const char *isa, int32_t n_threads, int32_t n_gen,
                        int32_t reps, const conc_case *cases, size_t n) {
    const conc_case *one = find_one(cases, n);
    printf("| %-20s | %-11s | %7s | %8s | %-9s | %20s | %20s | %9s |\n", "model", "isa", "threads",
           "requests", "test", "agg t/s", "decode t/s", "speedup");
    printf("| -------------------- | ----------- | ------: | -------: | --------- | "
           "-------------------: "
           "| -------------------: | --------: |\n");
    for (size_t i = 0; i < n; i++) {
        const conc_case *c = &cases[i];
        char test[32], agg[48], dec[48], speedup[16] = "";
        snprintf(test, sizeof test, "p%d+tg%d", PROMPT_LEN, n_gen);
        snprintf(agg, sizeof agg, "%.2f ± %.2f", c->st.median, c->st.stddev);
        snprintf(dec, sizeof dec, "%.2f ± %.2f", c->decode_st.median, c->decode_st.stddev);
        if (one && one->decode_st.median > 0)
            snprintf(speedup, sizeof speedup, "%.2fx", c->decode_st.median / one->decode_st.median);
        /* "±" is two bytes but one column: pad by one more. */
        printf("| %-20s | %-11s | %7d | %8d | %-9s | %21s | %21s | %9s |\n", m->type, isa,
               n_threads, c->n, test, agg, dec, speedup);
    }
    printf(
        "agg t/s: all generated tokens / wall time of the round (prompts included); decode t/s: "
        "tokens /\n"
        "time of the steps that only decoded; speedup: median decode t/s over that of 1 request.\n"
        "median ± sample standard deviation of %d interleaved rounds after one warm-up per N.\n",
        reps);
}

static json_t *ratio_json(double num, const conc_case *one, bool decode) {
    double den = one ? (decode ? one->decode_st.median : one->st.median) : 0.0;
    return den > 0 ? json_real(num / den) : json_null();
}

static int print_json_results(const bench_model *m, const bench_opts *o, const char *isa,
                              int32_t n_threads, int32_t n_gen, const conc_case *cases, size_t n) {
    const conc_case *one = find_one(cases, n);
    char cpu[160];
    syn_cpu_describe(cpu, sizeof cpu);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const conc_case *c = &cases[i];
        json_t *obj = json_pack(
            "{s:o, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:i, s:o, s:f, s:f, s:f, s:f, s:o, s:f, s:f, "
            "s:f, s:f, s:o, s:o, "
            "s:o}",
            "model_file", json_text(m->path), "model_type", m->type, "isa", isa, "kv_type",
            o->g.kv_type == SYN_KV_F16 ? "f16" : "f32", "n_threads", n_threads, "n_requests", c->n,
            "n_prompt", PROMPT_LEN, "n_gen", n_gen, "reps", o->reps, "samples_ts",
            json_doubles(c->ts, (size_t)o->reps), "median_ts", c->st.median, "stddev_ts",
            c->st.stddev, "min_ts", c->st.min, "max_ts", c->st.max, "samples_decode_ts",
            json_doubles(c->decode_ts, (size_t)o->reps), "median_decode_ts", c->decode_st.median,
            "stddev_decode_ts", c->decode_st.stddev, "min_decode_ts", c->decode_st.min,
            "max_decode_ts", c->decode_st.max, "speedup_ts", ratio_json(c->st.median, one, false),
            "speedup_decode_ts", ratio_json(c->decode_st.median, one, true), "cpu", json_text(cpu));
        if (json_array_append_new(arr, obj) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return print_json(arr);
}

int bench_concurrent(const bench_opts *o) {
    const int32_t n_threads = o->threads[0], n_gen = o->gens[0];
    syn_model *model = NULL;
    /* No background prefetch: no thread may compete with the measurements. */
    int rc = load_model(o->g.model_path, false, o->g.huge_pages, o->g.interleave, &model);
    if (rc != EXIT_OK) return rc;
    bench_model m;
    bench_describe_model(model, o->g.model_path, &m);
    int32_t max_n = 0;
    for (size_t i = 0; i < o->n_concurrent; i++)
        if (o->concurrent[i] > max_n) max_n = o->concurrent[i];
    int32_t *ids = malloc((size_t)max_n * PROMPT_LEN * sizeof *ids);
    conc_case *cases = calloc(o->n_concurrent, sizeof *cases);
    const char *isa = "?";
    if (!ids || !cases) {
        rc = fail_runtime("out of memory for %d requests", max_n);
        goto done;
    }
    if ((uint64_t)PROMPT_LEN + (uint64_t)n_gen >
        (uint64_t)(m.info.n_ctx_train > 0 ? m.info.n_ctx_train : 0)) {
        rc = fail_runtime(
            "a request of %d + %d tokens does not fit the training context of '%s' (%d)",
            PROMPT_LEN, n_gen, o->g.model_path, m.info.n_ctx_train);
        goto done;
    }
    bench_random_tokens(ids, (size_t)max_n * PROMPT_LEN, m.info.n_vocab);
    if ((rc = resolved_isa(model, o, &isa)) != EXIT_OK) goto done;
    /* Every engine lives through all rounds (idle ones sleep), so rounds can alternate N. */
    for (size_t i = 0; rc == EXIT_OK && i < o->n_concurrent; i++) {
        cases[i].n = o->concurrent[i];
        rc = setup_case(model, o, n_threads, n_gen, ids, &cases[i]);
        if (rc == EXIT_OK) rc = run_round(&cases[i], n_gen, -1);
    }
    for (int32_t rep = 0; rc == EXIT_OK && rep < o->reps; rep++)
        for (size_t i = 0; rc == EXIT_OK && i < o->n_concurrent; i++)
            rc = run_round(&cases[i], n_gen, rep);
    if (rc != EXIT_OK) goto done;
    for (size_t i = 0; i < o->n_concurrent; i++) {
        cases[i].st = bench_stats_of(cases[i].ts, (size_t)o->reps);
        cases[i].decode_st = bench_stats_of(cases[i].decode_ts, (size_t)o->reps);
    }
    if (o->json) {
        rc = print_json_results(&m, o, isa, n_threads, n_gen, cases, o->n_concurrent);
    } else {
        print_table(&m, isa, n_threads, n_gen, o->reps, cases, o->n_concurrent);
        rc = check_stdout();
    }
done:
    free_cases(cases, o->n_concurrent);
    free(ids);
    syn_model_free(model);
    return rc;
}
