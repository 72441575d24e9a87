/* kernels.c: the dispatch table of each kernel tier, written out entry by entry, and the getter
 * that hands one out after checking the CPU can run it. */
#include "kernels/kernels.h"

#include "core/error.h"
#include "kernels/kernels_impl.h"

/* ---- Q4_0, Q5_0, Q4_1, Q5_1 through a tier's Q8_0 kernels ------------------------------------
 * Where a tier has no kernel of its own for these types (the matmuls of AVX2 and the ARM tiers,
 * the ARM tiers' matvecs), rows are unpacked into Q8_0 blocks of their codes and run through the
 * tier's Q8_0 kernel (unpacked.c); the row_dot is the reference for rows too long to unpack. */

/* Defines the matvec `name` / the matmul `name` of the unpacked path `via`. */
#define UNPACKED_MATVEC(name, via)                                                                 \
    static void name(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,  \
                     const void *act, float *y) {                                                  \
        syn_k_matvec_unpacked(&via, n_blocks, w, w_row_bytes, r0, r1, act, y);                     \
    }
#define UNPACKED_MATMUL(name, via)                                                                 \
    static void name(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,  \
                     const void *act, int64_t n_tokens, float *y, int64_t y_stride) {              \
        syn_k_matmul_unpacked(&via, n_blocks, w, w_row_bytes, r0, r1, act, n_tokens, y, y_stride); \
    }

#if defined(__x86_64__)
static const syn_k_via_q8_0 via_q4_0_avx2 = {
    .unpack = syn_unpack_q4_0_avx2,
    .q8_matvec = syn_matvec_q8_0_avx2,
    .q8_matmul = syn_matmul_q8_0_avx2,
    .has_min = false,
    .row_dot = syn_vec_dot_q4_0_scalar,
};
static const syn_k_via_q8_0 via_q5_0_avx2 = {
    .unpack = syn_unpack_q5_0_avx2,
    .q8_matvec = syn_matvec_q8_0_avx2,
    .q8_matmul = syn_matmul_q8_0_avx2,
    .has_min = false,
    .row_dot = syn_vec_dot_q5_0_scalar,
};
static const syn_k_via_q8_0 via_q4_1_avx2 = {
    .unpack = syn_unpack_q4_1_avx2,
    .q8_matvec = syn_matvec_q8_0_avx2,
    .q8_matmul = syn_matmul_q8_0_avx2,
    .has_min = true,
    .row_dot = syn_vec_dot_q4_1_scalar,
};
static const syn_k_via_q8_0 via_q5_1_avx2 = {
    .unpack = syn_unpack_q5_1_avx2,
    .q8_matvec = syn_matvec_q8_0_avx2,
    .q8_matmul = syn_matmul_q8_0_avx2,
    .has_min = true,
    .row_dot = syn_vec_dot_q5_1_scalar,
};
UNPACKED_MATMUL(unpacked_matmul_q4_0_avx2, via_q4_0_avx2)
UNPACKED_MATMUL(unpacked_matmul_q5_0_avx2, via_q5_0_avx2)
UNPACKED_MATMUL(unpacked_matmul_q4_1_avx2, via_q4_1_avx2)
UNPACKED_MATMUL(unpacked_matmul_q5_1_avx2, via_q5_1_avx2)
#endif

