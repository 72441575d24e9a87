/* test_kernels.c: the Q8_0 dot, matvec and matmul kernels of every ISA tier this CPU runs against
 * the scalar reference (exact int32 block dots, including -128 weights; bitwise equal floats),
 * scalar against a double-precision sum, matmul against matvec across tile edges, long rows and
 * many tokens (past the kernels' stack buffers; on x86 also through AVX-VNNI's 256-bit matmul
 * loop, built for AVX-512, where the CPU lacks AVX-VNNI), tier selection (unknown and
 * unavailable tiers are errors, never a fallback), every tier's delta-net recurrence against
 * its definition, its delta-net convolution against the others' bits and silu's value, and its
 * GEGLU against gelu.h's function. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/gelu.h"
#include "kernels/fp16.h"
#include "kernels/kernels.h"
#include "kernels/kernels_impl.h"

#include "../support/type_kernels_check.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static uint32_t rng_next(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Codes in [lo, hi]; the scale a random fp16 in about [1e-4, 2). */
static void random_block(block_q8_0 *b, int lo, int hi, bool unit_scale) {
    for (int i = 0; i < QK8_0; i++)
        b->qs[i] = (int8_t)(lo + (int)(rng_next() % (uint32_t)(hi - lo + 1)));
    b->d = unit_scale ? 0x3c00 : (uint16_t)(0x0400 + rng_next() % 0x3800);
}

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

static int available_tiers(syn_kernels out[SYN_TIER_COUNT]) {
    int n = 0;
    for (int i = SYN_TIER_SCALAR; i < SYN_TIER_COUNT; i++) {
        if (syn_kernels_get((syn_isa_tier)i, &out[n]) == SYN_OK) {
            n++;
        } else {
            printf("  skipped %s: %s\n", syn_isa_tier_name((syn_isa_tier)i), syn_last_error());
        }
    }
    return n;
}

/* The tiers plus, where AVX-512 VNNI runs, a copy of it whose Q8_0, Q4_0, Q5_0, Q4_1 and Q5_1
 * matmuls are AVX-VNNI's 256-bit lane loop (syn_matmul_*_avx512_ymm), so that loop is tested on
 * CPUs without AVX-VNNI too; on a CPU with GFNI, whose avx512-vnni table takes the GFNI builds of
 * the 4-6-bit kernels, the copy has the plain ones. */
static int tiers_and_variants(syn_kernels out[SYN_TIER_COUNT + 1],
                              const char *names[SYN_TIER_COUNT + 1]) {
    int n = available_tiers(out);
    for (int i = 0; i < n; i++)
        names[i] = syn_isa_tier_name(out[i].isa);
#if defined(__x86_64__)
    for (int i = 0; i < n; i++) {
        if (out[i].isa == SYN_TIER_AVX512_VNNI) {
            if (syn_cpu_has_gfni()) {
                assert_int_equal(syn_kernels_get_build(SYN_TIER_AVX512_VNNI, false, &out[n]),
                                 SYN_OK);
                names[n] = "avx512-vnni (AVX-VNNI's 256-bit matmul, kernels without GFNI)";
            } else {
                out[n] = out[i];
                names[n] = "avx512-vnni (AVX-VNNI's 256-bit matmul)";
            }
            out[n].mat[GGML_TYPE_Q8_0].matmul = syn_matmul_q8_0_avx512_ymm;
            out[n].mat[GGML_TYPE_Q4_0].matmul = syn_matmul_q4_0_avx512_ymm;
            out[n].mat[GGML_TYPE_Q5_0].matmul = syn_matmul_q5_0_avx512_ymm;
            out[n].mat[GGML_TYPE_Q4_1].matmul = syn_matmul_q4_1_avx512_ymm;
            out[n].mat[GGML_TYPE_Q5_1].matmul = syn_matmul_q5_1_avx512_ymm;
            n++;
            break;
        }
    }
#endif
    return n;
}

static int32_t int_dot(const block_q8_0 *w, const block_q8_0 *a) {
    int32_t s = 0;
    for (int i = 0; i < QK8_0; i++)
        s += w->qs[i] * a->qs[i];
    return s;
}

/* With both scales 1.0 a one-block dot is (float)isum, exact below 2^24: the int32 sum itself. */
static void test_block_dots_exact(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    /* weight/activation ranges: full int8 weights (files may hold -128), quantizer-range
     * activations */
    static const int ranges[][4] = {{-128, 127, -127, 127},   {-128, -128, 127, 127},
                                    {-128, -128, -127, -127}, {127, 127, -127, -127},
                                    {-1, 1, -127, 127},       {0, 0, -127, 127}};
    for (size_t rg = 0; rg < sizeof ranges / sizeof ranges[0]; rg++) {
        for (int trial = 0; trial < 200; trial++) {
            block_q8_0 w, a;
            random_block(&w, ranges[rg][0], ranges[rg][1], true);
            random_block(&a, ranges[rg][2], ranges[rg][3], true);
            const float expect = (float)int_dot(&w, &a);
            for (int k = 0; k < n_tiers; k++) {
                float got = tier_vec_dot(tiers[k].isa)(1, &w, &a);
                if (got != expect)
                    fail_msg("%s vec_dot: %.1f, expected %.1f", syn_isa_tier_name(tiers[k].isa),
                             got, expect);
                tiers[k].mat[GGML_TYPE_Q8_0].matvec(1, &w, sizeof w, 0, 1, &a, &got);
                if (got != expect)
                    fail_msg("%s matvec: %.1f, expected %.1f", syn_isa_tier_name(tiers[k].isa), got,
                             expect);
            }
        }
    }
    /* Extremes through the tiled paths: 8 rows x 8 tokens of one block each. */
    block_q8_0 w[8], a[8];
    for (int i = 0; i < 8; i++) {
        random_block(&w[i], -128, 127, true);
        random_block(&a[i], -127, 127, true);
    }
    memset(w[0].qs, 0x80, QK8_0); /* all -128 */
    memset(a[1].qs, 0x81, QK8_0); /* all -127 */
    memset(a[2].qs, 0x7f, QK8_0); /* all 127 */
    for (int k = 0; k < n_tiers; k++) {
        float y[8 * 8];
        tiers[k].mat[GGML_TYPE_Q8_0].matmul(1, w, sizeof w[0], 0, 8, a, 8, y, 8);
        for (int t = 0; t < 8; t++) {
            for (int r = 0; r < 8; r++) {
                if (y[t * 8 + r] != (float)int_dot(&w[r], &a[t])) {
                    fail_msg("%s matmul row %d token %d: %.1f, expected %d",
                             syn_isa_tier_name(tiers[k].isa), r, t, y[t * 8 + r],
                             int_dot(&w[r], &a[t]));
                }
            }
        }
    }
}

