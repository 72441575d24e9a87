/* test_optimized.c: the optimized backend against the oracles and llama.cpp (issue 3's
 * tolerances), across kernel tiers, and its determinism: bitwise-equal logits for any prompt
 * chunking, any thread count and token-by-token decoding. */
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
#include "kernels/cpu_features.h"
#include "model/model.h"

static syn_context_params optimized_params(void) {
    syn_context_params p = syn_context_default_params();
    p.backend = SYN_BACKEND_OPTIMIZED;
    p.n_threads = 2;
    return p;
}

/* ---- agreement ------------------------------------------------------------------------------ */

/* Within 5e-3 of an oracle at its own top-5 ids, same argmax wherever its margin >= 0.01. */
static void check_oracle(const char *model_key, agreement_against against) {
    syn_context_params p = optimized_params();
    agreement_stats s;
    assert_true(agreement_run(model_key, &p, against, 0.01, &s));
    agreement_print(model_key, &s);
    assert_int_equal(s.n_steps, 96);
    assert_true(s.max_abs_diff < 5e-3);
    assert_true(s.n_argmax_checked > 50);
    assert_int_equal(s.n_argmax_mismatch, 0);
}

static void test_q8_model_vs_q8_ref(void **state) {
    (void)state;
    check_oracle("qwen2-tiny-synth-q8_0", AGAINST_Q8_REF);
}

static void test_f32_model_vs_f32_ref(void **state) {
    (void)state;
    check_oracle("qwen2-tiny-synth-f32", AGAINST_F32_REF);
}

/* Against llama.cpp, same argmax where its margin >= 0.05; max_diff / mean_diff bound the logits.
 */
static void check_llama(const char *model_key, syn_kv_type kv, double max_diff, double mean_diff) {
    syn_context_params p = optimized_params();
    p.kv_type = kv;
    agreement_stats s;
    assert_true(agreement_run(model_key, &p, AGAINST_LLAMA_CPP, 0.05, &s));
    agreement_print(kv == SYN_KV_F16 ? "f16 KV vs llama.cpp" : "vs llama.cpp", &s);
    assert_true(s.max_abs_diff < max_diff);
    assert_true(s.mean_abs_diff < mean_diff);
    assert_true(s.n_argmax_checked > 30);
    assert_int_equal(s.n_argmax_mismatch, 0);
}

static void test_q8_model_vs_llama_cpp(void **state) {
    (void)state;
    check_llama("qwen2-tiny-synth-q8_0", SYN_KV_F32, 0.08, 0.02);
}

static void test_f32_model_vs_llama_cpp(void **state) {
    (void)state;
    check_llama("qwen2-tiny-synth-f32", SYN_KV_F32, 0.01, 0.01);
}

/* An fp16 KV cache is held to llama.cpp's Q8_0 tolerance only (it keeps K/V in fp16 too). */
static void test_f16_kv_vs_llama_cpp(void **state) {
    (void)state;
    check_llama("qwen2-tiny-synth-q8_0", SYN_KV_F16, 0.08, 0.02);
    check_llama("qwen2-tiny-synth-f32", SYN_KV_F16, 0.08, 0.02);
}

/* ---- determinism and tiers ------------------------------------------------------------------- */

typedef struct fixture {
    const char *file;
    syn_model *model;
    int32_t n_vocab;
    int32_t tokens[600]; /* a deterministic token sequence */
} fixture;

static int setup_model(void **state, const char *file) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    f->file = file;
    f->model = test_load_model(file);
    if (!f->model) {
        free(f);
        return -1;
    }
    syn_model_info info;
    syn_model_get_info(f->model, &info);
    f->n_vocab = info.n_vocab;
    test_fill_tokens(f->tokens, sizeof f->tokens / sizeof f->tokens[0], 12345);
    for (size_t i = 0; i < sizeof f->tokens / sizeof f->tokens[0]; i++)
        f->tokens[i] %= f->n_vocab;
    *state = f;
    return 0;
}

static int setup_q8(void **state) { return setup_model(state, "qwen2-tiny-synth-q8_0.gguf"); }

/* qwen3: per-head Q/K norms, 8 heads of 64 on a 256-wide model (query width 512), no biases. */
static int setup_qwen3_q8(void **state) { return setup_model(state, "arch/qwen3-s5-q8_0.gguf"); }

/* llama: adjacent-pair RoPE with rope_freqs, no biases, untied output. */
static int setup_llama_q8(void **state) { return setup_model(state, "arch/llama-s5-q8_0.gguf"); }

