/* floats_avx512.c: the float32 kernels (floats.h) built with AVX-512 (F, BW, VL): the same code
 * and bits as the other builds (floats_impl.h; SwiGLU and attention in 16 lanes), with 32 vector
 * registers so that one attention pass keeps the accumulators of up to 8 query heads. */
#define SYN_F_MAX_NG 8
#include "kernels/floats_impl.h"
#include "kernels/kernels_impl.h"

void syn_attention_avx512(const syn_attn_args *a) { attention(a); }
void syn_swiglu_avx512(float *g, const float *u, int64_t n) { swiglu(g, u, n); }
void syn_geglu_avx512(float *g, const float *u, int64_t n, const uint16_t *table) {
    geglu(g, u, n, table);
}
float syn_dot_f32_avx512(const float *a, const float *b, int64_t n) { return dot(a, b, n); }
void syn_delta_rule_avx512(const syn_delta_rule_args *a) { delta_rule(a); }
void syn_dn_conv_avx512(float *x, float *s, const float *w, int32_t K, size_t stride, int64_t n) {
    dn_conv(x, s, w, K, stride, n);
}
