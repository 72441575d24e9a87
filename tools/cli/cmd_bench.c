/* cmd_bench.c: `synapse bench`: llama-bench-like prompt (pp) and decode (tg) speeds per thread
 * count, with the memory read bandwidth measured in the same run and decode efficiency. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "commands.h"
#include "common/args.h"
#include "common/options.h"
#include "common/output.h"
#include "common/setup.h"
#include "common/text.h"
#include "int8peak.h"
#include "membw.h"
#include "synapse_internal.h"

const char usage_bench[] =
    "synapse bench -m MODEL [-t 1,2] [-p 5,64,512] [-n 64] [-d 0] [-r 5] [--backend NAME]\n"
    "              [--isa TIER] [--kv-type TYPE] [--json | --profile]\n"
    "synapse bench --e2e -m MODEL [-t 1,2] [-n 64] [-c 4096] [-r 5] [--backend NAME] [--isa TIER]\n"
    "              [--kv-type TYPE] [--json]\n"
    "  Speed tests in the manner of llama-bench, for every thread count in -t and depth in -d:\n"
    "    ppP   one decode call of P tokens; t/s = P / its time\n"
    "    tgN   N single-token decode calls after an untimed 1-token prompt; t/s = N / their time\n"
    "  With -d D the KV cache already holds D tokens when each test starts (\"tg64 @ d1024\").\n"
    "  Token ids are random (fixed seed). Every test runs once as a warm-up, then -r times;\n"
    "  t/s is the median \"±\" the sample standard deviation of those runs. Before and after each\n"
    "  thread count's tests the memory read bandwidth is measured in the same run (that many\n"
    "  threads, each reading its own slice of a resident 1 GiB buffer in 2 MiB pages where the\n"
    "  kernel allows; 5 passes each probe) in the read strategy that won a trial of them all\n"
    "  (16-, 32- and 64-byte loads where the CPU has them, 1, 2 or 4 streams per thread, with\n"
    "  and without software prefetch; one pass each over 256 MiB), and tg rows get eff = t/s x\n"
    "  bytes read per token / bandwidth, the best pass the winner showed (the probes' median\n"
    "  pass is printed beside it): the share of the memory-bound ceiling reached. Bytes per\n"
    "  token: the weights of the file (a tied\n"
    "  embedding counted once, as the output projection; an untied file's token embedding is\n"
    "  left out: one row is read), plus the KV cache one step reads, at the test's mean depth\n"
    "  (tgN @ dD: D + 2 + (N - 1) / 2 positions of every layer's keys and values, in the\n"
    "  --kv-type's element size). Likewise the int8 multiply-add peak of the dot instruction of\n"
    "  every x86 tier the CPU runs (avx512-vnni, avx-vnni, avx2) is measured before and after\n"
    "  (every thread running independent chains of it; each tier's figure is printed), and pp\n"
    "  rows of an x86 tier get eff = t/s x multiply-adds per token / the best tier's peak: the\n"
    "  block matrices' weights (the output projection and attention left out), the share of the\n"
    "  compute ceiling.\n"
    "  -m, --model FILE        the GGUF model (loaded without background prefetch: the warm-up\n"
    "                          runs map the pages)\n"
    "  -t, --threads LIST      thread counts, each 1..256, e.g. 1,2 (default: one per online CPU)\n"
    "  -p, --n-prompt LIST     prompt lengths (default 5,64,512; 0: none)\n"
    "  -n, --n-gen LIST        decode lengths (default 64; 0: none)\n"
    "  -d, --n-depth LIST      cached tokens before each test (default 0)\n"
    "  -r, --repetitions N     counted runs per test, N >= 1 (default 5)\n" USAGE_BACKEND_OPTS
    "  --profile               after the table, each test's steps (optimized backend): one more\n"
    "                          run with every thread-pool step of the forward pass timed (qkv,\n"
    "                          attention, wo, ffn, down, norm, quantize, output, ...), each\n"
    "                          step's runs, milliseconds and share, and for the steps that\n"
    "                          multiply by quantized matrices their int8 multiply-adds per\n"
    "                          second against the in-run int8 peak\n"
    "  --json                  an array of result objects: {\"model_file\", \"model_type\",\n"
    "                          \"model_size\", \"model_n_params\", \"backend\", \"isa\", "
    "\"kv_type\",\n"
    "                          \"n_threads\", \"test\", \"n_prompt\", \"n_gen\", \"n_depth\", "
    "\"reps\",\n"
    "                          \"samples_ts\", \"median_ts\", \"avg_ts\", \"stddev_ts\", "
    "\"min_ts\", \"max_ts\",\n"
    "                          \"bandwidth_gbs\", \"bandwidth_median_gbs\", "
    "\"bandwidth_strategy\",\n"
    "                          \"weight_bytes_per_token\", \"kv_bytes_per_token\", "
    "\"int8_peak_gmacs\",\n"
    "                          \"int8_peak_isa\", \"macs_per_token\",\n"
    "                          \"efficiency\" (tg: of the bandwidth ceiling, pp: of the int8 "
    "peak;\n"
    "                          null where not measured),\n"
    "                          \"cpu\" (CPUID's brand string, family and model; aarch64: the\n"
    "                          implementer and part codes)}\n"
    "  --e2e                   whole processes instead: for every -t and -n, runs `synapse run -m\n"
    "                          MODEL --tokens " BENCH_E2E_PROMPT
    " -n N --temp 0 --ignore-eos -t T\n"
    "                          -c C --json` (plus the backend options) once as a warm-up, then -r\n"
    "                          times, and reports the medians of its wall time, time to first "
    "token\n"
    "                          (its ttft_ms), load time, decode speed and peak RSS (wait4's\n"
    "                          ru_maxrss). -c C: its context size (default 4096)\n"
    "  The tests' context (the largest depth + the longest test) must fit in the model's\n"
    "  training context (exit 1 otherwise).\n"
    "synapse bench --concurrent LIST -m MODEL [-t T] [-n 64] [-r 5] [--isa TIER] [--kv-type TYPE]\n"
    "              [--json]\n"
    "  Aggregate throughput of many simultaneous requests on one engine: for every N in LIST\n"
    "  (1..256 each, e.g. 1,5,16), an engine with N slots and no prefix cache runs N requests at\n"
    "  once, each a distinct random 5-token prompt and -n N tokens (one value, default 64),\n"
    "  greedy, never stopping early. Each N runs once as a warm-up, then -r rounds that take the\n"
    "  N values in turn (round-robin), so that background load falls on every N alike. Reported\n"
    "  per N, as median \"±\" sample standard deviation: agg t/s = every generated token / wall\n"
    "  time from first submission to last completion (prompts included); decode t/s = tokens /\n"
    "  time of the engine steps that only decoded; and each median's speedup over N = 1 (when 1\n"
    "  is in LIST). -t takes one thread count here (default: one per online CPU).\n"
    "  --json                  an array, one object per N: {\"model_file\", \"model_type\", "
    "\"isa\",\n"
    "                          \"kv_type\", \"n_threads\", \"n_requests\", \"n_prompt\", "
    "\"n_gen\",\n"
    "                          \"reps\", \"samples_ts\", \"median_ts\", \"stddev_ts\", "
    "\"min_ts\",\n"
    "                          \"max_ts\", \"samples_decode_ts\", \"median_decode_ts\",\n"
    "                          \"stddev_decode_ts\", \"min_decode_ts\", \"max_decode_ts\",\n"
    "                          \"speedup_ts\", \"speedup_decode_ts\" (null without N = 1), "
    "\"cpu\"}\n"
    "synapse bench --json-schema FILE -m MODEL [-t T] [-n 64] [-r 5] [--isa TIER] [--kv-type "
    "TYPE]\n"
    "  Constrained decoding against plain: one engine runs a random 5-token prompt and -n N\n"
    "  sampled tokens (one value, default 64) without a constraint (never stopping early) and\n"
    "  then with the JSON Schema in FILE (stopping where the schema's text may end), once as a\n"
    "  warm-up and -r times in alternation; prints both decode t/s (tokens / time of the steps\n"
    "  that only decoded, the mask included) as median \"±\" sample standard deviation, their\n"
    "  ratio, the constrained requests' median length and the CPU. -t takes one thread count.\n";

enum {
    DEFAULT_REPS = 5,
    MAX_LIST_VALUE = 1 << 20, /* longer tests cannot fit any supported context anyway */
    BW_PASSES = 5,
    BW_TRIAL_PASSES = 1, /* per strategy, over the first BW_TRIAL_BYTES, to choose one */
};
static const size_t BW_BYTES = (size_t)1 << 30, BW_TRIAL_BYTES = (size_t)256 << 20;
static const int32_t DEFAULT_PROMPTS[] = {5, 64, 512};
static const int32_t DEFAULT_GENS[] = {64};
static const int32_t DEFAULT_DEPTHS[] = {0};

