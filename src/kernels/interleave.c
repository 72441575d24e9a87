/* interleave.c: the x16 weight layouts (kernels.h) written from a matrix's rows, and rows read
 * back from them. Portable: the model's background thread runs it once per matrix, while decode
 * still reads the rows. */
#include <string.h>

#include "kernels/kernels_impl.h"

size_t syn_x16_code_bytes(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q8_0: return SYN_X16_Q8_0_CODES;
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q5_1: return SYN_X16_Q5_0_CODES;
    case GGML_TYPE_Q4_0:
    case GGML_TYPE_Q4_1: return SYN_X16_Q4_0_CODES;
    case GGML_TYPE_Q4_K: return SYN_X16_Q4_K_CODES;
    case GGML_TYPE_Q5_K: return SYN_X16_Q5_K_CODES;
    case GGML_TYPE_Q6_K: return SYN_X16_Q6_K_CODES;
    default: return 0;
    }
}

size_t syn_x16_scale_bytes(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q5_0:
    case GGML_TYPE_Q4_0: return SYN_X16_D_SCALES;
    case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q4_1: return SYN_X16_DM_SCALES;
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K: return SYN_X16_K45_SCALES;
    case GGML_TYPE_Q6_K: return SYN_X16_Q6_K_SCALES;
    default: return 0;
    }
}

/* Copies n bytes between the layout at at and the block's bytes at b: into the layout when
 * pack, back into the block otherwise (one function per type for both directions keeps each
 * layout's offsets in one place). */
static void move(uint8_t *at, void *b, size_t n, bool pack) {
    if (pack)
        memcpy(at, b, n);
    else
        memcpy(b, at, n);
}

/* 4 bytes between lane i of the vector at vec and the block's bytes at b. */
static void lane_dword(uint8_t *vec, int i, void *b, bool pack) { move(vec + 4 * i, b, 4, pack); }

/* Row i of a group block (codes c, scales s) from or to block b. */
static void q8_0_lane(uint8_t *c, uint8_t *s, int i, block_q8_0 *b, bool pack) {
    for (int j = 0; j < 8; j++) { /* dword j of the block: codes 4j..4j+3, stored + 128 */
        uint8_t *lane = c + j * SYN_X16_VEC + 4 * i;
        move(lane, b->qs + 4 * j, 4, pack);
        uint8_t *flip = pack ? lane : (uint8_t *)(b->qs + 4 * j);
        for (int e = 0; e < 4; e++)
            flip[e] ^= 0x80;
    }
    move(s + 2 * i, &b->d, sizeof b->d, pack);
}

/* The 32-value types but Q8_0: the nibble bytes as stored, then (qh: Q5_0's and Q5_1's fifth
 * bits, NULL for Q4_0 and Q4_1) mask j, whose bits 4i .. 4i + 3 are qh's bits 4j .. 4j + 3; the
 * scales: d, then (m: Q4_1's and Q5_1's, else NULL) m. */
static void small_lane(uint8_t *c, uint8_t *s, int i, uint16_t *d, uint16_t *m, uint8_t *qh,
                       uint8_t *qs, bool pack) {
    for (int v = 0; v < 4; v++)
        lane_dword(c + v * SYN_X16_VEC, i, qs + 4 * v, pack);
    uint32_t bits = 0;
    if (qh && pack) memcpy(&bits, qh, sizeof bits);
    for (int j = 0; qh && j < 8; j++) {
        uint64_t mask;
        memcpy(&mask, c + SYN_X16_Q5_0_MASKS + 8 * j, sizeof mask);
        const uint64_t lane = (uint64_t)0xF << (4 * i);
        if (pack) {
            mask = (mask & ~lane) | (uint64_t)((bits >> (4 * j)) & 0xF) << (4 * i);
            memcpy(c + SYN_X16_Q5_0_MASKS + 8 * j, &mask, sizeof mask);
        } else {
            bits |= (uint32_t)((mask & lane) >> (4 * i)) << (4 * j);
        }
    }
    if (qh && !pack) memcpy(qh, &bits, sizeof bits);
    move(s + 2 * i, d, sizeof *d, pack);
    if (m) move(s + 2 * SYN_X16_ROWS + 2 * i, m, sizeof *m, pack);
}

/* Q4_K and Q5_K (qh: Q5_K's fifth bits, NULL for Q4_K): the packed codes dword by dword, then
 * the fifth bits; the scales: the 16-byte head (d | dmin, the 12 scale bytes) the two share. */
