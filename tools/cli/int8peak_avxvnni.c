/* int8peak_avxvnni.c: the AVX-VNNI tier's instruction, vpdpbusd on 256-bit registers (32 byte
 * products into 8 int32 lanes), in 12 independent chains. */
#include <immintrin.h>
#include <stdint.h>

uint64_t int8peak_chain_avxvnni(uint64_t iters);

uint64_t int8peak_chain_avxvnni(uint64_t iters) {
    const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
    __m256i acc[12];
#pragma GCC unroll 16
    for (int i = 0; i < 12; i++)
        acc[i] = _mm256_set1_epi32(i);
    for (uint64_t n = 0; n < iters; n++)
#pragma GCC unroll 16 /* every chain in registers, not an array in memory */
        for (int i = 0; i < 12; i++)
            acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
    __m256i sum = acc[0];
    for (int i = 1; i < 12; i++)
        sum = _mm256_add_epi32(sum, acc[i]);
    volatile int32_t sink = _mm256_extract_epi32(sum, 0) + _mm256_extract_epi32(sum, 7);
    (void)sink;
    return iters * 12 * 32;
}
