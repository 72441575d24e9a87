/* test_weight_quantize.c: the generator's quantizers (src/gguf/weight_quantize.c) against the
 * library's dequantizers (the weight-type table, src/model/wtype.c): on rows of weight-like, all
 * positive, all negative, outlier-laden, mixed-scale and zero values, every dequantized value is
 * within its block's quantization step of the float it came from. The allowed error is worked out
 * from the floats alone (never from the quantizer's own scales), so a wrong scale, code or bit
 * position fails it. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf/gguf.h"
#include "kernels/blocks.h"
#include "model/wtype.h"
#include "synapse_internal.h"

enum { N = 2048 }; /* 8 super-blocks, 64 blocks of 32 */

static const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                                 GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

static uint64_t rng_state;

static double uniform01(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(float std) {
    return std * (float)(sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01()));
}

/* Smallest and largest of x[n]; the largest magnitude. */
static void range_of(const float *x, int n, float *lo, float *hi, float *amax) {
    *lo = *hi = x[0];
    *amax = 0.0f;
    for (int j = 0; j < n; j++) {
        *lo = fminf(*lo, x[j]);
        *hi = fmaxf(*hi, x[j]);
        *amax = fmaxf(*amax, fabsf(x[j]));
    }
}

/* The error allowed at element i of row x. Blocks of 32: half a step (one step where the value of
 * largest magnitude takes the lowest code and one of the other sign is clamped), with the fp16
 * rounding of the scales. k-quants: half the sub-block's exact step plus one quantum of the
 * super-block's fp16 scales, by which the quantizer rounds each sub-block's scale up. */
static float allowed_error(uint32_t type, const float *x, int i) {
    const float slack = 1.02f, tiny = 1e-7f;
    float lo, hi, amax;
    if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K) {
        const float top = type == GGML_TYPE_Q4_K ? 15.0f : 31.0f;
        const float *super = x + i / QK_K * QK_K;
        float max_step = 0.0f, max_offset = 0.0f, step = 0.0f;
        for (int s = 0; s < 8; s++) {
            range_of(super + 32 * s, 32, &lo, &hi, &amax);
            const float offset = fmaxf(0.0f, -lo), st = (hi + offset) / top;
            max_step = fmaxf(max_step, st);
            max_offset = fmaxf(max_offset, offset);
            if (s == i % QK_K / 32) step = st;
        }
        return 0.5f * (step + slack * (max_offset / (63.0f * top) + max_step / 63.0f)) + tiny;
    }
    if (type == GGML_TYPE_Q6_K) {
        const float *super = x + i / QK_K * QK_K;
        float max_amax = 0.0f, sub_amax = 0.0f;
        for (int s = 0; s < 16; s++) {
            range_of(super + 16 * s, 16, &lo, &hi, &amax);
            max_amax = fmaxf(max_amax, amax);
            if (s == i % QK_K / 16) sub_amax = amax;
        }
        return 0.5f * (sub_amax / 31.0f + slack * max_amax / (31.0f * 127.0f)) + tiny;
    }
    range_of(x + i / 32 * 32, 32, &lo, &hi, &amax);
    switch (type) {
    case GGML_TYPE_Q8_0:
        return 0.57f * slack * amax / 127.0f + tiny; /* + 127 * fp16 rounding of d */
    case GGML_TYPE_Q4_0: return slack * amax / 8.0f + tiny;
    case GGML_TYPE_Q5_0: return slack * amax / 16.0f + tiny;
    case GGML_TYPE_Q4_1: return 0.5f * slack * (hi - lo) / 15.0f + fabsf(lo) / 2048.0f + tiny;
    case GGML_TYPE_Q5_1: return 0.5f * slack * (hi - lo) / 31.0f + fabsf(lo) / 2048.0f + tiny;
    default: fail_msg("no bound for type %u", type); return 0.0f;
    }
}

/* Row data of `type`, dequantized by the library's weight-type table as syn_tensor_row does. */
static void dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const syn_wtype *wt = syn_wtype_get(type);
    assert_non_null(wt);
    wt->dequantize_row(src, dst, n);
}

/* Quantizes x[N] as every type, dequantizes it through the library and checks every value; for
 * rows of spread values (spread), also the mean error. */
