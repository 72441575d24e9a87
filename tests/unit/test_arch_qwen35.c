/* test_arch_qwen35.c: qwen35 (Qwen3.5: gated delta net layers and gated full attention, 3:1) on
 * the random-weight files of tests/data/arch2 (F32, and llama-quantize's Q8_0 and Q4_K_M): the
 * reference backend against the exact oracle (llama.cpp on the F32-dequantized file),
 * teacher-forced along llama.cpp's tokens; the optimized backend against llama.cpp's own distance
 * from that oracle; the recurrent state across decode calls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../support/agreement.h"
#include "../support/test_util.h"

/* llama.cpp's default run against the exact oracle on each file (tests/data/arch2's README), max
 * and mean |logit difference| over the oracle's top-5 ids. */
typedef struct llama_cpp_distance {
    const char *file;
    double max, mean;
} llama_cpp_distance;

static const llama_cpp_distance distances[] = {
    {"arch2/qwen35-s5-f32.gguf", 0.0013, 0.0003},
    {"arch2/qwen35-s5-q8_0.gguf", 0.3368, 0.0667},
    {"arch2/qwen35-s5-q4_k_m.gguf", 0.4662, 0.1144},
};
enum { N_FILES = sizeof distances / sizeof distances[0] };

/* The reference backend within 5e-3 of the exact oracle's top-5 logits at every step of the three
 * runs, with its argmax wherever the oracle's margin is at least 0.01. */
static void test_reference_vs_exact_oracle(void **state) {
    (void)state;
    for (size_t i = 0; i < N_FILES; i++)
        agreement_assert_reference(distances[i].file, 5e-3);
}

/* The optimized backend (activations quantized as ggml pairs with each type, the recurrence in
 * float32) no farther from the exact oracle than llama.cpp (mean <= 1.15x llama.cpp's + 0.002,
 * max <= 1.3x + 0.005); with llama.cpp's own argmax wherever llama.cpp's margin is at least 0.1;
 * and missing the oracle's argmax (margin >= 0.1) at most once more than llama.cpp does. That one:
 * on Q4_K_M llama.cpp misses 3 such steps and this backend the same 3 and one more, where
 * llama.cpp's own margin is below 0.1 (this backend lies about 0.02 from llama.cpp on average, as
 * on qwen3). With an fp16 KV cache too. */
static void test_optimized_vs_exact_oracle(void **state) {
    (void)state;
    for (int kv = 0; kv < 2; kv++) {
        syn_context_params p = syn_context_default_params();
        p.backend = SYN_BACKEND_OPTIMIZED;
        p.n_threads = 2;
        p.kv_type = kv ? SYN_KV_F16 : SYN_KV_F32;
        for (size_t i = 0; i < N_FILES; i++) {
            const llama_cpp_distance *d = &distances[i];
            const agreement_stats s = agreement_assert_near_llama_cpp(
                d->file, &p, AGAINST_F32_REF_AS_LLAMA_CPP, d->max, d->mean, 1.3);
            assert_true(s.n_argmax_mismatch <= 1);
            agreement_stats all; /* the same logits, every clear step of the oracle compared */
            assert_true(agreement_run_arch(d->file, &p, AGAINST_F32_REF, 0.1, &all));
            assert_true(all.n_argmax_mismatch <= s.n_argmax_excused + 1);
            agreement_stats lc; /* against llama.cpp's own logits and margins */
            assert_true(agreement_run_arch(d->file, &p, AGAINST_LLAMA_CPP, 0.1, &lc));
            assert_true(lc.n_argmax_checked > 50);
            assert_int_equal(lc.n_argmax_mismatch, 0);
        }
    }
}

/* The recurrent state carries across decode calls and restarts from position 0: the same 24
 * tokens decoded at once and, after a truncation, in calls of 5 + 19 give bitwise the same last
 * logits, with either backend. Keeping part of the context forgets all of it (the state holds no
 * earlier position: syn_context_truncate starts over, n_past 0). */
static void test_state_across_calls_and_restart(void **state) {
    (void)state;
    syn_model *m = test_load_model("arch2/qwen35-s5-q8_0.gguf");
    assert_non_null(m);
    syn_model_info info;
    syn_model_get_info(m, &info);
    const size_t v = (size_t)info.n_vocab;
    int32_t tokens[24];
    test_fill_tokens(tokens, 24, 77);
    for (size_t i = 0; i < 24; i++)
        tokens[i] %= info.n_vocab;
    float *want = malloc(sizeof(float) * v);
    assert_non_null(want);
    const syn_backend backends[] = {SYN_BACKEND_REFERENCE, SYN_BACKEND_OPTIMIZED};
    for (size_t b = 0; b < 2; b++) {
        syn_context_params p = syn_context_default_params();
        p.backend = backends[b];
        p.n_threads = 2;
        p.n_ctx = 64;
        syn_context *ctx = NULL;
        assert_int_equal(syn_context_new(m, &p, &ctx), SYN_OK);
        assert_int_equal(syn_context_decode(ctx, tokens, 24, NULL), SYN_OK);
        memcpy(want, syn_context_logits(ctx), sizeof(float) * v);

        assert_int_equal(syn_context_truncate(ctx, 24), SYN_OK); /* keeps everything */
        assert_int_equal(syn_context_n_past(ctx), 24);
        assert_int_equal(syn_context_truncate(ctx, 10), SYN_OK);
        assert_int_equal(syn_context_n_past(ctx), 0);
        assert_int_equal(syn_context_decode(ctx, tokens, 5, NULL), SYN_OK);
        assert_int_equal(syn_context_decode(ctx, tokens + 5, 19, NULL), SYN_OK);
        assert_memory_equal(want, syn_context_logits(ctx), sizeof(float) * v);
        syn_context_free(ctx);
    }
    free(want);
    syn_model_free(m);
}

