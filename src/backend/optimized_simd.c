/* optimized_simd.c: the portable build of the optimized backend's float math, and the table
 * getter that picks a build per kernel tier. */
#define OPT_SIMD_SFX generic
#include "backend/optimized_simd_impl.h"

#if defined(__x86_64__)
void opt_simd_table_avx2(opt_simd *out);   /* optimized_simd_avx2.c */
void opt_simd_table_avx512(opt_simd *out); /* optimized_simd_avx512.c */
#endif

void opt_simd_get(syn_isa isa, opt_simd *out) {
#if defined(__x86_64__)
    /* Every x86 SIMD tier implies AVX2 + FMA + F16C (cpu_features.c checks them), avx512-vnni
     * AVX-512 F/BW/VL besides. */
    if (isa == SYN_ISA_AVX512_VNNI) {
        opt_simd_table_avx512(out);
        return;
    }
    if (isa == SYN_ISA_AVX2 || isa == SYN_ISA_AVX_VNNI) {
        opt_simd_table_avx2(out);
        return;
    }
#endif
    (void)isa;
    opt_simd_table_generic(out);
}