/* A random weight matrix (rows padded to row_bytes) and activations. */
typedef struct problem {
    int64_t n_rows, n_blocks, n_tokens;
    size_t row_bytes;
    unsigned char *w;
    block_q8_0 *a; /* [n_tokens][n_blocks] */
} problem;

static problem make_problem(int64_t n_rows, int64_t n_blocks, int64_t n_tokens, size_t pad) {
    problem p = {n_rows, n_blocks, n_tokens, (size_t)n_blocks * sizeof(block_q8_0) + pad,
                 NULL,   NULL};
    p.w = malloc(p.row_bytes * (size_t)n_rows);
    p.a = malloc(sizeof(block_q8_0) * (size_t)(n_blocks * n_tokens));
    assert_non_null(p.w);
    assert_non_null(p.a);
    memset(p.w, 0xee, p.row_bytes * (size_t)n_rows);
    for (int64_t r = 0; r < n_rows; r++) {
        block_q8_0 *row = (block_q8_0 *)(p.w + (size_t)r * p.row_bytes);
        for (int64_t b = 0; b < n_blocks; b++)
            random_block(&row[b], -128, 127, false);
    }
    for (int64_t i = 0; i < n_blocks * n_tokens; i++)
        random_block(&p.a[i], -127, 127, false);
    return p;
}

static void free_problem(problem *p) {
    free(p->w);
    free(p->a);
}

/* The scalar tier's matmul of the whole problem, [n_tokens][n_rows] (malloc'd). */
static float *scalar_matmul(const syn_kernels *scalar, const problem *p) {
    float *y = malloc(sizeof(float) * (size_t)(p->n_rows * p->n_tokens));
    assert_non_null(y);
    scalar->mat[GGML_TYPE_Q8_0].matmul(p->n_blocks, p->w, p->row_bytes, 0, p->n_rows, p->a,
                                       p->n_tokens, y, p->n_rows);
    return y;
}

/* Scalar against an independent double-precision sum of d_w * d_a * isum. */
static void test_scalar_within_tolerance_of_double(void **state) {
    (void)state;
    syn_kernels scalar;
    assert_int_equal(syn_kernels_get(SYN_TIER_SCALAR, &scalar), SYN_OK);
    problem p = make_problem(16, 152, 1, 0);
    for (int64_t r = 0; r < p.n_rows; r++) {
        const block_q8_0 *w = (const block_q8_0 *)(p.w + (size_t)r * p.row_bytes);
        double sum = 0, mag = 0;
        for (int64_t b = 0; b < p.n_blocks; b++) {
            const double term = (double)syn_k_fp16_to_f32(w[b].d) * syn_k_fp16_to_f32(p.a[b].d) *
                                int_dot(&w[b], &p.a[b]);
            sum += term;
            mag += fabs(term);
        }
        const float got = syn_vec_dot_q8_0_q8_0_scalar(p.n_blocks, w, p.a);
        assert_true(fabs(got - sum) <= 1e-5 * mag); /* float rounding over 152 terms */
    }
    free_problem(&p);
}

/* Every tier's vec_dot, matvec and matmul equal scalar bitwise (kernels.h's contract). */
static void test_tiers_bitwise_equal_scalar(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    static const int64_t block_counts[] = {1, 7, 8, 28, 152};
    for (size_t bc = 0; bc < sizeof block_counts / sizeof block_counts[0]; bc++) {
        problem p = make_problem(21, block_counts[bc], 9, 6);
        float ref[9 * 21], got[9 * 21];
        tiers[0].mat[GGML_TYPE_Q8_0].matmul(p.n_blocks, p.w, p.row_bytes, 0, p.n_rows, p.a,
                                            p.n_tokens, ref, p.n_rows);
        for (int k = 1; k < n_tiers; k++) {
            const char *name = syn_isa_tier_name(tiers[k].isa);
            tiers[k].mat[GGML_TYPE_Q8_0].matmul(p.n_blocks, p.w, p.row_bytes, 0, p.n_rows, p.a,
                                                p.n_tokens, got, p.n_rows);
            for (int i = 0; i < 9 * 21; i++) {
                if (memcmp(&got[i], &ref[i], sizeof(float)) != 0) {
                    fail_msg("%s matmul, %lld blocks, output %d: %a vs scalar %a", name,
                             (long long)p.n_blocks, i, got[i], ref[i]);
                }
            }
            for (int64_t r = 0; r < p.n_rows; r++) {
                const block_q8_0 *w = (const block_q8_0 *)(p.w + (size_t)r * p.row_bytes);
                const float d = tier_vec_dot(tiers[k].isa)(p.n_blocks, w, p.a + p.n_blocks);
                if (memcmp(&d, &ref[p.n_rows + r], sizeof d) != 0) {
                    fail_msg("%s vec_dot row %lld: %a vs scalar %a", name, (long long)r, d,
                             ref[p.n_rows + r]);
                }
            }
        }
        free_problem(&p);
    }
}

