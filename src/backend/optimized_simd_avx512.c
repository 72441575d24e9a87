/* optimized_simd_avx512.c: the optimized backend's float math built with AVX-512 (F, BW, VL): the
 * same code and bits as the other builds (optimized_simd_impl.h; SwiGLU in 16 lanes), with 32
 * vector registers so that one attention pass keeps the accumulators of up to 8 query heads. */
#define OPT_SIMD_SFX avx512
#define OPT_MAX_NG 8
#include "backend/optimized_simd_impl.h"