#if defined(__aarch64__)
static const syn_k_via_q8_0 via_q4_0_dotprod = {
    .unpack = syn_unpack_q4_0_dotprod,
    .q8_matvec = syn_matvec_q8_0_dotprod,
    .q8_matmul = syn_matmul_q8_0_dotprod,
    .has_min = false,
    .row_dot = syn_vec_dot_q4_0_scalar,
};
static const syn_k_via_q8_0 via_q5_0_dotprod = {
    .unpack = syn_unpack_q5_0_dotprod,
    .q8_matvec = syn_matvec_q8_0_dotprod,
    .q8_matmul = syn_matmul_q8_0_dotprod,
    .has_min = false,
    .row_dot = syn_vec_dot_q5_0_scalar,
};
static const syn_k_via_q8_0 via_q4_1_dotprod = {
    .unpack = syn_unpack_q4_1_dotprod,
    .q8_matvec = syn_matvec_q8_0_dotprod,
    .q8_matmul = syn_matmul_q8_0_dotprod,
    .has_min = true,
    .row_dot = syn_vec_dot_q4_1_scalar,
};
static const syn_k_via_q8_0 via_q5_1_dotprod = {
    .unpack = syn_unpack_q5_1_dotprod,
    .q8_matvec = syn_matvec_q8_0_dotprod,
    .q8_matmul = syn_matmul_q8_0_dotprod,
    .has_min = true,
    .row_dot = syn_vec_dot_q5_1_scalar,
};
/* i8mm: the dotprod unpackers feeding the i8mm Q8_0 kernels. */
static const syn_k_via_q8_0 via_q4_0_i8mm = {
    .unpack = syn_unpack_q4_0_dotprod,
    .q8_matvec = syn_matvec_q8_0_i8mm,
    .q8_matmul = syn_matmul_q8_0_i8mm,
    .has_min = false,
    .row_dot = syn_vec_dot_q4_0_scalar,
};
static const syn_k_via_q8_0 via_q5_0_i8mm = {
    .unpack = syn_unpack_q5_0_dotprod,
    .q8_matvec = syn_matvec_q8_0_i8mm,
    .q8_matmul = syn_matmul_q8_0_i8mm,
    .has_min = false,
    .row_dot = syn_vec_dot_q5_0_scalar,
};
static const syn_k_via_q8_0 via_q4_1_i8mm = {
    .unpack = syn_unpack_q4_1_dotprod,
    .q8_matvec = syn_matvec_q8_0_i8mm,
    .q8_matmul = syn_matmul_q8_0_i8mm,
    .has_min = true,
    .row_dot = syn_vec_dot_q4_1_scalar,
};
static const syn_k_via_q8_0 via_q5_1_i8mm = {
    .unpack = syn_unpack_q5_1_dotprod,
    .q8_matvec = syn_matvec_q8_0_i8mm,
    .q8_matmul = syn_matmul_q8_0_i8mm,
    .has_min = true,
    .row_dot = syn_vec_dot_q5_1_scalar,
};
UNPACKED_MATVEC(unpacked_matvec_q4_0_dotprod, via_q4_0_dotprod)
UNPACKED_MATVEC(unpacked_matvec_q5_0_dotprod, via_q5_0_dotprod)
UNPACKED_MATVEC(unpacked_matvec_q4_1_dotprod, via_q4_1_dotprod)
UNPACKED_MATVEC(unpacked_matvec_q5_1_dotprod, via_q5_1_dotprod)
UNPACKED_MATMUL(unpacked_matmul_q4_0_dotprod, via_q4_0_dotprod)
UNPACKED_MATMUL(unpacked_matmul_q5_0_dotprod, via_q5_0_dotprod)
UNPACKED_MATMUL(unpacked_matmul_q4_1_dotprod, via_q4_1_dotprod)
UNPACKED_MATMUL(unpacked_matmul_q5_1_dotprod, via_q5_1_dotprod)
UNPACKED_MATVEC(unpacked_matvec_q4_0_i8mm, via_q4_0_i8mm)
UNPACKED_MATVEC(unpacked_matvec_q5_0_i8mm, via_q5_0_i8mm)
UNPACKED_MATVEC(unpacked_matvec_q4_1_i8mm, via_q4_1_i8mm)
UNPACKED_MATVEC(unpacked_matvec_q5_1_i8mm, via_q5_1_i8mm)
UNPACKED_MATMUL(unpacked_matmul_q4_0_i8mm, via_q4_0_i8mm)
UNPACKED_MATMUL(unpacked_matmul_q5_0_i8mm, via_q5_0_i8mm)
UNPACKED_MATMUL(unpacked_matmul_q4_1_i8mm, via_q4_1_i8mm)
UNPACKED_MATMUL(unpacked_matmul_q5_1_i8mm, via_q5_1_i8mm)
#endif

/* ---- The tables ------------------------------------------------------------------------------ */

/* The scalar tier runs the specification itself. */
static const syn_kernels k_scalar = {
    .isa = SYN_TIER_SCALAR,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_scalar,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_scalar,
    .quantize_row_q8_k = syn_quantize_row_q8_k_scalar,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_scalar, .matmul = syn_matmul_q8_0_scalar},
            [GGML_TYPE_Q4_0] = {.matvec = syn_matvec_q4_0_scalar, .matmul = syn_matmul_q4_0_scalar},
            [GGML_TYPE_Q5_0] = {.matvec = syn_matvec_q5_0_scalar, .matmul = syn_matmul_q5_0_scalar},
            [GGML_TYPE_Q4_1] = {.matvec = syn_matvec_q4_1_scalar, .matmul = syn_matmul_q4_1_scalar},
            [GGML_TYPE_Q5_1] = {.matvec = syn_matvec_q5_1_scalar, .matmul = syn_matmul_q5_1_scalar},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_scalar, .matmul = syn_matmul_q4_k_scalar},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_scalar, .matmul = syn_matmul_q5_k_scalar},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_scalar, .matmul = syn_matmul_q6_k_scalar},
        },
    .attention = syn_attention_generic,
    .swiglu = syn_swiglu_generic,
    .geglu = syn_geglu_generic,
    .dot_f32 = syn_dot_f32_generic,
    .delta_rule = syn_delta_rule_generic,
    .dn_conv = syn_dn_conv_generic,
};