/* Shapes past the x86 kernels' stack buffers: rows longer than one matvec span (256 blocks) and
 * matmuls of more than one token chunk (256 tokens) and several k-spans; every tier equals scalar
 * bitwise, through both matvec and matmul. */
static void test_long_rows_and_many_tokens(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    static const int64_t shapes[][3] = {{19, 260, 5}, {9, 2, 300}, {17, 40, 261}};
    for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        problem p = make_problem(shapes[sh][0], shapes[sh][1], shapes[sh][2], 4);
        const size_t n_out = (size_t)(p.n_rows * p.n_tokens);
        float *ref = scalar_matmul(&tiers[0], &p), *got = malloc(sizeof(float) * n_out);
        assert_non_null(got);
        for (int k = 1; k < n_tiers; k++) {
            const char *name = syn_isa_tier_name(tiers[k].isa);
            tiers[k].mat[GGML_TYPE_Q8_0].matmul(p.n_blocks, p.w, p.row_bytes, 0, p.n_rows, p.a,
                                                p.n_tokens, got, p.n_rows);
            if (memcmp(got, ref, sizeof(float) * n_out) != 0) {
                fail_msg("%s matmul %lld x %lld blocks x %lld tokens differs from scalar", name,
                         (long long)p.n_rows, (long long)p.n_blocks, (long long)p.n_tokens);
            }
            const int64_t t = p.n_tokens - 1;
            tiers[k].mat[GGML_TYPE_Q8_0].matvec(p.n_blocks, p.w, p.row_bytes, 0, p.n_rows,
                                                p.a + t * p.n_blocks, got);
            if (memcmp(got, ref + t * p.n_rows, sizeof(float) * (size_t)p.n_rows) != 0) {
                fail_msg("%s matvec %lld x %lld blocks differs from scalar", name,
                         (long long)p.n_rows, (long long)p.n_blocks);
            }
        }
        free(ref);
        free(got);
        free_problem(&p);
    }
}

/* The x16 layouts: every tier that reads one gives, through matvec and matmul, the scalar tier's
 * outputs on the rows bit for bit (tests/support/type_kernels_check.c: row ranges of whole groups,
 * rows longer than the decode's single pass, token counts around the lane tiles and past a token
 * chunk, rows read back from the layout). AVX-512 VNNI reads those of every quantized type.
 */
static void test_x16_layout(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    int n_passed = 0, n_x16 = 0, n_types = 0;
    for (int k = 1; k < n_tiers; k++) {
        for (uint32_t type = 0; type < GGML_TYPE_COUNT; type++) {
            if (!tiers[k].x16[type].matvec) continue;
            assert_non_null(tiers[k].x16[type].matmul);
            assert_true(syn_x16_code_bytes(type) > 0);
            assert_int_equal(type_kernels_check_x16(&tiers[k], &tiers[0],
                                                    syn_isa_tier_name(tiers[k].isa), type,
                                                    &n_passed, &n_x16),
                             0);
            n_types++;
        }
    }
    print_message("x16 kernels: %d x16 checks (and %d of the rows) passed over %d tier-type "
                  "pairs\n",
                  n_x16, n_passed - n_x16, n_types);
    assert_int_equal(n_x16, n_types * 4 * 3); /* 4 shapes x 3 row ranges each */
#if defined(__x86_64__)
    if (syn_isa_tier_available(SYN_TIER_AVX512_VNNI)) {
        syn_kernels k;
        assert_int_equal(syn_kernels_get(SYN_TIER_AVX512_VNNI, &k), SYN_OK);
        static const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_0,
                                         GGML_TYPE_Q4_1, GGML_TYPE_Q5_1, GGML_TYPE_Q4_K,
                                         GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
            assert_non_null(k.x16[types[i]].matvec);
        assert_true(n_types >= 8);
    }
#endif
}

/* Matmul over odd shapes and row offsets equals matvec per token bitwise, leaves the outputs
 * outside [r0, r1) alone, and so cannot depend on how tokens or rows are tiled. */