static void k45_lane(uint8_t *c, uint8_t *s, int i, void *head, uint8_t *qs, uint8_t *qh,
                     bool pack) {
    for (int v = 0; v < 32; v++)
        lane_dword(c + v * SYN_X16_VEC, i, qs + 4 * v, pack);
    for (int k = 0; qh && k < 8; k++)
        lane_dword(c + SYN_X16_Q4_K_CODES + k * SYN_X16_VEC, i, qh + 4 * k, pack);
    for (int m = 0; m < 4; m++)
        lane_dword(s + m * SYN_X16_VEC, i, (uint8_t *)head + 4 * m, pack);
}

static void q6_k_lane(uint8_t *c, uint8_t *s, int i, block_q6_k *b, bool pack) {
    for (int v = 0; v < 32; v++) { /* ql: per half h, dword k of bytes 0..31, then of 32..63 */
        uint8_t *at = c + (v / 16) * SYN_X16_Q6_K_HALF + (v % 8) * 3 * SYN_X16_VEC;
        lane_dword(at + (v % 16 / 8) * SYN_X16_VEC, i, b->ql + 4 * v, pack);
    }
    for (int u = 0; u < 16; u++) { /* qh: per half, dword k after ql's two */
        uint8_t *at = c + (u / 8) * SYN_X16_Q6_K_HALF + (u % 8) * 3 * SYN_X16_VEC;
        lane_dword(at + 2 * SYN_X16_VEC, i, b->qh + 4 * u, pack);
    }
    for (int q = 0; q < 4; q++)
        lane_dword(s + q * SYN_X16_VEC, i, (uint8_t *)b->scales + 4 * q, pack);
    move(s + 4 * SYN_X16_VEC + 2 * i, &b->d, sizeof b->d, pack);
}

/* Copies row 16g + i's block k between the rows' block b and the layout, either way. */
static void x16_lane(uint32_t type, uint8_t *codes, uint8_t *scales, int64_t n_blocks, int64_t g,
                     int i, int64_t k, void *b, bool pack) {
    const size_t at = (size_t)g * (size_t)n_blocks + (size_t)k;
    uint8_t *c = codes + at * syn_x16_code_bytes(type);
    uint8_t *s = scales + at * syn_x16_scale_bytes(type);
    switch (type) {
    case GGML_TYPE_Q8_0: q8_0_lane(c, s, i, b, pack); break;
    case GGML_TYPE_Q5_0: {
        block_q5_0 *x = b;
        small_lane(c, s, i, &x->d, NULL, x->qh, x->qs, pack);
        break;
    }
    case GGML_TYPE_Q4_0: {
        block_q4_0 *x = b;
        small_lane(c, s, i, &x->d, NULL, NULL, x->qs, pack);
        break;
    }
    case GGML_TYPE_Q5_1: {
        block_q5_1 *x = b;
        small_lane(c, s, i, &x->d, &x->m, x->qh, x->qs, pack);
        break;
    }
    case GGML_TYPE_Q4_1: {
        block_q4_1 *x = b;
        small_lane(c, s, i, &x->d, &x->m, NULL, x->qs, pack);
        break;
    }
    case GGML_TYPE_Q4_K: k45_lane(c, s, i, b, ((block_q4_k *)b)->qs, NULL, pack); break;
    case GGML_TYPE_Q5_K:
        k45_lane(c, s, i, b, ((block_q5_k *)b)->qs, ((block_q5_k *)b)->qh, pack);
        break;
    case GGML_TYPE_Q6_K: q6_k_lane(c, s, i, b, pack); break;
    default: break;
    }
}

void syn_x16_pack(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t g0,
                  int64_t g1, uint8_t *codes, uint8_t *scales) {
    const size_t bb = ggml_type_size(type);
    for (int64_t g = g0; g < g1; g++) {
        for (int i = 0; i < SYN_X16_ROWS; i++) {
            const uint8_t *row = (const uint8_t *)w + (size_t)(g * SYN_X16_ROWS + i) * w_row_bytes;
            for (int64_t k = 0; k < n_blocks; k++) /* the packing direction only reads the row */
                x16_lane(type, codes, scales, n_blocks, g, i, k, (void *)(row + (size_t)k * bb),
                         true);
        }
    }
}

void syn_x16_block(uint32_t type, const syn_x16 *x, int64_t n_blocks, int64_t r, int64_t k,
                   void *block) {
    /* the unpacking direction only reads the arrays */
    x16_lane(type, (uint8_t *)x->codes, (uint8_t *)x->scales, n_blocks, r / SYN_X16_ROWS,
             (int)(r % SYN_X16_ROWS), k, block, false);
}
