/* quants_x86.h: helpers shared by the x86 tier files (quants_avx2.c, quants_avx512.c,
 * quants_avxvnni.c). Everything is static inline so each file compiles it with its own ISA flags;
 * a tier passes its block-dot and tile functions, which the always_inline drivers inline. */
#ifndef SYN_KERNELS_QUANTS_X86_H
#define SYN_KERNELS_QUANTS_X86_H

#include <immintrin.h>

#include "kernels/kernels_impl.h"


SYN_K_INLINE __m256i x86_load_qs(const block_q8_0 *b) { return _mm256_loadu_si256((const __m256i *)b->qs); }

SYN_K_INLINE float x86_fp16_f32(uint16_t h) { return _cvtsh_ss(h); }

/* [sum(d0), sum(d1), sum(d2), sum(d3)] of four 8-lane vectors. */
SYN_K_INLINE __m128i x86_reduce4(const __m256i d[4]) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* [sum(d0), ..., sum(d7)] of eight 8-lane vectors. */
SYN_K_INLINE __m256i x86_reduce8(const __m256i d[8]) {
    const __m256i lo4 = _mm256_hadd_epi32(_mm256_hadd_epi32(d[0], d[1]), _mm256_hadd_epi32(d[2], d[3]));
    const __m256i hi4 = _mm256_hadd_epi32(_mm256_hadd_epi32(d[4], d[5]), _mm256_hadd_epi32(d[6], d[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(lo4, hi4, 0x20),
                            _mm256_permute2x128_si256(lo4, hi4, 0x31));
}

/* The fp16 scales of block b of eight rows, as floats. */
SYN_K_INLINE __m256 x86_scales8(const block_q8_0 *const rows[8], int64_t b) {
    const __m128i h = _mm_setr_epi16((short)rows[0][b].d, (short)rows[1][b].d, (short)rows[2][b].d,
                                     (short)rows[3][b].d, (short)rows[4][b].d, (short)rows[5][b].d,
                                     (short)rows[6][b].d, (short)rows[7][b].d);
    return _mm256_cvtph_ps(h);
}

/* 8 int32 partial sums of the products of one weight block and one activation block. */
typedef __m256i (*x86_dot_block_fn)(__m256i w, __m256i a);

/* Decode over rows [r0, r1) eight at a time: lane i of the accumulator is row r + i and follows
 * kernels.h's float sequence; leftover rows go to the tier's single-row dot. */
SYN_K_INLINE void x86_matvec8(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
                              const block_q8_0 *a, float *y, x86_dot_block_fn dot,
                              float (*vec_dot)(int64_t, const block_q8_0 *, const block_q8_0 *)) {
    /* Short row streams defeat the hardware prefetcher, so each load also prefetches the same
     * block of a row-group at least ~24 KiB ahead (a hint: running past the matrix is harmless). */
    const size_t group_bytes = 8 * w_row_bytes;
    const size_t prefetch_ahead = group_bytes ? group_bytes * ((24 * 1024 + group_bytes - 1) / group_bytes) : 0;
    int64_t r = r0;
    for (; r + 8 <= r1; r += 8) {
        const block_q8_0 *wr[8];
        SYN_K_UNROLL(8)
        for (int i = 0; i < 8; i++) wr[i] = syn_k_wrow(w, w_row_bytes, r + i);
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < n_blocks; b++) {
            const __m256i av = x86_load_qs(&a[b]);
            __m256i d[8];
            SYN_K_UNROLL(8)
            for (int i = 0; i < 8; i++) {
                _mm_prefetch((const char *)&wr[i][b] + prefetch_ahead, _MM_HINT_T0);
                d[i] = dot(x86_load_qs(&wr[i][b]), av);
            }
            const __m256 isum = _mm256_cvtepi32_ps(x86_reduce8(d));
            const __m256 s = _mm256_mul_ps(x86_scales8(wr, b), _mm256_set1_ps(x86_fp16_f32(a[b].d)));
            const __m256 p = _mm256_mul_ps(isum, s);
            acc = _mm256_add_ps(acc, p);
        }
        _mm256_storeu_ps(y + r, acc);
    }
    for (; r < r1; r++) y[r] = vec_dot(n_blocks, syn_k_wrow(w, w_row_bytes, r), a);
}

#endif
