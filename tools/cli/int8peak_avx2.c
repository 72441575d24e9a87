/* int8peak_avx2.c: the AVX2 tier's int8 dot, vpmaddubsw (32 byte products, pairwise summed to
 * int16) then vpmaddwd against ones and vpaddd into int32, in 8 independent chains. */
#include <immintrin.h>
#include <stdint.h>

uint64_t int8peak_chain_avx2(uint64_t iters);

uint64_t int8peak_chain_avx2(uint64_t iters) {
    const __m256i b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
    __m256i a[8], acc[8];
#pragma GCC unroll 16
    for (int i = 0; i < 8; i++) {
        a[i] = _mm256_set1_epi8((char)(3 + i));
        acc[i] = _mm256_set1_epi32(i);
    }
    for (uint64_t n = 0; n < iters; n++)
#pragma GCC unroll 16 /* every chain in registers, not an array in memory */
        for (int i = 0; i < 8; i++) {
            __asm__("" : "+x"(a[i])); /* opaque operands: each product is computed, every round */
            acc[i] =
                _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a[i], b), ones));
        }
    __m256i sum = acc[0];
    for (int i = 1; i < 8; i++)
        sum = _mm256_add_epi32(sum, acc[i]);
    volatile int32_t sink = _mm256_extract_epi32(sum, 0) + _mm256_extract_epi32(sum, 7);
    (void)sink;
    return iters * 8 * 32;
}
