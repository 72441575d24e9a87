/* kquants_avx512.c: the AVX-512 VNNI tier's k-quant kernels (kquants_avx512.h), without GFNI, and
 * the x16 layouts' kernels of Q4_K, Q5_K and Q6_K, which both of the tier's tables take (they
 * unpack no nibble that GFNI would do in fewer instructions: one AND per code vector). */
#include "kernels/kquants_avx512.h"

KQ_AVX512_KERNELS(avx512)
KQ_X16_KERNELS(q4_k, GGML_TYPE_Q4_K, avx512)
KQ_X16_KERNELS(q5_k, GGML_TYPE_Q5_K, avx512)
KQ_X16_KERNELS(q6_k, GGML_TYPE_Q6_K, avx512)
