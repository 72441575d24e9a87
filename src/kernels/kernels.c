/* kernels.c: fills a dispatch table with one tier's kernels, after checking the CPU can run it. */
#include "kernels/kernels.h"

#include "core/error.h"
#include "kernels/kernels_impl.h"

/* Q4_0, Q5_0, Q4_1, Q5_1 on a SIMD tier: its unpacker feeding its Q8_0 kernels (unpacked.c). */
#define SYN_K_VIA_Q8_0(T, tier, unpack_sfx, has_min)                                               \
    static const syn_k_via_q8_0 via_##T##_##tier = {syn_unpack_##T##_##unpack_sfx, syn_matvec_q8_0_##tier, \
                                                    syn_matmul_q8_0_##tier, has_min, syn_vec_dot_##T##_scalar}; \
    static void matmul_##T##_##tier(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, \
                                    const void *act, int64_t n_tokens, float *y, int64_t y_stride) { \
        syn_k_matmul_unpacked(&via_##T##_##tier, n_blocks, w, w_row_bytes, r0, r1, act, n_tokens, y, y_stride); \
    }
#define SYN_K_VIA_Q8_0_MATVEC(T, tier)                                                             \
    static void matvec_##T##_##tier(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1, \
                                    const void *act, float *y) {                                   \
        syn_k_matvec_unpacked(&via_##T##_##tier, n_blocks, w, w_row_bytes, r0, r1, act, y);        \
    }

/* A tier's matmul of the four types through its Q8_0 kernels (AVX2 and the ARM tiers; the VNNI
 * tiers have their own); their matvec is the tier's own where it unpacks in registers (x86), else
 * SYN_K_VIA_Q8_0_MATVEC's. */
#define SYN_K_VIA_Q8_0_ALL(tier, unpack_sfx)                                                       \
    SYN_K_VIA_Q8_0(q4_0, tier, unpack_sfx, false)                                                  \
    SYN_K_VIA_Q8_0(q5_0, tier, unpack_sfx, false)                                                  \
    SYN_K_VIA_Q8_0(q4_1, tier, unpack_sfx, true)                                                   \
    SYN_K_VIA_Q8_0(q5_1, tier, unpack_sfx, true)

#if defined(__x86_64__)
SYN_K_VIA_Q8_0_ALL(avx2, avx2)
#define matmul_q4_0_avx512 syn_matmul_q4_0_avx512 /* the VNNI tiers' own (x86_matmul_codes) */
#define matmul_q5_0_avx512 syn_matmul_q5_0_avx512
#define matmul_q4_1_avx512 syn_matmul_q4_1_avx512
#define matmul_q5_1_avx512 syn_matmul_q5_1_avx512
#define matmul_q4_0_avxvnni syn_matmul_q4_0_avxvnni
#define matmul_q5_0_avxvnni syn_matmul_q5_0_avxvnni
#define matmul_q4_1_avxvnni syn_matmul_q4_1_avxvnni
#define matmul_q5_1_avxvnni syn_matmul_q5_1_avxvnni
#define matvec_q4_0_avx2 syn_matvec_q4_0_avx2
#define matvec_q5_0_avx2 syn_matvec_q5_0_avx2
#define matvec_q4_0_avx512 syn_matvec_q4_0_avx512
#define matvec_q5_0_avx512 syn_matvec_q5_0_avx512
#define matvec_q4_0_avxvnni syn_matvec_q4_0_avxvnni
#define matvec_q5_0_avxvnni syn_matvec_q5_0_avxvnni
#define matvec_q4_1_avx2 syn_matvec_q4_1_avx2
#define matvec_q5_1_avx2 syn_matvec_q5_1_avx2
#define matvec_q4_1_avx512 syn_matvec_q4_1_avx512
#define matvec_q5_1_avx512 syn_matvec_q5_1_avx512
#define matvec_q4_1_avxvnni syn_matvec_q4_1_avxvnni
#define matvec_q5_1_avxvnni syn_matvec_q5_1_avxvnni
#endif
#if defined(__aarch64__)
SYN_K_VIA_Q8_0_ALL(dotprod, dotprod)
SYN_K_VIA_Q8_0_ALL(i8mm, dotprod)
SYN_K_VIA_Q8_0_MATVEC(q4_0, dotprod)
SYN_K_VIA_Q8_0_MATVEC(q5_0, dotprod)
SYN_K_VIA_Q8_0_MATVEC(q4_1, dotprod)
SYN_K_VIA_Q8_0_MATVEC(q5_1, dotprod)
SYN_K_VIA_Q8_0_MATVEC(q4_0, i8mm)
SYN_K_VIA_Q8_0_MATVEC(q5_0, i8mm)
SYN_K_VIA_Q8_0_MATVEC(q4_1, i8mm)
SYN_K_VIA_Q8_0_MATVEC(q5_1, i8mm)
#endif

/* The table of a tier: quant_dot names the quantizer / single-row Q8_0 dot, mat_ the Q8_0 matrix
 * kernels (and, through them, the unpacked types'), kq the k-quant kernels, q8k the Q8_K and Q8_1
 * quantizers. */
#define SYN_K_TABLE(isa_, quant_dot, mat_, kq, q8k)                                                \
    (syn_kernels) {                                                                                \
        .isa = (isa_), .quantize_row_q8_0 = syn_quantize_row_q8_0_##quant_dot,                     \
        .vec_dot_q8_0_q8_0 = syn_vec_dot_q8_0_q8_0_##quant_dot,                                    \
        .quantize_row_q8_1 = syn_quantize_row_q8_1_##q8k, .quantize_row_q8_k = syn_quantize_row_q8_k_##q8k, \
        .mat = {                                                                                   \
            [GGML_TYPE_Q8_0] = {syn_matvec_q8_0_##mat_, syn_matmul_q8_0_##mat_},                   \
            [GGML_TYPE_Q4_0] = {matvec_q4_0_##mat_, matmul_q4_0_##mat_},                           \
            [GGML_TYPE_Q5_0] = {matvec_q5_0_##mat_, matmul_q5_0_##mat_},                           \
            [GGML_TYPE_Q4_1] = {matvec_q4_1_##mat_, matmul_q4_1_##mat_},                           \
            [GGML_TYPE_Q5_1] = {matvec_q5_1_##mat_, matmul_q5_1_##mat_},                           \
            [GGML_TYPE_Q4_K] = {syn_matvec_q4_k_##kq, syn_matmul_q4_k_##kq},                       \
            [GGML_TYPE_Q5_K] = {syn_matvec_q5_k_##kq, syn_matmul_q5_k_##kq},                       \
            [GGML_TYPE_Q6_K] = {syn_matvec_q6_k_##kq, syn_matmul_q6_k_##kq},                       \
        },                                                                                         \
    }

/* The scalar tier runs the specification itself. */
#define matvec_q4_0_scalar syn_matvec_q4_0_scalar
#define matmul_q4_0_scalar syn_matmul_q4_0_scalar
#define matvec_q5_0_scalar syn_matvec_q5_0_scalar
#define matmul_q5_0_scalar syn_matmul_q5_0_scalar
#define matvec_q4_1_scalar syn_matvec_q4_1_scalar
#define matmul_q4_1_scalar syn_matmul_q4_1_scalar
#define matvec_q5_1_scalar syn_matvec_q5_1_scalar
#define matmul_q5_1_scalar syn_matmul_q5_1_scalar

syn_status syn_kernels_get(syn_isa isa, syn_kernels *out) {
    return syn_kernels_get_build(isa, syn_cpu_has_gfni(), out);
}

syn_status syn_kernels_get_build(syn_isa isa, bool gfni, syn_kernels *out) {
    (void)gfni; /* x86 only */
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_kernels_get: NULL output table");
    syn_status st = syn_isa_check(isa);
    if (st != SYN_OK) return st;
    switch (isa) {
    case SYN_ISA_SCALAR: *out = SYN_K_TABLE(isa, scalar, scalar, scalar, scalar); return SYN_OK;
#if defined(__x86_64__)
    case SYN_ISA_AVX2: *out = SYN_K_TABLE(isa, avx2, avx2, avx2, avx2); return SYN_OK;
    case SYN_ISA_AVX512_VNNI:
        *out = SYN_K_TABLE(isa, avx2, avx512, avx512, avx2);
        if (gfni) {
            out->mat[GGML_TYPE_Q4_0].matvec = syn_matvec_q4_0_avx512_gfni;
            out->mat[GGML_TYPE_Q5_0].matvec = syn_matvec_q5_0_avx512_gfni;
            out->mat[GGML_TYPE_Q4_1].matvec = syn_matvec_q4_1_avx512_gfni;
            out->mat[GGML_TYPE_Q5_1].matvec = syn_matvec_q5_1_avx512_gfni;
            out->mat[GGML_TYPE_Q4_K] = (syn_type_kernels){syn_matvec_q4_k_avx512_gfni, syn_matmul_q4_k_avx512_gfni};
            out->mat[GGML_TYPE_Q5_K] = (syn_type_kernels){syn_matvec_q5_k_avx512_gfni, syn_matmul_q5_k_avx512_gfni};
            out->mat[GGML_TYPE_Q6_K] = (syn_type_kernels){syn_matvec_q6_k_avx512_gfni, syn_matmul_q6_k_avx512_gfni};
        }
        return SYN_OK;
    case SYN_ISA_AVX_VNNI: *out = SYN_K_TABLE(isa, avx2, avxvnni, avx2, avx2); return SYN_OK;
#endif
#if defined(__aarch64__)
    case SYN_ISA_NEON_DOT: *out = SYN_K_TABLE(isa, dotprod, dotprod, dotprod, dotprod); return SYN_OK;
    case SYN_ISA_I8MM: *out = SYN_K_TABLE(isa, dotprod, i8mm, dotprod, dotprod); return SYN_OK;
#endif
    default: break;
    }
    return syn_fail(SYN_ERR_INTERNAL, "isa '%s' passed the CPU check but has no kernels in this build",
                    syn_isa_name(isa));
}
