/*
 * weight_quantize.c: float rows into ggml's weight blocks, for `synapse gen-model`
 * (syn_quantize_weight_row in synapse_internal.h). Simple quantizers, not ggml's: the codes differ
 * from llama-quantize's while the layouts and formulas are the same (src/model/wtype.c decodes
 * them); tests/unit/test_weight_quantize.c holds them to the step. Q8_0 is ggml's own rule, the
 * activations' quantizer (quants_scalar.c). Per block of 32, the scale comes
 * from the block's range: Q4_0 / Q5_0 map the value of largest magnitude to the lowest code, as
 * ggml does; Q4_1 / Q5_1 spread the codes from the minimum to the maximum. The k-quants round
 * every scale up, never down (the fp16 d and dmin of the super-block, then each sub-block's 6- or
 * 8-bit multiple of them), so each sub-block's grid covers its values and no code is clamped:
 * the error is at most half of the sub-block's step.
 */
#include <math.h>
#include <string.h>

#include "gguf/gguf.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"
#include "kernels/kernels_impl.h"
#include "synapse_internal.h"

/* Nearest integer, ties to even, for |v| < 2^22: adding and removing 1.5 * 2^23 rounds in the
 * default rounding mode without a libm call (half a billion calls per model). */
static inline float round_even(float v) { return (v + 12582912.0f) - 12582912.0f; }

/* round_even(v) clamped to lo..hi, as a code. */
static inline int code_of(float v, int lo, int hi) {
    float r = round_even(v);
    return r < (float)lo ? lo : r > (float)hi ? hi : (int)r;
}

/* The fp16 value nearest above v >= 0 (v itself when exact): a stored scale never falls below the
 * one asked for. */
static uint16_t fp16_up(float v) {
    uint16_t h = syn_k_f32_to_fp16(v);
    if (syn_k_fp16_to_f32(h) < v) h++;
    return h;
}

static void min_max(const float *x, int n, float *lo, float *hi) {
    *lo = *hi = x[0];
    for (int j = 1; j < n; j++) {
        *lo = fminf(*lo, x[j]);
        *hi = fmaxf(*hi, x[j]);
    }
}

/* The value of largest magnitude, sign kept (the first of equals). */
static float largest_magnitude(const float *x, int n) {
    float m = 0.0f;
    for (int j = 0; j < n; j++)
        if (fabsf(x[j]) > fabsf(m)) m = x[j];
    return m;
}

/* ---------------------------------------------------------------------------------------------
 * Blocks of 32
 * ------------------------------------------------------------------------------------------- */

/* Codes 0..2*half-1 of x[32] for the value d * (q - half), d = m / -half where m is the value of
 * largest magnitude: m gets code 0 exactly; a value as large as m of the other sign is clamped to
 * the top code (one step off), as in ggml. Returns the fp16 d. */
static uint16_t codes_symmetric(const float *x, int half, uint8_t q[32]) {
    uint16_t d16 = syn_k_f32_to_fp16(largest_magnitude(x, 32) / (float)-half);
    float d = syn_k_fp16_to_f32(d16), id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++)
        q[j] = (uint8_t)code_of(x[j] * id + (float)half, 0, 2 * half - 1);
    return d16;
}

/* Codes 0..top of x[32] for the value d * q + m: m is the minimum, d the range over top. Sets the
 * fp16 d and m. */
static void codes_min_max(const float *x, int top, uint8_t q[32], uint16_t *d16, uint16_t *m16) {
    float lo, hi;
    min_max(x, 32, &lo, &hi);
    *d16 = fp16_up((hi - lo) / (float)top);
    *m16 = syn_k_f32_to_fp16(lo);
    float d = syn_k_fp16_to_f32(*d16), m = syn_k_fp16_to_f32(*m16),
          id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++)
        q[j] = (uint8_t)code_of((x[j] - m) * id, 0, top);
}

/* Nibbles: elements 0..15 low, 16..31 high. */
static void pack_nibbles(const uint8_t q[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)((q[j] & 0x0F) | (q[j + 16] & 0x0F) << 4);
}

/* Fifth bits: element i's at bit i of a little-endian uint32. */
static void pack_fifth_bits(const uint8_t q[32], uint8_t qh[4]) {
    uint32_t bits = 0;
    for (int j = 0; j < 32; j++)
        bits |= (uint32_t)(q[j] >> 4) << j;
    for (int k = 0; k < 4; k++)
        qh[k] = (uint8_t)(bits >> (8 * k));
}

