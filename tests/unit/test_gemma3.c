/* test_gemma3.c: the gemma3 architecture on tests/data/arch2 (llama.cpp's own F32, Q8_0 and Q4_K_M
 * files: a sliding window of 8 on layers 0 and 1, linear RoPE scaling on layer 2, GELU, the
 * post-attention and post-FFN norms): the reference backend against the exact oracle f32_ref,
 * teacher-forced along llama.cpp's tokens past the window; the optimized backend against
 * llama.cpp's own distance from that oracle (tests/data/arch2/README.md). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/agreement.h"
#include "../support/test_util.h"
#include "backend/backend.h"
#include "kernels/cpu_features.h"
#include "model/model.h"

/* llama.cpp's default run against f32_ref: max and mean |logit difference| over f32_ref's top-5
 * ids, all 96 steps (tests/data/arch2/README.md). */
typedef struct llama_cpp_distance {
    const char *file;
    double max, mean;
} llama_cpp_distance;

static const llama_cpp_distance files[] = {
    {"arch2/gemma3-s5-f32.gguf", 0.0073, 0.0017},
    {"arch2/gemma3-s5-q8_0.gguf", 0.1312, 0.0303},
    {"arch2/gemma3-s5-q4_k_m.gguf", 0.1932, 0.0435},
};

/* The reference backend within 1e-3 of f32_ref's top-5 logits at every step (its GELU rounds
 * through fp16 as ggml's does, gelu.h; an exact GELU would be 2e-3 away), with its argmax wherever
 * f32_ref's margin is at least 0.01. */
static void test_reference_vs_exact_oracle(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        agreement_assert_reference(files[i].file, 1e-3);
}

/* The optimized backend (activations quantized as ggml pairs them with each weight type, GELU
 * through fp16) no farther from f32_ref than llama.cpp's default run: mean <= 1.15x llama.cpp's +
 * 0.002, max <= 1.3x + 0.005, and f32_ref's argmax wherever its margin is at least 0.1 and
 * llama.cpp has it too; with an fp16 KV cache too. */
static void test_optimized_vs_exact_oracle(void **state) {
    (void)state;
    for (int kv = 0; kv < 2; kv++) {
        syn_context_params p = syn_context_default_params();
        p.backend = SYN_BACKEND_OPTIMIZED;
        p.n_threads = 2;
        p.kv_type = kv ? SYN_KV_F16 : SYN_KV_F32;
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            const llama_cpp_distance *d = &files[i];
            const agreement_stats s = agreement_assert_near_llama_cpp(
                d->file, &p, AGAINST_F32_REF_AS_LLAMA_CPP, d->max, d->mean, 1.3);
            assert_int_equal(s.n_argmax_mismatch, 0);
        }
    }
}

/* Logits after each of n tokens ([n][n_vocab], malloc'd), decoded in chunks of `chunk`. */
static float *decode_all(syn_model *m, syn_context_params p, const int32_t *tokens, size_t n,
                         size_t chunk) {
    syn_context *ctx = NULL;
    p.n_ctx = (uint32_t)n;
    assert_int_equal(syn_context_new(m, &p, &ctx), SYN_OK);
    const size_t v = (size_t)m->hp.n_vocab;
    float *out = malloc(sizeof(float) * n * v);
    assert_non_null(out);
    for (size_t i = 0; i < n; i += chunk) {
        const size_t len = n - i < chunk ? n - i : chunk;
        assert_int_equal(syn_context_decode(ctx, tokens + i, len, out + i * v), SYN_OK);
    }
    syn_context_free(ctx);
    return out;
}

/* 600 positions, 75 times the window: the optimized backend (its ring of the window and a slice,
 * prefill slices of 16 tokens here) stays within 5e-3 of the reference backend (a ring of exactly
 * the window, one token at a time) at every position, so neither loses a key inside the window
 * or keeps one outside it when the rings wrap. */
static void test_long_sequence_backends_agree(void **state) {
    (void)state;
    syn_model *m = test_load_model("arch2/gemma3-s5-f32.gguf");
    assert_non_null(m);
    enum { N = 600 };
    int32_t tokens[N];
    test_fill_tokens(tokens, N, 77);
    for (size_t i = 0; i < N; i++)
        tokens[i] %= m->hp.n_vocab;
    syn_context_params ref = syn_context_default_params();
    ref.backend = SYN_BACKEND_REFERENCE;
    syn_context_params opt = syn_context_default_params();
    opt.backend = SYN_BACKEND_OPTIMIZED;
    opt.n_threads = 2;
    float *want = decode_all(m, ref, tokens, N, 100);
    float *got = decode_all(m, opt, tokens, N, 100);
    double max_diff = 0.0;
    for (size_t i = 0; i < (size_t)N * (size_t)m->hp.n_vocab; i++) {
        const double d = fabs((double)got[i] - (double)want[i]);
        max_diff = d > max_diff ? d : max_diff;
    }
    printf("600 positions: optimized vs reference max |diff| %.5f\n", max_diff);
    assert_true(max_diff < 5e-3);
    free(want);
    free(got);
    syn_model_free(m);
}

