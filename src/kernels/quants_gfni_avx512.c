/*
 * quants_gfni_avx512.c: the avx512-vnni tier's Q4_0 / Q5_0 / Q4_1 / Q5_1 matvecs built again with
 * GFNI, where x86_nibbles unpacks a block's 4-bit codes with one VGF2P8AFFINEQB instead of a
 * shift and a mask (fewer instructions per block). syn_kernels_get
 * installs them where the CPU has GFNI (Ice Lake, Zen 4 and later; not Cascade Lake, which has
 * AVX-512 VNNI without it). The same sums as quants_avx512.c's, bit for bit.
 */
#include "kernels/quants_x86.h"

SYN_K_INLINE __m256i dot_unsigned(__m256i u, __m256i a, __m256i c) {
    return _mm256_dpbusd_epi32(c, u, a);
}
X86_CODES_MATVECS(avx512_gfni, dot_unsigned)
