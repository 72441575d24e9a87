/* quants_x86.h: the x86 kernel drivers shared by the tier files (quants_avx2.c, quants_avx512.c,
 * quants_avxvnni.c). Everything is static inline so each file compiles it with its own ISA flags;
 * a tier passes its block-dot (or VPDPBUSD) function, which the always_inline drivers inline.
 * Every driver keeps kernels.h's per-output float sequence, so all tiers agree bitwise. */
#ifndef SYN_KERNELS_QUANTS_X86_H
#define SYN_KERNELS_QUANTS_X86_H

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "kernels/kernels_impl.h"

SYN_K_INLINE __m256i x86_load_qs(const block_q8_0 *b) {
    return _mm256_loadu_si256((const __m256i *)b->qs);
}

SYN_K_INLINE float x86_fp16_f32(uint16_t h) { return _cvtsh_ss(h); }

/* [sum(d0), sum(d1), sum(d2), sum(d3)] of four 8-lane vectors. */
SYN_K_INLINE __m128i x86_reduce4(const __m256i d[4]) {
    const __m256i h =
        _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* [sum(d0), ..., sum(d7)] of eight 8-lane vectors. A transpose-add tree built from blends (any
 * vector pipe) and one in-lane shuffle per step: 7 shuffles instead of the 14 of a hadd tree, as
 * shuffles are what this reduction is short of on Zen 4 (2 shuffle pipes of 4). Integer adds are
 * exact, so the tree's order does not matter. */
SYN_K_INLINE __m256i x86_reduce8(const __m256i d[8]) {
    __m256i x[4], z[2];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) { /* lane 2k: d[2i] lanes 2k+2k+1; lane 2k+1: the same of d[2i+1] */
        const __m256i t = _mm256_blend_epi32(d[2 * i], d[2 * i + 1], 0xAA);
        const __m256i u = _mm256_blend_epi32(d[2 * i], d[2 * i + 1], 0x55);
        x[i] = _mm256_add_epi32(t, _mm256_shuffle_epi32(u, 0xB1));
    }
    SYN_K_UNROLL(2)
    for (int i = 0; i < 2; i++) { /* each 128-bit half: [sum a, sum b, sum c, sum d] of its lanes */
        const __m256i t = _mm256_blend_epi32(x[2 * i], x[2 * i + 1], 0xCC);
        const __m256i u = _mm256_blend_epi32(x[2 * i + 1], x[2 * i], 0xCC);
        z[i] = _mm256_add_epi32(t, _mm256_shuffle_epi32(u, 0x4E));
    }
    return _mm256_add_epi32(_mm256_blend_epi32(z[0], z[1], 0xF0),
                            _mm256_permute2x128_si256(z[0], z[1], 0x21));
}

typedef __m256i (*x86_reduce8_fn)(const __m256i d[8]);

/* x86_reduce8 for block dots whose int32 lanes are all within +-16383, as the unsigned 4- and 5-bit
 * codes' are (4 x 31 x 128 at most): lanes then pack to int16 without saturating, and a VPMADDWD by
 * ones adds neighbours, so each level of the tree is a pack and a multiply-add (sums of two lanes
 * still fit int16 for the second level). 15 instructions for 8 blocks where x86_reduce8 takes 27
 * (the same 7 shuffles; the blends and most adds go), and the same exact sums. */
SYN_K_INLINE __m256i x86_reduce8_small(const __m256i d[8]) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i x[4];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) { /* per 128-bit half: [d2i lanes 0+1, 2+3, d2i+1 lanes 0+1, 2+3] */
        x[i] = _mm256_madd_epi16(_mm256_packs_epi32(d[2 * i], d[2 * i + 1]), ones);
    }
    /* per 128-bit half, the half's sum of d0..d3 (z0) and of d4..d7 (z1) */
    const __m256i z0 = _mm256_madd_epi16(_mm256_packs_epi32(x[0], x[1]), ones);
    const __m256i z1 = _mm256_madd_epi16(_mm256_packs_epi32(x[2], x[3]), ones);
    return _mm256_add_epi32(_mm256_blend_epi32(z0, z1, 0xF0),
                            _mm256_permute2x128_si256(z0, z1, 0x21));
}

/* The fp16 scales of blocks b..b+7 of one row, as floats. */
SYN_K_INLINE __m256 x86_scales8(const block_q8_0 *x, int64_t b) {
    const __m128i h =
        _mm_setr_epi16((short)x[b].d, (short)x[b + 1].d, (short)x[b + 2].d, (short)x[b + 3].d,
                       (short)x[b + 4].d, (short)x[b + 5].d, (short)x[b + 6].d, (short)x[b + 7].d);
    return _mm256_cvtph_ps(h);
}

/* The fp16 scales of block b of four rows (or tokens), as floats. */
SYN_K_INLINE __m128 x86_scales4(const block_q8_0 *const x[4], int64_t b) {
    return _mm_cvtph_ps(_mm_setr_epi16((short)x[0][b].d, (short)x[1][b].d, (short)x[2][b].d,
                                       (short)x[3][b].d, 0, 0, 0, 0));
}

/* 8 int32 partial sums of the products of one weight block w and one activation block a; c is
 * prep(a), computed once per activation block (a tier's offset correction, or unused). */
typedef __m256i (*x86_dot_block_fn)(__m256i w, __m256i a, __m256i c);
typedef __m256i (*x86_act_prep_fn)(__m256i a);

SYN_K_INLINE __m256i x86_dot1(const block_q8_0 *w, const block_q8_0 *a, x86_act_prep_fn prep,
                              x86_dot_block_fn dot) {
    const __m256i av = x86_load_qs(a);
    return dot(x86_load_qs(w), av, prep(av));
}

/* One row's dot in kernels.h's order (the single-row vec_dot). Int sums and products of 8 (then
 * 4) blocks are computed as vectors, then added to the accumulator one block at a time, in order.
 */
SYN_K_INLINE float x86_row_dot(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a,
                               x86_act_prep_fn prep, x86_dot_block_fn dot) {
    float acc = 0.0f;
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
        __m256i d[8];
        SYN_K_UNROLL(8)
        for (int i = 0; i < 8; i++)
            d[i] = x86_dot1(&w[b + i], &a[b + i], prep, dot);
        const __m256 isum = _mm256_cvtepi32_ps(x86_reduce8(d));
        const __m256 s = _mm256_mul_ps(x86_scales8(w, b), x86_scales8(a, b));
        float p[8];
        _mm256_storeu_ps(p, _mm256_mul_ps(isum, s));
        SYN_K_UNROLL(8)
        for (int i = 0; i < 8; i++)
            acc += p[i];
    }
    if (b + 4 <= n_blocks) {
        __m256i d[4];
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++)
            d[i] = x86_dot1(&w[b + i], &a[b + i], prep, dot);
        const block_q8_0 *wb[4] = {&w[b], &w[b + 1], &w[b + 2], &w[b + 3]};
        const block_q8_0 *ab[4] = {&a[b], &a[b + 1], &a[b + 2], &a[b + 3]};
        const __m128 s = _mm_mul_ps(x86_scales4(wb, 0), x86_scales4(ab, 0));
        float p[4];
        _mm_storeu_ps(p, _mm_mul_ps(_mm_cvtepi32_ps(x86_reduce4(d)), s));
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++)
            acc += p[i];
        b += 4;
    }
    for (; b < n_blocks; b++) {
        const __m256i d = x86_dot1(&w[b], &a[b], prep, dot);
        const __m128i d4 = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
        const __m128i d2 = _mm_hadd_epi32(d4, d4);
        const int32_t isum = _mm_cvtsi128_si32(_mm_hadd_epi32(d2, d2));
        const float s = x86_fp16_f32(w[b].d) * x86_fp16_f32(a[b].d);
        const float p = (float)isum * s;
        acc += p;
    }
    return acc;
}

