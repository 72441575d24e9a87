/* quants_scalar.c: the portable reference kernels; the specification every SIMD tier must match
 * bit for bit (see kernels.h for the numeric contract). */
#include <math.h>

#include "kernels/fp16.h"
#include "kernels/kernels_impl.h"

void syn_quantize_row_q8_0_scalar(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float *xb = x + b * QK8_0;
        float amax = 0.0f;
        for (int i = 0; i < QK8_0; i++) amax = fmaxf(amax, fabsf(xb[i]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = syn_k_f32_to_fp16(d);
        /* nearbyintf rounds half to even in the default rounding mode. */
        for (int i = 0; i < QK8_0; i++) y[b].qs[i] = (int8_t)nearbyintf(xb[i] * id);
    }
}

float syn_vec_dot_q8_0_q8_0_scalar(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++) {
        int32_t isum = 0;
        for (int i = 0; i < QK8_0; i++) isum += (int32_t)w[b].qs[i] * (int32_t)a[b].qs[i];
        const float s = syn_k_fp16_to_f32(w[b].d) * syn_k_fp16_to_f32(a[b].d);
        const float p = (float)isum * s; /* separate statement: never fused with the add */
        acc += p;
    }
    return acc;
}

void syn_matvec_q8_0_scalar(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                            int64_t r1, const void *act, float *y) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    for (int64_t r = r0; r < r1; r++) {
        y[r] = syn_vec_dot_q8_0_q8_0_scalar(n_blocks, syn_k_wrow(w, w_row_bytes, r), a);
    }
}

void syn_matmul_q8_0_scalar(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                            int64_t r1, const void *act, int64_t n_tokens, float *y,
                            int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    for (int64_t t = 0; t < n_tokens; t++) {
        syn_matvec_q8_0_scalar(n_blocks, w, w_row_bytes, r0, r1, a + t * n_blocks, y + t * y_stride);
    }
}