/* qwen2 in Q5_0 (its output in Q6_K): the x16 layout of the 5-bit codes. */
static int setup_qwen2_q5_0(void **state) { return setup_model(state, "arch/qwen2-s5-q5_0.gguf"); }

/* qwen2 in Q4_0 (its output in Q6_K). */
static int setup_qwen2_q4_0(void **state) { return setup_model(state, "arch/qwen2-s5-q4_0.gguf"); }

/* qwen2 in Q5_K (its output and two FFN-down matrices in Q6_K). */
static int setup_qwen2_q5_k_m(void **state) {
    return setup_model(state, "arch/qwen2-s5-q5_k_m.gguf");
}

/* gemma3: sliding window of 8 on layers 0 and 1, post norms, GELU, Q4_K / Q6_K weights. */
static int setup_gemma3_q4_k_m(void **state) {
    return setup_model(state, "arch2/gemma3-s5-q4_k_m.gguf");
}

/* phi3: views of fused q | k | v and gate | up in Q4_K and Q6_K, partial rotary, LongRoPE
 * factors and attn_factor, GQA 2. */
static int setup_phi3_q4_k_m(void **state) {
    return setup_model(state, "arch2/phi3-s5-q4_k_m.gguf");
}

/* qwen35: gated delta net layers (their state carried token by token) and a gated attention layer
 * with partial RoPE, in Q4_K / Q6_K. */
static int setup_qwen35(void **state) { return setup_model(state, "arch2/qwen35-s5-q4_k_m.gguf"); }

static int teardown(void **state) {
    fixture *f = *state;
    syn_model_free(f->model);
    free(f);
    return 0;
}

/* Logits of every one of n tokens ([n][n_vocab], malloc'd), fed to a fresh context in chunks of
 * `chunk` tokens. all_logits false: each chunk's last row only comes from syn_context_logits
 * (the other rows stay NaN-free zeros and are not compared by callers). */
static float *run_chunks(const fixture *f, syn_context_params p, size_t n, size_t chunk,
                         bool all_logits) {
    float *out = calloc(n * (size_t)f->n_vocab, sizeof(float));
    syn_context *ctx = NULL;
    assert_non_null(out);
    p.n_ctx = (uint32_t)n;
    assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_OK);
    for (size_t i = 0; i < n; i += chunk) {
        size_t len = n - i < chunk ? n - i : chunk;
        float *dst = out + i * (size_t)f->n_vocab;
        assert_int_equal(syn_context_decode(ctx, f->tokens + i, len, all_logits ? dst : NULL),
                         SYN_OK);
        if (!all_logits)
            memcpy(out + (i + len - 1) * (size_t)f->n_vocab, syn_context_logits(ctx),
                   sizeof(float) * (size_t)f->n_vocab);
    }
    syn_context_free(ctx);
    return out;
}

static void assert_bitwise_equal(const float *a, const float *b, size_t n, const char *what) {
    if (memcmp(a, b, n * sizeof(float)) != 0) {
        for (size_t i = 0; i < n; i++) {
            if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
                fail_msg("%s: logits differ at %zu: %.9g vs %.9g", what, i, (double)a[i],
                         (double)b[i]);
            }
        }
    }
}

/* Prompt chunk sizes 1, 2, 3, 17, 64 and thread counts 1, 2, 3 give bitwise-equal logits at every
 * position; chunk size 1 is token-by-token decoding. */
static void test_chunking_and_threads_bitwise(void **state) {
    const fixture *f = *state;
    const size_t n = 70;
    syn_context_params p = optimized_params();
    p.n_threads = 1;
    float *want = run_chunks(f, p, n, n, true);
    const size_t chunks[] = {1, 2, 3, 17, 64};
    for (int threads = 1; threads <= 3; threads++) {
        p.n_threads = threads;
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            char what[64];
            snprintf(what, sizeof what, "chunk %zu, %d threads", chunks[c], threads);
            float *got = run_chunks(f, p, n, chunks[c], true);
            assert_bitwise_equal(want, got, n * (size_t)f->n_vocab, what);
            free(got);
        }
    }
    free(want);
}

/* Decoding one token at a time without all_logits gives the same last logits as one prefill, and
 * a prompt longer than one internal slice (512 tokens) matches its 64-token chunking. */
static void test_decode_equals_prefill(void **state) {
    const fixture *f = *state;
    syn_context_params p = optimized_params();
    const size_t v = (size_t)f->n_vocab;
    float *prefill = run_chunks(f, p, 40, 40, false);
    float *decode = run_chunks(f, p, 40, 1, false);
    assert_bitwise_equal(prefill + 39 * v, decode + 39 * v, v, "token by token vs prefill");
    free(prefill);
    free(decode);

    float *whole = run_chunks(f, p, 600, 600, false);
    float *sliced = run_chunks(f, p, 600, 64, false);
    assert_bitwise_equal(whole + 599 * v, sliced + 599 * v, v,
                         "600-token prefill vs 64-token chunks");
    free(whole);
    free(sliced);
}

