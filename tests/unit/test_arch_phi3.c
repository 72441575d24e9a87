/* test_arch_phi3.c: the phi3 architecture (Phi-3 / Phi-3.5 / Phi-4-mini) on the files of
 * tests/data/arch2 (random weights, llama.cpp's own F32 / Q8_0 / Q4_K_M files, its logits and the
 * exact F32 oracle; /shared/testdata/arch2/README.md): fused q | k | v and gate | up matrices,
 * partial rotary, LongRoPE factors and attn_factor, an untied output. The reference backend
 * against the exact oracle, the optimized one against llama.cpp's own distance from it, both
 * teacher-forced along llama.cpp's tokens; the long factors for a context beyond the original
 * one; files with broken phi3 metadata or tensors refused by name. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../support/agreement.h"
#include "../support/test_util.h"
#include "gguf/gguf.h"

static const char *const files[] = {
    "arch2/phi3-s5-f32.gguf",
    "arch2/phi3-s5-q8_0.gguf",
    "arch2/phi3-s5-q4_k_m.gguf",
};

/* The reference backend within 5e-3 of the exact oracle's top-5 logits at every step of the three
 * runs (the README expects about 1e-3 from float32 arithmetic), with its argmax wherever the
 * oracle's margin is at least 0.01. */
static void test_reference_vs_exact_oracle(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        agreement_assert_reference(files[i], 5e-3);
}

/* llama.cpp's default run's distance from the exact oracle (the README's table): max and mean
 * |logit difference| over the oracle's top-5 ids, and its argmax misses at the 96 steps where the
 * oracle's margin is at least 0.1 (from the oracle file's llama.cpp top5). Our activations are
 * quantized as ggml's, but the rounding draws differ (ours and llama.cpp's logits lie as far
 * apart as either from the oracle: 0.205 max on Q4_K_M), so a maximum over 480 values varies:
 * on Q4_K_M ours is 0.239 against llama.cpp's 0.165 and one or two clear steps flip (two with
 * an fp16 KV cache) where llama.cpp's do not, while the mean stays within 1.1x. max_factor and
 * extra_misses say how much more than llama.cpp each file is allowed. */
typedef struct llama_cpp_distance {
    const char *file;
    double max, mean;
    int clear_misses;
    double max_factor;
    int extra_misses;
} llama_cpp_distance;

static const llama_cpp_distance distances[] = {
    {"arch2/phi3-s5-f32.gguf", 0.0085, 0.0020, 0, 1.3, 0},
    {"arch2/phi3-s5-q8_0.gguf", 0.1859, 0.0396, 1, 1.3, 0},
    {"arch2/phi3-s5-q4_k_m.gguf", 0.1649, 0.0446, 0, 1.5, 2},
};

/* The optimized backend (activations quantized as ggml pairs them with each weight type) no
 * farther from the exact oracle than llama.cpp: mean <= 1.15x llama.cpp's + 0.002, max <=
 * max_factor x + 0.005, and no more clear argmax misses than llama.cpp's + extra_misses; with an
 * fp16 KV cache (llama.cpp's default) too. */
static void test_optimized_vs_exact_oracle(void **state) {
    (void)state;
    for (int kv = 0; kv < 2; kv++) {
        syn_context_params p = syn_context_default_params();
        p.backend = SYN_BACKEND_OPTIMIZED;
        p.n_threads = 2;
        p.kv_type = kv ? SYN_KV_F16 : SYN_KV_F32;
        for (size_t i = 0; i < sizeof distances / sizeof distances[0]; i++) {
            const llama_cpp_distance *d = &distances[i];
            const agreement_stats s = agreement_assert_near_llama_cpp(
                d->file, &p, AGAINST_F32_REF, d->max, d->mean, d->max_factor);
            assert_true(s.n_argmax_mismatch <= d->clear_misses + d->extra_misses);
        }
    }
}

/* ---- variants of a file: its metadata and tensors rewritten with one change --------------------
 */

