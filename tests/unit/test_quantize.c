/* test_quantize.c: the Q8_0 activation quantizer on every ISA tier this CPU runs: hand-worked
 * blocks (ggml's rule, half-to-even ties), zero blocks, and random rows identical to scalar; the
 * fp16 converters against the CPU's own F16C instructions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/fp16.h"
#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Runs check(kernels) for every tier available here; prints the ones skipped. */
static void for_each_tier(void (*check)(const syn_kernels *k)) {
    for (int i = SYN_TIER_SCALAR; i < SYN_TIER_COUNT; i++) {
        syn_kernels k;
        if (syn_kernels_get((syn_isa_tier)i, &k) != SYN_OK) {
            printf("  skipped %s: %s\n", syn_isa_tier_name((syn_isa_tier)i), syn_last_error());
            continue;
        }
        check(&k);
    }
}

/* Quantizes one block and checks its fp16 scale and 32 codes. */
static void expect_block(const syn_kernels *k, const float x[QK8_0], uint16_t scale,
                         const int8_t codes[QK8_0]) {
    block_q8_0 y;
    memset(&y, 0x55, sizeof y);
    k->quantize_row_q8_0(x, &y, QK8_0);
    if (y.d != scale)
        fail_msg("%s: scale 0x%04x, expected 0x%04x", syn_isa_tier_name(k->isa), y.d, scale);
    for (int i = 0; i < QK8_0; i++) {
        if (y.qs[i] != codes[i])
            fail_msg("%s: code %d is %d, expected %d", syn_isa_tier_name(k->isa), i, y.qs[i],
                     codes[i]);
    }
}

enum { FP16_ONE = 0x3c00, FP16_TWO = 0x4000 };

/* The hand-worked block: amax 127 gives d = 1, and ties round to even. */
static void check_hand_worked(const syn_kernels *k) {
    float x[QK8_0] = {127, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f};
    int8_t q[QK8_0] = {127, 2, 4, -2, 0, 0};
    expect_block(k, x, FP16_ONE, q);
}

static void test_hand_worked_block(void **state) {
    (void)state;
    for_each_tier(check_hand_worked);
}

/* d = 1: every .5 goes to the even neighbour, either sign; -127 stays exact. */
static void check_ties(const syn_kernels *k) {
    float x[QK8_0] = {-127, 0.5f,   1.5f,    2.5f,   -0.5f,       -1.5f, -2.5f,
                      3.5f, 126.5f, -126.5f, 125.5f, 0.49999997f, 1.25f, -3.75f};
    int8_t q[QK8_0] = {-127, 0, 2, 2, 0, -2, -2, 4, 126, -126, 126, 0, 1, -4};
    expect_block(k, x, FP16_ONE, q);
}

static void test_round_half_to_even(void **state) {
    (void)state;
    for_each_tier(check_ties);
}

static void check_zero_block(const syn_kernels *k) {
    float x[QK8_0] = {0};
    x[3] = -0.0f;
    int8_t q[QK8_0] = {0};
    expect_block(k, x, 0x0000, q);
}

static void test_zero_block(void **state) {
    (void)state;
    for_each_tier(check_zero_block);
}

/* ggml's rule worked by hand: amax 254 -> d = 2 (fp16 0x4000), id = 0.5; and amax 1 ->
 * d = 1/127 = 0.00787402 = 2^-7 * (1 + 8.13/1024), fp16 0x2008, id ~ 127. */
static void check_ggml_blocks(const syn_kernels *k) {
    float x1[QK8_0] = {254, 3, 5, -1, 1, -254, 100, -7};
    int8_t q1[QK8_0] = {127, 2, 2, 0, 0, -127, 50, -4};
    expect_block(k, x1, FP16_TWO, q1);
    float x2[QK8_0] = {1.0f, 0.25f, -1.0f, 0.1f, -0.3f, 0.0f, 0.9f};
    int8_t q2[QK8_0] = {127, 32, -127, 13, -38, 0, 114}; /* 31.75, 12.7, -38.1, 114.3 */
    expect_block(k, x2, 0x2008, q2);
}