/* Deep in the context, where attention's running softmax rescales across many KV blocks, the
 * optimized backend stays near the reference backend (which attends with a plain two-pass
 * softmax): logits at positions 99, 199, ..., 599, both KV types. The bounds have some room over
 * what the optimized backend measured before the running softmax (max |diff| 0.0728 with an f32
 * cache, the same as after: the gap at depth comes from elsewhere); a wrong rescale gives errors
 * of order 1. */
static void test_long_context_vs_reference(void **state) {
    const fixture *f = *state;
    const size_t n = 600, chunk = 100, v = (size_t)f->n_vocab;
    syn_context_params ref = syn_context_default_params();
    ref.backend = SYN_BACKEND_REFERENCE;
    ref.n_threads = 2;
    float *want = run_chunks(f, ref, n, chunk, false);
    const syn_kv_type kv_types[] = {SYN_KV_F32, SYN_KV_F16};
    const double bound[] = {0.1, 0.12};
    for (size_t k = 0; k < 2; k++) {
        syn_context_params p = optimized_params();
        p.kv_type = kv_types[k];
        float *got = run_chunks(f, p, n, chunk, false);
        double max_diff = 0.0;
        for (size_t pos = chunk - 1; pos < n; pos += chunk)
            for (size_t i = 0; i < v; i++) {
                const double d = fabs((double)got[pos * v + i] - (double)want[pos * v + i]);
                max_diff = d > max_diff ? d : max_diff;
            }
        printf("%s KV, positions up to %zu: max |diff| against the reference %.5f\n",
               k ? "f16" : "f32", n - 1, max_diff);
        assert_true(max_diff < bound[k]);
        free(got);
    }
    free(want);
}

/* Truncating and decoding again overwrites the cache: the same tokens give the same logits. */
static void test_truncate_rewinds(void **state) {
    const fixture *f = *state;
    syn_context_params p = optimized_params();
    p.n_ctx = 64;
    const size_t v = (size_t)f->n_vocab;
    syn_context *ctx = NULL;
    float *first = malloc(sizeof(float) * v);
    assert_non_null(first);
    assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_OK);
    assert_int_equal(syn_context_decode(ctx, f->tokens, 20, NULL), SYN_OK);
    memcpy(first, syn_context_logits(ctx), sizeof(float) * v);
    assert_int_equal(syn_context_truncate(ctx, 10), SYN_OK);
    assert_int_equal(syn_context_decode(ctx, f->tokens + 300, 5, NULL), SYN_OK); /* other tokens */
    assert_int_equal(syn_context_truncate(ctx, 10), SYN_OK);
    assert_int_equal(syn_context_decode(ctx, f->tokens + 10, 10, NULL), SYN_OK);
    assert_bitwise_equal(first, syn_context_logits(ctx), v, "after rewind");
    syn_context_free(ctx);
    free(first);
}

static const syn_isa_tier all_tiers[] = {SYN_TIER_SCALAR,   SYN_TIER_AVX2,     SYN_TIER_AVX512_VNNI,
                                         SYN_TIER_AVX_VNNI, SYN_TIER_NEON_DOT, SYN_TIER_I8MM};

static bool tier_available(syn_isa_tier t) { return syn_isa_tier_available(t); }

/* Every tier available here gives the same logits, bitwise, at every position, with either KV
 * element type (an f16 cache is converted with F16C on x86, portably elsewhere). */
static void test_tiers_agree(void **state) {
    const fixture *f = *state;
    const size_t n = 24;
    const syn_kv_type kv_types[] = {SYN_KV_F32, SYN_KV_F16};
    for (size_t k = 0; k < 2; k++) {
        syn_context_params p = optimized_params();
        p.kv_type = kv_types[k];
        p.isa = SYN_TIER_SCALAR;
        float *want = run_chunks(f, p, n, 9, true);
        int tested = 0;
        for (size_t i = 0; i < sizeof all_tiers / sizeof all_tiers[0]; i++) {
            if (!tier_available(all_tiers[i])) continue;
            p.isa = all_tiers[i];
            float *got = run_chunks(f, p, n, 9, true);
            assert_bitwise_equal(want, got, n * (size_t)f->n_vocab,
                                 syn_isa_tier_name(all_tiers[i]));
            free(got);
            tested++;
            printf("tier %s, %s KV: same logits as scalar\n", syn_isa_tier_name(all_tiers[i]),
                   k ? "f16" : "f32");
        }
        assert_true(tested >= 1);
        free(want);
    }
}

