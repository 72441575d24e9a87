/* ggml_types.c: names and block geometry of the GGUF value types and the ggml tensor types. */
#include "gguf/gguf.h"

/* One ggml tensor type: elements per block and bytes per block (0/0: unknown id). */
typedef struct ggml_type_traits {
    const char *name;
    uint32_t block_size;
    uint32_t type_size;
} ggml_type_traits;

/* Geometry as ggml defines it (QK_K = 256 for the k-quants and the i-quants). Listing the types
 * Synapse cannot compute lets the reader parse such files and the loader refuse them by name. */
static const ggml_type_traits ggml_types[GGML_TYPE_COUNT] = {
    [GGML_TYPE_F32] = {"f32", 1, 4},
    [GGML_TYPE_F16] = {"f16", 1, 2},
    [GGML_TYPE_Q4_0] = {"q4_0", 32, 18},
    [GGML_TYPE_Q4_1] = {"q4_1", 32, 20},
    [GGML_TYPE_Q5_0] = {"q5_0", 32, 22},
    [GGML_TYPE_Q5_1] = {"q5_1", 32, 24},
    [GGML_TYPE_Q8_0] = {"q8_0", 32, 34},
    [GGML_TYPE_Q8_1] = {"q8_1", 32, 36},
    [GGML_TYPE_Q2_K] = {"q2_k", 256, 84},
    [GGML_TYPE_Q3_K] = {"q3_k", 256, 110},
    [GGML_TYPE_Q4_K] = {"q4_k", 256, 144},
    [GGML_TYPE_Q5_K] = {"q5_k", 256, 176},
    [GGML_TYPE_Q6_K] = {"q6_k", 256, 210},
    [GGML_TYPE_Q8_K] = {"q8_k", 256, 292},
    [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98},
    [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", 256, 110},
    [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136},
    [24] = {"i8", 1, 1},
    [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},
    [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},
    [GGML_TYPE_BF16] = {"bf16", 1, 2},
    [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},
    [39] = {"mxfp4", 32, 17},
};

static const char *const gguf_type_names[GGUF_TYPE_COUNT] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

static const uint8_t gguf_type_sizes[GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *gguf_type_name(uint32_t value_type) {
    return value_type < GGUF_TYPE_COUNT ? gguf_type_names[value_type] : "invalid";
}

uint32_t gguf_type_size(uint32_t value_type) {
    return value_type < GGUF_TYPE_COUNT ? gguf_type_sizes[value_type] : 0;
}

const char *ggml_type_name(uint32_t ggml_type) {
    if (ggml_type >= GGML_TYPE_COUNT || !ggml_types[ggml_type].name) return "unknown";
    return ggml_types[ggml_type].name;
}

uint32_t ggml_block_size(uint32_t ggml_type) {
    return ggml_type < GGML_TYPE_COUNT ? ggml_types[ggml_type].block_size : 0;
}

uint32_t ggml_type_size(uint32_t ggml_type) {
    return ggml_type < GGML_TYPE_COUNT ? ggml_types[ggml_type].type_size : 0;
}

uint64_t ggml_row_size(uint32_t ggml_type, uint64_t n) {
    uint32_t block = ggml_block_size(ggml_type);
    if (block == 0 || n % block != 0) return 0;
    uint64_t blocks = n / block;
    uint32_t size = ggml_types[ggml_type].type_size;
    if (blocks > UINT64_MAX / size) return 0;
    return blocks * size;
}
