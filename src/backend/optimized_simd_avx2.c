/* optimized_simd_avx2.c: the optimized backend's float math built with AVX2 (same bits as the
 * portable build: see optimized_simd_impl.h). */
#define OPT_SIMD_SFX avx2
#include "backend/optimized_simd_impl.h"
