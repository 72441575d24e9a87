/* test_embed.c: embeddings (syn_embed and embedding requests of syn_engine) against the oracle:
 * the reference backend's final hidden states, pooled (mean, cls, last) and L2-normalised here,
 * independently of the engine's pooling; unit length; determinism; one vector bitwise the same
 * alone and among other inputs, with any step split and thread count (among generation requests
 * and after a preemption: test_engine.c); prefix-cache reuse for last pooling only;
 * `dimensions`; the pooling taken from the file's pooling_type key (and refused for none/rank);
 * the errors (empty input, too long, bad arguments). Files: qwen2 (F32, Q8_0), qwen3, llama,
 * gemma3 (sliding window), qwen35 (recurrent layers), phi3. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/test_util.h"
#include "backend/backend.h"
#include "gguf/gguf.h"
#include "model/model.h"

enum { N_INPUTS = 8, MAX_LEN = 96 };

/* Input lengths: one token, block edges (16, 17), a step split, longer prompts. */
static const size_t lens[N_INPUTS] = {1, 7, 16, 17, 33, 50, 64, 96};

typedef struct fixture {
    syn_model *model;
    int32_t n_embd;
    int32_t tokens[N_INPUTS][MAX_LEN];
} fixture;

static int setup_file(void **state, const char *file) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->model = test_load_model(file);
    if (!f->model) {
        free(f);
        return -1;
    }
    f->n_embd = f->model->hp.n_embd;
    const int32_t n_vocab = f->model->hp.n_vocab;
    test_fill_tokens(&f->tokens[0][0], N_INPUTS * MAX_LEN, 4242u);
    for (size_t k = 0; k < N_INPUTS; k++)
        for (size_t i = 0; i < MAX_LEN; i++)
            f->tokens[k][i] %= n_vocab;
    *state = f;
    return 0;
}

static int setup_qwen2_f32(void **state) { return setup_file(state, "qwen2-tiny-synth-f32.gguf"); }
static int setup_qwen2_q8(void **state) { return setup_file(state, "qwen2-tiny-synth-q8_0.gguf"); }
static int setup_qwen3(void **state) { return setup_file(state, "arch/qwen3-s5-q8_0.gguf"); }
static int setup_llama(void **state) { return setup_file(state, "arch/llama-s5-q4_k_m.gguf"); }
static int setup_gemma3(void **state) { return setup_file(state, "arch2/gemma3-s5-q8_0.gguf"); }
static int setup_qwen35(void **state) { return setup_file(state, "arch2/qwen35-s5-q8_0.gguf"); }
static int setup_phi3(void **state) { return setup_file(state, "arch2/phi3-s5-q4_k_m.gguf"); }

static int teardown(void **state) {
    fixture *f = *state;
    syn_model_free(f->model);
    free(f);
    return 0;
}

/* The oracle's input: the reference backend's final hidden rows [n][n_embd] of tokens (malloc'd).
 */
static float *reference_rows(const fixture *f, const int32_t *tokens, size_t n) {
    const syn_backend_config cfg = {
        .n_ctx = (uint32_t)n, .n_threads = 1, .isa = SYN_TIER_SCALAR, .kv_type = SYN_KV_F32};
    void *ref = NULL;
    assert_int_equal(syn_reference_backend.create(f->model, &cfg, &ref), SYN_OK);
    float *rows = malloc(sizeof *rows * n * (size_t)f->n_embd);
    assert_non_null(rows);
    assert_int_equal(syn_reference_backend.forward_hidden(ref, tokens, n, 0, rows), SYN_OK);
    syn_reference_backend.destroy(ref);
    return rows;
}

/* The oracle: rows [n][d] pooled and scaled to unit length in double, written here without the
 * engine's code. */