/* What a variant changes; unset fields change nothing. */
typedef struct variant {
    const char *u32_key; /* set to u32_value (added when absent) */
    uint32_t u32_value;
    const char *f32_key; /* set to f32_value */
    float f32_value;
    const char *drop_tensor;
    const char
        *resize_tensor; /* its last dimension becomes resize_rows (data cut or zero-padded) */
    uint64_t resize_rows;
    const char *poke_tensor; /* an F32 tensor whose value poke_index becomes poke_value */
    uint64_t poke_index;
    float poke_value;
    bool swap_rope_factors; /* rope_factors_short holds the long factors and the long ones the short
                             */
} variant;

typedef struct fill_src {
    const gguf_tensor *t;
    const variant *v;
} fill_src;

static syn_status fill_tensor(void *user, const char *name, void *dst, uint64_t nbytes) {
    const fill_src *src = user;
    const uint64_t n = src->t->nbytes < nbytes ? src->t->nbytes : nbytes;
    memcpy(dst, src->t->data, n);
    memset((uint8_t *)dst + n, 0, nbytes - n);
    if (src->v->poke_tensor && strcmp(name, src->v->poke_tensor) == 0)
        memcpy((float *)dst + src->v->poke_index, &src->v->poke_value, sizeof(float));
    return SYN_OK;
}

static bool str_is(gguf_str s, const char *c) { return c && gguf_str_eq(s, c); }

/* Writes tests/data/<file> changed by v to path; every other key and tensor is copied as it is. */
static void write_variant(const char *file, const variant *v, const char *path) {
    gguf_file *f = NULL;
    assert_int_equal(gguf_open(test_data_path(file), &f), SYN_OK);
    gguf_writer *w = gguf_writer_new();
    assert_non_null(w);
    bool u32_done = false;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kvs[i];
        if (str_is(kv->key, v->u32_key)) {
            assert_int_equal(gguf_writer_set_u32(w, v->u32_key, v->u32_value), SYN_OK);
            u32_done = true;
        } else if (str_is(kv->key, v->f32_key)) {
            assert_int_equal(gguf_writer_set_f32(w, v->f32_key, v->f32_value), SYN_OK);
        } else {
            assert_int_equal(gguf_writer_copy_kv(w, kv), SYN_OK);
        }
    }
    if (v->u32_key && !u32_done)
        assert_int_equal(gguf_writer_set_u32(w, v->u32_key, v->u32_value), SYN_OK);
    fill_src *srcs = calloc(f->n_tensors, sizeof *srcs);
    assert_non_null(srcs);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (str_is(t->name, v->drop_tensor)) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.data);
        srcs[i].t = t;
        srcs[i].v = v;
        if (v->swap_rope_factors && (strcmp(name, "rope_factors_short.weight") == 0 ||
                                     strcmp(name, "rope_factors_long.weight") == 0))
            srcs[i].t = gguf_find_tensor(f, name[13] == 's' ? "rope_factors_long.weight"
                                                            : "rope_factors_short.weight");
        uint64_t ne[GGUF_MAX_DIMS];
        memcpy(ne, t->ne, sizeof ne);
        if (str_is(t->name, v->resize_tensor)) ne[t->n_dims - 1] = v->resize_rows;
        assert_int_equal(
            gguf_writer_add_tensor(w, name, t->type, t->n_dims, ne, fill_tensor, &srcs[i]), SYN_OK);
    }
    assert_int_equal(gguf_writer_write(w, path), SYN_OK);
    gguf_writer_free(w);
    free(srcs);
    gguf_close(f);
}

static syn_model *load_path(const char *path) {
    syn_model_params mp = syn_model_default_params();
    mp.prefetch = false;
    syn_model *m = NULL;
    if (syn_model_load(path, &mp, &m) != SYN_OK) fail_msg("%s: %s", path, syn_last_error());
    return m;
}

/* ---- LongRoPE: the long factors beyond the original context -----------------------------------
 */

enum { ORIG_CTX = 4096 };

