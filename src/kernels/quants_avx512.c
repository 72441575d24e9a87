/*
 * quants_avx512.c: AVX-512 VNNI Q8_0 matrix kernels (the quantizer and single-row dot are AVX2's).
 *
 * Strategy: VPDPBUSD multiplies unsigned by signed bytes. Matvec feeds it (|w|, sign(a, w)).
 * The matmul tile feeds (a + 128, w) with the accumulator preset to -128 * sum(w), which is
 * exact for any int8 on both sides and costs the sign fix once per row instead of once per
 * (row, token) pair. The 256-bit (VL) forms are used: on the machines we target, 512-bit ops run
 * as two 256-bit halves, and the 32 registers are what pays: the tile is 4 rows x 8 tokens.
 * Per-block int32 sums are folded by hadd trees so each output lane follows kernels.h's float
 * sequence exactly (bitwise equal to scalar).
 */
#include "kernels/quants_x86.h"

SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a) {
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
}

void syn_matvec_q8_0_avx512(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                            const block_q8_0 *a, float *y) {
    x86_matvec8(n_blocks, w, w_row_bytes, r0, r1, a, y, dot_block, syn_vec_dot_q8_0_q8_0_avx2);
}

/* 4 rows x 8 tokens; acc[i] lane j is row r + i, token t0 + j. */
static void tile_4x8(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a, int64_t t0, float *y,
                     int64_t y_stride, int64_t r) {
    const block_q8_0 *at[8];
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++) at[j] = a + (t0 + j) * n_blocks;
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < n_blocks; b++) {
        __m256i au[8]; /* a + 128 as unsigned bytes */
        SYN_K_UNROLL(8)
        for (int j = 0; j < 8; j++) au[j] = _mm256_xor_si256(x86_load_qs(&at[j][b]), bias);
        const __m256 da = x86_scales8(at, b);
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            const __m256i wv = x86_load_qs(&wr[i][b]);
            const __m256i neg_c = _mm256_sub_epi32(_mm256_setzero_si256(),
                                                   _mm256_dpbusd_epi32(_mm256_setzero_si256(), bias, wv));
            __m256i d[8];
            SYN_K_UNROLL(8)
            for (int j = 0; j < 8; j++) d[j] = _mm256_dpbusd_epi32(neg_c, au[j], wv);
            const __m256 isum = _mm256_cvtepi32_ps(x86_reduce8(d));
            const __m256 s = _mm256_mul_ps(_mm256_set1_ps(x86_fp16_f32(wr[i][b].d)), da);
            const __m256 p = _mm256_mul_ps(isum, s);
            acc[i] = _mm256_add_ps(acc[i], p);
        }
    }
    float out[4][8];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) _mm256_storeu_ps(out[i], acc[i]);
    SYN_K_UNROLL(8)
    for (int j = 0; j < 8; j++) {
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) y[(t0 + j) * y_stride + r + i] = out[i][j];
    }
}

void syn_matmul_q8_0_avx512(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                            const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride) {
    syn_k_matmul_tiles(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 8, tile_4x8, syn_vec_dot_q8_0_q8_0_avx2,
               syn_matvec_q8_0_avx512);
}
