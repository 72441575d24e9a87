/* interleave.c: the x16 weight layouts (kernels.h) written from a matrix's rows, and rows read
 * back from them. Portable: the model's background thread runs it once per matrix, while decode
 * still reads the rows. */
#include <string.h>

#include "kernels/kernels_impl.h"

enum {
    X16_VEC = SYN_X16_ROWS * 4,   /* one vector: a dword of each of the 16 rows */
    X16_Q5_0_MASKS = 4 * X16_VEC, /* where a Q5_0 group block's fifth-bit masks start */
    X16_Q6_K_HALF = 24 * X16_VEC, /* a Q6_K group block's codes of one 128-element half */
};

size_t syn_x16_code_bytes(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q8_0: return (size_t)SYN_X16_ROWS * QK8_0;
    case GGML_TYPE_Q5_0: return X16_Q5_0_MASKS + 8 * sizeof(uint64_t);
    case GGML_TYPE_Q4_K: return 32 * X16_VEC;
    case GGML_TYPE_Q5_K: return 40 * X16_VEC;
    case GGML_TYPE_Q6_K: return 2 * X16_Q6_K_HALF;
    default: return 0;
    }
}

size_t syn_x16_scale_bytes(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q5_0: return (size_t)SYN_X16_ROWS * sizeof(uint16_t);
    case GGML_TYPE_Q4_K:
    case GGML_TYPE_Q5_K: return 4 * X16_VEC;
    case GGML_TYPE_Q6_K: return 4 * X16_VEC + SYN_X16_ROWS * sizeof(uint16_t);
    default: return 0;
    }
}

/* Copies 4 bytes between lane i of the vector at vec and the block's bytes at b, either way. */
static void lane_dword(uint8_t *vec, int i, uint8_t *b, bool pack) {
    if (pack)
        memcpy(vec + 4 * i, b, 4);
    else
        memcpy(b, vec + 4 * i, 4);
}

/* Row i of a group block (codes c, scales s) from or to block b. */
static void q8_0_lane(uint8_t *c, uint8_t *s, int i, block_q8_0 *b, bool pack) {
    for (int j = 0; j < 8; j++) { /* dword j of the block: codes 4j..4j+3, + 128 */
        uint8_t *lane = c + ((size_t)j * SYN_X16_ROWS + (size_t)i) * 4;
        uint32_t v;
        memcpy(&v, pack ? (const void *)(b->qs + 4 * j) : (const void *)lane, sizeof v);
        v ^= 0x80808080u;
        memcpy(pack ? (void *)lane : (void *)(b->qs + 4 * j), &v, sizeof v);
    }
    if (pack)
        memcpy(s + 2 * i, &b->d, sizeof b->d);
    else
        memcpy(&b->d, s + 2 * i, sizeof b->d);
}

static void q5_0_lane(uint8_t *c, uint8_t *s, int i, block_q5_0 *b, bool pack) {
    for (int v = 0; v < 4; v++) {
        if (pack)
            memcpy(c + ((size_t)v * SYN_X16_ROWS + (size_t)i) * 4, b->qs + 4 * v, 4);
        else
            memcpy(b->qs + 4 * v, c + ((size_t)v * SYN_X16_ROWS + (size_t)i) * 4, 4);
    }
    uint32_t qh = 0;
    if (pack) memcpy(&qh, b->qh, sizeof qh);
    for (int j = 0; j < 8; j++) {
        uint64_t mask;
        memcpy(&mask, c + X16_Q5_0_MASKS + 8 * j, sizeof mask);
        const uint64_t bits = (uint64_t)0xF << (4 * i);
        if (pack) {
            mask = (mask & ~bits) | (uint64_t)((qh >> (4 * j)) & 0xF) << (4 * i);
            memcpy(c + X16_Q5_0_MASKS + 8 * j, &mask, sizeof mask);
        } else {
            qh |= (uint32_t)((mask & bits) >> (4 * i)) << (4 * j);
        }
    }
    if (pack) {
        memcpy(s + 2 * i, &b->d, sizeof b->d);
    } else {
        memcpy(b->qh, &qh, sizeof qh);
        memcpy(&b->d, s + 2 * i, sizeof b->d);
    }
}

static void q4_k_lane(uint8_t *c, uint8_t *s, int i, block_q4_k *b, bool pack) {
    for (int v = 0; v < 32; v++) /* the packed codes, dword by dword */
        lane_dword(c + v * X16_VEC, i, b->qs + 4 * v, pack);
    for (int m = 0; m < 4; m++) /* d | dmin, then the 12 scale bytes */
        lane_dword(s + m * X16_VEC, i, (uint8_t *)b + 4 * m, pack);
}

static void q5_k_lane(uint8_t *c, uint8_t *s, int i, block_q5_k *b, bool pack) {
    for (int v = 0; v < 32; v++) /* the packed codes, as Q4_K's */
        lane_dword(c + v * X16_VEC, i, b->qs + 4 * v, pack);
    for (int k = 0; k < 8; k++) /* the fifth bits */
        lane_dword(c + (32 + k) * X16_VEC, i, b->qh + 4 * k, pack);
    for (int m = 0; m < 4; m++) /* d | dmin, then the 12 scale bytes, as Q4_K's */
        lane_dword(s + m * X16_VEC, i, (uint8_t *)b + 4 * m, pack);
}

static void q6_k_lane(uint8_t *c, uint8_t *s, int i, block_q6_k *b, bool pack) {
    for (int v = 0; v < 32; v++) /* ql: per half h, dword k of bytes 0..31, then of 32..63 */
        lane_dword(c + (v / 16) * X16_Q6_K_HALF + (v % 8) * 3 * X16_VEC + (v % 16 / 8) * X16_VEC, i,
                   b->ql + 4 * v, pack);
    for (int u = 0; u < 16; u++) /* qh: per half, dword k after ql's two */
        lane_dword(c + (u / 8) * X16_Q6_K_HALF + (u % 8) * 3 * X16_VEC + 2 * X16_VEC, i,
                   b->qh + 4 * u, pack);
    for (int q = 0; q < 4; q++)
        lane_dword(s + q * X16_VEC, i, (uint8_t *)b->scales + 4 * q, pack);
    if (pack)
        memcpy(s + 4 * X16_VEC + 2 * i, &b->d, sizeof b->d);
    else
        memcpy(&b->d, s + 4 * X16_VEC + 2 * i, sizeof b->d);
}

/* Copies row 16g + i's block k between the rows' block b and the layout, either way. */
static void x16_lane(uint32_t type, uint8_t *codes, uint8_t *scales, int64_t n_blocks, int64_t g,
                     int i, int64_t k, void *b, bool pack) {
    const size_t at = (size_t)g * (size_t)n_blocks + (size_t)k;
    uint8_t *c = codes + at * syn_x16_code_bytes(type);
    uint8_t *s = scales + at * syn_x16_scale_bytes(type);
    switch (type) {
    case GGML_TYPE_Q8_0: q8_0_lane(c, s, i, b, pack); break;
    case GGML_TYPE_Q5_0: q5_0_lane(c, s, i, b, pack); break;
    case GGML_TYPE_Q4_K: q4_k_lane(c, s, i, b, pack); break;
    case GGML_TYPE_Q5_K: q5_k_lane(c, s, i, b, pack); break;
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
