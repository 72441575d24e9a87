/*
 * blocks.h: the byte layouts of ggml's quantized weight blocks, as GGUF files store them (all
 * little-endian, no padding). The formulas that turn a block into floats are in
 * src/model/wtype.c (the specification every kernel must agree with).
 *
 *   type  values  bytes  value of element i
 *   Q4_0    32     18    d * (q4 - 8)
 *   Q4_1    32     20    d * q4 + m
 *   Q5_0    32     22    d * (q5 - 16)            (the fifth bit of element i in qh bit i)
 *   Q5_1    32     24    d * q5 + m
 *   Q8_0    32     34    d * q8
 *   Q4_K   256    144    8 sub-blocks of 32 with 6-bit scale sc and min mn: d*sc * q4 - dmin*mn
 *   Q5_K   256    176    as Q4_K with a fifth bit per element
 *   Q6_K   256    210    16 sub-blocks of 16 with an int8 scale: d * sc * (q6 - 32)
 * In the 32-value types the low nibbles of qs hold elements 0..15 and the high nibbles 16..31.
 */
#ifndef SYN_KERNELS_BLOCKS_H
#define SYN_KERNELS_BLOCKS_H

#include <stdint.h>

enum { QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32, QK_K = 256, K_SCALE_SIZE = 12 };

typedef struct block_q4_0 {
    uint16_t d; /* fp16 scale */
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

typedef struct block_q4_1 {
    uint16_t d, m; /* fp16 scale and offset */
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

typedef struct block_q5_0 {
    uint16_t d;
    uint8_t qh[4]; /* fifth bits: element i at bit i of the little-endian uint32 */
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

typedef struct block_q5_1 {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

/* A Q8_0 block: 32 int8 codes sharing one fp16 scale; value = d * q. Also the activation format
 * of the optimized backend's integer dot products. */
typedef struct block_q8_0 {
    uint16_t d; /* fp16 scale */
    int8_t qs[QK8_0];
} block_q8_0;

/* The activation of the k-quants' dot products (ggml's block_q8_K): 256 int8 codes sharing one
 * float scale, value = d * q, and the sums of each 16 codes (for the k-quants' min and offset
 * terms). */
typedef struct block_q8_k {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_k;

typedef struct block_q4_k {
    uint16_t d, dmin;             /* fp16 super-block scales of the sub-block scales and mins */
    uint8_t scales[K_SCALE_SIZE]; /* 8 6-bit scales and 8 6-bit mins, packed */
    uint8_t qs[QK_K / 2];         /* 4 groups of 64 values: 32 low nibbles, then 32 high */
} block_q4_k;

typedef struct block_q5_k {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8]; /* fifth bits: group g's low half at bit 2g, high half at bit 2g + 1 */
    uint8_t qs[QK_K / 2];
} block_q5_k;

typedef struct block_q6_k {
    uint8_t ql[QK_K / 2]; /* low 4 bits */
    uint8_t qh[QK_K / 4]; /* high 2 bits */
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_k;

_Static_assert(sizeof(block_q4_0) == 18, "ggml's Q4_0 block is 18 bytes");
_Static_assert(sizeof(block_q4_1) == 20, "ggml's Q4_1 block is 20 bytes");
_Static_assert(sizeof(block_q5_0) == 22, "ggml's Q5_0 block is 22 bytes");
_Static_assert(sizeof(block_q5_1) == 24, "ggml's Q5_1 block is 24 bytes");
_Static_assert(sizeof(block_q8_0) == 34, "ggml's Q8_0 block is 34 bytes");
_Static_assert(sizeof(block_q8_k) == 292, "ggml's Q8_K block is 292 bytes");
_Static_assert(sizeof(block_q4_k) == 144, "ggml's Q4_K block is 144 bytes");
_Static_assert(sizeof(block_q5_k) == 176, "ggml's Q5_K block is 176 bytes");
_Static_assert(sizeof(block_q6_k) == 210, "ggml's Q6_K block is 210 bytes");

/* Sub-block j's 6-bit scale and min from the 12 packed bytes of Q4_K / Q5_K: sub-blocks 0..3 keep
 * theirs in the low 6 bits of bytes j and j + 4; sub-blocks 4..7 split theirs over a nibble of
 * byte j + 4 and the top 2 bits of bytes j - 4 (scale) and j (min). */
static inline void syn_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

#endif
