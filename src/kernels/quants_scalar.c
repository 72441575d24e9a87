/* quants_scalar.c: the portable reference kernels; the specification every SIMD tier must match
 * bit for bit (see kernels.h for the numeric contract). */
#include <math.h>
#include <string.h>

#include "kernels/codes.h"
#include "kernels/fp16.h"
#include "kernels/kernels_impl.h"

/* One Q8_0 block of x; returns the unrounded float d (Q8_1's sum uses it). */
static float quantize_block_q8_0(const float *xb, block_q8_0 *yb) {
    float amax = 0.0f;
    for (int i = 0; i < QK8_0; i++)
        amax = fmaxf(amax, fabsf(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    yb->d = syn_k_f32_to_fp16(d);
    /* nearbyintf rounds half to even in the default rounding mode. */
    for (int i = 0; i < QK8_0; i++)
        yb->qs[i] = (int8_t)nearbyintf(xb[i] * id);
    return d;
}

void syn_quantize_row_q8_0_scalar(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++)
        quantize_block_q8_0(x + b * QK8_0, &y[b]);
}

float syn_vec_dot_q8_0_q8_0_scalar(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++) {
        int32_t isum = 0;
        for (int i = 0; i < QK8_0; i++)
            isum += (int32_t)w[b].qs[i] * (int32_t)a[b].qs[i];
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
        syn_matvec_q8_0_scalar(n_blocks, w, w_row_bytes, r0, r1, a + t * n_blocks,
                               y + t * y_stride);
    }
}

/* ---- The other quantized types (kernels.h states their contracts) ---------------------------- */

void syn_quantize_row_q8_1_scalar(const float *x, block_q8_0 *y, uint16_t *s, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = quantize_block_q8_0(x + b * QK8_0, &y[b]);
        int32_t sum = 0;
        for (int i = 0; i < QK8_0; i++)
            sum += y[b].qs[i];
        s[b] = syn_k_f32_to_fp16(d * (float)sum);
    }
}

void syn_quantize_row_q8_k_scalar(const float *x, block_q8_k *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        float max = 0.0f, amax = 0.0f;
        for (int i = 0; i < QK_K; i++) {
            if (fabsf(xb[i]) > amax) {
                amax = fabsf(xb[i]);
                max = xb[i];
            }
        }
        memset(&y[b], 0, sizeof y[b]);
        if (amax == 0.0f) continue;
        const float iscale = -127.0f / max;
        for (int i = 0; i < QK_K; i++) {
            const float v = nearbyintf(iscale * xb[i]);
            y[b].qs[i] = (int8_t)(v > 127.0f ? 127.0f : v);
            y[b].bsums[i / 16] = (int16_t)(y[b].bsums[i / 16] + y[b].qs[i]);
        }
        y[b].d = 1.0f / iscale;
    }
}

/* The Q8_0 dot over codes c (kernels.h): one block's term. */
static float q8_term(const int8_t c[QK8_0], uint16_t wd, const block_q8_0 *a) {
    int32_t isum = 0;
    for (int i = 0; i < QK8_0; i++)
        isum += (int32_t)c[i] * (int32_t)a->qs[i];
    const float s = syn_k_fp16_to_f32(wd) * syn_k_fp16_to_f32(a->d);
    return (float)isum * s;
}

#define SYN_K_SCALAR_Q8_0_FAMILY(T, block_t)                                                       \
    float syn_vec_dot_##T##_scalar(int64_t n_blocks, const void *w, const void *act) {             \
        const block_t *wb = w;                                                                     \
        const block_q8_0 *a = act;                                                                 \
        float acc = 0.0f;                                                                          \
        for (int64_t b = 0; b < n_blocks; b++) {                                                   \
            int8_t c[QK8_0];                                                                       \
            syn_k_codes_##T(&wb[b], c);                                                            \
            const float p = q8_term(c, wb[b].d, &a[b]);                                            \
            acc += p;                                                                              \
        }                                                                                          \
        return acc;                                                                                \
    }
SYN_K_SCALAR_Q8_0_FAMILY(q4_0, block_q4_0)
SYN_K_SCALAR_Q8_0_FAMILY(q5_0, block_q5_0)

#define SYN_K_SCALAR_Q8_1_FAMILY(T, block_t)                                                       \
    float syn_vec_dot_##T##_scalar(int64_t n_blocks, const void *w, const void *act) {             \
        const block_t *wb = w;                                                                     \
        const syn_act_q8_1 *a = act;                                                               \
        float acc_d = 0.0f, acc_m = 0.0f;                                                          \
        for (int64_t b = 0; b < n_blocks; b++) {                                                   \
            int8_t c[QK8_0];                                                                       \
            syn_k_codes_##T(&wb[b], c);                                                            \
            const float p = q8_term(c, wb[b].d, &a->q[b]);                                         \
            acc_d += p;                                                                            \
        }                                                                                          \
        for (int64_t b = 0; b < n_blocks; b++) {                                                   \
            const float p = syn_k_fp16_to_f32(wb[b].m) * syn_k_fp16_to_f32(a->s[b]);               \
            acc_m += p;                                                                            \
        }                                                                                          \
        return acc_d + acc_m;                                                                      \
    }
