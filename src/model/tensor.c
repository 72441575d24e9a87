/* tensor.c: one row of a tensor, dequantized through the weight-type table (wtype.c). */
#include <string.h>

#include "model/model.h"
#include "model/wtype.h"

int64_t syn_tensor_blocks(const syn_tensor *t) {
    return t->ne[0] / (int64_t)ggml_block_size(t->type);
}

syn_x16 syn_tensor_x16(const syn_tensor *t) {
    const size_t blocks = (size_t)(t->ne[1] / SYN_X16_ROWS) * (size_t)syn_tensor_blocks(t);
    return (syn_x16){t->x16, t->x16 + blocks * syn_x16_code_bytes(t->type)};
}

void syn_tensor_row(const syn_tensor *t, int64_t row, float *dst) {
    const syn_wtype *wt = syn_wtype_get(t->type);
    if (!wt) {
        /* The loader admits no other type; zeros rather than garbage if a caller slips. */
        memset(dst, 0, (size_t)t->ne[0] * sizeof(float));
        return;
    }
    if (row < atomic_load_explicit(&t->x16_rows, memory_order_acquire)) {
        /* from the x16 copy (kernels.h), block by block through the rows' own dequantizer */
        const int64_t nb = syn_tensor_blocks(t), per_block = (int64_t)ggml_block_size(t->type);
        const syn_x16 x = syn_tensor_x16(t);
        _Alignas(8) uint8_t block[256];
        _Static_assert(sizeof(block_q6_k) <= sizeof block, "the largest block of a layout");
        for (int64_t k = 0; k < nb; k++) {
            syn_x16_block(t->type, &x, nb, row, k, block);
            wt->dequantize_row(block, dst + k * per_block, per_block);
        }
        return;
    }
    const uint8_t *base = t->data;
    wt->dequantize_row(base + (uint64_t)row * t->row_bytes, dst, t->ne[0]);
}

void syn_layer_matrices(const syn_layer *L, const syn_tensor *out[SYN_LAYER_MATRICES]) {
    const syn_tensor *w[SYN_LAYER_MATRICES] = {&L->wq,      &L->wk,     &L->wv,       &L->wo,
                                               &L->ssm_qkv, &L->ssm_z,  &L->ssm_beta, &L->ssm_alpha,
                                               &L->ssm_out, &L->w_gate, &L->w_up,     &L->w_down};
    memcpy(out, w, sizeof w);
}