static void quantize_q4_0(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0, dst += sizeof(block_q4_0)) {
        block_q4_0 blk;
        uint8_t q[32];
        blk.d = codes_symmetric(x, 8, q);
        pack_nibbles(q, blk.qs);
        memcpy(dst, &blk, sizeof blk);
    }
}

static void quantize_q5_0(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0, dst += sizeof(block_q5_0)) {
        block_q5_0 blk;
        uint8_t q[32];
        blk.d = codes_symmetric(x, 16, q);
        pack_nibbles(q, blk.qs);
        pack_fifth_bits(q, blk.qh);
        memcpy(dst, &blk, sizeof blk);
    }
}

static void quantize_q4_1(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1, dst += sizeof(block_q4_1)) {
        block_q4_1 blk;
        uint8_t q[32];
        codes_min_max(x, 15, q, &blk.d, &blk.m);
        pack_nibbles(q, blk.qs);
        memcpy(dst, &blk, sizeof blk);
    }
}

static void quantize_q5_1(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1, dst += sizeof(block_q5_1)) {
        block_q5_1 blk;
        uint8_t q[32];
        codes_min_max(x, 31, q, &blk.d, &blk.m);
        pack_nibbles(q, blk.qs);
        pack_fifth_bits(q, blk.qh);
        memcpy(dst, &blk, sizeof blk);
    }
}

/* ---------------------------------------------------------------------------------------------
 * Super-blocks of 256
 * ------------------------------------------------------------------------------------------- */

/* The smallest multiple k (at most kmax) of unit with k * unit >= v; 0 when unit is 0. */
static int multiple_up(float v, float unit, int kmax) {
    if (unit <= 0.0f || v <= 0.0f) return 0;
    float k = ceilf(v / unit);
    return k > (float)kmax ? kmax : (int)k;
}

/* Q4_K / Q5_K: codes 0..top of x[256] for the value d*sc * q - dmin*mn per sub-block of 32 (sc, mn
 * 6-bit). A sub-block's offset -min(0, lowest) comes first (the format subtracts a non-negative
 * min), rounded up to a multiple of dmin; then its step covers highest + offset in top steps,
 * rounded up to a multiple of d. */
static void codes_k_4_5(const float *x, int top, uint8_t q[QK_K], uint16_t *d16, uint16_t *dmin16,
                        uint8_t scales[K_SCALE_SIZE]) {
    float lo[8], hi[8], max_offset = 0.0f;
    for (int s = 0; s < 8; s++) {
        min_max(x + 32 * s, 32, &lo[s], &hi[s]);
        max_offset = fmaxf(max_offset, -lo[s]);
    }
    *dmin16 = fp16_up(max_offset / 63.0f);
    const float dmin = syn_k_fp16_to_f32(*dmin16);
    uint8_t sc[8], mn[8];
    float need[8], max_need = 0.0f;
    for (int s = 0; s < 8; s++) {
        mn[s] = (uint8_t)multiple_up(-lo[s], dmin, 63);
        need[s] = (hi[s] + dmin * (float)mn[s]) / (float)top;
        max_need = fmaxf(max_need, need[s]);
    }
    *d16 = fp16_up(max_need / 63.0f);
    const float d = syn_k_fp16_to_f32(*d16);
    for (int s = 0; s < 8; s++) {
        sc[s] = (uint8_t)multiple_up(need[s], d, 63);
        /* The dequantizer's own products, so that the codes are rounded against its grid. */
        const float step = d * (float)sc[s], offset = dmin * (float)mn[s];
        const float inv = step != 0.0f ? 1.0f / step : 0.0f;
        for (int j = 32 * s; j < 32 * s + 32; j++)
            q[j] = (uint8_t)code_of((x[j] + offset) * inv, 0, top);
    }
    /* Sub-blocks 0..3 in the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7 in a nibble
     * of bytes 8..11 (scale low, min high) plus the top 2 bits of bytes 0..3 and 4..7. */
    for (int j = 0; j < 4; j++) {
        scales[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        scales[j + 4] = (uint8_t)(mn[j] | (mn[j + 4] >> 4) << 6);
        scales[j + 8] = (uint8_t)((sc[j + 4] & 0x0F) | (mn[j + 4] & 0x0F) << 4);
    }
}

/* Group g of 64 values: qs[32g + l] holds value 64g + l in its low nibble, 64g + 32 + l in its
 * high nibble. */
static void pack_k_nibbles(const uint8_t q[QK_K], uint8_t qs[QK_K / 2]) {
    for (int g = 0; g < QK_K / 64; g++)
        for (int l = 0; l < 32; l++)
            qs[32 * g + l] = (uint8_t)((q[64 * g + l] & 0x0F) | (q[64 * g + 32 + l] & 0x0F) << 4);
}

static void quantize_q4_k(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, dst += sizeof(block_q4_k)) {
        block_q4_k blk;
        uint8_t q[QK_K];
        codes_k_4_5(x, 15, q, &blk.d, &blk.dmin, blk.scales);
        pack_k_nibbles(q, blk.qs);
        memcpy(dst, &blk, sizeof blk);
    }
}

