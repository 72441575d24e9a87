/*
 * wtype.h: the weight-type table: for every tensor type Synapse computes, the row dequantizer the
 * reference backend uses and the activation format the type's integer dot product takes (as
 * ggml's vec_dot_type). Block geometry (values and bytes per block, row size) is the GGUF
 * reader's (gguf.h: ggml_block_size, ggml_type_size, ggml_row_size), which knows every type a file
 * may hold; the per-tier matrix kernels are in the kernel table (kernels.h: syn_kernels.mat).
 * Adding a type: its block layout (kernels/blocks.h), one entry here, and its kernels.
 */
#ifndef SYN_MODEL_WTYPE_H
#define SYN_MODEL_WTYPE_H

#include <stdint.h>

typedef struct syn_wtype {
    uint32_t type; /* enum ggml_type */
    /* src: n / block_size whole blocks (any alignment) -> dst[n]. */
    void (*dequantize_row)(const void *src, float *dst, int64_t n);
    /* The activation format of the type's dot product: GGML_TYPE_F32 for the float types (their
     * rows are converted and dotted in float), else the quantized activation ggml pairs it with:
     * Q8_0 for Q4_0, Q5_0, Q8_0; Q8_1 for Q4_1, Q5_1; Q8_K for the k-quants. */
    uint32_t act_type;
} syn_wtype;

/* The entry of tensor type `type`, or NULL when Synapse cannot compute it. */
const syn_wtype *syn_wtype_get(uint32_t type);

/* The computable types' names, for messages: "f32, f16, bf16, q8_0, q4_0, ...". */
const char *syn_wtype_names(void);

#endif
