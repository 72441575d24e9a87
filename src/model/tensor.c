/* tensor.c: one row of a tensor, dequantized through the weight-type table (wtype.c). */
#include <string.h>

#include "model/model.h"
#include "model/wtype.h"

void syn_tensor_row(const syn_tensor *t, int64_t row, float *dst) {
    const syn_wtype *wt = syn_wtype_get(t->type);
    if (!wt) {
        /* The loader admits no other type; zeros rather than garbage if a caller slips. */
        memset(dst, 0, (size_t)t->ne[0] * sizeof(float));
        return;
    }
    const uint8_t *base = t->data;
    wt->dequantize_row(base + (uint64_t)row * t->row_bytes, dst, t->ne[0]);
}