/* A local layer's KV memory stays at the window (the reference: exactly 8 positions; the
 * optimized backend: its ring of 3 blocks of 16) however long the sequence, while the global
 * layer's grows with it. */
static void test_local_kv_memory_stays_at_window(void **state) {
    (void)state;
    syn_model *m = test_load_model("arch2/gemma3-s5-q8_0.gguf");
    assert_non_null(m);
    const syn_hparams *hp = &m->hp;
    assert_int_equal(hp->swa_window, 8);
    assert_true(syn_layer_is_local(hp, 0) && syn_layer_is_local(hp, 1));
    assert_false(syn_layer_is_local(hp, 2));
    int32_t tokens[1000];
    test_fill_tokens(tokens, 1000, 5);
    for (size_t i = 0; i < 1000; i++)
        tokens[i] %= hp->n_vocab;
    const syn_backend_ops *ops[] = {&syn_reference_backend, &syn_optimized_backend};
    const size_t per_position = 2 * sizeof(float) * (size_t)hp->kv_dim; /* K and V, f32 */
    const size_t local_want[] = {8 * per_position, 3 * 16 * per_position};
    float *logits = malloc(sizeof(float) * (size_t)hp->n_vocab);
    assert_non_null(logits);
    for (size_t b = 0; b < 2; b++) {
        const syn_backend_config cfg = {
            .n_ctx = 4096, .n_threads = 1, .isa = syn_isa_tier_best(), .kv_type = SYN_KV_F32};
        void *st = NULL;
        assert_int_equal(ops[b]->create(m, &cfg, &st), SYN_OK);
        assert_int_equal(ops[b]->forward(st, tokens, 100, 0, logits, false), SYN_OK);
        const size_t global_100 = ops[b]->kv_layer_bytes(st, 2);
        assert_int_equal(ops[b]->kv_layer_bytes(st, 0), local_want[b]);
        assert_int_equal(ops[b]->kv_layer_bytes(st, 1), local_want[b]);
        for (uint32_t pos = 100; pos < 1000; pos += 300)
            assert_int_equal(ops[b]->forward(st, tokens + pos, 300, pos, logits, false), SYN_OK);
        assert_int_equal(ops[b]->kv_layer_bytes(st, 0), local_want[b]);
        assert_int_equal(ops[b]->kv_layer_bytes(st, 1), local_want[b]);
        assert_true(ops[b]->kv_layer_bytes(st, 2) >= 1000 * per_position);
        assert_true(global_100 < ops[b]->kv_layer_bytes(st, 2));
        printf("%s: local layer %zu bytes, global layer %zu bytes after 1000 positions\n",
               ops[b]->name, ops[b]->kv_layer_bytes(st, 0), ops[b]->kv_layer_bytes(st, 2));
        ops[b]->destroy(st);
    }
    free(logits);
    syn_model_free(m);
}

/* Truncating 60 positions: a rewind of one token keeps the cache; a rewind to 10, whose window
 * both rings have overwritten (the optimized one holds positions 16..63), starts over (n_past 0),
 * and decoding the tokens again gives the first run's logits, bitwise. */
static void test_truncate_within_and_past_window(void **state) {
    (void)state;
    syn_model *m = test_load_model("arch2/gemma3-s5-q8_0.gguf");
    assert_non_null(m);
    const size_t v = (size_t)m->hp.n_vocab;
    int32_t tokens[60];
    test_fill_tokens(tokens, 60, 9);
    for (size_t i = 0; i < 60; i++)
        tokens[i] %= m->hp.n_vocab;
    for (int b = 0; b < 2; b++) {
        syn_context_params p = syn_context_default_params();
        p.backend = b ? SYN_BACKEND_OPTIMIZED : SYN_BACKEND_REFERENCE;
        p.n_threads = 2;
        p.n_ctx = 64;
        syn_context *ctx = NULL;
        float *first = malloc(sizeof(float) * v * 60), *again = malloc(sizeof(float) * v * 60);
        assert_non_null(first);
        assert_non_null(again);
        assert_int_equal(syn_context_new(m, &p, &ctx), SYN_OK);
        assert_int_equal(syn_context_decode(ctx, tokens, 60, first), SYN_OK);
        assert_int_equal(syn_context_truncate(ctx, 59), SYN_OK);
        assert_int_equal(syn_context_n_past(ctx), 59);
        assert_int_equal(syn_context_decode(ctx, tokens + 59, 1, NULL), SYN_OK);
        assert_memory_equal(syn_context_logits(ctx), first + 59 * v, sizeof(float) * v);
        assert_int_equal(syn_context_truncate(ctx, 10), SYN_OK);
        assert_int_equal(syn_context_n_past(ctx), 0);
        assert_int_equal(syn_context_decode(ctx, tokens, 60, again), SYN_OK);
        assert_memory_equal(first, again, sizeof(float) * v * 60);
        syn_context_free(ctx);
        free(first);
        free(again);
    }
    syn_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_exact_oracle),
        cmocka_unit_test(test_optimized_vs_exact_oracle),
        cmocka_unit_test(test_long_sequence_backends_agree),
        cmocka_unit_test(test_local_kv_memory_stays_at_window),
        cmocka_unit_test(test_truncate_within_and_past_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