static void test_matmul_matches_matvec_across_edges(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT + 1];
    const char *names[SYN_TIER_COUNT + 1];
    const int n_tiers = tiers_and_variants(tiers, names);
    /* 5, 6, 7: tails of 1-3 tokens after a full 4-token lane tile (AVX-VNNI), or lone tiles of
     * 5-7 of AVX-512's 8; 12 and 15: tails of 4 and 7 after a full 8 */
    static const int64_t token_counts[] = {1, 3, 4, 5, 6, 7, 8, 12, 15, 17, 33};
    /* {0, 32} and {16, 32}: only whole 16-row tiles, the last with no next tile to prefetch */
    static const int64_t row_ranges[][2] = {{0, 1},  {2, 5},  {0, 8},  {3, 16},
                                            {1, 38}, {0, 40}, {0, 32}, {16, 32}};
    problem p = make_problem(40, 28, 33, 2);
    const int64_t y_stride = 45;
    float *y = malloc(sizeof(float) * (size_t)(33 * y_stride));
    float *yv = malloc(sizeof(float) * (size_t)y_stride);
    assert_non_null(y);
    assert_non_null(yv);
    for (int k = 0; k < n_tiers; k++) {
        const char *name = names[k];
        for (size_t tc = 0; tc < sizeof token_counts / sizeof token_counts[0]; tc++) {
            for (size_t rr = 0; rr < sizeof row_ranges / sizeof row_ranges[0]; rr++) {
                const int64_t nt = token_counts[tc], r0 = row_ranges[rr][0], r1 = row_ranges[rr][1];
                for (int64_t i = 0; i < 33 * y_stride; i++)
                    y[i] = -999.0f;
                tiers[k].mat[GGML_TYPE_Q8_0].matmul(p.n_blocks, p.w, p.row_bytes, r0, r1, p.a, nt,
                                                    y, y_stride);
                for (int64_t t = 0; t < 33; t++) {
                    if (t < nt)
                        tiers[k].mat[GGML_TYPE_Q8_0].matvec(p.n_blocks, p.w, p.row_bytes, r0, r1,
                                                            p.a + t * p.n_blocks, yv);
                    for (int64_t r = 0; r < y_stride; r++) {
                        const float got = y[t * y_stride + r];
                        if (t >= nt || r < r0 || r >= r1) {
                            if (got != -999.0f)
                                fail_msg("%s wrote outside its outputs at token %lld row %lld",
                                         name, (long long)t, (long long)r);
                        } else if (memcmp(&got, &yv[r], sizeof got) != 0) {
                            fail_msg("%s: %lld tokens, rows [%lld,%lld): token %lld row %lld "
                                     "matmul %a matvec %a",
                                     name, (long long)nt, (long long)r0, (long long)r1,
                                     (long long)t, (long long)r, got, yv[r]);
                        }
                    }
                }
            }
        }
    }
    free(y);
    free(yv);
    free_problem(&p);
}

static void test_isa_names_and_selection(void **state) {
    (void)state;
    for (int i = 0; i < SYN_TIER_COUNT; i++) {
        syn_isa_tier parsed;
        assert_int_equal(syn_isa_tier_parse(syn_isa_tier_name((syn_isa_tier)i), &parsed), SYN_OK);
        assert_int_equal(parsed, i);
    }
    assert_string_equal(syn_isa_tier_name(SYN_TIER_AVX512_VNNI), "avx512-vnni");
    assert_string_equal(syn_isa_tier_name(SYN_TIER_NEON_DOT), "neon-dot");
    syn_isa_tier isa;
    assert_int_equal(syn_isa_tier_parse("avx3", &isa), SYN_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(syn_last_error(), "avx3"));
    assert_int_equal(syn_isa_tier_resolve(SYN_TIER_AUTO, &isa), SYN_OK);
    assert_int_equal(isa, syn_isa_tier_best());
    assert_true(syn_isa_tier_available(isa));
    assert_true(syn_isa_tier_available(SYN_TIER_SCALAR));

    /* A tier this machine cannot run is an error naming it, never a fallback. */
    int n_unavailable = 0;
    for (int i = SYN_TIER_SCALAR; i < SYN_TIER_COUNT; i++) {
        if (syn_isa_tier_available((syn_isa_tier)i)) continue;
        n_unavailable++;
        syn_kernels k = {.isa = SYN_TIER_SCALAR};
        assert_int_equal(syn_kernels_get((syn_isa_tier)i, &k), SYN_ERR_UNAVAILABLE);
        assert_non_null(strstr(syn_last_error(), syn_isa_tier_name((syn_isa_tier)i)));
        assert_int_equal(syn_isa_tier_resolve((syn_isa_tier)i, &isa), SYN_ERR_UNAVAILABLE);
    }
    assert_true(n_unavailable >= 2); /* at least the other architecture's tiers */
#if defined(__x86_64__)
    assert_false(syn_isa_tier_available(SYN_TIER_NEON_DOT));
    assert_false(syn_isa_tier_available(SYN_TIER_I8MM));
    assert_int_equal(syn_isa_tier_available(SYN_TIER_AVX2), __builtin_cpu_supports("avx2") != 0);
    assert_int_equal(syn_isa_tier_available(SYN_TIER_AVX512_VNNI),
                     __builtin_cpu_supports("avx512vnni") != 0);
    if (!syn_isa_tier_available(SYN_TIER_AVX_VNNI))
        printf("  skipped: CPU lacks avx-vnni (its kernels are built, not run)\n");
#endif
}

/* The 4- and 5-bit matvecs at the ends of their integer range: every code at its largest (15 or
 * 31) or zero, against activations of all 127 or all -128 (a code the quantizer never writes, so
 * the bound is the kernels' own). The x86 tiers add block lanes as int16 (x86_reduce8_small), which
 * holds only while a lane stays within 4 x 31 x 128; here each output has a known exact value:
 * with d = 1 and m = 1 a block sums n_code x a x 32 (+ 32 a x m for Q4_1 / Q5_1 through s), an
 * integer small enough for float. */
