/* unpacked.c: Q4_0, Q5_0, Q4_1 and Q5_1 through a tier's Q8_0 kernels (kernels_impl.h:
 * syn_k_via_q8_0). A group of rows is unpacked into a stack buffer of Q8_0 blocks of their codes,
 * then the tier's Q8_0 matvec or matmul runs on it: the Q8_0 contract over the codes is exactly
 * these types' (kernels.h), so the result is bitwise the scalar tier's. The unpacking costs a
 * store and a load of 34 bytes per block in L1/L2; matmul repays it over its tokens. */
#include "kernels/fp16.h"
#include "kernels/kernels_impl.h"

enum {
    MV_GROUP_BYTES = 24 * 1024,  /* matvec: rows unpacked per call stay in L1 */
    MM_GROUP_BYTES = 128 * 1024, /* matmul: up to 16 rows (a full AVX-512 tile) even for long rows */
    MAX_GROUP_BLOCKS = MM_GROUP_BYTES / sizeof(block_q8_0),
};

/* acc_m of kernels.h: m[b] * s[b] added in order from 0. */
static float min_term(const float *m, const uint16_t *s, int64_t n_blocks) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++) {
        const float p = m[b] * syn_k_fp16_to_f32(s[b]);
        acc += p;
    }
    return acc;
}

/* Rows per unpacked group: as many as fit `bytes`, at least 8 for matvec (its per-call activation
 * preparation is then shared by 8 rows), rounded down to whole 16-row tiles for matmul. */
static int64_t group_rows(int64_t n_blocks, size_t bytes, int64_t min_rows) {
    int64_t g = (int64_t)(bytes / sizeof(block_q8_0)) / n_blocks;
    if (g < min_rows) g = min_rows;
    if (g * n_blocks > (int64_t)MAX_GROUP_BLOCKS) g = (int64_t)MAX_GROUP_BLOCKS / n_blocks;
    return g >= 32 ? g - g % 16 : g;
}

static void unpack_group(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t g0,
                         int64_t g1, block_q8_0 *buf, float *m) {
    for (int64_t r = g0; r < g1; r++)
        v->unpack((const char *)w + (size_t)r * w_row_bytes, n_blocks, buf + (r - g0) * n_blocks, m + (r - g0) * n_blocks);
}

void syn_k_matvec_unpacked(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                           int64_t r1, const void *act, float *y) {
    if (n_blocks > (int64_t)MAX_GROUP_BLOCKS) {
        for (int64_t r = r0; r < r1; r++) y[r] = v->row_dot(n_blocks, (const char *)w + (size_t)r * w_row_bytes, act);
        return;
    }
    const syn_act_q8_1 *a1 = act;
    const block_q8_0 *aq = v->has_min ? a1->q : act;
    block_q8_0 buf[MAX_GROUP_BLOCKS];
    float m[MAX_GROUP_BLOCKS];
    const int64_t group = group_rows(n_blocks, MV_GROUP_BYTES, 8);
    for (int64_t g0 = r0; g0 < r1; g0 += group) {
        const int64_t g1 = g0 + group < r1 ? g0 + group : r1;
        unpack_group(v, n_blocks, w, w_row_bytes, g0, g1, buf, m);
        v->q8_matvec(n_blocks, buf, (size_t)n_blocks * sizeof(block_q8_0), 0, g1 - g0, aq, y + g0);
        if (v->has_min)
            for (int64_t r = g0; r < g1; r++) y[r] = y[r] + min_term(m + (r - g0) * n_blocks, a1->s, n_blocks);
    }
}

void syn_k_matmul_unpacked(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                           int64_t r1, const void *act, int64_t n_tokens, float *y, int64_t y_stride) {
    if (n_blocks > (int64_t)MAX_GROUP_BLOCKS) {
        const syn_act_q8_1 *a1 = act;
        for (int64_t t = 0; t < n_tokens; t++) {
            const syn_act_q8_1 at = v->has_min ? (syn_act_q8_1){a1->q + t * n_blocks, a1->s + t * n_blocks}
                                               : (syn_act_q8_1){0};
            const void *row_act = v->has_min ? (const void *)&at : (const void *)((const block_q8_0 *)act + t * n_blocks);
            syn_k_matvec_unpacked(v, n_blocks, w, w_row_bytes, r0, r1, row_act, y + t * y_stride);
        }
        return;
    }
    const syn_act_q8_1 *a1 = act;
    const block_q8_0 *aq = v->has_min ? a1->q : act;
    block_q8_0 buf[MAX_GROUP_BLOCKS];
    float m[MAX_GROUP_BLOCKS];
    const int64_t group = group_rows(n_blocks, MM_GROUP_BYTES, 16);
    for (int64_t g0 = r0; g0 < r1; g0 += group) {
        const int64_t g1 = g0 + group < r1 ? g0 + group : r1;
        unpack_group(v, n_blocks, w, w_row_bytes, g0, g1, buf, m);
        v->q8_matmul(n_blocks, buf, (size_t)n_blocks * sizeof(block_q8_0), 0, g1 - g0, aq, n_tokens, y + g0, y_stride);
        if (!v->has_min) continue;
        for (int64_t t = 0; t < n_tokens; t++) {
            float *yt = y + t * y_stride;
            for (int64_t r = g0; r < g1; r++)
                yt[r] = yt[r] + min_term(m + (r - g0) * n_blocks, a1->s + t * n_blocks, n_blocks);
        }
    }
}
