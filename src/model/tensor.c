/* tensor.c: scalar conversions (fp16, bf16) and row dequantization through the weight-type table
 * (wtype.c). */
#include <string.h>

#include "kernels/fp16.h"
#include "model/model.h"
#include "model/wtype.h"

/* The bit-level conversions live in kernels/fp16.h so that kernel files can inline them. */
float syn_fp16_to_f32(uint16_t h) { return syn_k_fp16_to_f32(h); }

uint16_t syn_f32_to_fp16(float f) { return syn_k_f32_to_fp16(f); }

float syn_bf16_to_f32(uint16_t h) { return syn_k_bits_f32((uint32_t)h << 16); }

void syn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const syn_wtype *wt = syn_wtype_get(type);
    if (wt) {
        wt->dequantize_row(src, dst, n);
        return;
    }
    /* The loader admits no other type; zeros rather than garbage if a caller slips. */
    memset(dst, 0, (size_t)n * sizeof(float));
}

void syn_tensor_row(const syn_tensor *t, int64_t row, float *dst) {
    const uint8_t *base = t->data;
    syn_dequantize_row(t->type, base + (uint64_t)row * t->row_bytes, dst, t->ne[0]);
}