static void test_small_code_extremes(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT + 1];
    const char *names[SYN_TIER_COUNT + 1];
    const int n_tiers = tiers_and_variants(tiers, names);
    enum { N_BLOCKS = 28, N_ROWS = 2 }; /* 28: three 8-block groups and a 4-block tail */
    static const struct {
        enum ggml_type type;
        size_t block_bytes, qs_at, qh_at; /* qh_at 0: no fifth bits */
        int bias; /* the code is q - bias (Q4_0 8, Q5_0 16); 0 for the m types */
    } types[] = {
        {GGML_TYPE_Q4_0, sizeof(block_q4_0), offsetof(block_q4_0, qs), 0, 8},
        {GGML_TYPE_Q5_0, sizeof(block_q5_0), offsetof(block_q5_0, qs), offsetof(block_q5_0, qh),
         16},
        {GGML_TYPE_Q4_1, sizeof(block_q4_1), offsetof(block_q4_1, qs), 0, 0},
        {GGML_TYPE_Q5_1, sizeof(block_q5_1), offsetof(block_q5_1, qs), offsetof(block_q5_1, qh), 0},
    };
    const uint16_t one = syn_k_f32_to_fp16(1.0f);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const size_t bb = types[ti].block_bytes, row_bytes = bb * N_BLOCKS;
        unsigned char *w = calloc(N_ROWS, row_bytes);
        for (int r = 0; r < N_ROWS; r++) {
            for (int b = 0; b < N_BLOCKS; b++) {
                unsigned char *blk = w + (size_t)r * row_bytes + (size_t)b * bb;
                memcpy(blk, &one, 2);
                if (types[ti].bias == 0) memcpy(blk + 2, &one, 2); /* m */
                if (r == 0) { /* row 0: largest codes; row 1: all zero */
                    memset(blk + types[ti].qs_at, 0xFF, 16);
                    if (types[ti].qh_at) memset(blk + types[ti].qh_at, 0xFF, 4);
                }
            }
        }
        const int q_max = types[ti].qh_at ? 31 : 15;
        for (int sign = 0; sign < 2; sign++) {
            const int8_t a_code = sign ? -128 : 127;
            block_q8_0 act[N_BLOCKS];
            uint16_t sums[N_BLOCKS];
            for (int b = 0; b < N_BLOCKS; b++) {
                act[b].d = one;
                memset(act[b].qs, (unsigned char)a_code, sizeof act[b].qs);
                sums[b] = syn_k_f32_to_fp16(32.0f * a_code); /* s = d x sum(qs), exact in fp16 */
            }
            const syn_act_q8_1 act1 = {act, sums};
            const void *arg = types[ti].bias ? (const void *)act : (const void *)&act1;
            for (int r = 0; r < N_ROWS; r++) {
                const int code = (r == 0 ? q_max : 0) - types[ti].bias;
                const float m_term = types[ti].bias ? 0.0f : 32.0f * a_code;
                const float want = (float)N_BLOCKS * (32.0f * (float)(code * a_code) + m_term);
                for (int k = 0; k < n_tiers; k++) {
                    float y[N_ROWS] = {0};
                    tiers[k].mat[types[ti].type].matvec(N_BLOCKS, w, row_bytes, 0, N_ROWS, arg, y);
                    if (y[r] != want) {
                        printf("  %s %s row %d a %d: %.1f, want %.1f\n", names[k],
                               ggml_type_name(types[ti].type), r, a_code, y[r], want);
                    }
                    assert_true(y[r] == want);
                }
            }
        }
        free(w);
    }
}

/* Every quantized type (Q4_0 ... Q6_K, Q8_0): the scalar dot against float64 on the same codes, the
 * Q8_K quantizer's rule, and each tier (the AVX-VNNI lane loop included) bitwise equal to scalar
 * in its activation quantizers, matvec and matmul over the model widths, odd widths and token
 * counts (tests/support/type_kernels_check.c, shared with the aarch64 harness). */
static void test_type_kernels(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT + 1];
    const char *names[SYN_TIER_COUNT + 1];
    const int n_tiers = tiers_and_variants(tiers, names);
    int n_passed = 0;
    assert_int_equal(type_kernels_check_spec(&tiers[0], &n_passed), 0);
    for (int k = 1; k < n_tiers; k++)
        assert_int_equal(type_kernels_check(&tiers[k], &tiers[0], names[k], &n_passed), 0);
    printf("  %d type-kernel checks passed over %d tiers\n", n_passed, n_tiers);
}

static float rng_float(void) { return (float)(rng_next() % 20001) / 10000.0f - 1.0f; } /* [-1, 1] */

/* The delta rule (floats.h) written as its definition, one token and one column at a time. */
static void delta_rule_spec(const syn_delta_rule_args *a) {
    for (size_t t = 0; t < a->n; t++) {
        const float *q = a->qk + t * 2 * (size_t)a->dk, *k = q + a->dk;
        const float decay = a->gates[2 * t], beta = a->gates[2 * t + 1];
        for (int32_t j = 0; j < a->dv; j++) {
            float sk = 0.0f, o = 0.0f;
            for (int32_t i = 0; i < a->dk; i++) {
                float *s = &a->S[(size_t)i * a->dv + j];
                *s = *s * decay;
                sk = sk + *s * k[i];
            }
            const float d = beta * (a->v[t * a->v_stride + (size_t)j] - sk);
            for (int32_t i = 0; i < a->dk; i++) {
                float *s = &a->S[(size_t)i * a->dv + j];
                *s = *s + k[i] * d;
                o = o + *s * q[i];
            }
            a->o[t * a->o_stride + (size_t)j] = o;
        }
    }
}