/* ---- options ---------------------------------------------------------------------------- */

static int parse_list(arg_iter *it, const char *arg, int32_t min, int32_t max, const char *what,
                      int32_t **vals, size_t *n) {
    const char *v;
    int rc = args_value(it, arg, &v);
    if (rc != EXIT_OK) return rc;
    free(*vals); /* the last occurrence wins */
    *vals = NULL;
    return parse_int_list(arg, v, min, max, what, vals, n);
}

/* Copies a default list into malloc'd memory, so that every list is freed the same way. */
static int default_list(const int32_t *vals, size_t n, int32_t **out, size_t *n_out) {
    *out = malloc(n * sizeof **out);
    if (!*out) return fail_runtime("out of memory");
    memcpy(*out, vals, n * sizeof **out);
    *n_out = n;
    return EXIT_OK;
}

static bool any_positive(const int32_t *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (v[i] > 0) return true;
    return false;
}

static int parse_args(int argc, char **argv, bench_opts *o) {
    arg_iter it = args_begin(argc, argv);
    const char *arg;
    int rc;
    bool prompts_given = false, depths_given = false;
    long l = 0;
    while ((arg = args_next(&it)) != NULL) {
        if (args_is_help(arg)) {
            fputs(usage_bench, stdout);
            return ARGS_HELP;
        }
        rc = parse_gen_opt(&it, arg, GEN_MODEL | GEN_BACKEND | GEN_CTX, &o->g);
        if (rc != OPT_NOMATCH) {
            if (rc != EXIT_OK) return rc;
        } else if (strcmp(arg, "-t") == 0 || strcmp(arg, "--threads") == 0) {
            if ((rc = parse_list(&it, arg, 1, MAX_THREADS, "thread count", &o->threads,
                                 &o->n_threads)) != EXIT_OK)
                return rc;
        } else if (strcmp(arg, "-p") == 0 || strcmp(arg, "--n-prompt") == 0) {
            if ((rc = parse_list(&it, arg, 0, MAX_LIST_VALUE, "prompt length", &o->prompts,
                                 &o->n_prompts)) != EXIT_OK)
                return rc;
            prompts_given = true;
        } else if (strcmp(arg, "-n") == 0 || strcmp(arg, "--n-gen") == 0) {
            if ((rc = parse_list(&it, arg, 0, MAX_LIST_VALUE, "token count", &o->gens,
                                 &o->n_gens)) != EXIT_OK)
                return rc;
        } else if (strcmp(arg, "-d") == 0 || strcmp(arg, "--n-depth") == 0) {
            if ((rc = parse_list(&it, arg, 0, MAX_LIST_VALUE, "depth", &o->depths, &o->n_depths)) !=
                EXIT_OK)
                return rc;
            depths_given = true;
        } else if (strcmp(arg, "-r") == 0 || strcmp(arg, "--repetitions") == 0) {
            const char *v;
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            if ((rc = parse_long(arg, v, 1, 1000, &l)) != EXIT_OK) return rc;
            o->reps = (int32_t)l;
        } else if (strcmp(arg, "--concurrent") == 0) {
            const char *v;
            if ((rc = args_value(&it, arg, &v)) != EXIT_OK) return rc;
            free(o->concurrent);
            o->concurrent = NULL;
            if ((rc = parse_int_list(arg, v, 1, SYN_ENGINE_MAX_PARALLEL, "request count",
                                     &o->concurrent, &o->n_concurrent)) != EXIT_OK)
                return rc;
        } else if (strcmp(arg, "--json-schema") == 0) {
            if ((rc = args_value(&it, arg, &o->json_schema)) != EXIT_OK) return rc;
        } else if (strcmp(arg, "--e2e") == 0) {
            o->e2e = true;
        } else if (strcmp(arg, "--json") == 0) {
            o->json = true;
        } else if (strcmp(arg, "--profile") == 0) {
            o->profile = true;
        } else {
            return args_unknown(arg);
        }
    }
    if ((rc = require_model(&o->g)) != EXIT_OK) return rc;
    if (o->concurrent) {
        if (o->e2e || prompts_given || depths_given || o->g.n_ctx)
            return fail_usage(
                "--concurrent runs 5-token prompts on engines: --e2e, -p, -d and -c do not apply");
        if (o->g.backend != SYN_BACKEND_OPTIMIZED)
            return fail_usage("--concurrent runs on the optimized backend only");
        if (o->n_threads > 1) return fail_usage("--concurrent takes one thread count (-t T)");
        if (o->n_gens > 1 || (o->gens && o->gens[0] == 0))
            return fail_usage("--concurrent takes one token count of at least 1 (-n N)");
    }
    if (o->json_schema) {
        if (o->concurrent || o->e2e || o->json || prompts_given || depths_given || o->g.n_ctx)
            return fail_usage("--json-schema runs one 5-token prompt on an engine, printed as a "
                              "table: --concurrent, --e2e, --json, -p, -d and -c do not apply");
        if (o->n_threads > 1) return fail_usage("--json-schema takes one thread count (-t T)");
        if (o->n_gens > 1 || (o->gens && o->gens[0] < 2))
            return fail_usage("--json-schema takes one token count of at least 2 (-n N)");
    }
    if (o->profile && (o->concurrent || o->e2e || o->json_schema || o->json))
        return fail_usage("--profile prints the in-process tests' steps as tables: --concurrent, "
                          "--e2e, --json-schema and --json do not apply");
    if (o->profile && o->g.backend != SYN_BACKEND_OPTIMIZED)
        return fail_usage("--profile times the optimized backend's steps: the reference backend "
                          "keeps none");
    if (o->e2e && (prompts_given || depths_given))
        return fail_usage("--e2e runs a fixed %d-token prompt: -p and -d do not apply",
                          BENCH_E2E_PROMPT_LEN);
    if (!o->e2e && o->g.n_ctx)
        return fail_usage("-c applies to --e2e only (the tests size their own context)");
    if (!o->threads) {
        long n_cpu = sysconf(_SC_NPROCESSORS_ONLN);
        int32_t t = n_cpu < 1 ? 1 : n_cpu > MAX_THREADS ? MAX_THREADS : (int32_t)n_cpu;
        if ((rc = default_list(&t, 1, &o->threads, &o->n_threads)) != EXIT_OK) return rc;
    }
    if (!o->prompts &&
        (rc = default_list(DEFAULT_PROMPTS, 3, &o->prompts, &o->n_prompts)) != EXIT_OK)
        return rc;
    if (!o->gens && (rc = default_list(DEFAULT_GENS, 1, &o->gens, &o->n_gens)) != EXIT_OK)
        return rc;
    if (!o->depths && (rc = default_list(DEFAULT_DEPTHS, 1, &o->depths, &o->n_depths)) != EXIT_OK)
        return rc;
    if (o->e2e ? !any_positive(o->gens, o->n_gens)
               : !any_positive(o->prompts, o->n_prompts) && !any_positive(o->gens, o->n_gens))
        return fail_usage("nothing to measure: every -p and -n value is 0");
    if (o->e2e && !o->g.n_ctx) o->g.n_ctx = BENCH_E2E_DEFAULT_N_CTX;
    return EXIT_OK;
}

