/* test_gemma3.c: the gemma3 architecture on tests/data/arch2 (llama.cpp's own F32, Q8_0 and Q4_K_M
 * files: a sliding window of 8 on layers 0 and 1, linear RoPE scaling on layer 2, GELU, the
 * post-attention and post-FFN norms): the reference backend against the exact oracle f32_ref,
 * teacher-forced along llama.cpp's tokens past the window; the optimized backend against
 * llama.cpp's own distance from that oracle (tests/data/arch2/README.md). */
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
    syn_context_params p = syn_context_default_params();
    p.backend = SYN_BACKEND_REFERENCE;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        agreement_stats s;
        assert_true(agreement_run_arch(files[i].file, &p, AGAINST_F32_REF, 0.01, &s));
        agreement_print(files[i].file, &s);
        assert_int_equal(s.n_steps, 3 * 32);
        assert_true(s.max_abs_diff < 1e-3);
        assert_true(s.n_argmax_checked > 50);
        assert_int_equal(s.n_argmax_mismatch, 0);
    }
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
            agreement_stats s;
            assert_true(agreement_run_arch(d->file, &p, AGAINST_F32_REF_AS_LLAMA_CPP, 0.1, &s));
            printf("optimized, %s KV, ", kv ? "f16" : "f32");
            agreement_print(d->file, &s);
            assert_true(s.max_abs_diff <= 1.3 * d->max + 0.005);
            assert_true(s.mean_abs_diff <= 1.15 * d->mean + 0.002);
            assert_true(s.n_argmax_checked > 50);
            assert_int_equal(s.n_argmax_mismatch, 0);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_exact_oracle),
        cmocka_unit_test(test_optimized_vs_exact_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