/* ---- corrupt files: the qwen35 Q4_K_M file with one key or tensor name patched in place ---- */

/* The offset just past the GGUF string str (its uint64 length, then its bytes) in buf. */
static size_t find_gguf_string(const uint8_t *buf, size_t size, const char *str) {
    const uint64_t len = strlen(str);
    for (size_t i = 0; i + 8 + len <= size; i++)
        if (memcmp(buf + i, &len, 8) == 0 && memcmp(buf + i + 8, str, len) == 0) return i + 8 + len;
    fail_msg("'%s' is not in the file", str);
    return 0;
}

typedef struct bad_qwen35 {
    const char *what;
    const char *name; /* a uint32 key whose value becomes value, or (rename) a tensor or key name
                       * whose last character becomes 'X' */
    bool rename;
    uint32_t value;
    syn_status status; /* what syn_model_load returns */
    const char *error; /* a part of its message */
} bad_qwen35;

static const bad_qwen35 bad_cases[] = {
    {"missing ssm_a", "blk.1.ssm_a", true, 0, SYN_ERR_FORMAT, "missing tensor 'blk.1.ssm_a'"},
    {"conv kernel 3 for 4-tap convolution weights", "qwen35.ssm.conv_kernel", false, 3,
     SYN_ERR_FORMAT,
     "tensor 'blk.0.ssm_conv1d.weight' has shape [4, 1024] but the hyperparameters require "
     "[3, 1024]"},
    {"conv kernel 0", "qwen35.ssm.conv_kernel", false, 0, SYN_ERR_FORMAT,
     "qwen35.ssm.conv_kernel is 0, expected a positive count"},
    {"conv kernel 2^31", "qwen35.ssm.conv_kernel", false, 0x80000000u, SYN_ERR_FORMAT,
     "qwen35.ssm.conv_kernel is 2147483648, above the supported maximum"},
    {"no layer pattern", "qwen35.full_attention_interval", true, 0, SYN_ERR_FORMAT,
     "missing key 'qwen35.full_attention_interval'"},
    {"layer pattern 2: block 1 would be attention", "qwen35.full_attention_interval", false, 2,
     SYN_ERR_FORMAT, "missing tensor 'blk.1.attn_q.weight'"},
    {"layer pattern 8: no attention block", "qwen35.full_attention_interval", false, 8,
     SYN_ERR_UNSUPPORTED,
     "qwen35.full_attention_interval 8 above qwen35.block_count 4 leaves no attention layer"},
    {"3 Q/K heads for 4 V heads", "qwen35.ssm.group_count", false, 3, SYN_ERR_FORMAT,
     "qwen35.ssm.group_count 3 does not divide qwen35.ssm.time_step_rank 4"},
    {"3 V heads for an inner size of 512", "qwen35.ssm.time_step_rank", false, 3, SYN_ERR_FORMAT,
     "qwen35.ssm.time_step_rank 3 does not divide qwen35.ssm.inner_size 512"},
    {"state size 64 for heads of 128", "qwen35.ssm.state_size", false, 64, SYN_ERR_FORMAT,
     "tensor 'blk.0.attn_qkv.weight' has shape [256, 1024] but the hyperparameters require "
     "[256, 768]"},
};

/* Each corrupt variant is refused with the status and a message naming the key or tensor. */
static void test_bad_files(void **state) {
    (void)state;
    size_t size = 0;
    uint8_t *orig = test_read_file(test_data_path("arch2/qwen35-s5-q4_k_m.gguf"), &size);
    assert_non_null(orig);
    uint8_t *buf = malloc(size);
    assert_non_null(buf);
    char *dir = test_make_temp_dir();
    assert_non_null(dir);
    char path[4096];
    snprintf(path, sizeof path, "%s/bad.gguf", dir);
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_qwen35 *c = &bad_cases[i];
        memcpy(buf, orig, size);
        const size_t end = find_gguf_string(buf, size, c->name);
        if (c->rename) {
            buf[end - 1] = 'X';
        } else { /* the key's type (GGUF_TYPE_UINT32, 4), then its value */
            const uint32_t type = 4;
            assert_memory_equal(buf + end, &type, 4);
            memcpy(buf + end + 4, &c->value, 4);
        }
        assert_int_equal(test_write_file(path, buf, size), 0);
        syn_model_params mp = syn_model_default_params();
        mp.prefetch = false;
        syn_model *m = NULL;
        const syn_status st = syn_model_load(path, &mp, &m);
        if (st != c->status || !strstr(syn_last_error(), c->error))
            fail_msg("%s: status %d, error \"%s\", want %d and \"%s\"", c->what, st,
                     syn_last_error(), c->status, c->error);
        assert_null(m);
    }
    test_remove_dir(dir);
    free(dir);
    free(buf);
    free(orig);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_exact_oracle),
        cmocka_unit_test(test_optimized_vs_exact_oracle),
        cmocka_unit_test(test_state_across_calls_and_restart),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