/* The tokens of the oracle's first run (prompt and generated), into tokens[cap]; their count. */
static size_t oracle_tokens(const char *file, int32_t *tokens, size_t cap) {
    char path[256];
    snprintf(path, sizeof path, "%s.oracle.json", file);
    json_t *runs = json_load_file(test_data_path(path), 0, NULL);
    assert_non_null(runs);
    json_t *run = json_array_get(runs, 0);
    json_t *parts[2] = {json_object_get(run, "prompt_ids"), json_object_get(run, "generated_ids")};
    size_t n = 0;
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < json_array_size(parts[p]) && n < cap; i++)
            tokens[n++] = (int32_t)json_integer_value(json_array_get(parts[p], i));
    json_decref(runs);
    return n;
}

/* Logits [n][n_vocab] (malloc'd) of tokens through a fresh context of n_ctx positions. */
static float *run_ctx(const syn_model *m, syn_backend backend, uint32_t n_ctx,
                      const int32_t *tokens, size_t n) {
    syn_model_info info;
    syn_model_get_info(m, &info);
    float *logits = malloc(sizeof(float) * n * (size_t)info.n_vocab);
    assert_non_null(logits);
    syn_context_params p = syn_context_default_params();
    p.backend = backend;
    p.n_threads = 2;
    p.n_ctx = n_ctx;
    syn_context *ctx = NULL;
    assert_int_equal(syn_context_new(m, &p, &ctx), SYN_OK);
    assert_int_equal(syn_context_decode(ctx, tokens, n, logits), SYN_OK);
    syn_context_free(ctx);
    return logits;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - (double)b[i]);
        d = e > d ? e : d;
    }
    return d;
}

/* A context longer than rope.scaling.original_context_length (4096) takes rope_factors_long, one
 * of at most 4096 positions the short ones: on a copy of the F32 file whose context_length is
 * Phi-3.5's 131072, a 4097-position context gives the logits, bitwise, that a 4096-position one
 * gives on a second copy with the two factor sets swapped, and they differ clearly from the
 * short-factor run; in both backends, which agree with each other on the long factors too. */
static void test_longrope_long_factors_beyond_original_context(void **state) {
    (void)state;
    const char *file = "arch2/phi3-s5-f32.gguf";
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char plain[4200], swapped[4200];
    snprintf(plain, sizeof plain, "%s/long-context.gguf", dir);
    snprintf(swapped, sizeof swapped, "%s/swapped-factors.gguf", dir);
    const variant v_plain = {.u32_key = "phi3.context_length", .u32_value = 131072};
    variant v_swapped = v_plain;
    v_swapped.swap_rope_factors = true;
    write_variant(file, &v_plain, plain);
    write_variant(file, &v_swapped, swapped);
    syn_model *m = load_path(plain), *ms = load_path(swapped);
    syn_model_info info;
    syn_model_get_info(m, &info);

    int32_t tokens[64];
    const size_t n = oracle_tokens(file, tokens, 64);
    const size_t count = n * (size_t)info.n_vocab;
    const syn_backend backends[] = {SYN_BACKEND_REFERENCE, SYN_BACKEND_OPTIMIZED};
    float *long_logits[2];
    for (int b = 0; b < 2; b++) {
        float *short_run = run_ctx(m, backends[b], ORIG_CTX, tokens, n);
        float *long_run = run_ctx(m, backends[b], ORIG_CTX + 1, tokens, n);
        float *swapped_short = run_ctx(ms, backends[b], ORIG_CTX, tokens, n);
        const double d = max_abs_diff(short_run, long_run, count);
        printf("%s: long vs short factors, max |logit diff| %.4f\n", b ? "optimized" : "reference",
               d);
        assert_true(d > 0.1);
        assert_memory_equal(long_run, swapped_short, sizeof(float) * count);
        long_logits[b] = long_run;
        free(short_run);
        free(swapped_short);
    }
    const double cross = max_abs_diff(long_logits[0], long_logits[1], count);
    printf("long factors, optimized vs reference: max |logit diff| %.6f\n", cross);
    assert_true(cross < 1e-3);
    free(long_logits[0]);
    free(long_logits[1]);
    syn_model_free(m);
    syn_model_free(ms);
    test_remove_dir(dir);
    free(dir);
}

