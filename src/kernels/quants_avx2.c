/*
 * quants_avx2.c: AVX2 Q8_0 kernels (the quantizer and single-row dot also serve the VNNI tiers).
 *
 * Strategy: a block's 32 products come from maddubs(|w|, sign(a, w)) then madd with ones
 * (|w| <= 128 and |a| <= 127 keep the int16 pair sums below 32767, so -128 weights are exact).
 * Matvec is quants_x86.h's sequential row stream; the matmul tile is 4 rows x 4 tokens, its
 * per-block int32 sums of 4 tokens folded into one vector by a tree of hadds (the VNNI tiers'
 * rows-in-lanes tile needs VPDPBUSD: maddubs of w + 128 would saturate). Each output follows
 * kernels.h's float sequence exactly: this tier is bitwise equal to scalar.
 */
#include "kernels/fp16.h"
#include "kernels/quants_x86.h"

/* maddubs needs no correction: prep gives zero (matvec sums its lanes as the block's correction).
 */
SYN_K_INLINE __m256i prep_none(__m256i a) {
    (void)a;
    return _mm256_setzero_si256();
}

SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a, __m256i unused) {
    (void)unused;
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

/* One Q8_0 block of x; returns the unrounded float d (Q8_1's sum uses it). */
SYN_K_INLINE float quantize_block_q8_0(const float *xb, block_q8_0 *yb) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps();
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign_bit, v[i]));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float d = _mm_cvtss_f32(m4) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    yb->d = syn_k_f32_to_fp16(d);
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], vid),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[i] = _mm256_cvtps_epi32(r);
    }
    /* packs work per 128-bit lane; the permute restores element order. */
    const __m256i q8 =
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)yb->qs, ordered);
    return d;
}

void syn_quantize_row_q8_0_avx2(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++)
        quantize_block_q8_0(x + b * QK8_0, &y[b]);
}

void syn_quantize_row_q8_1_avx2(const float *x, block_q8_0 *y, uint16_t *s, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = quantize_block_q8_0(x + b * QK8_0, &y[b]);
        s[b] = syn_k_f32_to_fp16(d * (float)x86_block_sum(&y[b]));
    }
}

float syn_vec_dot_q8_0_q8_0_avx2(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a) {
    return x86_row_dot(n_blocks, w, a, prep_none, dot_block);
}

void syn_matvec_q8_0_avx2(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                          int64_t r1, const void *act, float *y) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    x86_matvec(n_blocks, w, w_row_bytes, r0, r1, a, y, prep_none, dot_block);
}

/* 4 rows x 4 tokens; acc[i] lane j is row r + i, token t0 + j. */
static void tile_4x4(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a,
                     int64_t t0, float *y, int64_t y_stride, int64_t r) {
    const block_q8_0 *at[4];
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++)
        at[j] = a + (t0 + j) * n_blocks;
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < n_blocks; b++) {
        __m256i av[4];
        SYN_K_UNROLL(4)
        for (int j = 0; j < 4; j++)
            av[j] = x86_load_qs(&at[j][b]);
        const __m128 da = x86_scales4(at, b);
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            const __m256i wv = x86_load_qs(&wr[i][b]);
            const __m256i uw = _mm256_abs_epi8(wv);
            __m256i d[4];
            SYN_K_UNROLL(4)
            for (int j = 0; j < 4; j++) {
                d[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(uw, _mm256_sign_epi8(av[j], wv)),
                                         _mm256_set1_epi16(1));
            }
            const __m128 isum = _mm_cvtepi32_ps(x86_reduce4(d));
            const __m128 s = _mm_mul_ps(_mm_set1_ps(x86_fp16_f32(wr[i][b].d)), da);
            const __m128 p = _mm_mul_ps(isum, s);
            acc[i] = _mm_add_ps(acc[i], p);
        }
    }
    _MM_TRANSPOSE4_PS(acc[0], acc[1], acc[2], acc[3]); /* now acc[j] lane i */
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++)
        _mm_storeu_ps(y + (t0 + j) * y_stride + r, acc[j]);
}

void syn_matmul_q8_0_avx2(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                          int64_t r1, const void *act, int64_t n_tokens, float *y,
                          int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    syn_k_matmul_tiles(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 4, tile_4x4,
                       syn_vec_dot_q8_0_q8_0_avx2, syn_matvec_q8_0_avx2);
}

/* ---- Q4_0, Q5_0, Q4_1, Q5_1 unpacked into Q8_0 blocks of their codes (unpacked.c), for every x86
 * tier (quants_x86.h has the code unpacking). */

SYN_K_INLINE void store_block(block_q8_0 *out, uint16_t d, __m256i codes) {
    out->d = d;
    _mm256_storeu_si256((__m256i *)out->qs, codes);
}

void syn_unpack_q4_0_avx2(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    (void)m;
    const block_q4_0 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++)
        store_block(&out[b], w[b].d, x86_codes_q4_0((const char *)&w[b]));
}

void syn_unpack_q5_0_avx2(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    (void)m;
    const block_q5_0 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        store_block(&out[b], w[b].d, x86_codes_q5_0((const char *)&w[b]));
    }
}

void syn_unpack_q4_1_avx2(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    const block_q4_1 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        store_block(&out[b], w[b].d, x86_nibbles(w[b].qs));
        m[b] = x86_fp16_f32(w[b].m);
    }
}

void syn_unpack_q5_1_avx2(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    const block_q5_1 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        store_block(&out[b], w[b].d, x86_add_fifth_bits(x86_nibbles(w[b].qs), w[b].qh));
        m[b] = x86_fp16_f32(w[b].m);
    }
}

/* Unsigned codes (Q4_0, Q5_0, Q4_1, Q5_1) times a: maddubs takes them as they are. */
SYN_K_INLINE __m256i dot_unsigned(__m256i u, __m256i a, __m256i c) {
    return _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), _mm256_set1_epi16(1)));
}
X86_CODES_MATVECS(avx2, dot_unsigned)
