/*
 * quants_avx512.c: AVX-512 VNNI Q8_0 matrix kernels (the quantizer and single-row dot are AVX2's).
 *
 * Strategy (quants_x86.h has the drivers): VPDPBUSD multiplies unsigned by signed bytes, so the
 * weights are offset by +128 (exact for any int8) and the int32 sums start from -128 * sum(a).
 * Matvec streams rows front to back, folding each row's per-block sums with hadd trees. Matmul
 * puts rows in lanes (weights transposed per tile, activation dwords broadcast), so it needs no
 * horizontal sums; its tile is 16 rows (two 8-lane vectors) x 4 tokens, which with the 16
 * transposed weight vectors uses most of the 32 registers. The 256-bit (VL) forms are used: on Zen 4
 * 512-bit ops run as two 256-bit halves. Bitwise equal to scalar (kernels.h).
 */
#include "kernels/quants_x86.h"

/* -128 * (sum of each 4-byte group of a): the correction for the +128 offset of w below. */
SYN_K_INLINE __m256i prep_offset(__m256i a) {
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), a));
}

/* (w + 128) as unsigned bytes times a, plus the correction: exactly w . a per 4-byte group. */
SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a, __m256i c) {
    return _mm256_dpbusd_epi32(c, _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), a);
}

SYN_K_INLINE __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) { return _mm256_dpbusd_epi32(acc, u8, s8); }

void syn_matvec_q8_0_avx512(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                            const block_q8_0 *a, float *y) {
    x86_matvec(n_blocks, w, w_row_bytes, r0, r1, a, y, prep_offset, dot_block);
}

void syn_matmul_q8_0_avx512(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                            const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride) {
    x86_matmul(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 2, 4, dpbusd, prep_offset, dot_block);
}