static void quantize_q5_k(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, dst += sizeof(block_q5_k)) {
        block_q5_k blk;
        uint8_t q[QK_K];
        codes_k_4_5(x, 31, q, &blk.d, &blk.dmin, blk.scales);
        pack_k_nibbles(q, blk.qs);
        /* Fifth bits: value 64g + l at bit 2g of qh[l], value 64g + 32 + l at bit 2g + 1. */
        memset(blk.qh, 0, sizeof blk.qh);
        for (int g = 0; g < QK_K / 64; g++)
            for (int l = 0; l < 32; l++)
                blk.qh[l] |= (uint8_t)((q[64 * g + l] >> 4) << (2 * g) | (q[64 * g + 32 + l] >> 4)
                                                                             << (2 * g + 1));
        memcpy(dst, &blk, sizeof blk);
    }
}

/* Q6_K: value d * sc * (q - 32) per sub-block of 16 (sc int8). Each sub-block's step is its
 * largest magnitude over 31 (codes 1..63 around 32: symmetric, nothing clamped), rounded up to a
 * multiple of d, the largest step over 127. */
static void quantize_q6_k(const float *x, int64_t n, uint8_t *dst) {
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K, dst += sizeof(block_q6_k)) {
        block_q6_k blk;
        float need[16], max_need = 0.0f;
        for (int s = 0; s < 16; s++) {
            need[s] = fabsf(largest_magnitude(x + 16 * s, 16)) / 31.0f;
            max_need = fmaxf(max_need, need[s]);
        }
        blk.d = fp16_up(max_need / 127.0f);
        const float d = syn_k_fp16_to_f32(blk.d);
        uint8_t q[QK_K];
        for (int s = 0; s < 16; s++) {
            blk.scales[s] = (int8_t)multiple_up(need[s], d, 127);
            const float step = d * (float)blk.scales[s], inv = step != 0.0f ? 1.0f / step : 0.0f;
            for (int j = 16 * s; j < 16 * s + 16; j++)
                q[j] = (uint8_t)code_of(x[j] * inv + 32.0f, 0, 63);
        }
        /* In each half of 128, value l + 32k (l < 32, k < 4): low nibble in ql[l] (k = 0, 2) or
         * ql[l + 32] (k = 1, 3), low for k < 2 and high after; high 2 bits at bits 2k of qh[l]. */
        memset(blk.qh, 0, sizeof blk.qh);
        for (int h = 0; h < 2; h++) {
            const uint8_t *qv = q + 128 * h;
            uint8_t *ql = blk.ql + 64 * h, *qh = blk.qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((qv[l] & 0x0F) | (qv[l + 64] & 0x0F) << 4);
                ql[l + 32] = (uint8_t)((qv[l + 32] & 0x0F) | (qv[l + 96] & 0x0F) << 4);
                for (int k = 0; k < 4; k++)
                    qh[l] |= (uint8_t)((qv[l + 32 * k] >> 4) << (2 * k));
            }
        }
        memcpy(dst, &blk, sizeof blk);
    }
}

bool syn_quantize_weight_row(uint32_t ggml_type, const float *x, int64_t n, void *dst) {
    switch (ggml_type) {
    case GGML_TYPE_F32: memcpy(dst, x, (size_t)n * sizeof *x); return true;
    case GGML_TYPE_Q8_0: syn_quantize_row_q8_0_scalar(x, dst, n); return true;
    case GGML_TYPE_Q4_0: quantize_q4_0(x, n, dst); return true;
    case GGML_TYPE_Q4_1: quantize_q4_1(x, n, dst); return true;
    case GGML_TYPE_Q5_0: quantize_q5_0(x, n, dst); return true;
    case GGML_TYPE_Q5_1: quantize_q5_1(x, n, dst); return true;
    case GGML_TYPE_Q4_K: quantize_q4_k(x, n, dst); return true;
    case GGML_TYPE_Q5_K: quantize_q5_k(x, n, dst); return true;
    case GGML_TYPE_Q6_K: quantize_q6_k(x, n, dst); return true;
    default: return false;
    }
}