/* The first generated token's logits, captured from the engine's token event. */
static bool keep_first_logits(const syn_token_event *ev, void *user_data) {
    float *dst = user_data;
    if (ev->token >= 0 && ev->index == 0)
        memcpy(dst, ev->logits, sizeof(float) * (size_t)ev->n_vocab);
    return true;
}

/* The engine (the server's path) chooses the factors by its own n_ctx as a context does: its
 * first token's logits for a prompt are bitwise a 4096- or 4097-position context's last logits,
 * and the two differ. */
static void test_longrope_through_the_engine(void **state) {
    (void)state;
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/long-context.gguf", dir);
    const variant v = {.u32_key = "phi3.context_length", .u32_value = 131072};
    write_variant("arch2/phi3-s5-q4_k_m.gguf", &v, path);
    syn_model *m = load_path(path);
    syn_model_info info;
    syn_model_get_info(m, &info);
    const size_t nv = (size_t)info.n_vocab;
    int32_t tokens[64];
    const size_t n = oracle_tokens("arch2/phi3-s5-q4_k_m.gguf", tokens, 64);
    float *engine_logits[2];
    for (int k = 0; k < 2; k++) {
        const uint32_t n_ctx = ORIG_CTX + (uint32_t)k;
        float *ctx_logits = run_ctx(m, SYN_BACKEND_OPTIMIZED, n_ctx, tokens, n);
        engine_logits[k] = calloc(nv, sizeof(float));
        assert_non_null(engine_logits[k]);
        syn_engine_params ep = syn_engine_default_params();
        ep.n_threads = 2;
        ep.n_ctx = n_ctx;
        syn_engine *e = NULL;
        assert_int_equal(syn_engine_new(m, &ep, &e), SYN_OK);
        syn_request_params rp = syn_request_default_params();
        rp.prompt_tokens = tokens;
        rp.n_prompt_tokens = n;
        rp.max_tokens = 1;
        rp.sampling.temperature = 0.0f;
        rp.on_token = keep_first_logits;
        rp.user_data = engine_logits[k];
        syn_request *req = NULL;
        assert_int_equal(syn_engine_submit(e, &rp, &req), SYN_OK);
        syn_request_result res;
        assert_int_equal(syn_request_wait(req, &res), SYN_OK);
        assert_int_equal(res.status, SYN_OK);
        syn_request_free(req);
        syn_engine_free(e);
        assert_memory_equal(engine_logits[k], ctx_logits + (n - 1) * nv, sizeof(float) * nv);
        free(ctx_logits);
    }
    const double d = max_abs_diff(engine_logits[0], engine_logits[1], nv);
    printf("engine: long vs short factors, max |logit diff| %.4f\n", d);
    assert_true(d > 0.1);
    free(engine_logits[0]);
    free(engine_logits[1]);
    syn_model_free(m);
    test_remove_dir(dir);
    free(dir);
}

/* ---- broken phi3 files ------------------------------------------------------------------------
 */

typedef struct bad_case {
    const char *what;
    variant v;
    const char *expect; /* substring of the load error */
} bad_case;