/* The interleaved copies (syn_model_params.interleave, the default) exist where the CPU's best
 * tier reads them (the types it has x16 kernels for), and give the logits of the rows bit for bit,
 * one token at a time (matvec) and in chunks (matmul), at 1 and 2 threads; a row read back from a
 * copy (syn_tensor_row: the reference backend, a tied embedding) is the file's row. */
static void test_interleaved_equals_rows(void **state) {
    const fixture *f = *state;
    const size_t n = 40;
    syn_model_params mp = syn_model_default_params();
    mp.prefetch = false;
    mp.interleave = false;
    fixture rows = *f;
    assert_int_equal(syn_model_load(test_data_path(f->file), &mp, &rows.model), SYN_OK);
    assert_int_equal(syn_model_interleaved_bytes(rows.model), 0);
    const size_t interleaved = syn_model_interleaved_bytes(f->model);
    printf("%s: %zu bytes of interleaved copies\n", f->file, interleaved);
    if (syn_isa_tier_best() == SYN_TIER_AVX512_VNNI) assert_true(interleaved > 0);
    for (int threads = 1; threads <= 2; threads++) {
        syn_context_params p = optimized_params();
        p.n_threads = threads;
        const size_t chunks[] = {1, 17};
        for (size_t c = 0; c < 2; c++) {
            float *want = run_chunks(&rows, p, n, chunks[c], true);
            float *got = run_chunks(f, p, n, chunks[c], true);
            char what[64];
            snprintf(what, sizeof what, "interleaved, chunk %zu, %d threads", chunks[c], threads);
            assert_bitwise_equal(want, got, n * (size_t)f->n_vocab, what);
            free(want);
            free(got);
        }
    }
    const syn_tensor *outs[2] = {&f->model->output, &rows.model->output};
    const int64_t last = outs[0]->ne[1] / SYN_X16_ROWS * SYN_X16_ROWS - 1;
    if (atomic_load(&outs[0]->x16_rows) > last) {
        const int64_t width = outs[0]->ne[0], picks[] = {0, 17, last};
        float *a = malloc(sizeof(float) * (size_t)width),
              *b = malloc(sizeof(float) * (size_t)width);
        assert_non_null(a);
        assert_non_null(b);
        for (size_t i = 0; i < 3; i++) {
            syn_tensor_row(outs[0], picks[i], a);
            syn_tensor_row(outs[1], picks[i], b);
            assert_memory_equal(a, b, sizeof(float) * (size_t)width);
        }
        printf("output rows 0, 17 and %lld read back from the copy equal the file's\n",
               (long long)last);
        free(a);
        free(b);
    }
    syn_model_free(rows.model);
}

/* A tier this CPU lacks is an error, never a fallback; auto resolves to a real tier. */
static void test_unavailable_tier_fails(void **state) {
    const fixture *f = *state;
    syn_context_params p = optimized_params();
    syn_context *ctx = NULL;
    int missing = 0;
    for (size_t i = 0; i < sizeof all_tiers / sizeof all_tiers[0]; i++) {
        if (tier_available(all_tiers[i])) continue;
        p.isa = all_tiers[i];
        assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_ERR_UNAVAILABLE);
        assert_null(ctx);
        assert_non_null(strstr(syn_last_error(), syn_isa_tier_name(all_tiers[i])));
        missing++;
    }
    printf("%d tiers unavailable here, each refused\n", missing);
    p.isa = SYN_TIER_AUTO;
    assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_OK);
    syn_isa_tier best = syn_isa_tier_best();
    assert_string_equal(syn_context_isa_name(ctx), syn_isa_tier_name(best));
    syn_context_free(ctx);

    p.isa = (syn_isa_tier)99;
    assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_ERR_INVALID_ARGUMENT);
}

static void test_tier_names(void **state) {
    (void)state;
    syn_isa_tier t;
    assert_int_equal(syn_isa_tier_parse("auto", &t), SYN_OK);
    assert_int_equal(t, SYN_TIER_AUTO);
    assert_int_equal(syn_isa_tier_parse("avx512-vnni", &t), SYN_OK);
    assert_int_equal(t, SYN_TIER_AVX512_VNNI);
    assert_int_equal(syn_isa_tier_parse("i8mm", &t), SYN_OK);
    assert_int_equal(t, SYN_TIER_I8MM);
    assert_int_equal(syn_isa_tier_parse("avx9", &t), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "avx9"));
    assert_string_equal(syn_isa_tier_name(SYN_TIER_AVX_VNNI), "avx-vnni");
    assert_string_equal(syn_isa_tier_name((syn_isa_tier)42), "?");
}

