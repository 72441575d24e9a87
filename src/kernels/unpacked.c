/* unpacked.c: Q4_0, Q5_0, Q4_1 and Q5_1 through a tier's Q8_0 kernels (kernels_impl.h:
 * syn_k_via_q8_0). A group of rows is unpacked into a stack buffer of Q8_0 blocks of their codes,
 * then the tier's Q8_0 matvec or matmul runs on it: the Q8_0 contract over the codes is exactly
 * these types' (kernels.h), so the result is bitwise the scalar tier's. The unpacking costs a
 * store and a load of 34 bytes per block in L1/L2; matmul repays it over its tokens. The matmuls
 * of AVX2 and the ARM tiers come here (the VNNI tiers unpack in registers as their lane tiles are
 * transposed: quants_x86.h, x86_matmul_codes, and take only syn_k_add_min_terms from here); of
 * matvec only the ARM tiers' (x86 unpacks in registers: x86_matvec_codes). */
#include "kernels/fp16.h"
#include "kernels/kernels_impl.h"

enum {
    MV_GROUP_BYTES = 24 * 1024, /* matvec: rows unpacked per call stay in L1 */
    MM_GROUP_BYTES =
        128 * 1024, /* matmul: up to 16 rows (a full AVX-512 tile) even for long rows */
    MAX_GROUP_BLOCKS = MM_GROUP_BYTES / sizeof(block_q8_0),
};
_Static_assert((int)MAX_GROUP_BLOCKS <= (int)SYN_K_MIN_TERMS_MAX,
               "a group's m fits syn_k_add_min_terms's buffers");

/* acc_m of kernels.h: m[b] * s[b] added in order from 0 (s already as floats). */
static float min_term(const float *m, const float *s, int64_t n_blocks) {
    float acc = 0.0f;
    for (int64_t b = 0; b < n_blocks; b++) {
        const float p = m[b] * s[b];
        acc += p;
    }
    return acc;
}

/* acc[r] = acc_m of rows r < nr, their m transposed in mt[b * nr + r]: rows in the lanes of
 * vector registers (GCC vector extension: SSE on x86-64, NEON on aarch64), four vectors at a time
 * so that four add chains overlap; each lane is one row's own multiply-then-add sequence. */
typedef float f32x4 __attribute__((vector_size(16)));

static void min_terms_rows(const float *mt, const float *sf, int64_t n_blocks, int64_t nr,
                           float *acc) {
    int64_t r = 0;
    for (; r + 16 <= nr; r += 16) {
        f32x4 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, m0, m1, m2, m3;
        for (int64_t b = 0; b < n_blocks; b++) {
            const float *mb = mt + b * nr + r;
            memcpy(&m0, mb, sizeof m0);
            memcpy(&m1, mb + 4, sizeof m1);
            memcpy(&m2, mb + 8, sizeof m2);
            memcpy(&m3, mb + 12, sizeof m3);
            const f32x4 p0 = m0 * sf[b], p1 = m1 * sf[b], p2 = m2 * sf[b], p3 = m3 * sf[b];
            a0 = a0 + p0;
            a1 = a1 + p1;
            a2 = a2 + p2;
            a3 = a3 + p3;
        }
        memcpy(acc + r, &a0, sizeof a0);
        memcpy(acc + r + 4, &a1, sizeof a1);
        memcpy(acc + r + 8, &a2, sizeof a2);
        memcpy(acc + r + 12, &a3, sizeof a3);
    }
    for (; r < nr; r++) {
        float a = 0.0f;
        for (int64_t b = 0; b < n_blocks; b++) {
            const float p = mt[b * nr + r] * sf[b];
            a += p;
        }
        acc[r] = a;
    }
}

/* The fp16 sums of one token's Q8_1 row as floats. */
static void sums_f32(const uint16_t *s, int64_t n_blocks, float *out) {
    for (int64_t b = 0; b < n_blocks; b++)
        out[b] = syn_k_fp16_to_f32(s[b]);
}