static void pool_rows(const float *rows, size_t n, size_t d, syn_pooling pooling, float *out) {
    size_t first = 0, count = n; /* mean: every row */
    if (pooling == SYN_POOLING_CLS) count = 1;
    if (pooling == SYN_POOLING_LAST) first = n - 1, count = 1;
    double *acc = calloc(d, sizeof *acc);
    assert_non_null(acc);
    for (size_t t = first; t < first + count; t++)
        for (size_t i = 0; i < d; i++)
            acc[i] += rows[t * d + i];
    double norm = 0.0;
    for (size_t i = 0; i < d; i++)
        norm += acc[i] * acc[i]; /* the 1/count of the mean cancels in the normalisation */
    norm = sqrt(norm);
    for (size_t i = 0; i < d; i++)
        out[i] = (float)(acc[i] / norm);
    free(acc);
}

static syn_engine *new_engine(const fixture *f, int32_t n_parallel, int32_t threads,
                              int32_t step_tokens) {
    syn_engine_params ep = syn_engine_default_params();
    ep.n_parallel = n_parallel;
    ep.n_threads = threads;
    ep.max_step_tokens = step_tokens;
    ep.n_ctx = 256;
    syn_engine *e = NULL;
    assert_int_equal(syn_engine_new(f->model, &ep, &e), SYN_OK);
    return e;
}

/* Every input of the fixture through syn_embed in one call: out [N_INPUTS][d]. */
static void embed_all(const fixture *f, syn_engine *e, syn_pooling pooling, int32_t dims,
                      float *out) {
    syn_embed_input in[N_INPUTS];
    for (size_t k = 0; k < N_INPUTS; k++)
        in[k] = (syn_embed_input){.tokens = f->tokens[k], .n_tokens = lens[k]};
    syn_embed_params p = syn_embed_default_params();
    p.pooling = pooling;
    p.dimensions = dims;
    size_t n_tokens = 0;
    if (syn_embed(e, &p, in, N_INPUTS, out, &n_tokens) != SYN_OK)
        fail_msg("syn_embed: %s", syn_last_error());
    size_t want = 0;
    for (size_t k = 0; k < N_INPUTS; k++)
        want += lens[k];
    assert_int_equal(n_tokens, want);
}

static double cosine(const float *a, const float *b, size_t d) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < d; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