/* Stores lanes [0, n) of v to y (n <= 8): tiles at a row-range edge keep their clamped lanes out.
 */
SYN_K_INLINE void x86_store_lanes(float *y, __m256 v, int64_t n) {
    if (n >= 8) {
        _mm256_storeu_ps(y, v);
    } else if (n > 0) {
        float tmp[8];
        _mm256_storeu_ps(tmp, v);
        memcpy(y, tmp, sizeof(float) * (size_t)n);
    }
}

/* Loads lanes [0, n) of y (n <= 8), zero elsewhere. */
SYN_K_INLINE __m256 x86_load_lanes(const float *y, int64_t n) {
    if (n >= 8) return _mm256_loadu_ps(y);
    float tmp[8] = {0};
    if (n > 0) memcpy(tmp, y, sizeof(float) * (size_t)n);
    return _mm256_loadu_ps(tmp);
}

/* ---- Matvec (decode) ------------------------------------------------------------------------ */
enum { X86_MV_SPAN = 256 }; /* blocks per pass over a row (bounds the stack buffers) */

/* The activation as matvec reads it, prepared once per call (or span): qs copied to aligned
 * 32-byte slots (no cache-line-split loads), f32 scales, and each block's whole int32 correction
 * (the lane sum of prep(a): -128 * sum(a) for the VNNI tiers, 0 for AVX2), which is added once per
 * 8 block sums instead of seeding every block's dot. */
typedef struct x86_mv_act {
    __m256i qs[X86_MV_SPAN];
    int32_t corr[X86_MV_SPAN];
    float d[X86_MV_SPAN];
} x86_mv_act;

SYN_K_INLINE int32_t x86_hsum8(__m256i d) {
    const __m128i d4 = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
    const __m128i d2 = _mm_add_epi32(d4, _mm_unpackhi_epi64(d4, d4));
    return _mm_cvtsi128_si32(_mm_add_epi32(d2, _mm_shuffle_epi32(d2, 1)));
}

/* Blocks [0, n) of a (n <= X86_MV_SPAN). */
SYN_K_INLINE void x86_act_prepare(int64_t n, const block_q8_0 *a, x86_mv_act *act,
                                  x86_act_prep_fn prep) {
    for (int64_t b = 0; b < n; b++) {
        const __m256i q = x86_load_qs(&a[b]);
        act->qs[b] = q;
        act->corr[b] = x86_hsum8(prep(q));
        act->d[b] = x86_fp16_f32(a[b].d);
    }
}

/* A weight block's 32 codes, from the block's first byte: Q8_0's signed qs (x86_codes_q8_0), or the
 * 4- and 5-bit types' unsigned q (x86_ucodes_*; kernels.h's codes are q - 8 / q - 16 for Q4_0 /
 * Q5_0, the bias going into the sums' correction). Every such type keeps its fp16 d in its first
 * two bytes. */
typedef __m256i (*x86_codes_fn)(const char *block);

SYN_K_INLINE __m256i x86_codes_q8_0(const char *block) {
    return _mm256_loadu_si256((const __m256i *)(block + offsetof(block_q8_0, qs)));
}

/* How the lane matmul reads a weight type: blocks bb bytes apart, fp16 d in their first two bytes,
 * 32 codes from codes(); offset: the codes are signed (Q8_0) and get +128 to be unsigned for
 * VPDPBUSD; bias: the int32 sums then start from -bias * sum(a), which makes them exactly
 * kernels.h's sum of (code - bias or the signed code) * a (Q8_0: 128, Q4_0: 8, Q5_0: 16, Q4_1 /
 * Q5_1: 0). */
typedef struct x86_wblocks {
    size_t bb;
    x86_codes_fn codes;
    bool offset;
    int32_t bias;
} x86_wblocks;

#define X86_WB_Q8_0 ((x86_wblocks){sizeof(block_q8_0), x86_codes_q8_0, true, 128})

/* The 32 4-bit codes of a Q4_0 / Q4_1 / Q5_* block's qs: low nibbles are elements 0..15, high
 * 16..31 (qs in both 128-bit halves, the upper shifted by 4). Built with GFNI (the files named
 * *_gfni_avx512.c), one VGF2P8AFFINEQB does the shift and the mask, the low half's qwords through
 * GF_LOW4 and the high half's through GF_HIGH4. */
/* GF2P8AFFINEQB bit matrices (one per qword of the matrix operand): output bit j of a byte is the
 * parity of the byte AND matrix byte 7 - j, so a matrix whose byte 7 - j is 1 << i moves bit i to
 * j. */
#define GF_MOVE(from, to) ((long long)((1ull << (from)) << (8 * (7 - (to)))))
#define GF_LOW4 (GF_MOVE(0, 0) | GF_MOVE(1, 1) | GF_MOVE(2, 2) | GF_MOVE(3, 3))  /* x & 15 */
#define GF_HIGH4 (GF_MOVE(4, 0) | GF_MOVE(5, 1) | GF_MOVE(6, 2) | GF_MOVE(7, 3)) /* x >> 4 */
#define GF_BITS45(from) (GF_MOVE((from), 4) | GF_MOVE((from) + 1, 5)) /* ((x >> from) & 3) << 4 */

SYN_K_INLINE __m256i x86_nibbles(const uint8_t qs[16]) {
    const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
#if defined(__GFNI__)
    return _mm256_gf2p8affine_epi64_epi8(
        q, _mm256_setr_epi64x(GF_LOW4, GF_LOW4, GF_HIGH4, GF_HIGH4), 0);
#else
    return _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(0x0F));
#endif
}

/* x plus 16 where element i's fifth bit (bit i of qh) is set. With AVX-512 BW a mask register
 * does it; in AVX2, qh's byte i / 8 goes to byte i and every bit but bit i % 8 is set, so a byte
 * is all ones exactly where its bit was set. */
SYN_K_INLINE __m256i x86_add_fifth_bits(__m256i x, const uint8_t qh[4]) {
    uint32_t bits;
    memcpy(&bits, qh, sizeof bits);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    return _mm256_mask_add_epi8(x, (__mmask32)bits, x, _mm256_set1_epi8(16));
#else
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)bits),
        _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    const __m256i set = _mm256_cmpeq_epi8(
        _mm256_or_si256(spread, _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFELL)), _mm256_set1_epi8(-1));
    return _mm256_or_si256(x, _mm256_and_si256(set, _mm256_set1_epi8(16)));
#endif
}

/* Unsigned codes q (Q4_0: 0..15, Q5_0: 0..31); kernels.h's codes are q - 8 and q - 16. */
SYN_K_INLINE __m256i x86_ucodes_q4_0(const char *block) {
    return x86_nibbles(((const block_q4_0 *)block)->qs);
}

SYN_K_INLINE __m256i x86_ucodes_q5_0(const char *block) {
    const block_q5_0 *b = (const block_q5_0 *)block;
    return x86_add_fifth_bits(x86_nibbles(b->qs), b->qh);
}

/* Q4_1 / Q5_1: their codes are the unsigned q themselves. */
SYN_K_INLINE __m256i x86_ucodes_q4_1(const char *block) {
    return x86_nibbles(((const block_q4_1 *)block)->qs);
}

