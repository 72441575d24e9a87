/* bench.c: what the benchmark's modes share (cmd_bench.c, bench_e2e.c, bench_concurrent.c):
 * statistics over repetitions, the model's description and per-token work, the prompt tokens. */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "synapse_internal.h"

/* The benchmark's prompt tokens: the same pseudo-random ids in every run. */
static const uint64_t TOKEN_SEED = 0x5eed5eed5eedULL;

static int cmp_double(const void *pa, const void *pb) {
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

bench_stats bench_stats_of(const double *v, size_t n) {
    bench_stats s = {0};
    double *sorted = malloc(n * sizeof *sorted);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    s.mean = sum / (double)n;
    double ss = 0;
    for (size_t i = 0; i < n; i++)
        ss += (v[i] - s.mean) * (v[i] - s.mean);
    s.stddev = n > 1 ? sqrt(ss / (double)(n - 1)) : 0.0;
    s.min = s.max = v[0];
    for (size_t i = 1; i < n; i++) {
        if (v[i] < s.min) s.min = v[i];
        if (v[i] > s.max) s.max = v[i];
    }
    if (sorted) {
        memcpy(sorted, v, n * sizeof *sorted);
        qsort(sorted, n, sizeof *sorted, cmp_double);
        s.median = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
        free(sorted);
    } else {
        s.median = s.mean; /* out of memory for a handful of doubles: the mean is the next best */
    }
    return s;
}

json_t *json_doubles(const double *v, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (json_array_append_new(arr, json_real(v[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

/* The file's mix as llama.cpp names it (general.file_type: "Q4_K_M", ...), else the type of the
 * first block's query matrix. */
static const char *file_type_name(const syn_model *model) {
    static const struct {
        uint32_t id;
        const char *name;
    } names[] = {{0, "F32"},     {1, "F16"},   {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
                 {8, "Q5_0"},    {9, "Q5_1"},  {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"},
                 {17, "Q5_K_M"}, {18, "Q6_K"}, {32, "BF16"}};
    uint32_t ft = UINT32_MAX;
    if (gguf_get_u32_opt(syn_model_gguf(model), "general.file_type", &ft) == SYN_OK)
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (names[i].id == ft) return names[i].name;
    syn_model_work work;
    syn_model_get_work(model, &work);
    return work.block_matrix_type < GGML_TYPE_COUNT ? ggml_type_name(work.block_matrix_type) : "?";
}

void bench_describe_model(const syn_model *model, const char *path, bench_model *m) {
    m->path = path;
    syn_model_get_info(model, &m->info);
    double n = (double)m->info.n_params;
    const char *wtype = file_type_name(model);
    if (n >= 1e9)
        snprintf(m->type, sizeof m->type, "%s %.2fB %s", m->info.architecture, n / 1e9, wtype);
    else
        snprintf(m->type, sizeof m->type, "%s %.0fM %s", m->info.architecture, n / 1e6, wtype);
    /* Decode reads every block matrix, norm and bias, and the output projection; of the token
     * embedding only one row, unless it is the (tied) output projection. */
    syn_model_work work;
    syn_model_get_work(model, &work);
    m->bytes_per_token = m->info.weight_bytes;
    if (!m->info.tied_output && work.token_embd_bytes <= m->bytes_per_token)
        m->bytes_per_token -= work.token_embd_bytes;
    m->kv_values_per_position = work.kv_values_per_position;
    m->kv_values_local = work.kv_values_local;
    m->swa_window = work.swa_window;
    m->macs_per_token = work.macs_per_token;
}

void bench_random_tokens(int32_t *ids, size_t n, int32_t n_vocab) {
    uint64_t state = TOKEN_SEED;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        ids[i] = (int32_t)((z ^ (z >> 31)) % (uint64_t)n_vocab);
    }
}