static double max_abs_diff(const float *a, const float *b, size_t d) {
    double m = 0;
    for (size_t i = 0; i < d; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* The engine's vectors lie within the quantized activations' error of the oracle's (cosine and
 * per-value bounds; the f32 model's float path much closer), for each pooling; and the poolings
 * differ from one another, so the comparison can tell them apart. */
static void check_against_oracle(void **state, double min_cos, double max_diff) {
    const fixture *f = *state;
    const size_t d = (size_t)f->n_embd;
    static const syn_pooling poolings[] = {SYN_POOLING_MEAN, SYN_POOLING_CLS, SYN_POOLING_LAST};
    float *got = malloc(sizeof *got * N_INPUTS * d), *want = malloc(sizeof *want * d * 3);
    float *rows[N_INPUTS];
    assert_non_null(got);
    assert_non_null(want);
    for (size_t k = 0; k < N_INPUTS; k++)
        rows[k] = reference_rows(f, f->tokens[k], lens[k]);
    syn_engine *e = new_engine(f, 4, 2, 40);
    for (size_t pi = 0; pi < 3; pi++) {
        embed_all(f, e, poolings[pi], 0, got);
        double worst_cos = 1, worst_diff = 0;
        for (size_t k = 0; k < N_INPUTS; k++) {
            float *w = want + pi * d;
            pool_rows(rows[k], lens[k], d, poolings[pi], w);
            worst_cos = fmin(worst_cos, cosine(got + k * d, w, d));
            worst_diff = fmax(worst_diff, max_abs_diff(got + k * d, w, d));
        }
        printf("%s pooling: cosine >= %.6f, max |diff| %.2e\n", syn_pooling_name(poolings[pi]),
               worst_cos, worst_diff);
        if (worst_cos < min_cos || worst_diff > max_diff)
            fail_msg("%s pooling: cosine %.6f (want >= %.4f), max |diff| %.3g (want <= %.3g)",
                     syn_pooling_name(poolings[pi]), worst_cos, min_cos, worst_diff, max_diff);
    }
    /* want holds the last input's mean, cls and last vectors: far apart */
    assert_true(cosine(want, want + 2 * d, d) < 0.99);
    assert_true(cosine(want + d, want + 2 * d, d) < 0.99);
    syn_engine_free(e);
    for (size_t k = 0; k < N_INPUTS; k++)
        free(rows[k]);
    free(got);
    free(want);
}

static void test_f32_matches_reference(void **state) { check_against_oracle(state, 0.99999, 1e-5); }
static void test_quantized_near_reference(void **state) {
    check_against_oracle(state, 0.997, 0.025);
}

/* Unit length; the same bits on a second run, on another engine with other threads and steps,
 * and alone (one input per call, one slot) as among the others. */
static void test_unit_deterministic_and_alone_equals_batched(void **state) {
    const fixture *f = *state;
    const size_t d = (size_t)f->n_embd;
    float *a = malloc(sizeof *a * N_INPUTS * d), *b = malloc(sizeof *b * N_INPUTS * d);
    assert_non_null(a);
    assert_non_null(b);
    syn_engine *batched = new_engine(f, 8, 3, 23); /* 23-token steps split most inputs */
    embed_all(f, batched, SYN_POOLING_MEAN, 0, a);
    for (size_t k = 0; k < N_INPUTS; k++) {
        double norm = 0;
        for (size_t i = 0; i < d; i++)
            norm += (double)a[k * d + i] * a[k * d + i];
        if (fabs(sqrt(norm) - 1.0) > 1e-5) fail_msg("input %zu: length %.8f", k, sqrt(norm));
    }
    embed_all(f, batched, SYN_POOLING_MEAN, 0, b);
    assert_memory_equal(a, b, sizeof *a * N_INPUTS * d);
    syn_engine_free(batched);

    syn_engine *alone = new_engine(f, 1, 1, 512);
    syn_embed_params p = syn_embed_default_params();
    p.pooling = SYN_POOLING_MEAN;
    for (size_t k = 0; k < N_INPUTS; k++) {
        const syn_embed_input in = {.tokens = f->tokens[k], .n_tokens = lens[k]};
        assert_int_equal(syn_embed(alone, &p, &in, 1, b + k * d, NULL), SYN_OK);
        if (memcmp(a + k * d, b + k * d, sizeof *a * d) != 0)
            fail_msg("input %zu (%zu tokens): alone differs from batched", k, lens[k]);
    }
    syn_engine_free(alone);
    free(a);
    free(b);
}

/* dimensions d: the full vector's first d values at unit length again. */
static void test_dimensions(void **state) {
    const fixture *f = *state;
    const size_t d = (size_t)f->n_embd, short_d = d / 4;
    float *full = malloc(sizeof *full * N_INPUTS * d), *cut = malloc(sizeof *cut * N_INPUTS * d);
    assert_non_null(full);
    assert_non_null(cut);
    syn_engine *e = new_engine(f, 4, 2, 64);
    embed_all(f, e, SYN_POOLING_LAST, 0, full);
    embed_all(f, e, SYN_POOLING_LAST, (int32_t)short_d, cut);
    for (size_t k = 0; k < N_INPUTS; k++) {
        double norm = 0;
        for (size_t i = 0; i < short_d; i++)
            norm += (double)full[k * d + i] * full[k * d + i];
        norm = sqrt(norm);
        for (size_t i = 0; i < short_d; i++)
            assert_float_equal(cut[k * short_d + i], full[k * d + i] / norm, 1e-6);
    }
    syn_embed_params p = syn_embed_default_params();
    const syn_embed_input in = {.tokens = f->tokens[0], .n_tokens = 3};
    p.dimensions = (int32_t)d + 1;
    assert_int_equal(syn_embed(e, &p, &in, 1, cut, NULL), SYN_ERR_INVALID_ARGUMENT);
    p.dimensions = -1;
    assert_int_equal(syn_embed(e, &p, &in, 1, cut, NULL), SYN_ERR_INVALID_ARGUMENT);
    syn_engine_free(e);
    free(full);
    free(cut);
}

/* One embedding request of tokens[n] with pooling; its vector into out, its reused prompt
 * positions returned. */
static size_t embed_request(syn_engine *e, const int32_t *tokens, size_t n, syn_pooling pooling,
                            float *out, size_t d) {
    syn_request_params p = syn_request_default_params();
    p.embed = true;
    p.pooling = pooling;
    p.prompt_tokens = tokens;
    p.n_prompt_tokens = n;
    syn_request *r = NULL;
    assert_int_equal(syn_engine_submit(e, &p, &r), SYN_OK);
    syn_request_result res;
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_non_null(res.embedding);
    memcpy(out, res.embedding, sizeof *out * d);
    const size_t cached = res.n_cached_tokens;
    syn_request_free(r);
    return cached;
}

/* The prefix cache: last pooling reads only the last token's state, so a repeated input reuses
 * its cached blocks (the same bits); mean and cls need every / the first token's state and
 * compute it all again. */
static void test_prefix_cache(void **state) {
    const fixture *f = *state;
    const size_t d = (size_t)f->n_embd, n = lens[N_INPUTS - 1]; /* 96 tokens: 5 full blocks */
    float *a = malloc(sizeof *a * d), *b = malloc(sizeof *b * d);
    assert_non_null(a);
    assert_non_null(b);
    syn_engine *e = new_engine(f, 2, 2, 64);
    static const syn_pooling poolings[] = {SYN_POOLING_LAST, SYN_POOLING_MEAN, SYN_POOLING_CLS};
    for (size_t pi = 0; pi < 3; pi++) {
        const int32_t *tokens = f->tokens[N_INPUTS - 1 - pi];
        assert_int_equal(embed_request(e, tokens, n, poolings[pi], a, d), 0);
        const size_t cached = embed_request(e, tokens, n, poolings[pi], b, d);
        if (poolings[pi] == SYN_POOLING_LAST)
            assert_int_equal(cached, (n - 1) / 16 * 16); /* all full blocks but the last token */
        else
            assert_int_equal(cached, 0);
        assert_memory_equal(a, b, sizeof *a * d);
    }
    syn_engine_free(e);
    free(a);
    free(b);
}

/* Writes tests/data/<file> with ARCH.pooling_type = value to path (every other key and tensor as
 * it is). */
typedef struct copy_src {
    const gguf_tensor *t;
} copy_src;

static syn_status copy_tensor(void *user, const char *name, void *dst, uint64_t nbytes) {
    (void)name;
    const copy_src *c = user;
    memcpy(dst, c->t->data, nbytes);
    return SYN_OK;
}

static void write_with_pooling(const char *file, uint32_t value, const char *path) {
    gguf_file *g = NULL;
    assert_int_equal(gguf_open(test_data_path(file), &g), SYN_OK);
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    for (uint64_t i = 0; i < g->n_kv; i++)
        assert_int_equal(gguf_writer_copy_kv(w, &g->kvs[i]), SYN_OK);
    assert_int_equal(gguf_writer_set_u32(w, "qwen2.pooling_type", value), SYN_OK);
    copy_src *srcs = calloc(g->n_tensors, sizeof *srcs);
    assert_non_null(srcs);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.data);
        srcs[i].t = t;
        assert_int_equal(
            gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, copy_tensor, &srcs[i]),
            SYN_OK);
    }
    assert_int_equal(gguf_writer_write(w, path), SYN_OK);
    gguf_writer_free(w);
    free(srcs);
    gguf_close(g);
}

