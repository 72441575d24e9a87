/*
 * codes.h: a weight block's integer codes, the operands of the integer dot products (kernels.h
 * states each type's contract over them). Portable C, static inline so each kernel file compiles
 * it with its own flags. The formulas are the dequantizers' (model/wtype.c) without the float
 * scales: element i of a block is d * codes[i] (Q4_0, Q5_0), d * codes[i] + m (Q4_1, Q5_1),
 * d * sc[j] * codes[i] - dmin * mn[j] (Q4_K, Q5_K) or d * sc[j] * codes[i] (Q6_K).
 */
#ifndef SYN_KERNELS_CODES_H
#define SYN_KERNELS_CODES_H

#include <stdint.h>
#include <string.h>

#include "kernels/blocks.h"

/* The 32 fifth bits of Q5_0 / Q5_1, element i at bit i. */
static inline uint32_t syn_k_qh32(const uint8_t qh[4]) {
    uint32_t v;
    memcpy(&v, qh, sizeof v);
    return v;
}

/* Low nibbles are elements 0..15, high nibbles 16..31; bias is subtracted from every code. */
static inline void syn_k_codes_nibbles(const uint8_t qs[16], uint32_t qh, int bias, int8_t c[32]) {
    for (int i = 0; i < 16; i++) {
        c[i] = (int8_t)((qs[i] & 0x0F) + (int)((qh >> i) & 1) * 16 - bias);
        c[i + 16] = (int8_t)((qs[i] >> 4) + (int)((qh >> (i + 16)) & 1) * 16 - bias);
    }
}

/* Q4_0: q - 8 in [-8, 7]. */
static inline void syn_k_codes_q4_0(const block_q4_0 *b, int8_t c[32]) {
    syn_k_codes_nibbles(b->qs, 0, 8, c);
}

/* Q4_1: q in [0, 15]. */
static inline void syn_k_codes_q4_1(const block_q4_1 *b, int8_t c[32]) {
    syn_k_codes_nibbles(b->qs, 0, 0, c);
}

/* Q5_0: q - 16 in [-16, 15]. */
static inline void syn_k_codes_q5_0(const block_q5_0 *b, int8_t c[32]) {
    syn_k_codes_nibbles(b->qs, syn_k_qh32(b->qh), 16, c);
}

/* Q5_1: q in [0, 31]. */
static inline void syn_k_codes_q5_1(const block_q5_1 *b, int8_t c[32]) {
    syn_k_codes_nibbles(b->qs, syn_k_qh32(b->qh), 0, c);
}

/* Q4_K / Q5_K (qh NULL for Q4_K): codes in [0, 15] / [0, 31] for elements 0..255 and the 6-bit
 * scale and min of each sub-block of 32. Group g's 32 bytes of qs hold sub-block 2g in their low
 * nibbles and 2g + 1 in their high ones; qh bit 2g / 2g + 1 of byte l is their element l's fifth
 * bit. */
static inline void syn_k_codes_k45(const uint8_t *qs, const uint8_t *qh,
                                   const uint8_t scales[K_SCALE_SIZE], uint8_t c[QK_K],
                                   uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 8; j++)
        syn_k_scale_min(j, scales, &sc[j], &mn[j]);
    for (int g = 0; g < 4; g++) {
        for (int l = 0; l < 32; l++) {
            const int hi_lo = qh ? ((qh[l] >> (2 * g)) & 1) * 16 : 0;
            const int hi_hi = qh ? ((qh[l] >> (2 * g + 1)) & 1) * 16 : 0;
            c[64 * g + l] = (uint8_t)((qs[32 * g + l] & 0x0F) + hi_lo);
            c[64 * g + 32 + l] = (uint8_t)((qs[32 * g + l] >> 4) + hi_hi);
        }
    }
}

/* The 8 scales and 8 mins of Q4_K / Q5_K as syn_k_scale_min gives them, four at a time from the
 * 12 bytes read as words (the kernels' hot path). */
static inline void syn_k_scales_k45(const uint8_t q[K_SCALE_SIZE], uint8_t sc[8], uint8_t mn[8]) {
    uint32_t w[3];
    memcpy(w, q, sizeof w);
    const uint32_t lo6 = 0x3F3F3F3Fu, lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u;
    const uint32_t s0 = w[0] & lo6, m0 = w[1] & lo6;
    const uint32_t s1 = (w[2] & lo4) | (((w[0] >> 6) & lo2) << 4);
    const uint32_t m1 = ((w[2] >> 4) & lo4) | (((w[1] >> 6) & lo2) << 4);
    memcpy(sc, &s0, 4);
    memcpy(sc + 4, &s1, 4);
    memcpy(mn, &m0, 4);
    memcpy(mn + 4, &m1, 4);
}

/* Q6_K: q - 32 in [-32, 31] for elements 0..255 (sub-block j of 16 has scale scales[j]). In each
 * half of 128, element 32k + l takes its low nibble from ql[l] (k even) or ql[l + 32] (k odd),
 * low for k < 2 and high after, and bits 2k..2k+1 of qh[l]. */
static inline void syn_k_codes_q6_k(const block_q6_k *b, int8_t c[QK_K]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        int8_t *o = c + 128 * h;
        for (int l = 0; l < 32; l++) {
            o[l] = (int8_t)(((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) - 32);
            o[l + 32] = (int8_t)(((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32);
            o[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            o[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

#endif
