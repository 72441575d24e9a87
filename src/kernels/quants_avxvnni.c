/*
 * quants_avxvnni.c: AVX-VNNI (VEX-encoded VPDPBUSD, no AVX-512) Q8_0 matrix kernels; the
 * quantizer and single-row dot are AVX2's.
 *
 * Same scheme as quants_avx512.c (weights offset by +128, sums started from -128 * sum(a); matvec
 * streams rows, matmul puts rows in lanes) with a matmul tile of 8 rows x 4 tokens to suit 16
 * vector registers. The shared drivers in quants_x86.h are tested through the avx512-vnni tier,
 * and this tile's matmul through syn_matmul_q8_0_avx512_ymm (the same call built for AVX-512).
 */
#include "kernels/quants_x86.h"

/* -128 * (sum of each 4-byte group of a): the correction for the +128 offset of w below. */
SYN_K_INLINE __m256i prep_offset(__m256i a) {
    return _mm256_sub_epi32(
        _mm256_setzero_si256(),
        _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_set1_epi8((char)0x80), a));
}

/* (w + 128) as unsigned bytes times a, plus the correction: exactly w . a per 4-byte group. */
SYN_K_INLINE __m256i dot_block(__m256i w, __m256i a, __m256i c) {
    return _mm256_dpbusd_avx_epi32(c, _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)), a);
}

SYN_K_INLINE __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
    return _mm256_dpbusd_avx_epi32(acc, u8, s8);
}

void syn_matvec_q8_0_avxvnni(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                             int64_t r1, const void *act, float *y) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    x86_matvec(n_blocks, w, w_row_bytes, r0, r1, a, y, prep_offset, dot_block);
}

void syn_matmul_q8_0_avxvnni(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                             int64_t r1, const void *act, int64_t n_tokens, float *y,
                             int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    x86_matmul(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 1, 4, 4, dpbusd, NULL,
               prep_offset, dot_block);
}

/* Unsigned codes (Q4_0, Q5_0, Q4_1, Q5_1) straight into VPDPBUSD. */
SYN_K_INLINE __m256i dot_unsigned(__m256i u, __m256i a, __m256i c) { return dpbusd(c, u, a); }
X86_CODES_MATVECS(avxvnni, dot_unsigned)
X86_CODES_MATMULS(avxvnni, dpbusd, dot_unsigned, 1, 4, 4, NULL)
