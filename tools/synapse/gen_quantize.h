/*
 * gen_quantize.h: float rows into ggml's weight blocks (kernels/blocks.h), for `synapse gen-model`.
 * Simple quantizers, not ggml's: each block's scale comes from its range and values round to the
 * nearest code, so the codes differ from llama-quantize's while the layouts and formulas are the
 * same (src/model/wtype.c decodes them). tests/unit/test_gen_quantize.c holds them to the step.
 */
#ifndef SYN_TOOL_GEN_QUANTIZE_H
#define SYN_TOOL_GEN_QUANTIZE_H

#include <stdbool.h>
#include <stdint.h>

/* Writes x[n] as ggml_type into dst (ggml_row_size(ggml_type, n) bytes); n is a multiple of the
 * type's block size. Types: F32, Q8_0 (ggml's own rule, bit for bit), Q4_0, Q4_1, Q5_0, Q5_1,
 * Q4_K, Q5_K, Q6_K; false (nothing written) for any other. Deterministic: the same floats give
 * the same bytes. */
bool gen_quantize_row(uint32_t ggml_type, const float *x, int64_t n, void *dst);

#endif