SYN_K_INLINE __m256i x86_ucodes_q5_1(const char *block) {
    const block_q5_1 *b = (const block_q5_1 *)block;
    return x86_add_fifth_bits(x86_nibbles(b->qs), b->qh);
}

SYN_K_INLINE __m256i x86_codes_q4_0(const char *block) {
    return _mm256_sub_epi8(x86_ucodes_q4_0(block), _mm256_set1_epi8(8));
}

SYN_K_INLINE __m256i x86_codes_q5_0(const char *block) {
    return _mm256_sub_epi8(x86_ucodes_q5_0(block), _mm256_set1_epi8(16));
}

/* Decode of Q4_0 / Q5_0 rows in a tier file: x86_matvec_codes over the unsigned codes, no buffer.
 * The tier's dot multiplies them unsigned (no sign or offset step) and prep_B(a) supplies the
 * -B * sum(a) that makes the block sum exactly kernels.h's sum of (q - B) * a. */
#define X86_MATVEC_CODES(T, tier, prep_B, dot_unsigned)                                            \
    void syn_matvec_##T##_##tier(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, float *y) {                          \
        x86_matvec_codes(n_blocks, w, w_row_bytes, r0, r1, act, y, prep_B, dot_unsigned,           \
                         sizeof(block_##T), x86_ucodes_##T, x86_reduce8_small);                    \
    }

/* The Q4_0, Q5_0, Q4_1 and Q5_1 matvecs of a tier whose dot_unsigned(u, a, c) adds u . a (u the
 * unsigned codes) per 4-byte group to c: prep_bias_B supplies each block's -B * sum(a) (Q4_0: 8,
 * Q5_0: 16; none for the offset types, whose m * s term comes after). */
#define X86_CODES_MATVECS(tier, dot_unsigned)                                                      \
    SYN_K_INLINE __m256i prep_bias8(__m256i a) {                                                   \
        return _mm256_sub_epi32(_mm256_setzero_si256(),                                            \
                                dot_unsigned(_mm256_set1_epi8(8), a, _mm256_setzero_si256()));     \
    }                                                                                              \
    SYN_K_INLINE __m256i prep_bias16(__m256i a) {                                                  \
        return _mm256_sub_epi32(_mm256_setzero_si256(),                                            \
                                dot_unsigned(_mm256_set1_epi8(16), a, _mm256_setzero_si256()));    \
    }                                                                                              \
    SYN_K_INLINE __m256i prep_zero(__m256i a) {                                                    \
        (void)a;                                                                                   \
        return _mm256_setzero_si256();                                                             \
    }                                                                                              \
    X86_MATVEC_CODES(q4_0, tier, prep_bias8, dot_unsigned)                                         \
    X86_MATVEC_CODES(q5_0, tier, prep_bias16, dot_unsigned)                                        \
    X86_MATVEC_CODES_MIN(q4_1, tier, prep_zero, dot_unsigned)                                      \
    X86_MATVEC_CODES_MIN(q5_1, tier, prep_zero, dot_unsigned)

/* The Q4_0, Q5_0, Q4_1 and Q5_1 matmuls of a VNNI tier: its lane kernels (x86_matmul_codes's
 * n_vec, n_tok, min_lanes and run) over the unsigned codes unpacked in registers as each tile is
 * transposed, the sums started from -8 or -16 * sum(a) (Q4_0, Q5_0) or from 0 with the m * s terms
 * added after (Q4_1, Q5_1: syn_k_add_min_terms): no unpacked copy of the rows. Expanded after
 * X86_CODES_MATVECS, whose prep_bias8 / prep_bias16 / prep_zero the few-token fallback takes. */
#define X86_CODES_MATMULS(tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)                    \
    X86_MATMUL_CODES(q4_0, 8, tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)                \
    X86_MATMUL_CODES(q5_0, 16, tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)               \
    X86_MATMUL_CODES_MIN(q4_1, tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)               \
    X86_MATMUL_CODES_MIN(q5_1, tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)
#define X86_MATMUL_CODES(T, B, tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)               \
    void syn_matmul_##T##_##tier(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, int64_t n_tokens, float *y,          \
                                 int64_t y_stride) {                                               \
        const x86_wblocks wb = {sizeof(block_##T), x86_ucodes_##T, false, B};                      \
        x86_matmul_codes(n_blocks, w, w_row_bytes, r0, r1, act, n_tokens, y, y_stride, wb, n_vec,  \
                         n_tok, min_lanes, dp, run, prep_bias##B, dot_unsigned,                    \
                         x86_reduce8_small);                                                       \
    }
/* Q4_1 / Q5_1 rows per pass (at most): the m * s terms follow each group's codes while its weights
 * and outputs are still in cache (all rows first, then the terms, was slower). */
enum { X86_MIN_GROUP_ROWS = 128 };

/* Rows too long for syn_k_add_min_terms's buffers take the matvec (x86_matvec_codes_min) per token.
 */
#define X86_MATMUL_CODES_MIN(T, tier, dp, dot_unsigned, n_vec, n_tok, min_lanes, run)              \
    void syn_matmul_##T##_##tier(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, int64_t n_tokens, float *y,          \
                                 int64_t y_stride) {                                               \
        const syn_act_q8_1 *a1 = act;                                                              \
        const size_t bb = sizeof(block_##T);                                                       \
        int64_t group = n_blocks > 0 ? SYN_K_MIN_TERMS_MAX / n_blocks : X86_MIN_GROUP_ROWS;        \
        if (group > X86_MIN_GROUP_ROWS) group = X86_MIN_GROUP_ROWS;                                \
        if (group > 16) group -= group % 16; /* whole 16-row tiles */                              \
        if (group < 1) {                                                                           \
            for (int64_t t = 0; t < n_tokens; t++) {                                               \
                const syn_act_q8_1 at = {a1->q + t * n_blocks, a1->s + t * n_blocks};              \
                x86_matvec_codes_min(n_blocks, w, w_row_bytes, r0, r1, &at, y + t * y_stride,      \
                                     prep_zero, dot_unsigned, bb, x86_ucodes_##T);                 \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        const x86_wblocks wb = {bb, x86_ucodes_##T, false, 0};                                     \
        float m[SYN_K_MIN_TERMS_MAX];                                                              \
        for (int64_t g0 = r0; g0 < r1; g0 += group) {                                              \
            const int64_t g1 = g0 + group < r1 ? g0 + group : r1;                                  \
            x86_matmul_codes(n_blocks, w, w_row_bytes, g0, g1, a1->q, n_tokens, y, y_stride, wb,   \
                             n_vec, n_tok, min_lanes, dp, run, prep_zero, dot_unsigned,            \
                             x86_reduce8_small);                                                   \
            for (int64_t r = g0; r < g1; r++)                                                      \
                x86_row_mins((const char *)w + (size_t)r * w_row_bytes, bb, n_blocks,              \
                             m + (r - g0) * n_blocks);                                             \
            syn_k_add_min_terms(n_blocks, m, g1 - g0, a1->s, n_tokens, y + g0, y_stride);          \
        }                                                                                          \
    }

/* f32(d) of the blocks at p, p + bb, ..., 8 (or 4) of them. */
SYN_K_INLINE short x86_d_at(const char *p) {
    short h;
    memcpy(&h, p, sizeof h);
    return h;
}

/* The 4 fp16 d of blocks p, p + bb, ..., p + 3 bb as one 64-bit word, assembled with integer shifts
 * and ors rather than VPINSRWs: the vector shuffle pipes are the matvec's bottleneck, and the
 * integer ALUs are idle there. */
SYN_K_INLINE uint64_t x86_d4_at(const char *p, size_t bb) {
    uint64_t h = 0;
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++)
        h |= (uint64_t)(uint16_t)x86_d_at(p + (size_t)i * bb) << (16 * i);
    return h;
}

SYN_K_INLINE __m256 x86_scales8_at(const char *p, size_t bb) {
    const __m128i h = _mm_insert_epi64(_mm_cvtsi64_si128((long long)x86_d4_at(p, bb)),
                                       (long long)x86_d4_at(p + 4 * bb, bb), 1);
    return _mm256_cvtph_ps(h);
}

SYN_K_INLINE __m128 x86_scales4_at(const char *p, size_t bb) {
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)x86_d4_at(p, bb)));
}

/* f32(m) of row r's blocks [0, n_blocks), m 2 bytes after the start of each bb-byte block: 8 at a
 * time through F16C. */
SYN_K_INLINE void x86_row_mins(const char *row, size_t bb, int64_t n_blocks, float *m) {
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8)
        _mm256_storeu_ps(m + b, x86_scales8_at(row + (size_t)b * bb + 2, bb));
    for (; b < n_blocks; b++)
        m[b] = x86_fp16_f32((uint16_t)x86_d_at(row + (size_t)b * bb + 2));
}