/* ---- the speed tests -------------------------------------------------------------------- */

typedef struct bench_result {
    int32_t n_threads;
    bool tg;          /* a decode test (else a prompt test) */
    int32_t n_tokens; /* P for ppP, N for tgN */
    int32_t depth;
    const char *isa;         /* static, from syn_context_isa_name */
    double bw_gbs;           /* this thread count's in-run bandwidth: its probes' best pass */
    double bw_median_gbs;    /* and their median pass */
    const char *bw_strategy; /* the read strategy that won (static, bench_ceiling's) */
    double peak_gmacs;       /* this thread count's in-run int8 peak: the best tier's (0: none) */
    const char *peak_isa;    /* the tier whose instruction reached it (NULL: none) */
    syn_kv_type kv_type;
    double *ts; /* [reps] tokens per second */
    bench_stats st;
    syn_step_times prof; /* --profile: the steps of one more run, and its wall time */
    double prof_ms;
} bench_result;

/* KV bytes one step of r (a tg test) reads: its mean depth's positions of every layer, at most
 * the window's of a sliding-window layer. */
static double kv_bytes_per_token(const bench_model *m, const bench_result *r) {
    const double mean_positions = r->depth + 2 + (r->n_tokens - 1) / 2.0;
    const double local_positions =
        m->swa_window && m->swa_window < mean_positions ? m->swa_window : mean_positions;
    const double values =
        mean_positions * (double)(m->kv_values_per_position - m->kv_values_local) +
        local_positions * (double)m->kv_values_local;
    return values * (r->kv_type == SYN_KV_F16 ? 2 : 4);
}

