/*
 * bench.h: what the two modes of `synapse bench` share: the parsed options and the summary
 * statistics of repeated measurements. cmd_bench.c parses and runs the in-process speed tests;
 * bench_e2e.c times whole `synapse run` processes; bench_concurrent.c many requests on engines.
 */
#ifndef SYNAPSE_TOOL_BENCH_H
#define SYNAPSE_TOOL_BENCH_H

#include "common/options.h"
#include "synapse.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The 5-token prompt of the --e2e runs: "The capital of France is" in Qwen2's vocabulary. */
#define BENCH_E2E_PROMPT "785,6722,315,9625,374"
enum { BENCH_E2E_PROMPT_LEN = 5, BENCH_E2E_DEFAULT_N_CTX = 4096 };

typedef struct bench_opts {
    gen_opts g;       /* -m, --backend, --isa, --kv-type; g.n_ctx: -c (--e2e only) */
    int32_t *threads; /* -t: [n_threads] thread counts */
    size_t n_threads;
    int32_t *prompts; /* -p: [n_prompts] prompt lengths; 0 skips */
    size_t n_prompts;
    int32_t *gens; /* -n: [n_gens] decode lengths; 0 skips */
    size_t n_gens;
    int32_t *depths; /* -d: [n_depths] tokens already cached before each test */
    size_t n_depths;
    int32_t reps;        /* -r: counted repetitions (one warm-up comes on top) */
    int32_t *concurrent; /* --concurrent: [n_concurrent] simultaneous request counts */
    size_t n_concurrent;
    const char *json_schema; /* --json-schema FILE */
    bool e2e;                /* --e2e */
    bool json;               /* --json */
    bool profile;            /* --profile */
} bench_opts;

typedef struct bench_stats {
    double median, mean, stddev, min, max; /* stddev: sample (n - 1), 0 for one value */
} bench_stats;

/* The statistics of v[n], n >= 1 (v is not modified). */
bench_stats bench_stats_of(const double *v, size_t n);

/* A JSON array of numbers; NULL: no memory. */
json_t *json_doubles(const double *v, size_t n);

/* What the results print besides their own figures. */
typedef struct bench_model {
    const char *path;
    syn_model_info info;
    char type[64];                   /* "qwen2 494M q8_0" */
    uint64_t bytes_per_token;        /* weight bytes one decode step reads */
    uint64_t kv_values_per_position; /* keys + values one cached position holds, all layers */
    uint64_t kv_values_local;        /* of those, the sliding-window layers' */
    uint32_t swa_window;             /* positions a sliding-window layer reads (0: none) */
    uint64_t macs_per_token;         /* multiply-adds of the block matrices for one token */
} bench_model;

void bench_describe_model(const syn_model *model, const char *path, bench_model *m);

/* Random ids in [0, n_vocab) from a fixed seed (splitmix64): the same tokens in every run. */
void bench_random_tokens(int32_t *ids, size_t n, int32_t n_vocab);

/* `synapse bench --e2e`: runs and prints everything; returns the exit code. */
int bench_e2e(const bench_opts *o);

/* `synapse bench --concurrent`: runs and prints everything; returns the exit code. */
int bench_concurrent(const bench_opts *o);

/* `synapse bench --json-schema FILE`: runs and prints everything; returns the exit code. */
int bench_schema(const bench_opts *o);

#endif