/* p[k] = (float)isum_k * (f32(w[k].d) * f32(a[k].d)) for k < n_blocks: the products kernels.h's
 * sequence adds, computed 8 blocks at a time with one reduction tree per 8 blocks. w: the row's
 * first block, blocks bb bytes apart, read by codes. The tier's dot gets a zero correction; act's
 * whole-block corrections are added to the tree's sums. */
SYN_K_INLINE void x86_row_products(int64_t n_blocks, const char *w, size_t bb,
                                   const x86_mv_act *act, int64_t b0, float *p,
                                   x86_dot_block_fn dot, x86_codes_fn codes,
                                   x86_reduce8_fn reduce8) {
    const __m256i zero = _mm256_setzero_si256();
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
        __m256i d[8];
        SYN_K_UNROLL(8)
        for (int i = 0; i < 8; i++)
            d[i] = dot(codes(w + (size_t)(b + i) * bb), act->qs[b0 + b + i], zero);
        const __m256i isum =
            _mm256_add_epi32(reduce8(d), _mm256_loadu_si256((const __m256i *)(act->corr + b0 + b)));
        const __m256 s =
            _mm256_mul_ps(x86_scales8_at(w + (size_t)b * bb, bb), _mm256_loadu_ps(act->d + b0 + b));
        _mm256_storeu_ps(p + b, _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s));
    }
    if (b + 4 <= n_blocks) {
        __m256i d[4];
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++)
            d[i] = dot(codes(w + (size_t)(b + i) * bb), act->qs[b0 + b + i], zero);
        const __m128i isum =
            _mm_add_epi32(x86_reduce4(d), _mm_loadu_si128((const __m128i *)(act->corr + b0 + b)));
        const __m128 s =
            _mm_mul_ps(x86_scales4_at(w + (size_t)b * bb, bb), _mm_loadu_ps(act->d + b0 + b));
        _mm_storeu_ps(p + b, _mm_mul_ps(_mm_cvtepi32_ps(isum), s));
        b += 4;
    }
    for (; b < n_blocks; b++) {
        const char *blk = w + (size_t)b * bb;
        const int32_t isum = x86_hsum8(dot(codes(blk), act->qs[b0 + b], zero)) + act->corr[b0 + b];
        uint16_t h;
        memcpy(&h, blk, sizeof h);
        const float s = x86_fp16_f32(h) * act->d[b0 + b];
        p[b] = (float)isum * s;
    }
}

/* acc + p[k0] + ... + p[k1 - 1], added in order: a piece of one row's kernels.h sum. */
SYN_K_INLINE float x86_chain(float acc, const float *p, int64_t k0, int64_t k1) {
    for (int64_t k = k0; k < k1; k++)
        acc += p[k];
    return acc;
}

/* Decode over rows [r0, r1). Memory is read as one sequential stream, row after row, front to
 * back: the hardware prefetcher streams that fastest (rows read side by side, i.e. several
 * streams, ran much slower). No software prefetch: with the weights in 2 MiB pages it slowed
 * decode, and with 4 KiB pages it bought nothing (docs/BENCHMARKS.md). A row's block products go to
 * a buffer 8 blocks at a time; its kernels.h sum, a chain of dependent adds, runs while the next
 * row's products are computed, so neither the stream nor the vector units wait on add latency. */
SYN_K_INLINE void x86_matvec_codes(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                   int64_t r1, const block_q8_0 *a, float *y, x86_act_prep_fn prep,
                                   x86_dot_block_fn dot, size_t bb, x86_codes_fn codes,
                                   x86_reduce8_fn reduce8) {
    x86_mv_act act;
    if (n_blocks > X86_MV_SPAN) {
        /* Rows too long for the buffers: span by span, each row's sum right after its products. */
        float p[X86_MV_SPAN];
        for (int64_t r = r0; r < r1; r++) {
            float acc = 0.0f;
            for (int64_t b0 = 0; b0 < n_blocks; b0 += X86_MV_SPAN) {
                const int64_t kb = n_blocks - b0 < X86_MV_SPAN ? n_blocks - b0 : X86_MV_SPAN;
                x86_act_prepare(kb, a + b0, &act, prep);
                x86_row_products(kb, (const char *)w + (size_t)r * w_row_bytes + (size_t)b0 * bb,
                                 bb, &act, 0, p, dot, codes, reduce8);
                acc = x86_chain(acc, p, 0, kb);
            }
            y[r] = acc;
        }
        return;
    }
    x86_act_prepare(n_blocks, a, &act, prep);
    float p[2][X86_MV_SPAN]; /* products of the previous row and of this one, alternately */
    for (int64_t r = r0; r < r1; r++) {
        const float *pp = p[(r - r0 + 1) & 1];
        float *pc = p[(r - r0) & 1];
        const char *wr = (const char *)w + (size_t)r * w_row_bytes;
        float prev_acc = 0.0f;
        int64_t b = 0;
        for (; b + 8 <= n_blocks; b += 8) {
            x86_row_products(8, wr + (size_t)b * bb, bb, &act, b, pc + b, dot, codes, reduce8);
            if (r > r0) prev_acc = x86_chain(prev_acc, pp, b, b + 8);
        }
        x86_row_products(n_blocks - b, wr + (size_t)b * bb, bb, &act, b, pc + b, dot, codes,
                         reduce8);
        if (r > r0) y[r - 1] = x86_chain(prev_acc, pp, b, n_blocks);
    }
    if (r1 > r0) y[r1 - 1] = x86_chain(0.0f, p[(r1 - 1 - r0) & 1], 0, n_blocks);
}

/* Q8_0 decode: x86_matvec_codes over Q8_0 blocks. */
SYN_K_INLINE void x86_matvec(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                             int64_t r1, const block_q8_0 *a, float *y, x86_act_prep_fn prep,
                             x86_dot_block_fn dot) {
    x86_matvec_codes(n_blocks, w, w_row_bytes, r0, r1, a, y, prep, dot, sizeof(block_q8_0),
                     x86_codes_q8_0, x86_reduce8);
}

/* Q4_1 / Q5_1 rows [r0, r1): y[r] = acc_d + acc_m (kernels.h), acc_d by x86_matvec_codes over the
 * unsigned codes (prep_zero: no correction), then acc_m = sum_b f32(m[b]) * f32(s[b]) in order. */