#if defined(__x86_64__)
static const syn_kernels k_avx2 = {
    .isa = SYN_TIER_AVX2,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_avx2,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_avx2,
    .quantize_row_q8_k = syn_quantize_row_q8_k_avx2,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_avx2, .matmul = syn_matmul_q8_0_avx2},
            [GGML_TYPE_Q4_0] = {.matvec = syn_matvec_q4_0_avx2,
                                .matmul = unpacked_matmul_q4_0_avx2},
            [GGML_TYPE_Q5_0] = {.matvec = syn_matvec_q5_0_avx2,
                                .matmul = unpacked_matmul_q5_0_avx2},
            [GGML_TYPE_Q4_1] = {.matvec = syn_matvec_q4_1_avx2,
                                .matmul = unpacked_matmul_q4_1_avx2},
            [GGML_TYPE_Q5_1] = {.matvec = syn_matvec_q5_1_avx2,
                                .matmul = unpacked_matmul_q5_1_avx2},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_avx2, .matmul = syn_matmul_q4_k_avx2},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_avx2, .matmul = syn_matmul_q5_k_avx2},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_avx2, .matmul = syn_matmul_q6_k_avx2},
        },
    .attention = syn_attention_avx2,
    .swiglu = syn_swiglu_avx2,
    .geglu = syn_geglu_avx2,
    .dot_f32 = syn_dot_f32_avx2,
    .delta_rule = syn_delta_rule_avx2,
    .dn_conv = syn_dn_conv_avx2,
};

/* The types whose x16 layout (kernels.h) the AVX-512 VNNI tier reads. */
#define X16_AVX512                                                                                 \
    {                                                                                              \
        [GGML_TYPE_Q8_0] = {syn_matvec_x16_q8_0_avx512, syn_matmul_x16_q8_0_avx512},               \
        [GGML_TYPE_Q5_0] = {syn_matvec_x16_q5_0_avx512, syn_matmul_x16_q5_0_avx512},               \
        [GGML_TYPE_Q4_0] = {syn_matvec_x16_q4_0_avx512, syn_matmul_x16_q4_0_avx512},               \
        [GGML_TYPE_Q5_1] = {syn_matvec_x16_q5_1_avx512, syn_matmul_x16_q5_1_avx512},               \
        [GGML_TYPE_Q4_1] = {syn_matvec_x16_q4_1_avx512, syn_matmul_x16_q4_1_avx512},               \
        [GGML_TYPE_Q4_K] = {syn_matvec_x16_q4_k_avx512, syn_matmul_x16_q4_k_avx512},               \
        [GGML_TYPE_Q5_K] = {syn_matvec_x16_q5_k_avx512, syn_matmul_x16_q5_k_avx512},               \
        [GGML_TYPE_Q6_K] = {syn_matvec_x16_q6_k_avx512, syn_matmul_x16_q6_k_avx512},               \
    }

/* AVX-512 VNNI without GFNI: AVX2's quantizers, its own matrix kernels. */
static const syn_kernels k_avx512_vnni = {
    .isa = SYN_TIER_AVX512_VNNI,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_avx2,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_avx2,
    .quantize_row_q8_k = syn_quantize_row_q8_k_avx2,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_avx512, .matmul = syn_matmul_q8_0_avx512},
            [GGML_TYPE_Q4_0] = {.matvec = syn_matvec_q4_0_avx512, .matmul = syn_matmul_q4_0_avx512},
            [GGML_TYPE_Q5_0] = {.matvec = syn_matvec_q5_0_avx512, .matmul = syn_matmul_q5_0_avx512},
            [GGML_TYPE_Q4_1] = {.matvec = syn_matvec_q4_1_avx512, .matmul = syn_matmul_q4_1_avx512},
            [GGML_TYPE_Q5_1] = {.matvec = syn_matvec_q5_1_avx512, .matmul = syn_matmul_q5_1_avx512},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_avx512, .matmul = syn_matmul_q4_k_avx512},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_avx512, .matmul = syn_matmul_q5_k_avx512},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_avx512, .matmul = syn_matmul_q6_k_avx512},
        },
    .x16 = X16_AVX512,
    .attention = syn_attention_avx512,
    .swiglu = syn_swiglu_avx512,
    .geglu = syn_geglu_avx512,
    .dot_f32 = syn_dot_f32_avx512,
    .delta_rule = syn_delta_rule_avx512,
    .dn_conv = syn_dn_conv_avx512,
};