void syn_k_add_min_terms(int64_t n_blocks, const float *m, int64_t nr, const uint16_t *s,
                         int64_t n_tokens, float *y, int64_t y_stride) {
    float mt[SYN_K_MIN_TERMS_MAX], sf[SYN_K_MIN_TERMS_MAX], acc[SYN_K_MIN_TERMS_MAX];
    /* m transposed to [block][row], so each block's step is one pass over the rows
     * (vectorizable), each row's sum still in block order */
    for (int64_t r = 0; r < nr; r++)
        for (int64_t b = 0; b < n_blocks; b++)
            mt[b * nr + r] = m[r * n_blocks + b];
    for (int64_t t = 0; t < n_tokens; t++) {
        sums_f32(s + t * n_blocks, n_blocks, sf);
        min_terms_rows(mt, sf, n_blocks, nr, acc);
        float *yt = y + t * y_stride;
        for (int64_t r = 0; r < nr; r++)
            yt[r] = yt[r] + acc[r];
    }
}

/* Rows per unpacked group: as many as fit `bytes`, at least 8 for matvec (its per-call activation
 * preparation is then shared by 8 rows), rounded down to whole 16-row tiles for matmul. */
static int64_t group_rows(int64_t n_blocks, size_t bytes, int64_t min_rows) {
    int64_t g = (int64_t)(bytes / sizeof(block_q8_0)) / n_blocks;
    if (g < min_rows) g = min_rows;
    if (g * n_blocks > (int64_t)MAX_GROUP_BLOCKS) g = (int64_t)MAX_GROUP_BLOCKS / n_blocks;
    return g >= 32 ? g - g % 16 : g;
}

static void unpack_group(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w,
                         size_t w_row_bytes, int64_t g0, int64_t g1, block_q8_0 *buf, float *m) {
    for (int64_t r = g0; r < g1; r++)
        v->unpack((const char *)w + (size_t)r * w_row_bytes, n_blocks, buf + (r - g0) * n_blocks,
                  m + (r - g0) * n_blocks);
}

void syn_k_matvec_unpacked(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w,
                           size_t w_row_bytes, int64_t r0, int64_t r1, const void *act, float *y) {
    if (n_blocks > (int64_t)MAX_GROUP_BLOCKS) {
        for (int64_t r = r0; r < r1; r++)
            y[r] = v->row_dot(n_blocks, (const char *)w + (size_t)r * w_row_bytes, act);
        return;
    }
    const syn_act_q8_1 *a1 = act;
    const block_q8_0 *aq = v->has_min ? a1->q : act;
    block_q8_0 buf[MAX_GROUP_BLOCKS];
    float m[MAX_GROUP_BLOCKS], sf[MAX_GROUP_BLOCKS];
    if (v->has_min) sums_f32(a1->s, n_blocks, sf);
    const int64_t group = group_rows(n_blocks, MV_GROUP_BYTES, 8);
    for (int64_t g0 = r0; g0 < r1; g0 += group) {
        const int64_t g1 = g0 + group < r1 ? g0 + group : r1;
        unpack_group(v, n_blocks, w, w_row_bytes, g0, g1, buf, m);
        v->q8_matvec(n_blocks, buf, (size_t)n_blocks * sizeof(block_q8_0), 0, g1 - g0, aq, y + g0);
        if (v->has_min)
            for (int64_t r = g0; r < g1; r++)
                y[r] = y[r] + min_term(m + (r - g0) * n_blocks, sf, n_blocks);
    }
}

void syn_k_matmul_unpacked(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w,
                           size_t w_row_bytes, int64_t r0, int64_t r1, const void *act,
                           int64_t n_tokens, float *y, int64_t y_stride) {
    if (n_blocks > (int64_t)MAX_GROUP_BLOCKS) {
        const syn_act_q8_1 *a1 = act;
        for (int64_t t = 0; t < n_tokens; t++) {
            const syn_act_q8_1 at = v->has_min
                                        ? (syn_act_q8_1){a1->q + t * n_blocks, a1->s + t * n_blocks}
                                        : (syn_act_q8_1){0};
            const void *row_act = v->has_min
                                      ? (const void *)&at
                                      : (const void *)((const block_q8_0 *)act + t * n_blocks);
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
        v->q8_matmul(n_blocks, buf, (size_t)n_blocks * sizeof(block_q8_0), 0, g1 - g0, aq, n_tokens,
                     y + g0, y_stride);
        if (v->has_min)
            syn_k_add_min_terms(n_blocks, m, g1 - g0, a1->s, n_tokens, y + g0, y_stride);
    }
}