SYN_K_INLINE void x86_matvec_codes_min(int64_t n_blocks, const void *w, size_t w_row_bytes,
                                       int64_t r0, int64_t r1, const syn_act_q8_1 *a, float *y,
                                       x86_act_prep_fn prep_zero, x86_dot_block_fn dot_unsigned,
                                       size_t bb, x86_codes_fn codes) {
    x86_matvec_codes(n_blocks, w, w_row_bytes, r0, r1, a->q, y, prep_zero, dot_unsigned, bb, codes,
                     x86_reduce8_small);
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)w + (size_t)r * w_row_bytes;
        float acc = 0.0f;
        for (int64_t b = 0; b < n_blocks; b++) {
            uint16_t m;
            memcpy(&m, row + (size_t)b * bb + 2, sizeof m); /* after d in both types */
            const float p = x86_fp16_f32(m) * x86_fp16_f32(a->s[b]);
            acc += p;
        }
        y[r] = y[r] + acc;
    }
}

#define X86_MATVEC_CODES_MIN(T, tier, prep_zero, dot_unsigned)                                     \
    void syn_matvec_##T##_##tier(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, float *y) {                          \
        x86_matvec_codes_min(n_blocks, w, w_row_bytes, r0, r1, act, y, prep_zero, dot_unsigned,    \
                             sizeof(block_##T), x86_ucodes_##T);                                   \
    }

/* ---- Matmul with lanes = rows (VNNI tiers) -------------------------------------------------
 * VPDPBUSD sums 4 u8 x s8 products per int32 lane. A tile's weights are transposed so that lane
 * i of vector j holds codes 4j..4j+3 of row i's block, unsigned (Q8_0's offset by +128, the 4- and
 * 5-bit types' as they are: x86_wblocks); each activation dword is broadcast. Eight VPDPBUSDs
 * then leave row i's whole-block int32 dot with token t in lane i, after starting from
 * -bias * sum(a) (exact): no horizontal sums at all, and each lane follows kernels.h's float
 * sequence. */
enum {
    X86_MM_KS = 32, /* most blocks per k-span (bounds the stack buffers; the sums continue in y) */
    X86_MM_LONG =
        64,          /* calls with this many tokens take the longest spans (see x86_matmul_lanes) */
    X86_MM_TC = 256, /* tokens per chunk */
};

typedef __m256i (*x86_dpbusd_fn)(__m256i acc, __m256i u8, __m256i s8);

#if defined(__AVX512VNNI__)
/* acc + VPDPBUSD(u8, the 4 signed bytes at s8 broadcast to every lane), with the broadcast as the
 * instruction's own memory operand ({1to16}): GCC 12 does not fold _mm512_set1_epi32 of a load
 * into VPDPBUSD and issues a separate VPBROADCASTD per dword, which held the lane kernels back. */
SYN_K_INLINE __m512i x86_dpbusd_bcast(__m512i acc, __m512i u8, const int8_t *s8) {
    __asm__("vpdpbusd %[s8]%{1to16%}, %[u8], %[acc]"
            : [acc] "+v"(acc)
            : [u8] "v"(u8), [s8] "m"(*(const int8_t(*)[4])s8));
    return acc;
}

/* The decode loop of the x16 layouts (kernels.h), for every type: groups [g0, g1) of n_blocks
 * blocks each, one loop over all their (group, block) pairs in storage order with no loop end
 * between groups: step(ctx, acc, i, k) for pair i (block k of its group) updates the group's 16
 * sums (acc[0]; with mins, Q4_1's and Q5_1's acc_m in acc[1]), which are stored at y + 16g after
 * every block (the last store is the result: acc[0], or acc[0] + acc[1] with mins) and restarted
 * by a mask. A loop per group, whose exit every 28 blocks the CPU mispredicted, streamed 40 %
 * slower (docs/BENCHMARKS.md). */
typedef void (*x86_x16_step_fn)(const void *ctx, __m512 acc[2], int64_t i, int64_t k);

SYN_K_INLINE void x86_x16_decode(int64_t g0, int64_t g1, int64_t n_blocks, float *y,
                                 x86_x16_step_fn step, const void *ctx, const bool mins) {
    float *yg = y + g0 * SYN_X16_ROWS;
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    int64_t k = 0;
    const int64_t n = (g1 - g0) * n_blocks;
    for (int64_t i = 0; i < n; i++) {
        step(ctx, acc, i, k);
        _mm512_storeu_ps(yg, mins ? _mm512_add_ps(acc[0], acc[1]) : acc[0]);
        const int64_t last = k == n_blocks - 1; /* arithmetic, not a branch */
        acc[0] = _mm512_maskz_mov_ps((__mmask16)(last - 1), acc[0]);
        if (mins) acc[1] = _mm512_maskz_mov_ps((__mmask16)(last - 1), acc[1]);
        yg += SYN_X16_ROWS * last;
        k = (k + 1) * (1 - last);
    }
}
#endif

/* Per (token, block): the offset correction -128 * sum(qs) and f32(d). */
typedef struct x86_act_aux {
    int32_t corr;
    float d;
} x86_act_aux;

SYN_K_INLINE int32_t x86_block_sum(const block_q8_0 *b) {
    const __m256i u = _mm256_xor_si256(x86_load_qs(b), _mm256_set1_epi8((char)0x80)); /* qs + 128 */
    const __m256i s4 = _mm256_sad_epu8(u, _mm256_setzero_si256());
    const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(s4), _mm256_extracti128_si256(s4, 1));
    return (int32_t)_mm_cvtsi128_si64(_mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2))) - 128 * QK8_0;
}

SYN_K_INLINE int32_t x86_load_i32(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* out[j * stride] lane i = dword j of x[i] (+ 128 bytewise when offset: signed codes made unsigned
 * for VPDPBUSD): an 8 x 8 transpose of 32-bit elements. */
SYN_K_INLINE void x86_transpose8_u8(const __m256i x[8], __m256i *out, const int stride,
                                    const bool offset) {
    const __m256i bias = offset ? _mm256_set1_epi8((char)0x80) : _mm256_setzero_si256();
    __m256i t[8], u[8];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) {
        const __m256i e = _mm256_xor_si256(x[2 * i], bias),
                      o = _mm256_xor_si256(x[2 * i + 1], bias);
        t[2 * i] = _mm256_unpacklo_epi32(e, o);     /* rows 2i, 2i+1: dwords 0, 1 | 4, 5 */
        t[2 * i + 1] = _mm256_unpackhi_epi32(e, o); /* dwords 2, 3 | 6, 7 */
    }
    SYN_K_UNROLL(2)
    for (int h = 0; h < 2; h++) {
        u[4 * h + 0] =
            _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]); /* rows 4h..4h+3: dword 0 | 4 */
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);     /* dword 1 | 5 */
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]); /* dword 2 | 6 */
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]); /* dword 3 | 7 */
    }
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++) {
        out[j * stride] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
        out[(j + 4) * stride] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
    }
}

/* Accumulates blocks [0, kb) of a span into acc[v * n_tok + t] (lane i: row 8v + i, token t).
 * wp[(k * 8 + j) * n_vec + v]: the transposed weights (a 16-row tile's two vectors adjacent, one
 * 512-bit load for the AVX-512 tile); dwp[k * n_vec + v]: their scales;
 * a: token 0's first block of the span (tokens n_blocks apart); aux: likewise, KS apart. */
