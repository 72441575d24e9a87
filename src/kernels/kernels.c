/* kernels.c: fills a dispatch table with one tier's kernels, after checking the CPU can run it. */
#include "kernels/kernels.h"

#include "core/error.h"
#include "kernels/kernels_impl.h"

#define SYN_K_TABLE(isa_, quant_dot, mat_)                                                         \
    (syn_kernels) {                                                                                \
        .isa = (isa_), .quantize_row_q8_0 = syn_quantize_row_q8_0_##quant_dot,                     \
        .vec_dot_q8_0_q8_0 = syn_vec_dot_q8_0_q8_0_##quant_dot,                                    \
        .mat = {[GGML_TYPE_Q8_0] = {syn_matvec_q8_0_##mat_, syn_matmul_q8_0_##mat_}},              \
    }

syn_status syn_kernels_get(syn_isa isa, syn_kernels *out) {
    if (!out) return syn_fail(SYN_ERR_INVALID_ARGUMENT, "syn_kernels_get: NULL output table");
    syn_status st = syn_isa_check(isa);
    if (st != SYN_OK) return st;
    switch (isa) {
    case SYN_ISA_SCALAR: *out = SYN_K_TABLE(isa, scalar, scalar); return SYN_OK;
#if defined(__x86_64__)
    case SYN_ISA_AVX2: *out = SYN_K_TABLE(isa, avx2, avx2); return SYN_OK;
    case SYN_ISA_AVX512_VNNI: *out = SYN_K_TABLE(isa, avx2, avx512); return SYN_OK;
    case SYN_ISA_AVX_VNNI: *out = SYN_K_TABLE(isa, avx2, avxvnni); return SYN_OK;
#endif
#if defined(__aarch64__)
    case SYN_ISA_NEON_DOT: *out = SYN_K_TABLE(isa, dotprod, dotprod); return SYN_OK;
    case SYN_ISA_I8MM: *out = SYN_K_TABLE(isa, dotprod, i8mm); return SYN_OK;
#endif
    default: break;
    }
    return syn_fail(SYN_ERR_INTERNAL, "isa '%s' passed the CPU check but has no kernels in this build",
                    syn_isa_name(isa));
}
