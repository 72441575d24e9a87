/*
 * test_kernels_arm.c: the kernel tiers on aarch64, run under qemu-user (no cmocka: only the
 * kernel sources and src/core/error.c are linked). Usage:
 *   test_kernels_arm max     the CPU must offer neon-dot and i8mm; every tier against scalar
 *   test_kernels_arm nodot   the CPU lacks the dot product: only scalar is detected, and asking
 *                            for neon-dot or i8mm fails with SYN_ERR_UNAVAILABLE
 * Prints "N passed, N failed" and exits nonzero on any failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/fp16.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"

#include "../support/type_kernels_check.h"

static int n_passed, n_failed;

/* The single-row Q8_0 dot behind a tier's matrix kernels (their edge rows; kernels_impl.h), which
 * no table lists: the scalar one, AVX2's (every x86 tier) or the dot-product tier's (aarch64). */
typedef float (*q8_0_dot_fn)(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a);
static q8_0_dot_fn tier_vec_dot(syn_isa_tier isa) {
    switch (isa) {
#if defined(__x86_64__)
    case SYN_TIER_AVX2:
    case SYN_TIER_AVX512_VNNI:
    case SYN_TIER_AVX_VNNI: return syn_vec_dot_q8_0_q8_0_avx2;
#endif
#if defined(__aarch64__)
    case SYN_TIER_NEON_DOT:
    case SYN_TIER_I8MM: return syn_vec_dot_q8_0_q8_0_dotprod;
#endif
    default: return syn_vec_dot_q8_0_q8_0_scalar;
    }
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            n_passed++;                                                                            \
        } else {                                                                                   \
            n_failed++;                                                                            \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

static uint64_t rng_state = 0x853c49e6748fea9bu;
static uint32_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void random_block(block_q8_0 *b, int lo, int hi, uint16_t scale) {
    for (int i = 0; i < QK8_0; i++)
        b->qs[i] = (int8_t)(lo + (int)(rng_next() % (uint32_t)(hi - lo + 1)));
    b->d = scale ? scale : (uint16_t)(0x0400 + rng_next() % 0x3800);
}

/* The hand-worked block and half-to-even ties with d = 1. */
static void test_quantize_hand_worked(const syn_kernels *k) {
    const float x1[QK8_0] = {127, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f};
    const int8_t q1[QK8_0] = {127, 2, 4, -2, 0, 0};
    const float x2[QK8_0] = {-127, 1.5f, 126.5f, -126.5f, 0.49999997f, -3.75f};
    const int8_t q2[QK8_0] = {-127, 2, 126, -126, 0, -4};
    block_q8_0 y;
    k->quantize_row_q8_0(x1, &y, QK8_0);
    CHECK(y.d == 0x3c00 && memcmp(y.qs, q1, QK8_0) == 0, "%s: hand-worked block",
          syn_isa_tier_name(k->isa));
    k->quantize_row_q8_0(x2, &y, QK8_0);
    CHECK(y.d == 0x3c00 && memcmp(y.qs, q2, QK8_0) == 0, "%s: ties block",
          syn_isa_tier_name(k->isa));
    const float zero[QK8_0] = {0};
    k->quantize_row_q8_0(zero, &y, QK8_0);
    const int8_t zq[QK8_0] = {0};
    CHECK(y.d == 0 && memcmp(y.qs, zq, QK8_0) == 0, "%s: zero block", syn_isa_tier_name(k->isa));
}

static void test_quantize_vs_scalar(const syn_kernels *k, const syn_kernels *ref) {
    enum { N = 256 };
    static float x[N * QK8_0];
    static block_q8_0 a[N], b[N];
    for (int i = 0; i < N * QK8_0; i++) {
        x[i] = ((float)(rng_next() & 0xffff) / 32768.0f - 1.0f) * (float)(1 << (i / QK8_0 % 12));
    }
    ref->quantize_row_q8_0(x, a, N * QK8_0);
    k->quantize_row_q8_0(x, b, N * QK8_0);
    CHECK(memcmp(a, b, sizeof a) == 0, "%s: quantized rows differ from scalar",
          syn_isa_tier_name(k->isa));
}

/* Unit scales: a one-block dot is the exact int32 sum, -128 weights included. */
static void test_block_dots_exact(const syn_kernels *k) {
    int bad = 0;
    for (int trial = 0; trial < 300; trial++) {
        block_q8_0 w, a;
        random_block(&w, -128, 127, 0x3c00);
        random_block(&a, -127, 127, 0x3c00);
        if (trial % 3 == 0) memset(w.qs, 0x80, QK8_0);
        if (trial % 5 == 0) memset(a.qs, trial % 2 ? 0x81 : 0x7f, QK8_0);
        int32_t expect = 0;
        for (int i = 0; i < QK8_0; i++)
            expect += w.qs[i] * a.qs[i];
        float got = tier_vec_dot(k->isa)(1, &w, &a), got_mv = 0;
        k->mat[GGML_TYPE_Q8_0].matvec(1, &w, sizeof w, 0, 1, &a, &got_mv);
        if (got != (float)expect || got_mv != (float)expect) bad++;
    }
    CHECK(bad == 0, "%s: %d inexact block dots", syn_isa_tier_name(k->isa), bad);
}

/* Matmul over odd shapes equals scalar bitwise and matvec per token bitwise. */
static void test_matmul_vs_scalar(const syn_kernels *k, const syn_kernels *ref) {
    enum { ROWS = 23, BLOCKS = 28, TOKENS = 17, PAD = 4 };
    const size_t row_bytes = BLOCKS * sizeof(block_q8_0) + PAD;
    unsigned char *w = malloc(row_bytes * ROWS);
    block_q8_0 *a = malloc(sizeof(block_q8_0) * BLOCKS * TOKENS);
    float *y = malloc(sizeof(float) * TOKENS * ROWS), *yr = malloc(sizeof(float) * TOKENS * ROWS);
    float yv[ROWS];
    if (!w || !a || !y || !yr) {
        CHECK(0, "out of memory");
        return;
    }
    for (int r = 0; r < ROWS; r++) {
        for (int b = 0; b < BLOCKS; b++)
            random_block((block_q8_0 *)(w + r * row_bytes) + b, -128, 127, 0);
    }
    for (int i = 0; i < BLOCKS * TOKENS; i++)
        random_block(&a[i], -127, 127, 0);
    static const int token_counts[] = {1, 3, 4, 5, 8, 17};
    for (size_t tc = 0; tc < sizeof token_counts / sizeof token_counts[0]; tc++) {
        const int nt = token_counts[tc];
        ref->mat[GGML_TYPE_Q8_0].matmul(BLOCKS, w, row_bytes, 1, ROWS, a, nt, yr, ROWS);
        k->mat[GGML_TYPE_Q8_0].matmul(BLOCKS, w, row_bytes, 1, ROWS, a, nt, y, ROWS);
        int bad = 0, bad_mv = 0;
        for (int t = 0; t < nt; t++) {
            k->mat[GGML_TYPE_Q8_0].matvec(BLOCKS, w, row_bytes, 1, ROWS, a + t * BLOCKS, yv);
            for (int r = 1; r < ROWS; r++) {
                if (memcmp(&y[t * ROWS + r], &yr[t * ROWS + r], sizeof(float)) != 0) bad++;
                if (memcmp(&y[t * ROWS + r], &yv[r], sizeof(float)) != 0) bad_mv++;
            }
        }
        CHECK(bad == 0, "%s: %d tokens: %d outputs differ from scalar", syn_isa_tier_name(k->isa),
              nt, bad);
        CHECK(bad_mv == 0, "%s: %d tokens: %d outputs differ from matvec",
              syn_isa_tier_name(k->isa), nt, bad_mv);
    }
    free(w);
    free(a);
    free(y);
    free(yr);
}

static void test_tier(const syn_kernels *k, const syn_kernels *ref) {
    printf("testing %s\n", syn_isa_tier_name(k->isa));
    n_failed += type_kernels_check(k, ref, syn_isa_tier_name(k->isa), &n_passed);
    test_quantize_hand_worked(k);
    test_quantize_vs_scalar(k, ref);
    test_block_dots_exact(k);
    test_matmul_vs_scalar(k, ref);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    const int expect_dot = strcmp(mode, "max") == 0;
    if (!expect_dot && strcmp(mode, "nodot") != 0) {
        fprintf(stderr, "usage: %s max|nodot\n", argv[0]);
        return 2;
    }
    syn_kernels ref;
    CHECK(syn_kernels_get(SYN_TIER_SCALAR, &ref) == SYN_OK, "scalar tier unavailable");
    test_tier(&ref, &ref);
    n_failed += type_kernels_check_spec(&ref, &n_passed);

    syn_isa_tier best;
    CHECK(syn_isa_tier_resolve(SYN_TIER_AUTO, &best) == SYN_OK, "resolving auto");
    printf("best tier: %s\n", syn_isa_tier_name(best));
    CHECK(!syn_isa_tier_available(SYN_TIER_AVX2) && !syn_isa_tier_available(SYN_TIER_AVX512_VNNI) &&
              !syn_isa_tier_available(SYN_TIER_AVX_VNNI),
          "an x86 tier claims to be available on aarch64");
    if (expect_dot) {
        CHECK(best == SYN_TIER_I8MM, "best tier is %s, expected i8mm", syn_isa_tier_name(best));
        const syn_isa_tier tiers[] = {SYN_TIER_NEON_DOT, SYN_TIER_I8MM};
        for (int i = 0; i < 2; i++) {
            syn_kernels k;
            const syn_status st = syn_kernels_get(tiers[i], &k);
            CHECK(st == SYN_OK, "%s unavailable: %s", syn_isa_tier_name(tiers[i]),
                  syn_last_error());
            if (st == SYN_OK) test_tier(&k, &ref);
        }
    } else {
        CHECK(best == SYN_TIER_SCALAR, "best tier is %s, expected scalar", syn_isa_tier_name(best));
        const syn_isa_tier tiers[] = {SYN_TIER_NEON_DOT, SYN_TIER_I8MM};
        for (int i = 0; i < 2; i++) {
            syn_kernels k;
            CHECK(syn_kernels_get(tiers[i], &k) == SYN_ERR_UNAVAILABLE,
                  "%s: expected SYN_ERR_UNAVAILABLE", syn_isa_tier_name(tiers[i]));
            CHECK(strstr(syn_last_error(), syn_isa_tier_name(tiers[i])) != NULL,
                  "message does not name %s: %s", syn_isa_tier_name(tiers[i]), syn_last_error());
            printf("%s refused: %s\n", syn_isa_tier_name(tiers[i]), syn_last_error());
            syn_isa_tier isa;
            CHECK(syn_isa_tier_resolve(tiers[i], &isa) == SYN_ERR_UNAVAILABLE, "resolve %s",
                  syn_isa_tier_name(tiers[i]));
        }
    }
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed == 0 ? 0 : 1;
}