static void test_name(const bench_result *r, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s%d", r->tg ? "tg" : "pp", r->n_tokens);
    if (r->depth > 0 && n > 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, " @ d%d", r->depth);
}

/* tg: the share of the bandwidth ceiling (weights + KV); pp: of the int8 peak; < 0: unknown. */
static double efficiency(const bench_model *m, const bench_result *r) {
    if (r->tg)
        return r->bw_gbs > 0
                   ? r->st.median * ((double)m->bytes_per_token + kv_bytes_per_token(m, r)) /
                         (r->bw_gbs * 1e9)
                   : -1;
    return r->peak_gmacs > 0 ? r->st.median * (double)m->macs_per_token / (r->peak_gmacs * 1e9)
                             : -1;
}

static int print_header(void) {
    printf("| %-20s | %10s | %-9s | %-11s | %7s | %-15s | %20s | %5s |\n", "model", "size",
           "backend", "isa", "threads", "test", "t/s", "eff");
    printf(
        "| -------------------- | ---------: | --------- | ----------- | ------: | --------------- "
        "| -------------------: | ----: |\n");
    return check_stdout();
}

static int print_row(const bench_model *m, const bench_opts *o, const bench_result *r) {
    char name[48], ts[48], eff[16] = "";
    test_name(r, name, sizeof name);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", r->st.median, r->st.stddev);
    if (efficiency(m, r) >= 0) snprintf(eff, sizeof eff, "%.0f%%", 100.0 * efficiency(m, r));
    /* "±" is two bytes but one column: pad by one more. */
    printf("| %-20s | %6.2f MiB | %-9s | %-11s | %7d | %-15s | %21s | %5s |\n", m->type,
           (double)m->info.weight_bytes / (1024.0 * 1024.0), backend_name(o->g.backend), r->isa,
           r->n_threads, name, ts, eff);
    return check_stdout();
}

/* ---- the ceilings: memory read bandwidth and int8 peak, measured in the run -------------- */

/* The x86 tiers whose int8 dot instruction the peak measures: the machine's best of them is the
 * prefill ceiling, whichever tier the run uses. */
enum { N_PEAK_TIERS = 3 };
static const syn_isa_tier PEAK_TIERS[N_PEAK_TIERS] = {SYN_TIER_AVX512_VNNI, SYN_TIER_AVX_VNNI,
                                                      SYN_TIER_AVX2};

