/*
 * wtype.c: the weight-type table (wtype.h) and its row dequantizers, written from ggml's block
 * formulas (kernels/blocks.h). Each block is copied out with memcpy first: rows may sit at any
 * byte offset (fuzzed or in-memory files). The float operations are ggml's, in its order, so a
 * dequantized value is bitwise what ggml computes.
 */
#include "model/wtype.h"

#include <string.h>

#include "gguf/gguf.h"
#include "kernels/blocks.h"
#include "kernels/fp16.h"

static void dequantize_f32(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void dequantize_f16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] = syn_k_fp16_to_f32(h);
    }
}

static void dequantize_bf16(const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, p + 2 * i, sizeof h);
        dst[i] = syn_k_bits_f32((uint32_t)h << 16);
    }
}

static void dequantize_q4_0(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK4_0; b++, dst += QK4_0) {
        block_q4_0 blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        const float d = syn_k_fp16_to_f32(blk.d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = (float)((blk.qs[j] & 0x0F) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((blk.qs[j] >> 4) - 8) * d;
        }
    }
}

static void dequantize_q4_1(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK4_1; b++, dst += QK4_1) {
        block_q4_1 blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        const float d = syn_k_fp16_to_f32(blk.d), m = syn_k_fp16_to_f32(blk.m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (float)(blk.qs[j] & 0x0F) * d + m;
            dst[j + QK4_1 / 2] = (float)(blk.qs[j] >> 4) * d + m;
        }
    }
}

/* Element j's fifth bit (j < 16) and element j + 16's, as 0 or 16. */
static void fifth_bits(const uint8_t qh_bytes[4], int j, int *lo, int *hi) {
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof qh);
    *lo = (int)(((qh >> j) << 4) & 0x10);
    *hi = (int)((qh >> (j + 12)) & 0x10);
}

static void dequantize_q5_0(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK5_0; b++, dst += QK5_0) {
        block_q5_0 blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        const float d = syn_k_fp16_to_f32(blk.d);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int lo, hi;
            fifth_bits(blk.qh, j, &lo, &hi);
            dst[j] = (float)(((blk.qs[j] & 0x0F) | lo) - 16) * d;
            dst[j + QK5_0 / 2] = (float)(((blk.qs[j] >> 4) | hi) - 16) * d;
        }
    }
}

static void dequantize_q5_1(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK5_1; b++, dst += QK5_1) {
        block_q5_1 blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        const float d = syn_k_fp16_to_f32(blk.d), m = syn_k_fp16_to_f32(blk.m);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int lo, hi;
            fifth_bits(blk.qh, j, &lo, &hi);
            dst[j] = (float)((blk.qs[j] & 0x0F) | lo) * d + m;
            dst[j + QK5_1 / 2] = (float)((blk.qs[j] >> 4) | hi) * d + m;
        }
    }
}

static void dequantize_q8_0(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
        block_q8_0 blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        const float d = syn_k_fp16_to_f32(blk.d);
        for (int j = 0; j < QK8_0; j++)
            dst[j] = d * (float)blk.qs[j];
    }
}

/* Q4_K and Q5_K: 4 groups of 64 values, each two sub-blocks of 32 sharing 32 bytes of qs (low
 * nibbles first); qh (Q5_K, else NULL) adds 16 where the group's bit is set. */
static void dequantize_k_4_5(const uint8_t *qs, const uint8_t *qh, const uint8_t *scales,
                             uint16_t d16, uint16_t dmin16, float *dst) {
    const float d = syn_k_fp16_to_f32(d16), dmin = syn_k_fp16_to_f32(dmin16);
    for (int g = 0; g < QK_K / 64; g++, qs += 32, dst += 64) {
        uint8_t sc, mn;
        syn_k_scale_min(2 * g, scales, &sc, &mn);
        const float d1 = d * sc, m1 = dmin * mn;
        syn_k_scale_min(2 * g + 1, scales, &sc, &mn);
        const float d2 = d * sc, m2 = dmin * mn;
        const uint8_t lo_bit = (uint8_t)(1u << (2 * g)), hi_bit = (uint8_t)(2u << (2 * g));
        for (int l = 0; l < 32; l++) {
            const int high = qh && (qh[l] & lo_bit) ? 16 : 0;
            dst[l] = d1 * (float)((qs[l] & 0x0F) + high) - m1;
        }
        for (int l = 0; l < 32; l++) {
            const int high = qh && (qh[l] & hi_bit) ? 16 : 0;
            dst[32 + l] = d2 * (float)((qs[l] >> 4) + high) - m2;
        }
    }
}

static void dequantize_q4_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        block_q4_k blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        dequantize_k_4_5(blk.qs, NULL, blk.scales, blk.d, blk.dmin, dst);
    }
}

static void dequantize_q5_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        block_q5_k blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        dequantize_k_4_5(blk.qs, blk.qh, blk.scales, blk.d, blk.dmin, dst);
    }
}

/* Q6_K: 2 halves of 128 values; in a half, value l + 32 k (k = 0..3) takes its low nibble from
 * ql[l] (k even) or ql[l + 32] (k odd), low for k < 2 and high after, and bits 2k..2k+1 of qh[l]
 * on top; its scale is scales[l / 16 + 2 k]. */
static void dequantize_q6_k(const void *src, float *dst, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; b++) {
        block_q6_k blk;
        memcpy(&blk, (const uint8_t *)src + b * (int64_t)sizeof blk, sizeof blk);
        const float d = syn_k_fp16_to_f32(blk.d);
        const uint8_t *ql = blk.ql, *qh = blk.qh;
        const int8_t *sc = blk.scales;
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, dst += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                dst[l] = d * (float)sc[is] * (float)q1;
                dst[l + 32] = d * (float)sc[is + 2] * (float)q2;
                dst[l + 64] = d * (float)sc[is + 4] * (float)q3;
                dst[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
        }
    }
}

static const syn_wtype wtypes[] = {
    {GGML_TYPE_F32, dequantize_f32, GGML_TYPE_F32},
    {GGML_TYPE_F16, dequantize_f16, GGML_TYPE_F32},
    {GGML_TYPE_BF16, dequantize_bf16, GGML_TYPE_F32},
    {GGML_TYPE_Q8_0, dequantize_q8_0, GGML_TYPE_Q8_0},
    {GGML_TYPE_Q4_0, dequantize_q4_0, GGML_TYPE_Q8_0},
    {GGML_TYPE_Q4_1, dequantize_q4_1, GGML_TYPE_Q8_1},
    {GGML_TYPE_Q5_0, dequantize_q5_0, GGML_TYPE_Q8_0},
    {GGML_TYPE_Q5_1, dequantize_q5_1, GGML_TYPE_Q8_1},
    {GGML_TYPE_Q4_K, dequantize_q4_k, GGML_TYPE_Q8_K},
    {GGML_TYPE_Q5_K, dequantize_q5_k, GGML_TYPE_Q8_K},
    {GGML_TYPE_Q6_K, dequantize_q6_k, GGML_TYPE_Q8_K},
};

const syn_wtype *syn_wtype_get(uint32_t type) {
    for (size_t i = 0; i < sizeof wtypes / sizeof wtypes[0]; i++)
        if (wtypes[i].type == type) return &wtypes[i];
    return NULL;
}

const char *syn_wtype_names(void) {
    return "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k";
}