SYN_K_INLINE void x86_lane_tile(int64_t kb, const __m256i *wp, const __m256 *dwp,
                                const block_q8_0 *a, int64_t n_blocks, const x86_act_aux *aux,
                                __m256 *acc, const int n_vec, const int n_tok, x86_dpbusd_fn dp) {
    for (int64_t k = 0; k < kb; k++) {
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const int8_t *q = a[t * n_blocks + k].qs;
            const __m256i corr = _mm256_set1_epi32(aux[t * X86_MM_KS + k].corr);
            const __m256 da = _mm256_set1_ps(aux[t * X86_MM_KS + k].d);
            SYN_K_UNROLL(2)
            for (int v = 0; v < n_vec; v++) {
                const __m256i *wv = wp + k * 8 * n_vec + v;
                /* two chains of 4 VPDPBUSDs, for latency */
                __m256i half[2] = {corr, _mm256_setzero_si256()};
                SYN_K_UNROLL(8)
                for (int j = 0; j < 8; j++) {
                    half[j & 1] = dp(half[j & 1], _mm256_loadu_si256(wv + j * n_vec),
                                     _mm256_set1_epi32(x86_load_i32(q + 4 * j)));
                }
                const __m256i isum = _mm256_add_epi32(half[0], half[1]);
                const __m256 s =
                    _mm256_mul_ps(_mm256_loadu_ps((const float *)(dwp + k * n_vec + v)), da);
                const __m256 p = _mm256_mul_ps(_mm256_cvtepi32_ps(isum), s);
                acc[v * n_tok + t] = _mm256_add_ps(acc[v * n_tok + t], p);
            }
        }
    }
}

/* Runs x86_lane_tile for tokens [t0, t0 + n_tok) of a row tile: sums start at 0 in the first
 * span and continue from y in later ones. */
SYN_K_INLINE void x86_lane_tokens(int64_t kb, bool first_span, const __m256i *wp, const __m256 *dwp,
                                  const block_q8_0 *a, int64_t n_blocks, const x86_act_aux *aux,
                                  float *y, int64_t y_stride, int64_t n_rows, const int n_vec,
                                  const int n_tok, x86_dpbusd_fn dp) {
    __m256 acc[2 * 4];
    SYN_K_UNROLL(2)
    for (int v = 0; v < n_vec; v++) {
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            acc[v * n_tok + t] = first_span
                                     ? _mm256_setzero_ps()
                                     : x86_load_lanes(y + t * y_stride + 8 * v, n_rows - 8 * v);
        }
    }
    x86_lane_tile(kb, wp, dwp, a, n_blocks, aux, acc, n_vec, n_tok, dp);
    SYN_K_UNROLL(2)
    for (int v = 0; v < n_vec; v++) {
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            x86_store_lanes(y + t * y_stride + 8 * v, acc[v * n_tok + t], n_rows - 8 * v);
    }
}

/* The weights of rows [r, r + n) (clamped to r1 - 1), blocks [k0, k0 + kb): what the next row
 * tile's transposition reads, or part of its rows. */
typedef struct x86_tile_ref {
    const char *row0; /* row r's block k0 */
    int64_t n_rows, bytes;
    size_t row_bytes; /* from one row to the next */
} x86_tile_ref;

/* Prefetches line k of each row of *next (and, at the span's last block, each row's last byte):
 * spread over the kb iterations of the transposition (and of a tier's token loop, which takes
 * the next tile's rows past its first 8: x86_matmul_lanes), this fetches all of next's lines one
 * tile ahead (64 * kb >= 34 * kb bytes), so the weights stream from memory while this tile
 * computes instead of stalling its loads; the hardware prefetcher alone handles the 16 short
 * interleaved row streams poorly. Into L2 (T1): into L1 (T0, NTA) lost most of the gain
 * (docs/BENCHMARKS.md). */
SYN_K_INLINE void x86_prefetch_tile_line(const x86_tile_ref *next, int64_t k, int64_t kb) {
    if (!next->row0) return;
    for (int64_t i = 0; i < next->n_rows; i++) {
        const char *p = next->row0 + (size_t)i * next->row_bytes;
        if (64 * k < next->bytes) _mm_prefetch(p + 64 * k, _MM_HINT_T1);
        if (k == kb - 1) _mm_prefetch(p + next->bytes - 1, _MM_HINT_T1);
    }
}

/* The 8 consecutive rows whose block sits at p, rows s bytes apart: row i's block at p + i * s,
 * written with s, 3s, 5s and 7s as the only offsets, which x86 addressing scales to all eight, so
 * the loop keeps a few registers instead of eight row pointers (spilled, they cost a reload per
 * load and slowed the transposition). */
typedef struct x86_rows8 {
    size_t s, s3, s5, s7;
} x86_rows8;

SYN_K_INLINE x86_rows8 x86_rows8_of(size_t s) { return (x86_rows8){s, 3 * s, 5 * s, 7 * s}; }

SYN_K_INLINE const char *x86_rows8_at(const char *p, const x86_rows8 *o, int i) {
    switch (i) {
    case 0: return p;
    case 1: return p + o->s;
    case 2: return p + 2 * o->s;
    case 3: return p + o->s3;
    case 4: return p + 4 * o->s;
    case 5: return p + o->s5;
    case 6: return p + 2 * o->s3;
    default: return p + o->s7;
    }
}