/* One thread count's ceilings. */
typedef struct bench_ceiling {
    bench_stats bw; /* the winning strategy's passes before and after the tests */
    char bw_strategy[40];
    double trial_gbs[MEMBW_MAX_STRATEGIES]; /* each strategy's best trial pass */
    double tier_gmacs[N_PEAK_TIERS];        /* each PEAK_TIERS' int8 peak (0: not run here) */
    double peak_gmacs;                      /* the best tier's int8 peak (0: not measured) */
    const char *peak_isa;
} bench_ceiling;

/* Every strategy reads the first BW_TRIAL_BYTES BW_TRIAL_PASSES times; the best pass wins. */
static int choose_strategy(membw_buffer *buf, const membw_strategy *all, int32_t n_all,
                           int32_t n_threads, bench_ceiling *c, int32_t *winner) {
    double passes[BW_TRIAL_PASSES];
    *winner = 0;
    for (int32_t k = 0; k < n_all; k++) {
        int rc = membw_measure(buf, &all[k], BW_TRIAL_BYTES, n_threads, BW_TRIAL_PASSES, passes);
        if (rc != EXIT_OK) return rc;
        c->trial_gbs[k] = bench_stats_of(passes, BW_TRIAL_PASSES).max;
        if (c->trial_gbs[k] > c->trial_gbs[*winner]) *winner = k;
    }
    membw_strategy_name(&all[*winner], c->bw_strategy, sizeof c->bw_strategy);
    return EXIT_OK;
}

/* The int8 peak of every tier this machine runs, kept in c where it beats what c holds. */
static int measure_peaks(int32_t n_threads, bench_ceiling *c) {
    for (size_t i = 0; i < N_PEAK_TIERS; i++) {
        syn_isa_tier tier;
        int8peak_chain_fn chain = int8peak_chain(syn_isa_tier_name(PEAK_TIERS[i]));
        if (!chain || syn_isa_tier_resolve(PEAK_TIERS[i], &tier) != SYN_OK) continue;
        double gmacs = 0;
        int rc = int8peak_measure(chain, n_threads, BW_PASSES, &gmacs);
        if (rc != EXIT_OK) return rc;
        if (gmacs > c->tier_gmacs[i]) c->tier_gmacs[i] = gmacs;
        if (gmacs > c->peak_gmacs) {
            c->peak_gmacs = gmacs;
            c->peak_isa = syn_isa_tier_name(PEAK_TIERS[i]);
        }
    }
    return EXIT_OK;
}

static void print_bandwidth(const bench_model *m, const bench_opts *o, const bench_ceiling *c,
                            const membw_strategy *all, int32_t n_all, const membw_buffer *buf,
                            const syn_model *model) {
    double mb = (double)m->bytes_per_token / 1e6, gmacs = (double)m->macs_per_token / 1e9;
    char cpu[160], name[40];
    syn_cpu_describe(cpu, sizeof cpu);
    printf("\ncpu: %s\n", cpu);
    printf("memory read bandwidth and int8 peak, measured before and after each thread count's "
           "tests (the best pass of the read strategy that won the trials, its median pass in "
           "brackets; the int8 peak of the best tier's dot instruction):\n");
    for (size_t i = 0; i < o->n_threads; i++) {
        printf("  %3d thread%s %6.1f GB/s (%.1f) -> decode ceiling %.1f tok/s at %.1f MB of "
               "weights per token, read as %s",
               o->threads[i], o->threads[i] == 1 ? ": " : "s:", c[i].bw.max, c[i].bw.median,
               c[i].bw.max * 1e3 / mb, mb, c[i].bw_strategy);
        if (c[i].peak_gmacs > 0) {
            printf("; %.0f G int8 MAC/s (%s) -> prefill ceiling %.0f tok/s at %.3f G per token",
                   c[i].peak_gmacs, c[i].peak_isa, c[i].peak_gmacs / gmacs, gmacs);
            printf("\n      int8 peaks (G MAC/s, each tier's dot instruction):");
            for (size_t k = 0, shown = 0; k < N_PEAK_TIERS; k++)
                if (c[i].tier_gmacs[k] > 0)
                    printf("%s %s %.0f", shown++ ? "," : "", syn_isa_tier_name(PEAK_TIERS[k]),
                           c[i].tier_gmacs[k]);
        }
        printf("\n      read strategies (GB/s, one pass over %zu MiB):", BW_TRIAL_BYTES >> 20);
        for (int32_t k = 0; k < n_all; k++) {
            membw_strategy_name(&all[k], name, sizeof name);
            printf("%s %s %.1f", k ? "," : "", name, c[i].trial_gbs[k]);
        }
        printf("\n");
    }
    printf("t/s: median ± sample standard deviation of %d runs after one warm-up. eff: tg t/s x "
           "(%.1f MB + "
           "the KV bytes at its depth) / bandwidth; pp t/s x %.3f G multiply-adds / int8 peak.\n",
           o->reps, mb, gmacs);
    printf("in 2 MiB pages: %.0f MiB of the model's mapping (weights: %.0f MiB), %.0f of %zu MiB "
           "of the "
           "bandwidth buffer\n",
           (double)syn_model_huge_page_bytes(model) / 1048576.0,
           (double)m->info.weight_bytes / 1048576.0, (double)membw_huge_page_bytes(buf) / 1048576.0,
           membw_bytes(buf) >> 20);
}

