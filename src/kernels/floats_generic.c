/* floats_generic.c: the float32 kernels (floats.h) built as portable C: the scalar and ARM
 * tiers' build. */
#include "kernels/floats_impl.h"
#include "kernels/kernels_impl.h"

void syn_attention_generic(const syn_attn_args *a) { attention(a); }
void syn_swiglu_generic(float *g, const float *u, int64_t n) { swiglu(g, u, n); }
void syn_geglu_generic(float *g, const float *u, int64_t n, const uint16_t *table) {
    geglu(g, u, n, table);
}
float syn_dot_f32_generic(const float *a, const float *b, int64_t n) { return dot(a, b, n); }
void syn_delta_rule_generic(const syn_delta_rule_args *a) { delta_rule(a); }
void syn_dn_conv_generic(float *x, float *s, const float *w, int32_t K, size_t stride, int64_t n) {
    dn_conv(x, s, w, K, stride, n);
}
