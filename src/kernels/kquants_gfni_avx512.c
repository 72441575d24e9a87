/* kquants_gfni_avx512.c: the AVX-512 VNNI tier's k-quant kernels (kquants_avx512.h) built with
 * GFNI, for CPUs that have it: the same sums, bit for bit, from fewer instructions (Q6_K's code
 * unpacking 11 -> 5 per 128 codes). */
#include "kernels/kquants_avx512.h"

KQ_AVX512_KERNELS(avx512_gfni)
