/* test_reference_agreement.c: the reference backend against the float32 oracle and llama.cpp on
 * the two tiny models, teacher-forced along llama.cpp's greedy tokens (issue 2's tolerances). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "../support/agreement.h"

static syn_context_params reference_params(void) {
    syn_context_params p = syn_context_default_params();
    p.backend = SYN_BACKEND_REFERENCE;
    p.n_threads = 1;
    return p;
}

/* Within 5e-3 of f32_ref at its own top-5 ids, same argmax wherever its margin >= 0.01. */
static void check_against_f32_ref(const char *model_key) {
    syn_context_params p = reference_params();
    agreement_stats s;
    assert_true(agreement_run(model_key, &p, AGAINST_F32_REF, 0.01, &s));
    agreement_print(model_key, &s);
    assert_true(s.n_steps == 96);
    assert_true(s.max_abs_diff < 5e-3);
    assert_true(s.n_argmax_checked > 50);
    assert_int_equal(s.n_argmax_mismatch, 0);
}

static void test_q8_model_vs_f32_ref(void **state) {
    (void)state;
    check_against_f32_ref("qwen2-tiny-synth-q8_0");
}

static void test_f32_model_vs_f32_ref(void **state) {
    (void)state;
    check_against_f32_ref("qwen2-tiny-synth-f32");
}

/* Against llama.cpp: within 0.08 (mean < 0.02) on Q8_0, same argmax where its margin >= 0.05. */
static void test_q8_model_vs_llama_cpp(void **state) {
    (void)state;
    syn_context_params p = reference_params();
    agreement_stats s;
    assert_true(agreement_run("qwen2-tiny-synth-q8_0", &p, AGAINST_LLAMA_CPP, 0.05, &s));
    agreement_print("q8_0 vs llama.cpp", &s);
    assert_true(s.max_abs_diff < 0.08);
    assert_true(s.mean_abs_diff < 0.02);
    assert_true(s.n_argmax_checked > 30);
    assert_int_equal(s.n_argmax_mismatch, 0);
}

/* Against llama.cpp on the F32 model: within 0.01, same argmax where its margin >= 0.05. */
static void test_f32_model_vs_llama_cpp(void **state) {
    (void)state;
    syn_context_params p = reference_params();
    agreement_stats s;
    assert_true(agreement_run("qwen2-tiny-synth-f32", &p, AGAINST_LLAMA_CPP, 0.05, &s));
    agreement_print("f32 vs llama.cpp", &s);
    assert_true(s.max_abs_diff < 0.01);
    assert_true(s.n_argmax_checked > 30);
    assert_int_equal(s.n_argmax_mismatch, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_model_vs_f32_ref),
        cmocka_unit_test(test_f32_model_vs_f32_ref),
        cmocka_unit_test(test_q8_model_vs_llama_cpp),
        cmocka_unit_test(test_f32_model_vs_llama_cpp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
