/*
 * quants_dotprod.c: AArch64 Advanced SIMD kernels with the dot-product extension (SDOT); the
 * quantizers, single-row dot and Q4_0 / Q5_0 / Q4_1 / Q5_1 unpackers also serve the i8mm tier.
 *
 * Strategy: SDOT multiplies signed by signed bytes, so every int8 value is exact on both sides.
 * A block is two SDOTs into an int32x4; the per-block sums of 4 rows (matvec) or 4 tokens (matmul
 * tile) are folded with pairwise adds into one int32x4 whose lanes then follow kernels.h's float
 * sequence exactly (bitwise equal to scalar).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/fp16.h"
#include "kernels/kernels_impl.h"

SYN_K_INLINE float fp16_f32(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

SYN_K_INLINE float32x4_t fp16x4_f32(uint16_t h0, uint16_t h1, uint16_t h2, uint16_t h3) {
    const uint16_t h[4] = {h0, h1, h2, h3};
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

/* 4 int32 partial sums of the products of one weight block and one activation block. */
SYN_K_INLINE int32x4_t dot_block(const block_q8_0 *w, int8x16_t a0, int8x16_t a1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), vld1q_s8(w->qs), a0), vld1q_s8(w->qs + 16), a1);
}

/* [sum(d0), sum(d1), sum(d2), sum(d3)]. */
SYN_K_INLINE int32x4_t reduce4(const int32x4_t d[4]) {
    return vpaddq_s32(vpaddq_s32(d[0], d[1]), vpaddq_s32(d[2], d[3]));
}

/* One block by the Q8_0 rule; returns the unrounded d (Q8_1's sum uses it). */
SYN_K_INLINE float quantize_block_q8_0(const float *xb, block_q8_0 *yb) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0.0f);
    SYN_K_UNROLL(8)
    for (int i = 0; i < 8; i++) {
        v[i] = vld1q_f32(xb + 4 * i);
        m = vmaxq_f32(m, vabsq_f32(v[i]));
    }
    const float d = vmaxvq_f32(m) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    yb->d = syn_k_f32_to_fp16(d);
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++) {
        /* vcvtnq rounds to nearest, ties to even, like nearbyintf. */
        const int32x4_t q0 = vcvtnq_s32_f32(vmulq_n_f32(v[2 * i], id));
        const int32x4_t q1 = vcvtnq_s32_f32(vmulq_n_f32(v[2 * i + 1], id));
        const int16x8_t q16 = vcombine_s16(vqmovn_s32(q0), vqmovn_s32(q1));
        vst1_s8(yb->qs + 8 * i, vqmovn_s16(q16));
    }
    return d;
}

void syn_quantize_row_q8_0_dotprod(const float *x, block_q8_0 *y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++)
        quantize_block_q8_0(x + b * QK8_0, &y[b]);
}

void syn_quantize_row_q8_1_dotprod(const float *x, block_q8_0 *y, uint16_t *s, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = quantize_block_q8_0(x + b * QK8_0, &y[b]);
        const int32_t sum =
            (int32_t)vaddlvq_s8(vld1q_s8(y[b].qs)) + (int32_t)vaddlvq_s8(vld1q_s8(y[b].qs + 16));
        s[b] = syn_k_f32_to_fp16(d * (float)sum);
    }
}

float syn_vec_dot_q8_0_q8_0_dotprod(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++) {
        const int32_t isum =
            vaddvq_s32(dot_block(&w[b], vld1q_s8(a[b].qs), vld1q_s8(a[b].qs + 16)));
        const float s = fp16_f32(w[b].d) * fp16_f32(a[b].d);
        const float p = (float)isum * s;
        acc += p;
    }
    return acc;
}

void syn_matvec_q8_0_dotprod(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                             int64_t r1, const void *act, float *y) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const block_q8_0 *wr[4];
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++)
            wr[i] = syn_k_wrow(w, w_row_bytes, r + i);
        float32x4_t acc = vdupq_n_f32(0.0f); /* lane i: row r + i */
        for (int64_t b = 0; b < n_blocks; b++) {
            const int8x16_t a0 = vld1q_s8(a[b].qs), a1 = vld1q_s8(a[b].qs + 16);
            int32x4_t d[4];
            SYN_K_UNROLL(4)
            for (int i = 0; i < 4; i++) {
                __builtin_prefetch((const char *)&wr[i][b] + 4 * w_row_bytes);
                d[i] = dot_block(&wr[i][b], a0, a1);
            }
            const float32x4_t isum = vcvtq_f32_s32(reduce4(d));
            const float32x4_t s =
                vmulq_f32(fp16x4_f32(wr[0][b].d, wr[1][b].d, wr[2][b].d, wr[3][b].d),
                          vdupq_n_f32(fp16_f32(a[b].d)));
            const float32x4_t p = vmulq_f32(isum, s);
            acc = vaddq_f32(acc, p);
        }
        vst1q_f32(y + r, acc);
    }
    for (; r < r1; r++)
        y[r] = syn_vec_dot_q8_0_q8_0_dotprod(n_blocks, syn_k_wrow(w, w_row_bytes, r), a);
}

