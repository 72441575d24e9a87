/* int8peak_avx512.c: the AVX-512 VNNI tier's instruction, vpdpbusd on 512-bit registers (64
 * unsigned x signed byte products summed into 16 int32 lanes), in 12 independent chains. */
#include <immintrin.h>
#include <stdint.h>

uint64_t int8peak_chain_avx512(uint64_t iters);

uint64_t int8peak_chain_avx512(uint64_t iters) {
    const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    __m512i acc[12];
#pragma GCC unroll 16
    for (int i = 0; i < 12; i++)
        acc[i] = _mm512_set1_epi32(i);
    for (uint64_t n = 0; n < iters; n++)
#pragma GCC unroll 16 /* every chain in registers, not an array in memory */
        for (int i = 0; i < 12; i++)
            acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __m512i sum = acc[0];
    for (int i = 1; i < 12; i++)
        sum = _mm512_add_epi32(sum, acc[i]);
    volatile int32_t sink = _mm512_reduce_add_epi32(sum); /* keeps the chains from being removed */
    (void)sink;
    return iters * 12 * 64;
}