/* AVX-512 VNNI on a CPU with GFNI: the GFNI builds of the 4- to 6-bit matvecs and k-quant
 * matmuls, the rest as above. */
static const syn_kernels k_avx512_vnni_gfni = {
    .isa = SYN_TIER_AVX512_VNNI,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_avx2,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_avx2,
    .quantize_row_q8_k = syn_quantize_row_q8_k_avx2,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_avx512, .matmul = syn_matmul_q8_0_avx512},
            [GGML_TYPE_Q4_0] = {.matvec = syn_matvec_q4_0_avx512_gfni,
                                .matmul = syn_matmul_q4_0_avx512},
            [GGML_TYPE_Q5_0] = {.matvec = syn_matvec_q5_0_avx512_gfni,
                                .matmul = syn_matmul_q5_0_avx512},
            [GGML_TYPE_Q4_1] = {.matvec = syn_matvec_q4_1_avx512_gfni,
                                .matmul = syn_matmul_q4_1_avx512},
            [GGML_TYPE_Q5_1] = {.matvec = syn_matvec_q5_1_avx512_gfni,
                                .matmul = syn_matmul_q5_1_avx512},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_avx512_gfni,
                                .matmul = syn_matmul_q4_k_avx512_gfni},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_avx512_gfni,
                                .matmul = syn_matmul_q5_k_avx512_gfni},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_avx512_gfni,
                                .matmul = syn_matmul_q6_k_avx512_gfni},
        },
    .x16 = X16_AVX512,
    .attention = syn_attention_avx512,
    .swiglu = syn_swiglu_avx512,
    .geglu = syn_geglu_avx512,
    .dot_f32 = syn_dot_f32_avx512,
    .delta_rule = syn_delta_rule_avx512,
    .dn_conv = syn_dn_conv_avx512,
};

/* AVX-VNNI: AVX2's quantizers and k-quant kernels, its own Q8_0 to Q5_1 ones. */
static const syn_kernels k_avx_vnni = {
    .isa = SYN_TIER_AVX_VNNI,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_avx2,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_avx2,
    .quantize_row_q8_k = syn_quantize_row_q8_k_avx2,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_avxvnni,
                                .matmul = syn_matmul_q8_0_avxvnni},
            [GGML_TYPE_Q4_0] = {.matvec = syn_matvec_q4_0_avxvnni,
                                .matmul = syn_matmul_q4_0_avxvnni},
            [GGML_TYPE_Q5_0] = {.matvec = syn_matvec_q5_0_avxvnni,
                                .matmul = syn_matmul_q5_0_avxvnni},
            [GGML_TYPE_Q4_1] = {.matvec = syn_matvec_q4_1_avxvnni,
                                .matmul = syn_matmul_q4_1_avxvnni},
            [GGML_TYPE_Q5_1] = {.matvec = syn_matvec_q5_1_avxvnni,
                                .matmul = syn_matmul_q5_1_avxvnni},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_avx2, .matmul = syn_matmul_q4_k_avx2},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_avx2, .matmul = syn_matmul_q5_k_avx2},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_avx2, .matmul = syn_matmul_q6_k_avx2},
        },
    .attention = syn_attention_avx2,
    .swiglu = syn_swiglu_avx2,
    .geglu = syn_geglu_avx2,
    .dot_f32 = syn_dot_f32_avx2,
    .delta_rule = syn_delta_rule_avx2,
    .dn_conv = syn_dn_conv_avx2,
};
#endif

