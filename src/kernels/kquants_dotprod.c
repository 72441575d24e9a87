/*
 * kquants_dotprod.c: Q4_K, Q5_K and Q6_K x Q8_K kernels for both aarch64 tiers, and the NEON Q8_K
 * quantizer. kernels.h's k-quant sequence per super-block: exact int32 isum (and msum), then two
 * (one for Q6_K) float steps.
 *
 * Integer part: every code fits a signed byte (Q4_K 0..15, Q5_K 0..31, Q6_K's q - 32 in -32..31),
 * so SDOT of codes and activations gives a sub-block's products in 4 int32 partial sums, which are
 * multiplied by the sub-block's scale and accumulated (all exact int32). Q4_K/Q5_K's mins come from
 * the bsums: pairwise-added to the 8 sub-block sums, times the 8 mins with a widening multiply.
 * SMMLA would pair rows with tokens but still needs the per-sub-block scale multiply on every
 * 2x2 tile; the i8mm tier uses this code too.
 *
 * A row is computed against up to 4 tokens at once (matmul's tile): each super-block's codes are
 * unpacked once for all of them. Every (row, token) output follows the same per-block sequence
 * however the tokens are grouped, so matvec, matmul and scalar agree bitwise.
 */
#include <arm_neon.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "kernels/codes.h"
#include "kernels/kernels_impl.h"

enum { KQ_TOKENS = 4 }; /* tokens per row pass of matmul */

SYN_K_INLINE float fp16_f32(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* c . a over 32 bytes (c as two halves): 4 int32 partial sums. */
SYN_K_INLINE int32x4_t dot32(const int8x16_t c[2], const int8_t *a) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), c[0], vld1q_s8(a)), c[1], vld1q_s8(a + 16));
}

/* msum of kernels.h: sum_j mn[j] * (bsums[2j] + bsums[2j+1]); the pair sums fit int16 (|.| <=
 * 4064). */
SYN_K_INLINE int32_t min_sum(const block_q8_k *a, int16x8_t mn16) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(a->bsums), vld1q_s16(a->bsums + 8));
    const int32x4_t s = vmlal_s16(vmull_s16(vget_low_s16(pairs), vget_low_s16(mn16)),
                                  vget_high_s16(pairs), vget_high_s16(mn16));
    return vaddvq_s32(s);
}

/* kernels.h's float steps of one Q4_K / Q5_K super-block. */
SYN_K_INLINE float k45_step(float acc, int32_t isum, int32_t msum, uint16_t d, uint16_t dmin,
                            float ad) {
    const float dd = fp16_f32(d) * ad;
    const float p = (float)isum * dd;
    acc += p;
    const float dm = fp16_f32(dmin) * ad;
    const float q = (float)msum * dm;
    acc -= q;
    return acc;
}

/* Row w (n_blocks super-blocks of Q4_K, or Q5_K when qh_at) against tokens a[t * n_tok_stride],
 * t < n_tok: y[t * y_stride] = the dot. */
SYN_K_INLINE void k45_row(int64_t n_blocks, const char *w, size_t block_bytes, size_t qs_at,
                          size_t qh_at, const block_q8_k *a, int64_t n_tok_stride, float *y,
                          int64_t y_stride, const int n_tok) {
    float acc[KQ_TOKENS] = {0};
    const uint8x16_t low4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    for (int64_t b = 0; b < n_blocks; b++) {
        const char *blk = w + (size_t)b * block_bytes;
        const block_q4_k *head = (const block_q4_k *)blk; /* d, dmin and scales: the same in Q5_K */
        uint8_t sc[8], mn[8];
        syn_k_scales_k45(head->scales, sc, mn);
        const int16x8_t mn16 = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mn)));
        const uint8_t *qs = (const uint8_t *)blk + qs_at;
        /* fifth bits of elements l and 16 + l of each group; shifted down 2 bits per group */
        uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
        if (qh_at) {
            qh[0] = vld1q_u8((const uint8_t *)blk + qh_at);
            qh[1] = vld1q_u8((const uint8_t *)blk + qh_at + 16);
        }
        int32x4_t isum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            isum[t] = vdupq_n_s32(0);
        SYN_K_UNROLL(4)
        for (int g = 0; g < 4; g++) {
            int8x16_t lo[2], hi[2]; /* sub-blocks 2g and 2g + 1 */
            SYN_K_UNROLL(2)
            for (int h = 0; h < 2; h++) {
                const uint8x16_t q = vld1q_u8(qs + 32 * g + 16 * h);
                uint8x16_t l = vandq_u8(q, low4), u = vshrq_n_u8(q, 4);
                if (qh_at) {
                    l = vorrq_u8(l, vshlq_n_u8(vandq_u8(qh[h], one), 4));
                    u = vorrq_u8(u, vshlq_n_u8(vandq_u8(qh[h], two), 3));
                    qh[h] = vshrq_n_u8(qh[h], 2);
                }
                lo[h] = vreinterpretq_s8_u8(l);
                hi[h] = vreinterpretq_s8_u8(u);
            }
            SYN_K_UNROLL(4)
            for (int t = 0; t < n_tok; t++) {
                const int8_t *aq = a[t * n_tok_stride + b].qs + 64 * g;
                isum[t] = vmlaq_n_s32(isum[t], dot32(lo, aq), sc[2 * g]);
                isum[t] = vmlaq_n_s32(isum[t], dot32(hi, aq + 32), sc[2 * g + 1]);
            }
        }
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const block_q8_k *ab = &a[t * n_tok_stride + b];
            acc[t] = k45_step(acc[t], vaddvq_s32(isum[t]), min_sum(ab, mn16), head->d, head->dmin,
                              ab->d);
        }
    }
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        y[t * y_stride] = acc[t];
}

