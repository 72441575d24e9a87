/* tensor.c: scalar conversions (fp16, bf16) and row dequantization of the weight types Synapse
 * loads. */
#include <string.h>

#include "kernels/fp16.h"
#include "model/model.h"

/* The bit-level conversions live in kernels/fp16.h so that kernel files can inline them. */
float syn_fp16_to_f32(uint16_t h) { return syn_k_fp16_to_f32(h); }

uint16_t syn_f32_to_fp16(float f) { return syn_k_f32_to_fp16(f); }

float syn_bf16_to_f32(uint16_t h) { return syn_k_bits_f32((uint32_t)h << 16); }

/* Sources may sit at any byte offset (fuzzed or in-memory files), so elements are read with
 * memcpy, which compiles to plain loads where alignment allows. */
void syn_dequantize_row(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    switch (type) {
    case GGML_TYPE_F32: memcpy(dst, p, (size_t)n * sizeof(float)); return;
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, sizeof h);
            dst[i] = type == GGML_TYPE_F16 ? syn_fp16_to_f32(h) : syn_bf16_to_f32(h);
        }
        return;
    case GGML_TYPE_Q8_0:
        for (int64_t b = 0; b < n / QK8_0; b++) {
            block_q8_0 blk;
            memcpy(&blk, p + b * (int64_t)sizeof blk, sizeof blk);
            float d = syn_fp16_to_f32(blk.d);
            for (int j = 0; j < QK8_0; j++)
                dst[b * QK8_0 + j] = d * (float)blk.qs[j];
        }
        return;
    default:
        /* The loader admits no other type; zeros rather than garbage if a caller slips. */
        memset(dst, 0, (size_t)n * sizeof(float));
        return;
    }
}

void syn_tensor_row(const syn_tensor *t, int64_t row, float *dst) {
    const uint8_t *base = t->data;
    syn_dequantize_row(t->type, base + (uint64_t)row * t->row_bytes, dst, t->ne[0]);
}
