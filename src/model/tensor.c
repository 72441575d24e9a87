/* tensor.c: one row of a tensor, dequantized through the weight-type table (wtype.c). */
#include <string.h>

#include "model/model.h"
#include "model/wtype.h"

syn_x16 syn_tensor_x16(const syn_tensor *t) {
    const int64_t n_groups = t->ne[1] / SYN_X16_ROWS, nb = t->ne[0] / QK8_0;
    return (syn_x16){t->x16, (const uint16_t *)(t->x16 + syn_x16_codes_bytes(n_groups, nb))};
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
        const int64_t nb = t->ne[0] / QK8_0, g = row / SYN_X16_ROWS, lane = row % SYN_X16_ROWS;
        const syn_x16 x = syn_tensor_x16(t);
        for (int64_t k = 0; k < nb; k++) {
            const size_t at = (size_t)(g * nb + k);
            block_q8_0 b = {.d = x.scales[at * SYN_X16_ROWS + (size_t)lane]};
            const uint8_t *c = x.codes + at * SYN_X16_ROWS * QK8_0 + (size_t)lane * 4;
            for (int j = 0; j < 8; j++)
                for (int i = 0; i < 4; i++)
                    b.qs[4 * j + i] = (int8_t)(c[j * SYN_X16_ROWS * 4 + i] ^ 0x80);
            wt->dequantize_row(&b, dst + k * QK8_0, QK8_0);
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