static json_t *result_json(const bench_model *m, const bench_opts *o, const bench_result *r) {
    char name[48];
    test_name(r, name, sizeof name);
    json_t *samples = json_doubles(r->ts, (size_t)o->reps);
    const double e = efficiency(m, r);
    json_t *eff = e >= 0 ? json_real(e) : json_null();
    char cpu[160];
    syn_cpu_describe(cpu, sizeof cpu);
    return json_pack(
        "{s:o, s:s, s:I, s:I, s:s, s:s, s:s, s:i, s:s, s:i, s:i, s:i, s:i, s:o, s:f, "
        "s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:I, s:f, s:f, s:o, s:I, s:o, s:o}",
        "model_file", json_text(m->path), "model_type", m->type, "model_size",
        (json_int_t)m->info.weight_bytes, "model_n_params", (json_int_t)m->info.n_params, "backend",
        backend_name(o->g.backend), "isa", r->isa, "kv_type",
        o->g.kv_type == SYN_KV_F16 ? "f16" : "f32", "n_threads", r->n_threads, "test", name,
        "n_prompt", r->tg ? 0 : r->n_tokens, "n_gen", r->tg ? r->n_tokens : 0, "n_depth", r->depth,
        "reps", o->reps, "samples_ts", samples, "median_ts", r->st.median, "avg_ts", r->st.mean,
        "stddev_ts", r->st.stddev, "min_ts", r->st.min, "max_ts", r->st.max, "bandwidth_gbs",
        r->bw_gbs, "bandwidth_median_gbs", r->bw_median_gbs, "bandwidth_strategy", r->bw_strategy,
        "weight_bytes_per_token", (json_int_t)m->bytes_per_token, "kv_bytes_per_token",
        r->tg ? kv_bytes_per_token(m, r) : 0.0, "int8_peak_gmacs", r->peak_gmacs, "int8_peak_isa",
        r->peak_isa ? json_string(r->peak_isa) : json_null(), "macs_per_token",
        (json_int_t)m->macs_per_token, "efficiency", eff, "cpu", json_text(cpu));
}

/* One run of r's test from depth r->depth (the cache below it is kept); *ms: its timed part,
 * during which times (when not NULL) is on. */
static int run_test(syn_context *ctx, const int32_t *ids, const bench_result *r,
                    syn_step_times *times, double *ms) {
    char name[48];
    test_name(r, name, sizeof name);
    if (syn_context_truncate(ctx, (uint32_t)r->depth) != SYN_OK)
        return fail_lib("%s: cannot rewind the cache", name);
    /* A sliding-window cache (gemma3) that lost the window below the depth starts over: the depth
     * is filled again, untimed, with the tokens that filled it. */
    if (syn_context_n_past(ctx) < (uint32_t)r->depth &&
        syn_context_decode(ctx, ids, (size_t)r->depth, NULL) != SYN_OK)
        return fail_lib("%s: cannot fill the cache to depth %d again", name, (int)r->depth);
    /* a tg test's untimed 1-token prompt */
    syn_status st = r->tg ? syn_context_decode(ctx, ids, 1, NULL) : SYN_OK;
    if (times) times->on = true;
    const double t0 = syn_now_ms();
    if (!r->tg) st = syn_context_decode(ctx, ids, (size_t)r->n_tokens, NULL);
    for (int32_t i = 0; r->tg && st == SYN_OK && i < r->n_tokens; i++)
        st = syn_context_decode(ctx, &ids[i + 1], 1, NULL);
    const double t1 = syn_now_ms();
    if (times) times->on = false;
    if (st != SYN_OK)
        return fail_lib("%s: decoding failed at position %u", name, syn_context_n_past(ctx));
    *ms = t1 - t0;
    return EXIT_OK;
}

/* Runs r's test once as a warm-up and then reps times, filling r->ts; with profile, once more
 * with the backend's step times on (r->prof, r->prof_ms; none recorded by the reference). */
static int time_test(syn_context *ctx, const int32_t *ids, int32_t reps, bool profile,
                     bench_result *r) {
    for (int32_t rep = -1; rep < reps; rep++) {
        double ms = 0;
        int rc = run_test(ctx, ids, r, NULL, &ms);
        if (rc != EXIT_OK) return rc;
        if (rep >= 0) r->ts[rep] = ms > 0 ? (double)r->n_tokens * 1e3 / ms : 0.0;
    }
    r->st = bench_stats_of(r->ts, (size_t)reps);
    syn_step_times *times = syn_context_step_times(ctx);
    if (!profile || !times) return EXIT_OK;
    times->n = 0;
    times->other_ns = 0;
    int rc = run_test(ctx, ids, r, times, &r->prof_ms);
    r->prof = *times;
    return rc;
}

/* --profile: r's steps in its timed part (a tg test's N decode calls, not its 1-token prompt),
 * each with its share of the steps' time and, for the matrix steps, its int8 multiply-add rate
 * against the in-run peak. */