/* 4 rows x 4 tokens; acc[i] lane j is row r + i, token t0 + j. */
static void tile_4x4(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a,
                     int64_t t0, float *y, int64_t y_stride, int64_t r) {
    const block_q8_0 *at[4];
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++)
        at[j] = a + (t0 + j) * n_blocks;
    float32x4_t acc[4];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++)
        acc[i] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n_blocks; b++) {
        int8x16_t a0[4], a1[4];
        SYN_K_UNROLL(4)
        for (int j = 0; j < 4; j++) {
            a0[j] = vld1q_s8(at[j][b].qs);
            a1[j] = vld1q_s8(at[j][b].qs + 16);
        }
        const float32x4_t da = fp16x4_f32(at[0][b].d, at[1][b].d, at[2][b].d, at[3][b].d);
        SYN_K_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            int32x4_t d[4];
            SYN_K_UNROLL(4)
            for (int j = 0; j < 4; j++)
                d[j] = dot_block(&wr[i][b], a0[j], a1[j]);
            const float32x4_t isum = vcvtq_f32_s32(reduce4(d));
            const float32x4_t s = vmulq_f32(vdupq_n_f32(fp16_f32(wr[i][b].d)), da);
            const float32x4_t p = vmulq_f32(isum, s);
            acc[i] = vaddq_f32(acc[i], p);
        }
    }
    float out[4][4];
    SYN_K_UNROLL(4)
    for (int i = 0; i < 4; i++)
        vst1q_f32(out[i], acc[i]);
    for (int j = 0; j < 4; j++) {
        for (int i = 0; i < 4; i++)
            y[(t0 + j) * y_stride + r + i] = out[i][j];
    }
}

void syn_matmul_q8_0_dotprod(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                             int64_t r1, const void *act, int64_t n_tokens, float *y,
                             int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    syn_k_matmul_tiles(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 4, tile_4x4,
                       syn_vec_dot_q8_0_q8_0_dotprod, syn_matvec_q8_0_dotprod);
}

/* ---- Q4_0, Q5_0, Q4_1, Q5_1 unpacked into Q8_0 blocks of their codes (unpacked.c), for both
 * aarch64 tiers: low nibbles are elements 0..15, high nibbles 16..31; Q5's fifth bits (element i
 * at bit i of qh) become 16 by broadcasting qh's byte i / 8 to byte i and testing bit i % 8. */

/* Codes without bias: out[0] elements 0..15, out[1] 16..31. */
SYN_K_INLINE void nibbles(const uint8_t qs[16], uint8x16_t out[2]) {
    const uint8x16_t q = vld1q_u8(qs);
    out[0] = vandq_u8(q, vdupq_n_u8(0x0F));
    out[1] = vshrq_n_u8(q, 4);
}

SYN_K_INLINE void add_fifth_bits(const uint8_t qh[4], uint8x16_t c[2]) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t bits = vld1q_u8(bit), sixteen = vdupq_n_u8(16);
    SYN_K_UNROLL(2)
    for (int h = 0; h < 2; h++) {
        const uint8x16_t spread = vcombine_u8(vdup_n_u8(qh[2 * h]), vdup_n_u8(qh[2 * h + 1]));
        c[h] = vorrq_u8(c[h], vandq_u8(vtstq_u8(spread, bits), sixteen));
    }
}

SYN_K_INLINE void store_block(block_q8_0 *out, uint16_t d, const uint8x16_t c[2], uint8_t bias) {
    out->d = d;
    vst1q_s8(out->qs, vreinterpretq_s8_u8(vsubq_u8(c[0], vdupq_n_u8(bias))));
    vst1q_s8(out->qs + 16, vreinterpretq_s8_u8(vsubq_u8(c[1], vdupq_n_u8(bias))));
}

void syn_unpack_q4_0_dotprod(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    (void)m;
    const block_q4_0 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8x16_t c[2];
        nibbles(w[b].qs, c);
        store_block(&out[b], w[b].d, c, 8);
    }
}

void syn_unpack_q5_0_dotprod(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    (void)m;
    const block_q5_0 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8x16_t c[2];
        nibbles(w[b].qs, c);
        add_fifth_bits(w[b].qh, c);
        store_block(&out[b], w[b].d, c, 16);
    }
}

void syn_unpack_q4_1_dotprod(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    const block_q4_1 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8x16_t c[2];
        nibbles(w[b].qs, c);
        store_block(&out[b], w[b].d, c, 0);
        m[b] = fp16_f32(w[b].m);
    }
}

void syn_unpack_q5_1_dotprod(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m) {
    const block_q5_1 *w = w_row;
    for (int64_t b = 0; b < n_blocks; b++) {
        uint8x16_t c[2];
        nibbles(w[b].qs, c);
        add_fifth_bits(w[b].qh, c);
        store_block(&out[b], w[b].d, c, 0);
        m[b] = fp16_f32(w[b].m);
    }
}