static void test_ggml_rule_hand_computed(void **state) {
    (void)state;
    for_each_tier(check_ggml_blocks);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint32_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rng_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)(rng_next() & 0xffffff) / 16777216.0f;
}

enum { RANDOM_BLOCKS = 4096 };

static float random_x[RANDOM_BLOCKS * QK8_0];
static block_q8_0 random_ref[RANDOM_BLOCKS], random_out[RANDOM_BLOCKS];

static void check_random_against_scalar(const syn_kernels *k) {
    memset(random_out, 0x55, sizeof random_out);
    k->quantize_row_q8_0(random_x, random_out, (int64_t)RANDOM_BLOCKS * QK8_0);
    for (int b = 0; b < RANDOM_BLOCKS; b++) {
        if (memcmp(&random_out[b], &random_ref[b], sizeof(block_q8_0)) != 0) {
            fail_msg("%s: block %d differs from scalar", syn_isa_tier_name(k->isa), b);
        }
    }
}

static void test_random_rows_identical_to_scalar(void **state) {
    (void)state;
    for (int b = 0; b < RANDOM_BLOCKS; b++) {
        /* magnitudes from 1e-6 to 1e4, some blocks with exact ties after scaling */
        const float scale = (float)(1e-6 * __builtin_powi(10.0, b % 11));
        for (int i = 0; i < QK8_0; i++)
            random_x[b * QK8_0 + i] = rng_uniform(-1, 1) * scale;
        if (b % 7 == 0) {
            for (int i = 0; i < QK8_0; i++)
                random_x[b * QK8_0 + i] = (float)((int)(rng_next() % 255) - 127) * 0.5f;
            random_x[b * QK8_0] =
                63.5f; /* amax 63.5 -> d = 0.5: every value lands on a tie or integer */
        }
    }
    syn_kernels scalar;
    assert_int_equal(syn_kernels_get(SYN_TIER_SCALAR, &scalar), SYN_OK);
    scalar.quantize_row_q8_0(random_x, random_ref, (int64_t)RANDOM_BLOCKS * QK8_0);
    for_each_tier(check_random_against_scalar);
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) static void compare_fp16_with_f16c(void) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float a = syn_k_fp16_to_f32((uint16_t)h), b = _cvtsh_ss((uint16_t)h);
        if (a != a && b != b) continue;
        if (syn_k_f32_bits(a) != syn_k_f32_bits(b))
            fail_msg("fp16 0x%04x -> %a, F16C says %a", h, a, b);
    }
    for (uint64_t u = 0; u < 0x100000000u; u += 997) {
        const float f = syn_k_bits_f32((uint32_t)u);
        if (f != f) continue;
        const uint16_t a = syn_k_f32_to_fp16(f),
                       b = (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
        if (a != b) fail_msg("f32 0x%08x -> fp16 0x%04x, F16C says 0x%04x", (unsigned)u, a, b);
    }
}
#endif

static void test_fp16_matches_hardware(void **state) {
    (void)state;
#if defined(__x86_64__)
    if (!syn_isa_tier_available(SYN_TIER_AVX2)) { /* the avx2 tier requires F16C */
        printf("  skipped: CPU lacks F16C\n");
        return;
    }
    compare_fp16_with_f16c();
#else
    printf("  skipped: not an x86-64 build\n");
#endif
    assert_int_equal(syn_k_f32_to_fp16(1.0f), FP16_ONE);
    assert_int_equal(syn_k_f32_to_fp16(65520.0f), 0x7c00); /* rounds to infinity */
    assert_int_equal(syn_k_f32_to_fp16(5.9604645e-08f), 0x0001);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_worked_block),
        cmocka_unit_test(test_round_half_to_even),
        cmocka_unit_test(test_zero_block),
        cmocka_unit_test(test_ggml_rule_hand_computed),
        cmocka_unit_test(test_random_rows_identical_to_scalar),
        cmocka_unit_test(test_fp16_matches_hardware),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
