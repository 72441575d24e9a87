/* kquants_avx512.c: the AVX-512 VNNI tier's k-quant kernels (kquants_avx512.h), without GFNI. */
#include "kernels/kquants_avx512.h"

KQ_AVX512_KERNELS(avx512)