static void print_profile(const bench_result *r) {
    char name[48];
    test_name(r, name, sizeof name);
    double steps_ms = (double)r->prof.other_ns / 1e6;
    for (size_t i = 0; i < r->prof.n; i++)
        steps_ms += (double)r->prof.steps[i].ns / 1e6;
    printf("\nprofile of %s, %d thread%s: one more run, %.1f ms timed, %.1f ms of it in the "
           "steps below",
           name, r->n_threads, r->n_threads == 1 ? "" : "s", r->prof_ms, steps_ms);
    if (r->peak_gmacs > 0) printf(" (int8 peak %.0f G MAC/s, %s)", r->peak_gmacs, r->peak_isa);
    printf("\n  %-24s %6s %9s %7s %12s %8s\n", "step", "runs", "ms", "share", "G MAC/s", "of peak");
    for (size_t i = 0; i < r->prof.n; i++) {
        const syn_step_time *st = &r->prof.steps[i];
        const double ms = (double)st->ns / 1e6;
        printf("  %-24s %6" PRIu64 " %9.2f %6.1f%%", st->step, st->runs, ms,
               steps_ms > 0 ? 100.0 * ms / steps_ms : 0.0);
        if (st->macs > 0 && st->ns > 0) {
            const double gmacs = (double)st->macs / (double)st->ns;
            printf(" %12.1f", gmacs);
            if (r->peak_gmacs > 0) printf(" %7.0f%%", 100.0 * gmacs / r->peak_gmacs);
        }
        printf("\n");
    }
    if (r->prof.other_ns > 0)
        printf("  %-24s %6s %9.2f %6.1f%%\n", "(other steps)", "", (double)r->prof.other_ns / 1e6,
               100.0 * (double)r->prof.other_ns / 1e6 / steps_ms);
}

static int32_t max_of(const int32_t *v, size_t n) {
    int32_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i] > m) m = v[i];
    return m;
}

/* Runs every test of one thread count into results[*n_results...]. */
static int bench_threads(const syn_model *model, const bench_opts *o, int32_t n_threads,
                         uint32_t n_ctx, const int32_t *ids, bench_result *results,
                         size_t *n_results) {
    gen_opts g = o->g;
    g.n_threads = n_threads;
    syn_context *ctx = NULL;
    int rc = new_context(model, &g, n_ctx, &ctx);
    for (size_t d = 0; rc == EXIT_OK && d < o->n_depths; d++) {
        int32_t depth = o->depths[d];
        /* The depth is filled once, untimed; each run rewinds to it. */
        if (syn_context_truncate(ctx, 0) != SYN_OK ||
            syn_context_decode(ctx, ids, (size_t)depth, NULL) != SYN_OK) {
            rc = fail_lib("cannot fill the cache to depth %d", depth);
            break;
        }
        for (int kind = 0; rc == EXIT_OK && kind < 2; kind++) {
            const int32_t *lens = kind ? o->gens : o->prompts;
            size_t n_lens = kind ? o->n_gens : o->n_prompts;
            for (size_t i = 0; rc == EXIT_OK && i < n_lens; i++) {
                if (lens[i] == 0) continue;
                bench_result *r = &results[*n_results];
                r->n_threads = n_threads;
                r->tg = kind == 1;
                r->n_tokens = lens[i];
                r->depth = depth;
                r->isa = syn_context_isa_name(ctx);
                r->kv_type = g.kv_type;
                if ((rc = time_test(ctx, ids, o->reps, o->profile, r)) != EXIT_OK) break;
                ++*n_results;
            }
        }
    }
    syn_context_free(ctx);
    return rc;
}