static void check_row(const char *what, const float *x, bool spread) {
    static uint8_t q[N * 4];
    static float y[N];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint32_t type = types[t];
        memset(q, 0xA5, sizeof q);
        assert_true(syn_quantize_weight_row(type, x, N, q));
        dequantize_row(type, q, y, N);
        double sum_err = 0.0, sum_allowed = 0.0;
        for (int i = 0; i < N; i++) {
            const float err = fabsf(y[i] - x[i]), allowed = allowed_error(type, x, i);
            if (!(err <= allowed))
                fail_msg("%s, %s: element %d is %.9g, from %.9g: error %.3g over the allowed %.3g",
                         what, ggml_type_name(type), i, (double)y[i], (double)x[i], (double)err,
                         (double)allowed);
            sum_err += err;
            sum_allowed += allowed;
        }
        /* Rounding to nearest keeps spread values on average at half the bound or less (a quarter
         * of a step); truncation would put the half-step types at the bound. */
        if (spread && sum_err > 0.55 * sum_allowed)
            fail_msg("%s, %s: mean error %.3g is %.0f%% of the allowed mean", what,
                     ggml_type_name(type), sum_err / N, 100.0 * sum_err / sum_allowed);
    }
}

static float row[N];

static void test_weight_like(void **state) {
    (void)state;
    rng_state = 1;
    for (int i = 0; i < N; i++)
        row[i] = normal(0.05f);
    check_row("normal, std 0.05", row, true);
    /* ffn_down of the 0.5B preset: fan-in 4864; the k-quants' d falls among fp16 subnormals. */
    for (int i = 0; i < N; i++)
        row[i] = normal(1.0f / sqrtf(4864.0f));
    check_row("normal, std 1/sqrt(4864)", row, true);
}

static void test_one_signed(void **state) {
    (void)state;
    rng_state = 2;
    for (int i = 0; i < N; i++)
        row[i] = 1.0f + (float)uniform01() * 0.5f;
    check_row("positive, 1..1.5", row, true);
    for (int i = 0; i < N; i++)
        row[i] = -1.0f - (float)uniform01() * 2.0f;
    check_row("negative, -3..-1", row, true);
}

static void test_outliers_and_scales(void **state) {
    (void)state;
    rng_state = 3;
    for (int i = 0; i < N; i++)
        row[i] = normal(0.02f) + (i % 97 == 5 ? (i % 2 ? 1.5f : -1.5f) : 0.0f);
    check_row("outliers", row, false);
    /* Each block of 16 on its own scale, 2^-6 .. 2^1: the sub-block scales must differ. */
    for (int i = 0; i < N; i++)
        row[i] = ldexpf(normal(1.0f), i / 16 % 8 - 6);
    check_row("mixed scales", row, false);
    for (int i = 0; i < N; i++)
        row[i] = (i / 32) % 3 == 0 ? 0.0f : normal(0.1f);
    check_row("zero blocks among others", row, false);
}

static void test_zero_row(void **state) {
    (void)state;
    static uint8_t q[N * 4];
    static float y[N];
    memset(row, 0, sizeof row);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        assert_true(syn_quantize_weight_row(types[t], row, N, q));
        dequantize_row(types[t], q, y, N);
        for (int i = 0; i < N; i++)
            assert_true(y[i] == 0.0f);
    }
}

static void test_f32_and_unsupported(void **state) {
    (void)state;
    float x[32], y[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)i / 3.0f;
    assert_true(syn_quantize_weight_row(GGML_TYPE_F32, x, 32, y));
    assert_memory_equal(x, y, sizeof x);
    assert_false(syn_quantize_weight_row(GGML_TYPE_F16, x, 32, y));
    assert_false(syn_quantize_weight_row(GGML_TYPE_Q8_K, x, 32, y));
}

/* The same floats give the same bytes. */
static void test_deterministic(void **state) {
    (void)state;
    static uint8_t a[N * 4], b[N * 4];
    rng_state = 4;
    for (int i = 0; i < N; i++)
        row[i] = normal(0.05f);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const uint64_t bytes = ggml_row_size(types[t], N);
        memset(a, 0, sizeof a);
        memset(b, 0xFF, sizeof b);
        syn_quantize_weight_row(types[t], row, N, a);
        syn_quantize_weight_row(types[t], row, N, b);
        assert_memory_equal(a, b, bytes);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weight_like),         cmocka_unit_test(test_one_signed),
        cmocka_unit_test(test_outliers_and_scales), cmocka_unit_test(test_zero_row),
        cmocka_unit_test(test_f32_and_unsupported), cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
