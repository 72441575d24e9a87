/* test_arch_qwen35.c: qwen35 (Qwen3.5: gated delta net layers and gated full attention, 3:1) on
 * the random-weight files of tests/data/arch2 (F32, and llama-quantize's Q8_0 and Q4_K_M): the
 * reference backend against the exact oracle (llama.cpp on the F32-dequantized file),
 * teacher-forced along llama.cpp's tokens; the optimized backend against llama.cpp's own distance
 * from that oracle; the recurrent state across decode calls. */
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
    syn_context_params p = syn_context_default_params();
    p.backend = SYN_BACKEND_REFERENCE;
    for (size_t i = 0; i < N_FILES; i++) {
        agreement_stats s;
        assert_true(agreement_run_arch(distances[i].file, &p, AGAINST_F32_REF, 0.01, &s));
        agreement_print(distances[i].file, &s);
        assert_int_equal(s.n_steps, 3 * 32);
        assert_true(s.max_abs_diff < 5e-3);
        assert_true(s.n_argmax_checked > 50);
        assert_int_equal(s.n_argmax_mismatch, 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vs_exact_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