/* The file's pooling_type decides SYN_POOLING_MODEL: absent, last; 1, mean (and so the default
 * request equals an explicit mean one); 0 (none) and 4 (rank) are refused unless overridden. */
static void test_pooling_from_the_file(void **state) {
    const fixture *f = *state;
    syn_pooling got;
    assert_int_equal(f->model->hp.pooling_type, -1);
    assert_int_equal(syn_pooling_resolve(f->model, SYN_POOLING_MODEL, &got), SYN_OK);
    assert_int_equal(got, SYN_POOLING_LAST);
    assert_int_equal(syn_pooling_resolve(f->model, (syn_pooling)7, &got), SYN_ERR_INVALID_ARGUMENT);

    char *dir = test_make_temp_dir();
    char path[512];
    snprintf(path, sizeof path, "%s/pooled.gguf", dir);
    static const struct {
        uint32_t value;
        syn_status status;
        syn_pooling pooling;
    } cases[] = {{1, SYN_OK, SYN_POOLING_MEAN},
                 {2, SYN_OK, SYN_POOLING_CLS},
                 {3, SYN_OK, SYN_POOLING_LAST},
                 {0, SYN_ERR_UNSUPPORTED, SYN_POOLING_MODEL},
                 {4, SYN_ERR_UNSUPPORTED, SYN_POOLING_MODEL}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        write_with_pooling("qwen2-tiny-synth-q8_0.gguf", cases[c].value, path);
        syn_model_params mp = syn_model_default_params();
        mp.prefetch = false;
        syn_model *m = NULL;
        assert_int_equal(syn_model_load(path, &mp, &m), SYN_OK);
        syn_model_info info;
        syn_model_get_info(m, &info);
        assert_int_equal(info.pooling_type, (int32_t)cases[c].value);
        assert_int_equal(syn_pooling_resolve(m, SYN_POOLING_MODEL, &got), cases[c].status);
        if (cases[c].status == SYN_OK) assert_int_equal(got, cases[c].pooling);
        syn_engine_params ep = syn_engine_default_params();
        ep.n_parallel = 1;
        ep.n_threads = 1;
        ep.n_ctx = 64;
        syn_engine *e = NULL;
        assert_int_equal(syn_engine_new(m, &ep, &e), SYN_OK);
        syn_embed_params p = syn_embed_default_params();
        const syn_embed_input in = {.tokens = f->tokens[1], .n_tokens = lens[1]};
        float *v = malloc(sizeof *v * (size_t)f->n_embd * 2);
        assert_non_null(v);
        assert_int_equal(syn_embed(e, &p, &in, 1, v, NULL), cases[c].status);
        if (cases[c].status == SYN_OK) { /* the file's choice equals asking for it */
            p.pooling = cases[c].pooling;
            assert_int_equal(syn_embed(e, &p, &in, 1, v + f->n_embd, NULL), SYN_OK);
            assert_memory_equal(v, v + f->n_embd, sizeof *v * (size_t)f->n_embd);
        } else { /* an override still works */
            p.pooling = SYN_POOLING_LAST;
            assert_int_equal(syn_embed(e, &p, &in, 1, v, NULL), SYN_OK);
        }
        free(v);
        syn_engine_free(e);
        syn_model_free(m);
    }
    test_remove_dir(dir);
    free(dir);
}