/* Every tier's delta rule equals its definition bitwise, state and outputs, for value widths
 * through the 32-column strips and the 8-column tail, and the same bits when a sequence's tokens
 * arrive in two calls. */
static void test_delta_rule_tiers(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    enum { DK = 24, N = 7, MAX_DV = 72 };
    const int32_t widths[] = {8, 40, 72};
    float S0[DK * MAX_DV], qk[N * 2 * DK], gates[N * 2], v[N * MAX_DV];
    float S_spec[DK * MAX_DV], o_spec[N * MAX_DV], S_got[DK * MAX_DV], o_got[N * MAX_DV];
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int32_t dv = widths[w];
        for (int i = 0; i < DK * dv; i++)
            S0[i] = rng_float();
        for (int i = 0; i < N * 2 * DK; i++)
            qk[i] = rng_float() * 0.3f;
        for (int t = 0; t < N; t++) {
            gates[2 * t] = 0.5f + 0.5f * fabsf(rng_float());
            gates[2 * t + 1] = fabsf(rng_float());
        }
        for (int i = 0; i < N * dv; i++)
            v[i] = rng_float();
        memcpy(S_spec, S0, sizeof(float) * (size_t)(DK * dv));
        syn_delta_rule_args a = {.dk = DK,
                                 .dv = dv,
                                 .n = N,
                                 .S = S_spec,
                                 .qk = qk,
                                 .gates = gates,
                                 .v = v,
                                 .v_stride = (size_t)dv,
                                 .o = o_spec,
                                 .o_stride = (size_t)dv};
        delta_rule_spec(&a);
        for (int k = 0; k < n_tiers; k++) {
            for (size_t split = 0; split < 2; split++) {
                memcpy(S_got, S0, sizeof(float) * (size_t)(DK * dv));
                memset(o_got, 0, sizeof o_got);
                a.S = S_got;
                a.o = o_got;
                if (split) { /* tokens 0..2, then 3..N-1 */
                    a.n = 3;
                    tiers[k].delta_rule(&a);
                    a.n = N - 3;
                    a.qk = qk + 3 * 2 * DK;
                    a.gates = gates + 6;
                    a.v = v + 3 * dv;
                    a.o = o_got + 3 * dv;
                }
                tiers[k].delta_rule(&a);
                a.n = N, a.qk = qk, a.gates = gates, a.v = v;
                if (memcmp(S_got, S_spec, sizeof(float) * (size_t)(DK * dv)) != 0 ||
                    memcmp(o_got, o_spec, sizeof(float) * (size_t)(N * dv)) != 0)
                    fail_msg("%s delta rule, dv %d%s: not the definition's bits",
                             syn_isa_tier_name(tiers[k].isa), dv, split ? ", split" : "");
            }
        }
    }
    printf("  delta rule: %d tiers equal the definition bitwise\n", n_tiers);
}

/* Element (position t of a block, dim i) of one KV head's K or V run in a cache block (floats.h's
 * layout): its index from the start of K. */
static size_t kv_index(int32_t hd, bool value, int32_t t, int32_t i) {
    if (!value) return (size_t)i * SYN_ATTN_BLOCK + (size_t)t;
    const int32_t slab = i - i % 16, w = hd - slab < 16 ? hd - slab : 16;
    return (size_t)SYN_ATTN_BLOCK * (size_t)hd + (size_t)SYN_ATTN_BLOCK * (size_t)slab +
           (size_t)t * (size_t)w + (size_t)(i % 16);
}

/* Every tier's attention gives the same bits as the first tier's and lies within 1e-5 of a
 * softmax in double precision over the same (rounded) keys and values: head sizes with and
 * without a last slab of 8 dims, query groups below, at and above one pass's heads, key counts
 * that end inside a block, sliding windows, float32 and binary16 caches. */