/* Row w of Q6_K against tokens a[t * n_tok_stride], t < n_tok. */
SYN_K_INLINE void q6k_row(int64_t n_blocks, const block_q6_k *w, const block_q8_k *a,
                          int64_t n_tok_stride, float *y, int64_t y_stride, const int n_tok) {
    float acc[KQ_TOKENS] = {0};
    const uint8x16_t low4 = vdupq_n_u8(0x0F), low2 = vdupq_n_u8(3);
    const int8x16_t bias = vdupq_n_s8(32);
    for (int64_t b = 0; b < n_blocks; b++) {
        const block_q6_k *blk = &w[b];
        int32x4_t isum[KQ_TOKENS];
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++)
            isum[t] = vdupq_n_s32(0);
        SYN_K_UNROLL(2)
        for (int h = 0; h < 2; h++) {
            /* q[k][i]: elements 128h + 32k + 16i .. +15, sub-block 8h + 2k + i */
            int8x16_t q[4][2];
            SYN_K_UNROLL(2)
            for (int i = 0; i < 2; i++) {
                const uint8x16_t l0 = vld1q_u8(blk->ql + 64 * h + 16 * i);
                const uint8x16_t l1 = vld1q_u8(blk->ql + 64 * h + 32 + 16 * i);
                const uint8x16_t qh = vld1q_u8(blk->qh + 32 * h + 16 * i);
                const uint8x16_t u[4] = {
                    vorrq_u8(vandq_u8(l0, low4), vshlq_n_u8(vandq_u8(qh, low2), 4)),
                    vorrq_u8(vandq_u8(l1, low4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 2), low2), 4)),
                    vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(qh, 4), low2), 4)),
                    vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(qh, 6), 4)),
                };
                SYN_K_UNROLL(4)
                for (int k = 0; k < 4; k++)
                    q[k][i] = vsubq_s8(vreinterpretq_s8_u8(u[k]), bias);
            }
            SYN_K_UNROLL(4)
            for (int k = 0; k < 4; k++) {
                const int j = 8 * h + 2 * k;
                SYN_K_UNROLL(4)
                for (int t = 0; t < n_tok; t++) {
                    const int8_t *aq = a[t * n_tok_stride + b].qs + 128 * h + 32 * k;
                    isum[t] = vmlaq_n_s32(isum[t], vdotq_s32(vdupq_n_s32(0), q[k][0], vld1q_s8(aq)),
                                          blk->scales[j]);
                    isum[t] =
                        vmlaq_n_s32(isum[t], vdotq_s32(vdupq_n_s32(0), q[k][1], vld1q_s8(aq + 16)),
                                    blk->scales[j + 1]);
                }
            }
        }
        SYN_K_UNROLL(4)
        for (int t = 0; t < n_tok; t++) {
            const float dd = fp16_f32(blk->d) * a[t * n_tok_stride + b].d;
            const float p = (float)vaddvq_s32(isum[t]) * dd;
            acc[t] += p;
        }
    }
    SYN_K_UNROLL(4)
    for (int t = 0; t < n_tok; t++)
        y[t * y_stride] = acc[t];
}

#include "kernels/kquants_rows.h"

KQ_KERNELS(q4_k, GGML_TYPE_Q4_K, dotprod, k_matmul)
KQ_KERNELS(q5_k, GGML_TYPE_Q5_K, dotprod, k_matmul)
KQ_KERNELS(q6_k, GGML_TYPE_Q6_K, dotprod, k_matmul)

/* ---- Q8_K quantizer (kernels.h's rule; bitwise the scalar one) ------------------------------- */

void syn_quantize_row_q8_k_dotprod(const float *x, block_q8_k *y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float *xb = x + b * QK_K;
        float32x4_t m = vdupq_n_f32(0.0f);
        for (int i = 0; i < QK_K; i += 4)
            m = vmaxq_f32(m, vabsq_f32(vld1q_f32(xb + i)));
        const float amax = vmaxvq_f32(m);
        memset(&y[b], 0, sizeof y[b]);
        if (amax == 0.0f) continue;
        /* the first element of largest |x| carries the sign */
        const float32x4_t vamax = vdupq_n_f32(amax);
        int first = 0;
        while (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(xb + first)), vamax)) == 0)
            first += 4;
        while (fabsf(xb[first]) != amax)
            first++;
        const float iscale = -127.0f / xb[first];
        for (int i = 0; i < QK_K; i += 16) {
            int16x4_t q16[4];
            SYN_K_UNROLL(4)
            for (int k = 0; k < 4; k++) {
                /* vcvtnq rounds to nearest, ties to even, like nearbyintf */
                q16[k] = vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(xb + i + 4 * k), iscale)));
            }
            /* the saturating narrow is the rule's min(127, q) (q >= -127 always) */
            const int8x16_t q8 = vcombine_s8(vqmovn_s16(vcombine_s16(q16[0], q16[1])),
                                             vqmovn_s16(vcombine_s16(q16[2], q16[3])));
            vst1q_s8(y[b].qs + i, q8);
            y[b].bsums[i / 16] = vaddlvq_s8(q8);
        }
        y[b].d = 1.0f / iscale;
    }
}