/* Bad inputs fail at submission, naming the input; nothing is left running. */
static void test_errors(void **state) {
    const fixture *f = *state;
    syn_engine *e = new_engine(f, 2, 1, 64); /* n_ctx 256 */
    float *out = malloc(sizeof *out * (size_t)f->n_embd * 3);
    assert_non_null(out);
    syn_embed_params p = syn_embed_default_params();
    int32_t *longer = malloc(sizeof *longer * 257);
    assert_non_null(longer);
    for (size_t i = 0; i < 257; i++)
        longer[i] = f->tokens[i % N_INPUTS][i % MAX_LEN];
    const syn_embed_input ok = {.tokens = f->tokens[0], .n_tokens = 5};
    const syn_embed_input fits[1] = {{.tokens = longer, .n_tokens = 256}};
    assert_int_equal(syn_embed(e, &p, fits, 1, out, NULL), SYN_OK); /* the whole context */
    syn_embed_input bad[3] = {ok, {.tokens = longer, .n_tokens = 257}, ok};
    assert_int_equal(syn_embed(e, &p, bad, 3, out, NULL), SYN_ERR_CONTEXT_FULL);
    assert_non_null(strstr(syn_last_error(), "input 1"));
    bad[1] = (syn_embed_input){.tokens = longer, .n_tokens = 0};
    assert_int_equal(syn_embed(e, &p, bad, 3, out, NULL), SYN_ERR_INVALID_ARGUMENT);
    bad[1] = (syn_embed_input){.text = ""}; /* no BOS in this tokenizer's policy: no tokens */
    assert_int_equal(syn_embed(e, &p, bad, 3, out, NULL), SYN_ERR_INVALID_ARGUMENT);
    bad[1] = (syn_embed_input){.text = "both", .tokens = longer, .n_tokens = 2};
    assert_int_equal(syn_embed(e, &p, bad, 3, out, NULL), SYN_ERR_INVALID_ARGUMENT);
    int32_t outside = f->model->hp.n_vocab;
    bad[1] = (syn_embed_input){.tokens = &outside, .n_tokens = 1};
    assert_int_equal(syn_embed(e, &p, bad, 3, out, NULL), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_embed(e, &p, bad, 0, out, NULL), SYN_ERR_INVALID_ARGUMENT);
    assert_int_equal(syn_embed(NULL, &p, bad, 1, out, NULL), SYN_ERR_INVALID_ARGUMENT);
    /* a text input is the prompt_text's tokens */
    const syn_embed_input text = {.text = "Hello embeddings"};
    assert_int_equal(syn_embed(e, &p, &text, 1, out, NULL), SYN_OK);
    /* an embedding request takes no grammar; its result has no tokens */
    syn_request_params rp = syn_request_default_params();
    rp.embed = true;
    rp.prompt_tokens = f->tokens[2];
    rp.n_prompt_tokens = 9;
    rp.grammar = "root ::= \"a\"";
    syn_request *r = NULL;
    assert_int_equal(syn_engine_submit(e, &rp, &r), SYN_ERR_INVALID_ARGUMENT);
    rp.grammar = NULL;
    assert_int_equal(syn_engine_submit(e, &rp, &r), SYN_OK);
    syn_request_result res;
    assert_int_equal(syn_request_wait(r, &res), SYN_OK);
    assert_int_equal(res.finish, SYN_FINISH_LENGTH);
    assert_int_equal(res.n_tokens, 0);
    assert_int_equal(res.n_prompt_tokens, 9);
    assert_int_equal(res.n_embd, f->n_embd);
    assert_non_null(res.embedding);
    syn_request_free(r);
    syn_engine_stats st;
    syn_engine_get_stats(e, &st);
    assert_int_equal(st.n_active + st.n_queued, 0);
    assert_int_equal(st.n_generated, 0);
    syn_engine_free(e);
    free(longer);
    free(out);
}

