/* kquants_rows.h: the row and token-tile drivers of a tier's k-quant kernels. A kquants_<tier>.c
 * includes it after defining KQ_TOKENS and its two row kernels, which compute
 * y[t * y_stride] = kernels.h's dot of one row with token t's Q8_K row a[t * a_stride], t < n_tok:
 *   k45_row(n_blocks, row, block_bytes, qs_at, qh_at, a, a_stride, y, y_stride, n_tok)  Q4_K / Q5_K
 *   q6k_row(n_blocks, row, a, a_stride, y, y_stride, n_tok)                            Q6_K
 * Static inline, so each tier file compiles it with its own flags. */
#ifndef SYN_KERNELS_KQUANTS_ROWS_H
#define SYN_KERNELS_KQUANTS_ROWS_H

#include <stddef.h>

#include "kernels/kernels_impl.h"

/* Rows [r0, r1) against n_tok tokens (act rows n_blocks apart). */
SYN_K_INLINE void k_rows(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes,
                         int64_t r0, int64_t r1, const block_q8_k *a, float *y, int64_t y_stride,
                         const int n_tok) {
    for (int64_t r = r0; r < r1; r++) {
        const char *row = (const char *)w + (size_t)r * w_row_bytes;
        if (type == GGML_TYPE_Q4_K)
            k45_row(n_blocks, row, sizeof(block_q4_k), offsetof(block_q4_k, qs), 0, a, n_blocks,
                    y + r, y_stride, n_tok);
        else if (type == GGML_TYPE_Q5_K)
            k45_row(n_blocks, row, sizeof(block_q5_k), offsetof(block_q5_k, qs),
                    offsetof(block_q5_k, qh), a, n_blocks, y + r, y_stride, n_tok);
        else
            q6k_row(n_blocks, (const block_q6_k *)row, a, n_blocks, y + r, y_stride, n_tok);
    }
}

/* Matmul: rows in chunks that stay in L2 while every token tile of KQ_TOKENS passes over them. */
SYN_K_INLINE void k_matmul(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes,
                           int64_t r0, int64_t r1, const block_q8_k *a, int64_t n_tokens, float *y,
                           int64_t y_stride) {
    const int64_t chunk_rows = 32;
    for (int64_t c0 = r0; c0 < r1; c0 += chunk_rows) {
        const int64_t c1 = c0 + chunk_rows < r1 ? c0 + chunk_rows : r1;
        int64_t t = 0;
        for (; t + KQ_TOKENS <= n_tokens; t += KQ_TOKENS)
            k_rows(type, n_blocks, w, w_row_bytes, c0, c1, a + t * n_blocks, y + t * y_stride,
                   y_stride, KQ_TOKENS);
        const block_q8_k *at = a + t * n_blocks;
        float *yt = y + t * y_stride;
        switch (n_tokens - t) {
        case 1: k_rows(type, n_blocks, w, w_row_bytes, c0, c1, at, yt, y_stride, 1); break;
        case 2: k_rows(type, n_blocks, w, w_row_bytes, c0, c1, at, yt, y_stride, 2); break;
        case 3: k_rows(type, n_blocks, w, w_row_bytes, c0, c1, at, yt, y_stride, 3); break;
        default: break;
        }
    }
}

/* The kernel table's matvec and matmul of type T for tier sfx; matmul_fn: k_matmul or the tier's.
 */
#define KQ_KERNELS(T, TYPE, sfx, matmul_fn)                                                        \
    void syn_matvec_##T##_##sfx(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,   \
                                int64_t r1, const void *act, float *y) {                           \
        k_rows(TYPE, n_blocks, w, w_row_bytes, r0, r1, act, y, 0, 1);                              \
    }                                                                                              \
    void syn_matmul_##T##_##sfx(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,   \
                                int64_t r1, const void *act, int64_t n_tokens, float *y,           \
                                int64_t y_stride) {                                                \
        matmul_fn(TYPE, n_blocks, w, w_row_bytes, r0, r1, act, n_tokens, y, y_stride);             \
    }

#endif
