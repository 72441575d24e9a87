/*
 * quants_i8mm.c: AArch64 int8 matrix-multiply (SMMLA) matmul; decode uses the dot-product
 * matvec, as SMMLA would waste half its work on a single token.
 *
 * Strategy: SMMLA multiplies a 2x8 int8 matrix by the transpose of another, accumulating a 2x2
 * int32 tile. A tile here is 4 rows x 4 tokens = 2 row pairs x 2 token pairs; each block is four
 * 8-byte slices, and interleaving the slices of a pair (zip of 64-bit halves) forms the operands.
 * The 2x2 int32 results are whole block sums already, [ra.ta, ra.tb, rb.ta, rb.tb], so each lane
 * then follows kernels.h's float sequence exactly (bitwise equal to scalar).
 */
#include <arm_neon.h>
#include <string.h>

#include "kernels/kernels_impl.h"

SYN_K_INLINE float fp16_f32(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, sizeof f);
    return (float)f;
}

/* The four SMMLA operands of a pair of blocks: slice k holds bytes 8k..8k+7 of x then of y. */
SYN_K_INLINE void pair_slices(const int8_t *x, const int8_t *y, int8x16_t out[4]) {
    const int64x2_t x0 = vreinterpretq_s64_s8(vld1q_s8(x)),
                    x1 = vreinterpretq_s64_s8(vld1q_s8(x + 16));
    const int64x2_t y0 = vreinterpretq_s64_s8(vld1q_s8(y)),
                    y1 = vreinterpretq_s64_s8(vld1q_s8(y + 16));
    out[0] = vreinterpretq_s8_s64(vzip1q_s64(x0, y0));
    out[1] = vreinterpretq_s8_s64(vzip2q_s64(x0, y0));
    out[2] = vreinterpretq_s8_s64(vzip1q_s64(x1, y1));
    out[3] = vreinterpretq_s8_s64(vzip2q_s64(x1, y1));
}

/* acc[p][q] lanes: [row 2p . token 2q, row 2p . token 2q+1, row 2p+1 . token 2q, row 2p+1 . token
 * 2q+1]. */
static void tile_4x4(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a,
                     int64_t t0, float *y, int64_t y_stride, int64_t r) {
    const block_q8_0 *at[4];
    SYN_K_UNROLL(4)
    for (int j = 0; j < 4; j++)
        at[j] = a + (t0 + j) * n_blocks;
    float32x4_t acc[2][2];
    SYN_K_UNROLL(2)
    for (int p = 0; p < 2; p++)
        acc[p][0] = acc[p][1] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n_blocks; b++) {
        int8x16_t ws[2][4], as[2][4];
        float32x4_t dw[2], da[2];
        SYN_K_UNROLL(2)
        for (int p = 0; p < 2; p++) {
            pair_slices(wr[2 * p][b].qs, wr[2 * p + 1][b].qs, ws[p]);
            pair_slices(at[2 * p][b].qs, at[2 * p + 1][b].qs, as[p]);
            const float w0 = fp16_f32(wr[2 * p][b].d), w1 = fp16_f32(wr[2 * p + 1][b].d);
            const float a0 = fp16_f32(at[2 * p][b].d), a1 = fp16_f32(at[2 * p + 1][b].d);
            const float wv[4] = {w0, w0, w1, w1}, av[4] = {a0, a1, a0, a1};
            dw[p] = vld1q_f32(wv);
            da[p] = vld1q_f32(av);
        }
        SYN_K_UNROLL(2)
        for (int p = 0; p < 2; p++) {
            SYN_K_UNROLL(2)
            for (int q = 0; q < 2; q++) {
                int32x4_t m = vdupq_n_s32(0);
                SYN_K_UNROLL(4)
                for (int k = 0; k < 4; k++)
                    m = vmmlaq_s32(m, ws[p][k], as[q][k]);
                const float32x4_t s = vmulq_f32(dw[p], da[q]);
                const float32x4_t prod = vmulq_f32(vcvtq_f32_s32(m), s);
                acc[p][q] = vaddq_f32(acc[p][q], prod);
            }
        }
    }
    for (int p = 0; p < 2; p++) {
        for (int q = 0; q < 2; q++) {
            float out[4];
            vst1q_f32(out, acc[p][q]);
            y[(t0 + 2 * q) * y_stride + r + 2 * p] = out[0];
            y[(t0 + 2 * q + 1) * y_stride + r + 2 * p] = out[1];
            y[(t0 + 2 * q) * y_stride + r + 2 * p + 1] = out[2];
            y[(t0 + 2 * q + 1) * y_stride + r + 2 * p + 1] = out[3];
        }
    }
}

void syn_matvec_q8_0_i8mm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                          int64_t r1, const void *act, float *y) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    syn_matvec_q8_0_dotprod(n_blocks, w, w_row_bytes, r0, r1, a, y);
}

void syn_matmul_q8_0_i8mm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                          int64_t r1, const void *act, int64_t n_tokens, float *y,
                          int64_t y_stride) {
    const block_q8_0 *a = act; /* the Q8_0 activation rows */
    syn_k_matmul_tiles(n_blocks, w, w_row_bytes, r0, r1, a, n_tokens, y, y_stride, 4, tile_4x4,
                       syn_vec_dot_q8_0_q8_0_dotprod, syn_matvec_q8_0_dotprod);
}