/* The reference backend keeps float32 K/V only: asking it for fp16 is refused, not ignored. */
static void test_reference_rejects_f16_kv(void **state) {
    const fixture *f = *state;
    syn_context_params p = syn_context_default_params();
    p.backend = SYN_BACKEND_REFERENCE;
    p.kv_type = SYN_KV_F16;
    syn_context *ctx = NULL;
    assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_ERR_UNSUPPORTED);
    p.kv_type = (syn_kv_type)7;
    assert_int_equal(syn_context_new(f->model, &p, &ctx), SYN_ERR_INVALID_ARGUMENT);
    assert_null(ctx);
}

int main(void) {
    const struct CMUnitTest agreement[] = {
        cmocka_unit_test(test_q8_model_vs_q8_ref),    cmocka_unit_test(test_f32_model_vs_f32_ref),
        cmocka_unit_test(test_q8_model_vs_llama_cpp), cmocka_unit_test(test_f32_model_vs_llama_cpp),
        cmocka_unit_test(test_f16_kv_vs_llama_cpp),   cmocka_unit_test(test_tier_names),
    };
    const struct CMUnitTest on_model[] = {
        cmocka_unit_test(test_chunking_and_threads_bitwise),
        cmocka_unit_test(test_decode_equals_prefill),
        cmocka_unit_test(test_truncate_rewinds),
        cmocka_unit_test(test_long_context_vs_reference),
        cmocka_unit_test(test_tiers_agree),
        cmocka_unit_test(test_interleaved_equals_rows),
        cmocka_unit_test(test_unavailable_tier_fails),
        cmocka_unit_test(test_reference_rejects_f16_kv),
    };
    const struct CMUnitTest on_arch_model[] = {
        cmocka_unit_test(test_chunking_and_threads_bitwise),
        cmocka_unit_test(test_decode_equals_prefill),
        cmocka_unit_test(test_truncate_rewinds),
        cmocka_unit_test(test_tiers_agree),
        cmocka_unit_test(test_interleaved_equals_rows),
    };
    int failed = cmocka_run_group_tests_name("agreement", agreement, NULL, NULL);
    failed += cmocka_run_group_tests_name("determinism and tiers", on_model, setup_q8, teardown);
    failed += cmocka_run_group_tests_name("determinism and tiers, qwen3 q8_0", on_arch_model,
                                          setup_qwen3_q8, teardown);
    failed += cmocka_run_group_tests_name("determinism and tiers, llama q8_0", on_arch_model,
                                          setup_llama_q8, teardown);
    failed += cmocka_run_group_tests_name("determinism and tiers, qwen2 q5_0", on_arch_model,
                                          setup_qwen2_q5_0, teardown);
    const struct CMUnitTest on_x16_model[] = {cmocka_unit_test(test_interleaved_equals_rows)};
    failed += cmocka_run_group_tests_name("interleaved copies, qwen2 q5_k_m", on_x16_model,
                                          setup_qwen2_q5_k_m, teardown);
    failed += cmocka_run_group_tests_name("interleaved copies, qwen2 q4_0", on_x16_model,
                                          setup_qwen2_q4_0, teardown);
    failed += cmocka_run_group_tests_name("determinism and tiers, phi3 q4_k_m", on_arch_model,
                                          setup_phi3_q4_k_m, teardown);
    /* gemma3's truncation starts over when the sliding window is lost: test_gemma3.c */
    const struct CMUnitTest on_swa_model[] = {
        cmocka_unit_test(test_chunking_and_threads_bitwise),
        cmocka_unit_test(test_decode_equals_prefill),
        cmocka_unit_test(test_tiers_agree),
    };
    failed += cmocka_run_group_tests_name("determinism and tiers, gemma3 q4_k_m", on_swa_model,
                                          setup_gemma3_q4_k_m, teardown);
    /* qwen35's truncation starts over too (its recurrent state only moves forward): there the
     * same three, and test_arch_qwen35.c */
    const struct CMUnitTest on_recurrent_model[] = {
        cmocka_unit_test(test_chunking_and_threads_bitwise),
        cmocka_unit_test(test_decode_equals_prefill),
        cmocka_unit_test(test_tiers_agree),
    };
    failed += cmocka_run_group_tests_name("determinism and tiers, qwen35 q4_k_m",
                                          on_recurrent_model, setup_qwen35, teardown);
    return failed;
}