static void test_attention_tiers(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    enum { N_HEAD_KV = 2, KV_HEAD = 1, MAX_HD = 72, MAX_GROUP = 9, MAX_KEYS = 100, LAYER_OFF = 64 };
    enum { MAX_BLOCKS = (MAX_KEYS + SYN_ATTN_BLOCK - 1) / SYN_ATTN_BLOCK };
    const int32_t dims[] = {8, 24, 64, 72};
    const int32_t groups[] = {1, 4, 7, 9};
    const uint32_t keys[][2] = {{1, 0}, {16, 0}, {17, 0}, {100, 0}, {40, 5}, {100, 33}, {100, 99}};
    const size_t block_bytes = LAYER_OFF + (size_t)N_HEAD_KV * 2 * SYN_ATTN_BLOCK * MAX_HD * 4;
    char *blocks = malloc(block_bytes * MAX_BLOCKS);
    float *kf = malloc(sizeof(float) * MAX_KEYS * MAX_HD),
          *vf = malloc(sizeof(float) * MAX_KEYS * MAX_HD);
    float q[MAX_GROUP * MAX_HD], want[MAX_GROUP * MAX_HD], first[MAX_GROUP * MAX_HD],
        got[MAX_GROUP * MAX_HD];
    float *scratch = malloc(sizeof(float) * syn_attn_scratch_floats(MAX_GROUP));
    assert_non_null(blocks);
    assert_non_null(kf);
    assert_non_null(vf);
    assert_non_null(scratch);
    const void *block_ptrs[MAX_BLOCKS];
    for (int b = 0; b < MAX_BLOCKS; b++)
        block_ptrs[b] = blocks + (size_t)b * block_bytes;
    int n_cases = 0;
    for (int f16 = 0; f16 <= 1; f16++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int32_t hd = dims[di];
            const size_t elem = f16 ? 2 : 4, head_elems = 2 * SYN_ATTN_BLOCK * (size_t)hd;
            memset(blocks, 0x7f, block_bytes * MAX_BLOCKS); /* other heads: junk (NaN in f16) */
            for (int p = 0; p < MAX_KEYS; p++)
                for (int32_t i = 0; i < hd; i++)
                    for (int value = 0; value <= 1; value++) {
                        float x = rng_float() * (value ? 1.0f : 2.0f);
                        if (f16) x = syn_k_fp16_to_f32(syn_k_f32_to_fp16(x));
                        (value ? vf : kf)[p * hd + i] = x;
                        char *head = blocks + (size_t)(p / SYN_ATTN_BLOCK) * block_bytes +
                                     LAYER_OFF + KV_HEAD * head_elems * elem;
                        const size_t at = kv_index(hd, value, p % SYN_ATTN_BLOCK, i);
                        if (f16) {
                            const uint16_t h = syn_k_f32_to_fp16(x);
                            memcpy(head + at * 2, &h, 2);
                        } else {
                            memcpy(head + at * 4, &x, 4);
                        }
                    }
            for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
                for (size_t ki = 0; ki < sizeof keys / sizeof keys[0]; ki++) {
                    const int32_t group = groups[gi];
                    const uint32_t n_keys = keys[ki][0], first_key = keys[ki][1];
                    for (int i = 0; i < group * hd; i++)
                        q[i] = rng_float();
                    const float scale = 1.0f / sqrtf((float)hd);
                    for (int32_t g = 0; g < group; g++) { /* the definition in double */
                        double w[MAX_KEYS], mx = -INFINITY, sum = 0.0;
                        for (uint32_t p = first_key; p < n_keys; p++) {
                            double d = 0.0;
                            for (int32_t i = 0; i < hd; i++)
                                d += (double)q[g * hd + i] * kf[p * hd + i];
                            w[p] = d * scale;
                            mx = w[p] > mx ? w[p] : mx;
                        }
                        for (uint32_t p = first_key; p < n_keys; p++)
                            sum += w[p] = exp(w[p] - mx);
                        for (int32_t i = 0; i < hd; i++) {
                            double o = 0.0;
                            for (uint32_t p = first_key; p < n_keys; p++)
                                o += w[p] * vf[p * hd + i];
                            want[g * hd + i] = (float)(o / sum);
                        }
                    }
                    for (int k = 0; k < n_tiers; k++) {
                        const syn_attn_args a = {.head_dim = hd,
                                                 .n_head_kv = N_HEAD_KV,
                                                 .kv_head = KV_HEAD,
                                                 .group = group,
                                                 .n_keys = n_keys,
                                                 .first_key = first_key,
                                                 .f16 = f16,
                                                 .scale = scale,
                                                 .blocks = block_ptrs,
                                                 .layer_off = LAYER_OFF,
                                                 .q = q,
                                                 .out = got,
                                                 .scratch = scratch};
                        tiers[k].attention(&a);
                        const char *name = syn_isa_tier_name(tiers[k].isa);
                        if (k == 0) memcpy(first, got, sizeof(float) * (size_t)(group * hd));
                        if (memcmp(got, first, sizeof(float) * (size_t)(group * hd)) != 0)
                            fail_msg("%s attention (hd %d, group %d, keys %u..%u, %s): not %s's "
                                     "bits",
                                     name, hd, group, first_key, n_keys, f16 ? "f16" : "f32",
                                     syn_isa_tier_name(tiers[0].isa));
                        for (int i = 0; i < group * hd; i++)
                            if (fabsf(got[i] - want[i]) > 1e-5f)
                                fail_msg("%s attention (hd %d, group %d, keys %u..%u, %s): out[%d] "
                                         "%.8f, softmax in double %.8f",
                                         name, hd, group, first_key, n_keys, f16 ? "f16" : "f32", i,
                                         got[i], want[i]);
                    }
                    n_cases++;
                }
        }
    free(blocks);
    free(kf);
    free(vf);
    free(scratch);
    printf("  attention: %d shapes, %d tiers bitwise equal, within 1e-5 of double\n", n_cases,
           n_tiers);
}

/* Every tier's GEGLU equals syn_gelu_fp16(g) * u bitwise: every binary16 value, the midpoints
 * between neighbours (ties to even), float32 subnormals, the +-10 edges, infinities and NaN, and
 * lengths that leave a tail. */