SYN_K_INLINE uint16_t x86_load_u16(const char *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* Transposes the codes of 8 blocks (row i's at b[i]) into out[j * stride] and their scales into
 * *dw. */
SYN_K_INLINE void x86_transpose_blocks8(const char *const b[8], const x86_wblocks wb, __m256i *out,
                                        const int stride, __m256 *dw) {
    __m256i x[8];
    SYN_K_UNROLL(8)
    for (int i = 0; i < 8; i++)
        x[i] = wb.codes(b[i]);
    x86_transpose8_u8(x, out, stride, wb.offset);
    /* each scale inserted straight from memory (VPINSRW m16): built from words loaded into
     * general registers first, GCC ran short of them and bounced the words through mask registers
     */
    __m128i h = _mm_cvtsi32_si128(x86_load_u16(b[0]));
    h = _mm_insert_epi16(h, x86_load_u16(b[1]), 1);
    h = _mm_insert_epi16(h, x86_load_u16(b[2]), 2);
    h = _mm_insert_epi16(h, x86_load_u16(b[3]), 3);
    h = _mm_insert_epi16(h, x86_load_u16(b[4]), 4);
    h = _mm_insert_epi16(h, x86_load_u16(b[5]), 5);
    h = _mm_insert_epi16(h, x86_load_u16(b[6]), 6);
    h = _mm_insert_epi16(h, x86_load_u16(b[7]), 7);
    *dw = _mm256_cvtph_ps(h);
}

/* x86_transpose_blocks8 of the block at p of 8 rows (x86_rows8_at). */
SYN_K_INLINE void x86_transpose_rows8(const char *p, const x86_rows8 *o, const x86_wblocks wb,
                                      __m256i *out, const int stride, __m256 *dw) {
    const char *b[8];
    SYN_K_UNROLL(8)
    for (int i = 0; i < 8; i++)
        b[i] = x86_rows8_at(p, o, i);
    x86_transpose_blocks8(b, wb, out, stride, dw);
}

/* Transposes blocks [k0, k0 + kb) of rows [r, r + 8 * n_vec) (clamped to r1 - 1) into wp/dwp in
 * x86_lane_tile's layout, prefetching *next's weights on the way. */
SYN_K_INLINE void x86_transpose_tile(const void *w, size_t w_row_bytes, int64_t r, int64_t r1,
                                     int64_t k0, int64_t kb, const x86_tile_ref *next,
                                     const x86_wblocks wb, __m256i *wp, __m256 *dwp,
                                     const int n_vec) {
    if (r + 8 * n_vec <= r1 &&
        (!next->row0 || (next->n_rows % 8 == 0 && next->n_rows <= 8 * n_vec))) {
        /* whole tiles (all but a range's last): fixed row strides, prefetches of whole groups of 8
         * rows unrolled likewise */
        const int pf_vecs = (int)(next->n_rows / 8);
        const x86_rows8 o = x86_rows8_of(w_row_bytes);
        const char *p = (const char *)w + (size_t)r * w_row_bytes + (size_t)k0 * wb.bb;
        for (int64_t k = 0; k < kb; k++, p += wb.bb) {
            if (next->row0 && (64 * k < next->bytes || k == kb - 1)) {
                /* line k of each row, or at the span's last block each row's last byte */
                const char *q = next->row0 + (64 * k < next->bytes ? 64 * k : next->bytes - 1);
                SYN_K_UNROLL(2)
                for (int v = 0; v < pf_vecs; v++) {
                    SYN_K_UNROLL(8)
                    for (int i = 0; i < 8; i++)
                        _mm_prefetch(x86_rows8_at(q + (size_t)v * 8 * w_row_bytes, &o, i),
                                     _MM_HINT_T1);
                }
            }
            SYN_K_UNROLL(2)
            for (int v = 0; v < n_vec; v++) {
                x86_transpose_rows8(p + (size_t)v * 8 * w_row_bytes, &o, wb, wp + k * 8 * n_vec + v,
                                    n_vec, &dwp[k * n_vec + v]);
            }
        }
        return;
    }
    for (int v = 0; v < n_vec; v++) {
        /* block k0 of rows r + 8v .. + 7, rows past r1 - 1 clamped to it (lanes never stored) */
        const char *rows[8];
        for (int i = 0; i < 8; i++) {
            const int64_t ri = r + 8 * v + i < r1 ? r + 8 * v + i : r1 - 1;
            rows[i] = (const char *)w + (size_t)ri * w_row_bytes + (size_t)k0 * wb.bb;
        }
        for (int64_t k = 0; k < kb; k++) {
            if (v == 0) x86_prefetch_tile_line(next, k, kb);
            const char *b[8];
            SYN_K_UNROLL(8)
            for (int i = 0; i < 8; i++)
                b[i] = rows[i] + (size_t)k * wb.bb;
            x86_transpose_blocks8(b, wb, wp + k * 8 * n_vec + v, n_vec, &dwp[k * n_vec + v]);
        }
    }
}

/* Runs every token of a chunk against one transposed tile (x86_lane_all_tokens's arguments less
 * the tile shape): a tier's own token loop, e.g. AVX-512's 16-lane one. It prefetches *pf's lines
 * as it goes, x86_prefetch_tile_line(pf, k, kb) at block k (pf->row0 NULL: nothing to fetch). */
typedef void (*x86_lane_run_fn)(int64_t kb, bool first_span, const __m256i *wp, const __m256 *dwp,
                                const block_q8_0 *a, int64_t n_blocks, const x86_act_aux *aux,
                                int64_t nt, float *y, int64_t y_stride, int64_t n_rows,
                                const x86_tile_ref *pf);

/* Runs every token of a chunk against one transposed tile: token tiles of n_tok, then the
 * remaining 1 to n_tok - 1 tokens as one narrower tile (the same lane sequence, so the same bits).
 */
SYN_K_INLINE void x86_lane_all_tokens(int64_t kb, bool first_span, const __m256i *wp,
                                      const __m256 *dwp, const block_q8_0 *a, int64_t n_blocks,
                                      const x86_act_aux *aux, int64_t nt, float *y,
                                      int64_t y_stride, int64_t n_rows, const int n_vec,
                                      const int n_tok, x86_dpbusd_fn dp) {
    int64_t t = 0;
    for (; t + n_tok <= nt; t += n_tok) {
        x86_lane_tokens(kb, first_span, wp, dwp, a + t * n_blocks, n_blocks, aux + t * X86_MM_KS,
                        y + t * y_stride, y_stride, n_rows, n_vec, n_tok, dp);
    }
    const block_q8_0 *at = a + t * n_blocks;
    const x86_act_aux *xt = aux + t * X86_MM_KS;
    float *yt = y + t * y_stride;
    switch (nt - t) { /* n_tok <= 4 */
    case 1:
        x86_lane_tokens(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, n_vec, 1,
                        dp);
        break;
    case 2:
        x86_lane_tokens(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, n_vec, 2,
                        dp);
        break;
    case 3:
        x86_lane_tokens(kb, first_span, wp, dwp, at, n_blocks, xt, yt, y_stride, n_rows, n_vec, 3,
                        dp);
        break;
    default: break;
    }
}

/* The weights one (row tile, span) step transposes: rows [r, r + tile_rows) clamped to r1, blocks
 * [k0, k0 + ks) clamped to n_blocks; all NULL past the last step (what x86_prefetch_tile_line
 * takes as "nothing to prefetch"). */
SYN_K_INLINE x86_tile_ref x86_tile_at(const void *w, size_t w_row_bytes, int64_t r, int64_t r1,
                                      int64_t tile_rows, int64_t k0, int64_t ks, int64_t n_blocks,
                                      const x86_wblocks wb) {
    if (r >= r1 || k0 >= n_blocks) return (x86_tile_ref){0};
    const int64_t kb = n_blocks - k0 < ks ? n_blocks - k0 : ks;
    return (x86_tile_ref){(const char *)w + (size_t)r * w_row_bytes + (size_t)k0 * wb.bb,
                          r1 - r < tile_rows ? r1 - r : tile_rows, kb * (int64_t)wb.bb,
                          w_row_bytes};
}

/* aux[t * X86_MM_KS + k] for tokens [c0, c0 + nt) and blocks [k0, k0 + kb) of a. */
SYN_K_INLINE void x86_span_aux(const block_q8_0 *a, int64_t n_blocks, int64_t c0, int64_t nt,
                               int64_t k0, int64_t kb, int32_t bias, x86_act_aux *aux) {
    for (int64_t t = 0; t < nt; t++) {
        for (int64_t k = 0; k < kb; k++) {
            const block_q8_0 *blk = &a[(c0 + t) * n_blocks + k0 + k];
            aux[t * X86_MM_KS + k] =
                (x86_act_aux){-bias * x86_block_sum(blk), x86_fp16_f32(blk->d)};
        }
    }
}

/* The step order of a lane matmul's token chunk: (row tile, span) steps, each tile's weights
 * made ready once for every token of the chunk. When the activation's corrections of every span
 * fit aux at once (few tokens), a row tile's spans one after the other, which reads the weights
 * front to back as matvec does; otherwise (many tokens) span by span over all tiles, with that
 * span's corrections. Spans are of 32 blocks when a tile serves many tokens (an 896-wide row tile
 * is then one contiguous read), of 16 for a few tokens (where 32 are slower); aux keeps its
 * X86_MM_KS stride either way. */
typedef struct x86_lane_plan {
    int64_t ks, n_tiles, n_spans, n_blocks;
    int64_t c0, nt; /* the chunk's tokens */
    bool tiles_outer;
} x86_lane_plan;

SYN_K_INLINE x86_lane_plan x86_lane_plan_of(int64_t n_blocks, int64_t n_tiles, int64_t n_tokens,
                                            int64_t c0) {
    const int64_t ks = n_tokens >= X86_MM_LONG ? X86_MM_KS : X86_MM_KS / 2;
    const int64_t n_spans = (n_blocks + ks - 1) / ks;
    const int64_t nt = n_tokens - c0 < X86_MM_TC ? n_tokens - c0 : X86_MM_TC;
    return (x86_lane_plan){ks, n_tiles, n_spans, n_blocks, c0, nt, nt * n_spans <= X86_MM_TC};
}

/* Step s's row tile and span (s may be the step after the last: then *tile == n_tiles or
 * *k0 >= n_blocks), and the span's blocks [*k0, *k0 + *kb). */
SYN_K_INLINE void x86_plan_step(const x86_lane_plan *p, int64_t s, int64_t *tile, int64_t *k0,
                                int64_t *kb) {
    *tile = p->tiles_outer ? s / p->n_spans : s % p->n_tiles;
    const int64_t sp = p->tiles_outer ? s % p->n_spans : s / p->n_tiles;
    *k0 = sp * p->ks;
    *kb = p->n_blocks - *k0 < p->ks ? p->n_blocks - *k0 : p->ks;
}

/* One step of the plan as a driver runs it: its tile and span, the next step's (to prefetch),
 * and the corrections it reads. */
typedef struct x86_lane_step {
    int64_t tile, k0, kb;
    int64_t next_tile, next_k0, next_kb;
    const x86_act_aux *aux;
} x86_lane_step;

/* Step s of the plan, its corrections computed into aux where the plan needs them: all spans'
 * at the chunk's first step, or each span's at its first tile. */
SYN_K_INLINE x86_lane_step x86_plan_at(const x86_lane_plan *p, int64_t s, const block_q8_0 *a,
                                       int32_t bias, x86_act_aux *aux) {
    x86_lane_step st;
    x86_plan_step(p, s, &st.tile, &st.k0, &st.kb);
    x86_plan_step(p, s + 1, &st.next_tile, &st.next_k0, &st.next_kb);
    st.aux = aux;
    if (p->tiles_outer) {
        if (s == 0) {
            for (int64_t sp = 0; sp < p->n_spans; sp++) {
                const int64_t s0 = sp * p->ks,
                              n = p->n_blocks - s0 < p->ks ? p->n_blocks - s0 : p->ks;
                x86_span_aux(a, p->n_blocks, p->c0, p->nt, s0, n, bias,
                             aux + sp * p->nt * X86_MM_KS);
            }
        }
        st.aux = aux + st.k0 / p->ks * p->nt * X86_MM_KS;
    } else if (st.tile == 0) {
        x86_span_aux(a, p->n_blocks, p->c0, p->nt, st.k0, st.kb, bias, aux);
    }
    return st;
}

/* Matmul over rows [r0, r1) and n_tokens tokens in row tiles of 8 * n_vec rows and token tiles of
 * n_tok (n_vec <= 2, n_tok <= 4), or the tier's run for the token loop if not NULL, in
 * x86_lane_plan's step order. Each step transposes the tile's weights once for every token of the
 * chunk, and prefetches the weights of the step after it, so a call with few tokens, whose
 * compute per weight byte is small, still reads the weights at close to memory speed. */
SYN_K_INLINE void x86_matmul_lanes(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                   int64_t r1, const block_q8_0 *a, int64_t n_tokens, float *y,
                                   int64_t y_stride, const x86_wblocks wb, const int n_vec,
                                   const int n_tok, x86_dpbusd_fn dp, x86_lane_run_fn run) {
    x86_act_aux aux[X86_MM_TC * X86_MM_KS];
    __m256i wp[X86_MM_KS * 2 * 8];
    __m256 dwp[X86_MM_KS * 2];
    const int64_t tile_rows = 8 * n_vec, n_tiles = (r1 - r0 + tile_rows - 1) / tile_rows;
    for (int64_t c0 = 0; c0 < n_tokens; c0 += X86_MM_TC) {
        const x86_lane_plan plan = x86_lane_plan_of(n_blocks, n_tiles, n_tokens, c0);
        for (int64_t step = 0; step < n_tiles * plan.n_spans; step++) {
            const x86_lane_step st = x86_plan_at(&plan, step, a, wb.bias, aux);
            const int64_t r = r0 + st.tile * tile_rows, k0 = st.k0, kb = st.kb;
            const x86_act_aux *xa = st.aux;
            const x86_tile_ref next = x86_tile_at(w, w_row_bytes, r0 + st.next_tile * tile_rows, r1,
                                                  tile_rows, st.next_k0, plan.ks, n_blocks, wb);
            /* A tier's own token loop prefetches the next tile's rows past its first 8 (from its
             * first token tile), so that lines are asked for while the tokens run too, not only
             * while the tile is transposed (docs/BENCHMARKS.md; every prefetch from the token loop
             * instead was slower) */
            x86_tile_ref head = next, rest = {0};
            if (run && next.n_rows > 8) {
                head.n_rows = 8;
                rest = next;
                rest.row0 += 8 * w_row_bytes;
                rest.n_rows -= 8;
            }
            x86_transpose_tile(w, w_row_bytes, r, r1, k0, kb, &head, wb, wp, dwp, n_vec);
            if (run) {
                run(kb, k0 == 0, wp, dwp, a + c0 * n_blocks + k0, n_blocks, xa, plan.nt,
                    y + c0 * y_stride + r, y_stride, r1 - r, &rest);
            } else {
                x86_lane_all_tokens(kb, k0 == 0, wp, dwp, a + c0 * n_blocks + k0, n_blocks, xa,
                                    plan.nt, y + c0 * y_stride + r, y_stride, r1 - r, n_vec, n_tok,
                                    dp);
            }
        }
    }
}

/* Matmul for the VNNI tiers of the weights wb describes: fewer than min_lanes tokens go through the
 * matvec (x86_matvec_codes with prep, dot and reduce8; each token re-reads the weights, from
 * cache), where a transposed tile would be used too few times to pay: the lanes pay from 4 tokens
 * with the 256-bit 4-token tile (min_lanes 4), from 2 with AVX-512's 8-token tile (min_lanes 2). */
SYN_K_INLINE void x86_matmul_codes(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                   int64_t r1, const block_q8_0 *a, int64_t n_tokens, float *y,
                                   int64_t y_stride, const x86_wblocks wb, const int n_vec,
                                   const int n_tok, const int min_lanes, x86_dpbusd_fn dp,
                                   x86_lane_run_fn run, x86_act_prep_fn prep, x86_dot_block_fn dot,
                                   x86_reduce8_fn reduce8) {
    if (n_tokens < min_lanes) {
        for (int64_t t = 0; t < n_tokens; t++) {
            x86_matvec_codes(n_blocks, w, w_row_bytes, r0, r1, a + t * n_blocks, y + t * y_stride,
                             prep, dot, wb.bb, wb.codes, reduce8);
        }
        return;
    }
    x86_matmul_lanes(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, wb, n_vec, n_tok,
                     dp, run);
}

/* x86_matmul_codes of Q8_0 weights. */
SYN_K_INLINE void x86_matmul(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                             int64_t r1, const block_q8_0 *a, int64_t n_tokens, float *y,
                             int64_t y_stride, const int n_vec, const int n_tok,
                             const int min_lanes, x86_dpbusd_fn dp, x86_lane_run_fn run,
                             x86_act_prep_fn prep, x86_dot_block_fn dot) {
    x86_matmul_codes(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, X86_WB_Q8_0, n_vec,
                     n_tok, min_lanes, dp, run, prep, dot, x86_reduce8);
}

#endif
