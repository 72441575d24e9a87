/*
 * quants_avxvnni.c: AVX-VNNI (VEX-encoded VPDPBUSD, no AVX-512) Q8_0 matrix kernels; the
 * quantizer and single-row dot are AVX2's.
 *
 * Same scheme as quants_avx512.c (matvec: (|w|, sign(a, w)); matmul: (a + 128, w) with the
 * accumulator preset to -128 * sum(w)), with a 4 x 4 tile to fit 16 vector registers.
 */
#include "kernels/quants_x86.h"

SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a) {
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
}

void syn_matvec_q8_0_avxvnni(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                             const block_q8_0 *a, float *y) {
    x86_matvec8(n_blocks, w, w_row_bytes, r0, r1, a, y, dot_block, syn_vec_dot_q8_0_q8_0_avx2);
}

/* 4 rows x 4 tokens; acc[i] lane j is row r + i, token t0 + j. */
static void tile_4x4(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a, int64_t t0, float *y,
                     int64_t y_stride, int64_t r) {
    const block_q8_0 *at[4];
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++) at[j] = a + (t0 + j) * n_blocks;
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < n_blocks; b++) {
        __m256i au[4]; /* a + 128 as unsigned bytes */
        SYN_K_UNROLL(4)
        for (int j = 0; j < 4; j++) au[j] = _mm256_xor_si256(x86_load_qs(&at[j][b]), bias);
        const __m128 da = _mm_cvtph_ps(
            _mm_setr_epi16((short)at[0][b].d, (short)at[1][b].d, (short)at[2][b].d, (short)at[3][b].d, 0, 0, 0, 0));
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            const __m256i wv = x86_load_qs(&wr[i][b]);
            const __m256i neg_c = _mm256_sub_epi32(_mm256_setzero_si256(),
                                                   _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), bias, wv));
            __m256i d[4];
            SYN_K_UNROLL(4)
            for (int j = 0; j < 4; j++) d[j] = _mm256_dpbusd_avx_epi32(neg_c, au[j], wv);
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

void syn_matmul_q8_0_avxvnni(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                             const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride) {
    syn_k_matmul_tiles(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 4, tile_4x4, syn_vec_dot_q8_0_q8_0_avx2,
               syn_matvec_q8_0_avxvnni);
}