static void test_geglu_tiers(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    enum { N = 2 * 65536 + 16 };
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N),
          *got = malloc(sizeof(float) * N), *want = malloc(sizeof(float) * N);
    assert_non_null(g);
    assert_non_null(u);
    assert_non_null(got);
    assert_non_null(want);
    for (uint32_t h = 0; h < 65536; h++) {
        g[2 * h] = syn_k_fp16_to_f32((uint16_t)h);
        /* halfway to the next binary16 value up in magnitude (13 dropped bits: 0x1000) */
        g[2 * h + 1] = syn_k_bits_f32(syn_k_f32_bits(g[2 * h]) + 0x1000u);
    }
    const float edges[16] = {-10.0f, 10.0f,  -9.99f,  9.99f,  -10.01f, 10.01f, INFINITY, -INFINITY,
                             NAN,    1e-40f, -1e-40f, 1e-38f, 0.0f,    -0.0f,  3.0e-5f,  65519.0f};
    memcpy(g + 2 * 65536, edges, sizeof edges);
    for (int i = 0; i < N; i++)
        u[i] = (float)(int32_t)(rng_next() % 2001u - 1000) / 250.0f;
    for (int i = 0; i < N; i++)
        want[i] = syn_gelu_fp16(g[i]) * u[i];
    const int64_t lengths[] = {N, 13};
    for (int k = 0; k < n_tiers; k++)
        for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
            memcpy(got, g, sizeof(float) * N);
            tiers[k].geglu(got, u, lengths[l], syn_gelu_fp16_table());
            for (int64_t i = 0; i < lengths[l]; i++)
                if (syn_k_f32_bits(got[i]) != syn_k_f32_bits(want[i]))
                    fail_msg("%s geglu of %a (x %a): %a, want %a", syn_isa_tier_name(tiers[k].isa),
                             (double)g[i], (double)u[i], (double)got[i], (double)want[i]);
        }
    printf("  geglu: %d tiers equal gelu.h's function bitwise\n", n_tiers);
    free(g);
    free(u);
    free(got);
    free(want);
}

/* Every tier's delta-net convolution gives the same bits (state and outputs) over channel counts
 * through its wide lanes, 8 lanes and single-lane tail, and lies within 1e-6 (relative) of silu
 * computed with expf. */
static void test_dn_conv_tiers(void **state) {
    (void)state;
    syn_kernels tiers[SYN_TIER_COUNT];
    const int n_tiers = available_tiers(tiers);
    enum { K = 4, MAX_C = 61, STEPS = 3 };
    const int64_t widths[] = {61, 8, 3};
    float w[K * MAX_C], s0[(K - 1) * MAX_C], x0[STEPS][MAX_C];
    float s_first[(K - 1) * MAX_C], x_first[STEPS][MAX_C], s_got[(K - 1) * MAX_C],
        x_got[STEPS][MAX_C];
    for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
        const int64_t C = widths[wi];
        for (int i = 0; i < K * C; i++)
            w[i] = (float)(int32_t)(rng_next() % 2001u - 1000) / 700.0f;
        for (int i = 0; i < (K - 1) * C; i++)
            s0[i] = (float)(int32_t)(rng_next() % 2001u - 1000) / 300.0f;
        for (int t = 0; t < STEPS; t++)
            for (int c = 0; c < C; c++)
                x0[t][c] = (float)(int32_t)(rng_next() % 2001u - 1000) / 300.0f;
        for (int k = 0; k < n_tiers; k++) {
            float *sv = k == 0 ? s_first : s_got;
            float(*xv)[MAX_C] = k == 0 ? x_first : x_got;
            memcpy(sv, s0, sizeof s0);
            memcpy(xv, x0, sizeof x0);
            for (int t = 0; t < STEPS; t++)
                tiers[k].dn_conv(xv[t], sv, w, K, (size_t)C, C);
            if (k == 0) { /* the first tier against the definition in double and expf */
                double hist[K + STEPS][MAX_C];
                for (int j = 0; j < K - 1; j++)
                    for (int c = 0; c < C; c++)
                        hist[j][c] = s0[(size_t)j * (size_t)C + (size_t)c];
                for (int t = 0; t < STEPS; t++)
                    for (int c = 0; c < C; c++) {
                        hist[K - 1 + t][c] = x0[t][c];
                        double acc = 0.0;
                        for (int j = 0; j < K; j++)
                            acc += (double)w[(size_t)j * (size_t)C + (size_t)c] * hist[t + j][c];
                        const double want = acc / (1.0 + exp(-acc));
                        if (fabs(xv[t][c] - want) > 1e-6 * (1.0 + fabs(want)))
                            fail_msg("dn_conv channel %d step %d: %g, want %g", c, t,
                                     (double)xv[t][c], want);
                    }
                continue;
            }
            if (memcmp(s_got, s_first, sizeof(float) * (size_t)((K - 1) * C)) != 0)
                fail_msg("%s dn_conv state, %lld channels: not %s's bits",
                         syn_isa_tier_name(tiers[k].isa), (long long)C,
                         syn_isa_tier_name(tiers[0].isa));
            for (int t = 0; t < STEPS; t++)
                if (memcmp(x_got[t], x_first[t], sizeof(float) * (size_t)C) != 0)
                    fail_msg("%s dn_conv output, %lld channels: not %s's bits",
                             syn_isa_tier_name(tiers[k].isa), (long long)C,
                             syn_isa_tier_name(tiers[0].isa));
        }
    }
    printf("  dn_conv: %d tiers give the same bits\n", n_tiers);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_kernels),
        cmocka_unit_test(test_small_code_extremes),
        cmocka_unit_test(test_block_dots_exact),
        cmocka_unit_test(test_scalar_within_tolerance_of_double),
        cmocka_unit_test(test_tiers_bitwise_equal_scalar),
        cmocka_unit_test(test_long_rows_and_many_tokens),
        cmocka_unit_test(test_matmul_matches_matvec_across_edges),
        cmocka_unit_test(test_x16_layout),
        cmocka_unit_test(test_isa_names_and_selection),
        cmocka_unit_test(test_delta_rule_tiers),
        cmocka_unit_test(test_attention_tiers),
        cmocka_unit_test(test_geglu_tiers),
        cmocka_unit_test(test_dn_conv_tiers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