static int bench_speed(const bench_opts *o) {
    syn_model *model = NULL;
    /* No background prefetch: no thread may compete with the measurements. */
    int rc = load_model(o->g.model_path, false, o->g.huge_pages, o->g.interleave, &model);
    if (rc != EXIT_OK) return rc;
    bench_model m;
    bench_describe_model(model, o->g.model_path, &m);

    int32_t max_p = max_of(o->prompts, o->n_prompts), max_n = max_of(o->gens, o->n_gens);
    int32_t max_d = max_of(o->depths, o->n_depths);
    /* A tgN test needs N + 1 positions (its 1-token prompt); every list value is <= 2^20. */
    int32_t longest = max_n > 0 && max_n + 1 > max_p ? max_n + 1 : max_p;
    uint64_t n_ctx = (uint64_t)max_d + (uint64_t)longest;
    size_t n_ids = (size_t)(max_d > longest ? max_d : longest);
    size_t n_tests = o->n_depths * (o->n_prompts + o->n_gens) * o->n_threads;
    int32_t *ids = NULL;
    bench_result *results = NULL;
    double *samples = NULL;
    bench_ceiling *ceil = NULL;
    membw_buffer *buf = NULL;
    size_t n_results = 0;
    if (m.info.n_ctx_train <= 0 || n_ctx > (uint64_t)m.info.n_ctx_train) {
        rc = fail_runtime("the tests need a context of %" PRIu64
                          " tokens (depth %d + the longest test, "
                          "%d) but the training context of '%s' is %d",
                          n_ctx, max_d, longest, o->g.model_path, m.info.n_ctx_train);
        goto done;
    }
    ids = malloc(n_ids * sizeof *ids);
    results = calloc(n_tests, sizeof *results);
    samples = calloc(n_tests * (size_t)o->reps, sizeof *samples);
    ceil = calloc(o->n_threads, sizeof *ceil);
    if (!ids || !results || !samples || !ceil) {
        rc = fail_runtime("out of memory for %zu tests", n_tests);
        goto done;
    }
    for (size_t i = 0; i < n_tests; i++)
        results[i].ts = samples + i * (size_t)o->reps;
    bench_random_tokens(ids, n_ids, m.info.n_vocab);
    const double t0 = syn_now_ms();
    syn_model_wait_background(model); /* the interleaved copies, before anything is measured */
    if (!o->json && syn_model_interleaved_bytes(model) > 0)
        printf("interleaved copies: %.0f MiB, waited %.0f ms for them\n",
               (double)syn_model_interleaved_bytes(model) / 1048576.0, syn_now_ms() - t0);
    if ((rc = membw_new(BW_BYTES, &buf)) != EXIT_OK) goto done;
    /* The int8 peak where the contexts run an x86 tier (the scalar and ARM tiers have none). */
    syn_isa_tier tier;
    const bool peak = o->g.backend == SYN_BACKEND_OPTIMIZED &&
                      syn_isa_tier_resolve(o->g.isa, &tier) == SYN_OK &&
                      int8peak_chain(syn_isa_tier_name(tier)) != NULL;
    membw_strategy strategies[MEMBW_MAX_STRATEGIES];
    const int32_t n_strategies = membw_strategies(strategies);

    if (!o->json && (rc = print_header()) != EXIT_OK) goto done;
    for (size_t t = 0; rc == EXIT_OK && t < o->n_threads; t++) {
        /* The host's bandwidth moves within seconds: the ceiling is the best pass of the
         * strategy that won the trials, in its trials and in a probe before and one after this
         * thread count's tests, so that efficiency is not inflated by one probe landing in a
         * slow moment; the median of the probes' passes shows how far the host's typical moment
         * is below it. */
        bench_ceiling *c = &ceil[t];
        double passes[2 * BW_PASSES];
        int32_t winner = 0;
        const size_t first = n_results;
        if ((rc = choose_strategy(buf, strategies, n_strategies, o->threads[t], c, &winner)) !=
                EXIT_OK ||
            (rc = membw_measure(buf, &strategies[winner], 0, o->threads[t], BW_PASSES, passes)) !=
                EXIT_OK ||
            (peak && (rc = measure_peaks(o->threads[t], c)) != EXIT_OK))
            break;
        rc = bench_threads(model, o, o->threads[t], (uint32_t)n_ctx, ids, results, &n_results);
        if (rc == EXIT_OK)
            rc = membw_measure(buf, &strategies[winner], 0, o->threads[t], BW_PASSES,
                               passes + BW_PASSES);
        if (rc == EXIT_OK && peak) rc = measure_peaks(o->threads[t], c);
        if (rc == EXIT_OK) {
            /* The best pass the winner showed, its trial's included: the honest ceiling. */
            c->bw = bench_stats_of(passes, 2 * BW_PASSES);
            if (c->trial_gbs[winner] > c->bw.max) c->bw.max = c->trial_gbs[winner];
        }
        for (size_t i = first; i < n_results; i++) {
            results[i].bw_gbs = c->bw.max;
            results[i].bw_median_gbs = c->bw.median;
            results[i].bw_strategy = c->bw_strategy;
            results[i].peak_gmacs = c->peak_gmacs;
            results[i].peak_isa = c->peak_isa;
            if (rc == EXIT_OK && !o->json) rc = print_row(&m, o, &results[i]);
        }
    }
    if (rc != EXIT_OK) goto done;
    if (!o->json) {
        print_bandwidth(&m, o, ceil, strategies, n_strategies, buf, model);
        for (size_t i = 0; o->profile && i < n_results; i++)
            if (results[i].prof.n > 0) print_profile(&results[i]);
        rc = check_stdout();
    } else {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n_results; i++) {
            if (json_array_append_new(arr, result_json(&m, o, &results[i])) != 0) {
                json_decref(arr);
                arr = NULL;
            }
        }
        rc = print_json(arr);
    }
done:
    membw_free(buf);
    free(ceil);
    free(samples);
    free(results);
    free(ids);
    syn_model_free(model);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    bench_opts o = {0};
    gen_opts_init(&o.g, 0);
    o.reps = DEFAULT_REPS;
    int rc = parse_args(argc, argv, &o);
    if (rc == EXIT_OK)
        rc = o.json_schema  ? bench_schema(&o)
             : o.concurrent ? bench_concurrent(&o)
             : o.e2e        ? bench_e2e(&o)
                            : bench_speed(&o);
    free(o.threads);
    free(o.prompts);
    free(o.gens);
    free(o.depths);
    free(o.concurrent);
    return rc == ARGS_HELP ? EXIT_OK : rc;
}