#if defined(__aarch64__)
static const syn_kernels k_neon_dot = {
    .isa = SYN_TIER_NEON_DOT,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_dotprod,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_dotprod,
    .quantize_row_q8_k = syn_quantize_row_q8_k_dotprod,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_dotprod,
                                .matmul = syn_matmul_q8_0_dotprod},
            [GGML_TYPE_Q4_0] = {.matvec = unpacked_matvec_q4_0_dotprod,
                                .matmul = unpacked_matmul_q4_0_dotprod},
            [GGML_TYPE_Q5_0] = {.matvec = unpacked_matvec_q5_0_dotprod,
                                .matmul = unpacked_matmul_q5_0_dotprod},
            [GGML_TYPE_Q4_1] = {.matvec = unpacked_matvec_q4_1_dotprod,
                                .matmul = unpacked_matmul_q4_1_dotprod},
            [GGML_TYPE_Q5_1] = {.matvec = unpacked_matvec_q5_1_dotprod,
                                .matmul = unpacked_matmul_q5_1_dotprod},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_dotprod,
                                .matmul = syn_matmul_q4_k_dotprod},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_dotprod,
                                .matmul = syn_matmul_q5_k_dotprod},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_dotprod,
                                .matmul = syn_matmul_q6_k_dotprod},
        },
    .attention = syn_attention_generic,
    .swiglu = syn_swiglu_generic,
    .geglu = syn_geglu_generic,
    .dot_f32 = syn_dot_f32_generic,
    .delta_rule = syn_delta_rule_generic,
    .dn_conv = syn_dn_conv_generic,
};

/* i8mm: the dot-product tier's quantizers and k-quant kernels. */
static const syn_kernels k_i8mm = {
    .isa = SYN_TIER_I8MM,
    .quantize_row_q8_0 = syn_quantize_row_q8_0_dotprod,
    .quantize_row_q8_1 = syn_quantize_row_q8_1_dotprod,
    .quantize_row_q8_k = syn_quantize_row_q8_k_dotprod,
    .mat =
        {
            [GGML_TYPE_Q8_0] = {.matvec = syn_matvec_q8_0_i8mm, .matmul = syn_matmul_q8_0_i8mm},
            [GGML_TYPE_Q4_0] = {.matvec = unpacked_matvec_q4_0_i8mm,
                                .matmul = unpacked_matmul_q4_0_i8mm},
            [GGML_TYPE_Q5_0] = {.matvec = unpacked_matvec_q5_0_i8mm,
                                .matmul = unpacked_matmul_q5_0_i8mm},
            [GGML_TYPE_Q4_1] = {.matvec = unpacked_matvec_q4_1_i8mm,
                                .matmul = unpacked_matmul_q4_1_i8mm},
            [GGML_TYPE_Q5_1] = {.matvec = unpacked_matvec_q5_1_i8mm,
                                .matmul = unpacked_matmul_q5_1_i8mm},
            [GGML_TYPE_Q4_K] = {.matvec = syn_matvec_q4_k_dotprod,
                                .matmul = syn_matmul_q4_k_dotprod},
            [GGML_TYPE_Q5_K] = {.matvec = syn_matvec_q5_k_dotprod,
                                .matmul = syn_matmul_q5_k_dotprod},
            [GGML_TYPE_Q6_K] = {.matvec = syn_matvec_q6_k_dotprod,
                                .matmul = syn_matmul_q6_k_dotprod},
        },
    .attention = syn_attention_generic,
    .swiglu = syn_swiglu_generic,
    .geglu = syn_geglu_generic,
    .dot_f32 = syn_dot_f32_generic,
    .delta_rule = syn_delta_rule_generic,
    .dn_conv = syn_dn_conv_generic,
};
#endif

syn_status syn_kernels_get(syn_isa_tier isa, syn_kernels *out) {
    return syn_kernels_get_build(isa, syn_cpu_has_gfni(), out);
}

syn_status syn_kernels_get_build(syn_isa_tier isa, bool gfni, syn_kernels *out) {
    (void)gfni; /* x86 only */
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_kernels_get: NULL output table");
    syn_status st = syn_isa_tier_check(isa);
    if (st != SYN_OK) return st;
    const syn_kernels *k = NULL;
    switch (isa) {
    case SYN_TIER_SCALAR: k = &k_scalar; break;
#if defined(__x86_64__)
    case SYN_TIER_AVX2: k = &k_avx2; break;
    case SYN_TIER_AVX512_VNNI: k = gfni ? &k_avx512_vnni_gfni : &k_avx512_vnni; break;
    case SYN_TIER_AVX_VNNI: k = &k_avx_vnni; break;
#endif
#if defined(__aarch64__)
    case SYN_TIER_NEON_DOT: k = &k_neon_dot; break;
    case SYN_TIER_I8MM: k = &k_i8mm; break;
#endif
    default: break;
    }
    if (!k)
        return syn_fail(SYN_ERR_INTERNAL,
                        "isa '%s' passed the CPU check but has no kernels in this build",
                        syn_isa_tier_name(isa));
    *out = *k;
    return SYN_OK;
}