int main(void) {
    const struct CMUnitTest f32[] = {
        cmocka_unit_test(test_f32_matches_reference),
        cmocka_unit_test(test_unit_deterministic_and_alone_equals_batched),
        cmocka_unit_test(test_dimensions),
    };
    const struct CMUnitTest q8[] = {
        cmocka_unit_test(test_quantized_near_reference),
        cmocka_unit_test(test_unit_deterministic_and_alone_equals_batched),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_pooling_from_the_file),
        cmocka_unit_test(test_errors),
    };
    const struct CMUnitTest arch[] = {
        cmocka_unit_test(test_quantized_near_reference),
        cmocka_unit_test(test_unit_deterministic_and_alone_equals_batched),
    };
    int failed = cmocka_run_group_tests_name("embed, qwen2 f32", f32, setup_qwen2_f32, teardown);
    failed += cmocka_run_group_tests_name("embed, qwen2 q8_0", q8, setup_qwen2_q8, teardown);
    failed += cmocka_run_group_tests_name("embed, qwen3 q8_0", arch, setup_qwen3, teardown);
    failed += cmocka_run_group_tests_name("embed, llama q4_k_m", arch, setup_llama, teardown);
    failed += cmocka_run_group_tests_name("embed, gemma3 q8_0", arch, setup_gemma3, teardown);
    failed += cmocka_run_group_tests_name("embed, qwen35 q8_0", arch, setup_qwen35, teardown);
    failed += cmocka_run_group_tests_name("embed, phi3 q4_k_m", arch, setup_phi3, teardown);
    return failed;
}
