/*
 * quants_avx2.c: AVX2 Q8_0 kernels (the quantizer and single-row dot also serve the VNNI tiers).
 *
 * Strategy: a block's 32 products come from maddubs(|w|, sign(a, w)) then madd with ones
 * (|w| <= 128 and |a| <= 127 keep the int16 pair sums below 32767, so -128 weights are exact).
 * The per-block int32 sums of 8 rows (matvec) or 4 tokens (matmul tile) are folded into one vector
 * by a tree of hadds, so each output lane then follows kernels.h's float sequence exactly: this
 * tier is bitwise equal to scalar.
 */
#include "kernels/fp16.h"
#include "kernels/quants_x86.h"

SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

void syn_quantize_row_q8_0_avx2(const float *x, block_q8_0 *y, int64_t n) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float *xb = x + b * QK8_0;
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
        y[b].d = syn_k_f32_to_fp16(d);
        const __m256 vid = _mm256_set1_ps(id);
        __m256i q[4];
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            const __m256 r = _mm256_round_ps(_mm256_mul_ps(v[i], vid), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            q[i] = _mm256_cvtps_epi32(r);
        }
        /* packs work per 128-bit lane; the permute restores element order. */
        const __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        const __m256i ordered = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[b].qs, ordered);
    }
}

float syn_vec_dot_q8_0_q8_0_avx2(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a) {
    float acc = 0.0f;
    int64_t b = 0;
    /* 8 blocks at a time: int sums and products as vectors, then the adds in block order. */
    for (; b + 8 <= n_blocks; b += 8) {
        __m256i d[8];
        const block_q8_0 *wb[8], *ab[8];
        SYN_K_UNROLL(8)
        for (int i = 0; i < 8; i++) {
            d[i] = dot_block(x86_load_qs(&w[b + i]), x86_load_qs(&a[b + i]));
            wb[i] = &w[b + i];
            ab[i] = &a[b + i];
        }
        const __m256 isum = _mm256_cvtepi32_ps(x86_reduce8(d));
        const __m256 s = _mm256_mul_ps(x86_scales8(wb, 0), x86_scales8(ab, 0));
        float p[8];
        _mm256_storeu_ps(p, _mm256_mul_ps(isum, s));
        SYN_K_UNROLL(8)
        for (int i = 0; i < 8; i++) acc += p[i];
    }
    for (; b < n_blocks; b++) {
        const __m256i d = dot_block(x86_load_qs(&w[b]), x86_load_qs(&a[b]));
        const __m128i d4 = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
        const __m128i d2 = _mm_hadd_epi32(d4, d4);
        const int32_t isum = _mm_cvtsi128_si32(_mm_hadd_epi32(d2, d2));
        const float s = x86_fp16_f32(w[b].d) * x86_fp16_f32(a[b].d);
        const float p = (float)isum * s;
        acc += p;
    }
    return acc;
}

void syn_matvec_q8_0_avx2(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                          const block_q8_0 *a, float *y) {
    x86_matvec8(n_blocks, w, w_row_bytes, r0, r1, a, y, dot_block, syn_vec_dot_q8_0_q8_0_avx2);
}

/* 4 rows x 4 tokens; acc[i] lane j is row r + i, token t0 + j. */
static void tile_4x4(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a, int64_t t0, float *y,
                     int64_t y_stride, int64_t r) {
    const block_q8_0 *at[4];
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++) at[j] = a + (t0 + j) * n_blocks;
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < n_blocks; b++) {
        __m256i av[4];
        SYN_K_UNROLL(4)
        for (int j = 0; j < 4; j++) av[j] = x86_load_qs(&at[j][b]);
        const __m128 da = _mm_cvtph_ps(
            _mm_setr_epi16((short)at[0][b].d, (short)at[1][b].d, (short)at[2][b].d, (short)at[3][b].d, 0, 0, 0, 0));
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            const __m256i wv = x86_load_qs(&wr[i][b]);
            const __m256i uw = _mm256_abs_epi8(wv);
            __m256i d[4];
            SYN_K_UNROLL(4)
            for (int j = 0; j < 4; j++) {
                d[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(uw, _mm256_sign_epi8(av[j], wv)), _mm256_set1_epi16(1));
            }
            const __m128 isum = _mm_cvtepi32_ps(x86_reduce4(d));
            const __m128 s = _mm_mul_ps(_mm_set1_ps(x86_fp16_f32(wr[i][b].d)), da);
            const __m128 p = _mm_mul_ps(isum, s);
            acc[i] = _mm_add_ps(acc[i], p);
        }
    }
    _MM_TRANSPOSE4_PS(acc[0], acc[1], acc[2], acc[3]); /* now acc[j] lane i */
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++) _mm_storeu_ps(y + (t0 + j) * y_stride + r, acc[j]);
}

void syn_matmul_q8_0_avx2(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                          const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride) {
    syn_k_matmul_tiles(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 4, tile_4x4, syn_vec_dot_q8_0_q8_0_avx2,
               syn_matvec_q8_0_avx2);
}