SYN_K_SCALAR_Q8_1_FAMILY(q4_1, block_q4_1)
SYN_K_SCALAR_Q8_1_FAMILY(q5_1, block_q5_1)

/* Q4_K / Q5_K: one super-block's two terms (kernels.h). */
static float k45_block(float acc, const uint8_t *qs, const uint8_t *qh, const uint8_t *scales,
                       uint16_t d, uint16_t dmin, const block_q8_k *a) {
    uint8_t c[QK_K], sc[8], mn[8];
    syn_k_codes_k45(qs, qh, scales, c, sc, mn);
    int32_t isum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        int32_t s = 0;
        for (int i = 32 * j; i < 32 * j + 32; i++)
            s += (int32_t)c[i] * (int32_t)a->qs[i];
        isum += (int32_t)sc[j] * s;
        msum += (int32_t)mn[j] * ((int32_t)a->bsums[2 * j] + (int32_t)a->bsums[2 * j + 1]);
    }
    const float dd = syn_k_fp16_to_f32(d) * a->d;
    const float p = (float)isum * dd;
    acc += p;
    const float dm = syn_k_fp16_to_f32(dmin) * a->d;
    const float q = (float)msum * dm;
    acc -= q;
    return acc;
}

float syn_vec_dot_q4_k_scalar(int64_t n_blocks, const void *w, const void *act) {
    const block_q4_k *wb = w;
    const block_q8_k *a = act;
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++)
        acc = k45_block(acc, wb[b].qs, NULL, wb[b].scales, wb[b].d, wb[b].dmin, &a[b]);
    return acc;
}

float syn_vec_dot_q5_k_scalar(int64_t n_blocks, const void *w, const void *act) {
    const block_q5_k *wb = w;
    const block_q8_k *a = act;
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++)
        acc = k45_block(acc, wb[b].qs, wb[b].qh, wb[b].scales, wb[b].d, wb[b].dmin, &a[b]);
    return acc;
}

float syn_vec_dot_q6_k_scalar(int64_t n_blocks, const void *w, const void *act) {
    const block_q6_k *wb = w;
    const block_q8_k *a = act;
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++) {
        int8_t c[QK_K];
        syn_k_codes_q6_k(&wb[b], c);
        int32_t isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int32_t s = 0;
            for (int i = 16 * j; i < 16 * j + 16; i++)
                s += (int32_t)c[i] * (int32_t)a[b].qs[i];
            isum += (int32_t)wb[b].scales[j] * s;
        }
        const float dd = syn_k_fp16_to_f32(wb[b].d) * a[b].d;
        const float p = (float)isum * dd;
        acc += p;
    }
    return acc;
}

/* Matvec and matmul of every type from its single-row dot; act_row(act, t, n_blocks) is token t's
 * activation row. */
static const void *act_row_plain(const void *act, int64_t t, int64_t n_blocks, size_t block_bytes,
                                 syn_act_q8_1 *tmp) {
    (void)tmp;
    return (const char *)act + (size_t)(t * n_blocks) * block_bytes;
}

static const void *act_row_q8_1(const void *act, int64_t t, int64_t n_blocks, size_t block_bytes,
                                syn_act_q8_1 *tmp) {
    (void)block_bytes;
    const syn_act_q8_1 *a = act;
    *tmp = (syn_act_q8_1){a->q + t * n_blocks, a->s + t * n_blocks};
    return tmp;
}

#define SYN_K_SCALAR_MAT(T, act_row, act_block_t)                                                  \
    void syn_matvec_##T##_scalar(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, float *y) {                          \
        for (int64_t r = r0; r < r1; r++)                                                          \
            y[r] = syn_vec_dot_##T##_scalar(n_blocks, (const char *)w + (size_t)r * w_row_bytes,   \
                                            act);                                                  \
    }                                                                                              \
    void syn_matmul_##T##_scalar(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, int64_t n_tokens, float *y,          \
                                 int64_t y_stride) {                                               \
        for (int64_t t = 0; t < n_tokens; t++) {                                                   \
            syn_act_q8_1 tmp;                                                                      \
            syn_matvec_##T##_scalar(n_blocks, w, w_row_bytes, r0, r1,                              \
                                    act_row(act, t, n_blocks, sizeof(act_block_t), &tmp),          \
                                    y + t * y_stride);                                             \
        }                                                                                          \
    }
SYN_K_SCALAR_MAT(q4_0, act_row_plain, block_q8_0)
SYN_K_SCALAR_MAT(q5_0, act_row_plain, block_q8_0)
SYN_K_SCALAR_MAT(q4_1, act_row_q8_1, block_q8_0)
SYN_K_SCALAR_MAT(q5_1, act_row_q8_1, block_q8_0)
SYN_K_SCALAR_MAT(q4_k, act_row_plain, block_q8_k)
SYN_K_SCALAR_MAT(q5_k, act_row_plain, block_q8_k)
SYN_K_SCALAR_MAT(q6_k, act_row_plain, block_q8_k)