static const bad_case bad_cases[] = {
    {"long factors of 23",
     {.resize_tensor = "rope_factors_long.weight", .resize_rows = 23},
     "tensor 'rope_factors_long.weight' has shape [23] but the hyperparameters require [24]"},
    {"short factors missing",
     {.drop_tensor = "rope_factors_short.weight"},
     "tensor 'rope_factors_long.weight' is present without 'rope_factors_short.weight'"},
    {"a long factor of 0",
     {.poke_tensor = "rope_factors_long.weight", .poke_index = 5, .poke_value = 0.0f},
     "tensor 'rope_factors_long.weight' has 0 at 5: RoPE factors must be finite and positive"},
    {"a short factor of NaN",
     {.poke_tensor = "rope_factors_short.weight", .poke_index = 23, .poke_value = NAN},
     "tensor 'rope_factors_short.weight' has nan at 23"},
    {"a short factor below 0",
     {.poke_tensor = "rope_factors_short.weight", .poke_index = 0, .poke_value = -1.0f},
     "tensor 'rope_factors_short.weight' has -1 at 0"},
    {"rotary dims odd",
     {.u32_key = "phi3.rope.dimension_count", .u32_value = 47},
     "phi3.rope.dimension_count 47 must be even and at most the head size 64"},
    {"rotary dims above the head",
     {.u32_key = "phi3.rope.dimension_count", .u32_value = 80},
     "phi3.rope.dimension_count 80 must be even and at most the head size 64"},
    {"factors for another rotary width",
     {.u32_key = "phi3.rope.dimension_count", .u32_value = 32},
     "tensor 'rope_factors_short.weight' has shape [24] but the hyperparameters require [16]"},
    {"attn_factor NaN",
     {.f32_key = "phi3.rope.scaling.attn_factor", .f32_value = NAN},
     "phi3.rope.scaling.attn_factor is nan, expected a finite positive number"},
    {"attn_factor 0",
     {.f32_key = "phi3.rope.scaling.attn_factor", .f32_value = 0.0f},
     "phi3.rope.scaling.attn_factor is 0, expected a finite positive number"},
    {"original context 0",
     {.u32_key = "phi3.rope.scaling.original_context_length", .u32_value = 0},
     "phi3.rope.scaling.original_context_length is 0, expected a positive count"},
    {"attn_qkv without GQA's rows",
     {.resize_tensor = "blk.0.attn_qkv.weight", .resize_rows = 768},
     "tensor 'blk.0.attn_qkv.weight' has shape [256, 768] but the hyperparameters require [256, "
     "512]"},
    {"ffn_up unfused",
     {.resize_tensor = "blk.1.ffn_up.weight", .resize_rows = 768},
     "tensor 'blk.1.ffn_up.weight' has shape [256, 768] but the hyperparameters require [256, "
     "1536]"},
    {"attn_qkv missing",
     {.drop_tensor = "blk.2.attn_qkv.weight"},
     "missing tensor 'blk.2.attn_qkv.weight'"},
};

/* Each broken copy of the Q4_K_M file is refused with an error naming the key or tensor at fault;
 * the unchanged copy (whose sliding_window llama.cpp ignores, and so do we) loads. */
static void test_broken_files_refused(void **state) {
    (void)state;
    const char *file = "arch2/phi3-s5-q4_k_m.gguf";
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/copy.gguf", dir);
    const variant unchanged = {0};
    write_variant(file, &unchanged, path);
    syn_model_free(load_path(path));
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        snprintf(path, sizeof path, "%s/bad-%zu.gguf", dir, i);
        write_variant(file, &c->v, path);
        syn_model_params mp = syn_model_default_params();
        mp.prefetch = false;
        syn_model *m = NULL;
        if (syn_model_load(path, &mp, &m) == SYN_OK) fail_msg("%s: loaded", c->what);
        assert_null(m);
        if (!strstr(syn_last_error(), c->expect))
            fail_msg("%s: error \"%s\" lacks \"%s\"", c->what, syn_last_error(), c->expect);
        printf("%s: %s\n", c->what, syn_last_error());
    }
    test_remove_dir(dir);
    free(dir);
}

/* The hyperparameters phi3 adds reach the public info: an untied output. */
static void test_model_info(void **state) {
    (void)state;
    syn_model *m = test_load_model("arch2/phi3-s5-q8_0.gguf");
    assert_non_null(m);
    syn_model_info info;
    syn_model_get_info(m, &info);
    assert_string_equal(info.architecture, "phi3");
    assert_false(info.tied_output);
    assert_int_equal(info.n_head_kv, 2);
    assert_int_equal(info.n_ff, 768);
    syn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_exact_oracle),
        cmocka_unit_test(test_optimized_vs_exact_oracle),
        cmocka_unit_test(test_longrope_long_factors_beyond_original_context),
        cmocka_unit_test(test_longrope_through_the_engine),
        cmocka_unit_test(test_broken_files_refused),
        cmocka_unit_test(test_model_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
