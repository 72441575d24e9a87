/* kernels_impl.h: the per-tier kernel functions behind the dispatch table (kernels.c), and the
 * helpers the tier files share. Internal to src/kernels. */
#ifndef SYN_KERNELS_IMPL_H
#define SYN_KERNELS_IMPL_H

#include <stdbool.h>

#include "kernels/kernels.h"

/* Fully unrolls the next loop (GCC and clang), so that small per-row/per-token arrays of vectors
 * stay in registers: -O2 alone keeps them on the stack. */
#define SYN_K_PRAGMA(x) _Pragma(#x)
#define SYN_K_UNROLL(n) SYN_K_PRAGMA(GCC unroll n)
#define SYN_K_INLINE static inline __attribute__((always_inline))

/* Block b of weight row r. */
static inline const block_q8_0 *syn_k_wrow(const void *w, size_t w_row_bytes, int64_t r) {
    return (const block_q8_0 *)((const char *)w + (size_t)r * w_row_bytes);
}

/* Tokens per pass over a row tile, a multiple of tile_tokens: one pass's activation rows stay in
 * L2 while the row tile's weights stay in L1, so weights stream from memory once per pass. */
SYN_K_INLINE int64_t syn_k_token_chunk(int64_t n_blocks, int64_t tile_tokens) {
    int64_t t =
        n_blocks > 0 ? (int64_t)(256 * 1024) / (n_blocks * (int64_t)sizeof(block_q8_0)) : 64;
    t = t < tile_tokens ? tile_tokens : t > 64 ? 64 : t;
    return t - t % tile_tokens;
}

/* Computes y[(t0 + j) * y_stride + r + i] for i in 0..3 and j in 0..tile_tokens-1. */
typedef void (*syn_k_tile_fn)(int64_t n_blocks, const block_q8_0 *const wr[4], const block_q8_0 *a,
                              int64_t t0, float *y, int64_t y_stride, int64_t r);

/* Matmul in tiles of 4 rows x tile_tokens tokens; edge rows use vec_dot, edge tokens matvec, which
 * give the same bits as a tile would (kernels.h). */
SYN_K_INLINE void syn_k_matmul_tiles(
    int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0, int64_t r1,
    const block_q8_0 *a, int64_t n_tokens, float *y, int64_t y_stride, int64_t tile_tokens,
    syn_k_tile_fn tile, float (*vec_dot)(int64_t, const block_q8_0 *, const block_q8_0 *),
    void (*matvec)(int64_t, const void *, size_t, int64_t, int64_t, const void *, float *)) {
    const int64_t n_full = n_tokens - n_tokens % tile_tokens;
    const int64_t chunk = syn_k_token_chunk(n_blocks, tile_tokens);
    for (int64_t c0 = 0; c0 < n_full; c0 += chunk) {
        const int64_t c1 = c0 + chunk < n_full ? c0 + chunk : n_full;
        int64_t r = r0;
        for (; r + 4 <= r1; r += 4) {
            const block_q8_0 *wr[4];
            SYN_K_UNROLL(4)
            for (int i = 0; i < 4; i++)
                wr[i] = syn_k_wrow(w, w_row_bytes, r + i);
            for (int64_t t = c0; t < c1; t += tile_tokens)
                tile(n_blocks, wr, a, t, y, y_stride, r);
        }
        for (; r < r1; r++) {
            for (int64_t t = c0; t < c1; t++) {
                y[t * y_stride + r] =
                    vec_dot(n_blocks, syn_k_wrow(w, w_row_bytes, r), a + t * n_blocks);
            }
        }
    }
    for (int64_t t = n_full; t < n_tokens; t++) {
        matvec(n_blocks, w, w_row_bytes, r0, r1, a + t * n_blocks, y + t * y_stride);
    }
}

/* Tiers define the matrix kernels; some reuse a lower tier's quantizer and single-row dot. */
#define SYN_K_DECLARE_QUANT_DOT(sfx)                                                               \
    void syn_quantize_row_q8_0_##sfx(const float *x, block_q8_0 *y, int64_t n);                    \
    float syn_vec_dot_q8_0_q8_0_##sfx(int64_t n_blocks, const block_q8_0 *w, const block_q8_0 *a);
#define SYN_K_DECLARE_MAT(sfx)                                                                     \
    void syn_matvec_q8_0_##sfx(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,    \
                               int64_t r1, const void *act, float *y);                             \
    void syn_matmul_q8_0_##sfx(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,    \
                               int64_t r1, const void *act, int64_t n_tokens, float *y,            \
                               int64_t y_stride);

SYN_K_DECLARE_QUANT_DOT(scalar)
SYN_K_DECLARE_MAT(scalar)

/* The builds of the float32 kernels (floats.h; floats_<build>.c). */
void syn_attention_generic(const syn_attn_args *a);
void syn_swiglu_generic(float *g, const float *u, int64_t n);
void syn_geglu_generic(float *g, const float *u, int64_t n, const uint16_t *table);
float syn_dot_f32_generic(const float *a, const float *b, int64_t n);
void syn_delta_rule_generic(const syn_delta_rule_args *a);
void syn_dn_conv_generic(float *x, float *s, const float *w, int32_t K, size_t stride, int64_t n);
#if defined(__x86_64__)
void syn_attention_avx2(const syn_attn_args *a);
void syn_swiglu_avx2(float *g, const float *u, int64_t n);
void syn_geglu_avx2(float *g, const float *u, int64_t n, const uint16_t *table);
float syn_dot_f32_avx2(const float *a, const float *b, int64_t n);
void syn_delta_rule_avx2(const syn_delta_rule_args *a);
void syn_dn_conv_avx2(float *x, float *s, const float *w, int32_t K, size_t stride, int64_t n);
void syn_attention_avx512(const syn_attn_args *a);
void syn_swiglu_avx512(float *g, const float *u, int64_t n);
void syn_geglu_avx512(float *g, const float *u, int64_t n, const uint16_t *table);
float syn_dot_f32_avx512(const float *a, const float *b, int64_t n);
void syn_delta_rule_avx512(const syn_delta_rule_args *a);
void syn_dn_conv_avx512(float *x, float *s, const float *w, int32_t K, size_t stride, int64_t n);
#endif

/* ---- The other quantized types ------------------------------------------------------------ */

void syn_quantize_row_q8_1_scalar(const float *x, block_q8_0 *y, uint16_t *s, int64_t n);
void syn_quantize_row_q8_k_scalar(const float *x, block_q8_k *y, int64_t n);

/* The specification of each type's single-row dot (kernels.h), and its matvec and matmul built
 * on it (the scalar tier's). act: one activation row of the type's format. */
#define SYN_K_DECLARE_TYPE_SCALAR(T)                                                               \
    float syn_vec_dot_##T##_scalar(int64_t n_blocks, const void *w, const void *act);              \
    void syn_matvec_##T##_scalar(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, float *y);                           \
    void syn_matmul_##T##_scalar(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,  \
                                 int64_t r1, const void *act, int64_t n_tokens, float *y,          \
                                 int64_t y_stride);
SYN_K_DECLARE_TYPE_SCALAR(q4_0)
SYN_K_DECLARE_TYPE_SCALAR(q5_0)
SYN_K_DECLARE_TYPE_SCALAR(q4_1)
SYN_K_DECLARE_TYPE_SCALAR(q5_1)
SYN_K_DECLARE_TYPE_SCALAR(q4_k)
SYN_K_DECLARE_TYPE_SCALAR(q5_k)
SYN_K_DECLARE_TYPE_SCALAR(q6_k)

/* Q4_0, Q5_0, Q4_1, Q5_1 on the SIMD tiers (unpacked.c): rows are unpacked into Q8_0 blocks of
 * their codes (d copied; for Q4_1 / Q5_1 also m[b] = f32(w[b].m)) in a stack buffer, which the
 * tier's own Q8_0 matvec / matmul then computes, giving kernels.h's sequence bit for bit. */
typedef void (*syn_k_unpack_fn)(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m);

typedef struct syn_k_via_q8_0 {
    syn_k_unpack_fn unpack;
    syn_matvec_fn q8_matvec; /* the tier's Q8_0 kernels */
    syn_matmul_fn q8_matmul;
    bool has_min; /* Q4_1 / Q5_1: Q8_1 activations, the acc_m term */
    float (*row_dot)(int64_t n_blocks, const void *w,
                     const void *act); /* rows too long to unpack */
} syn_k_via_q8_0;

/* y[t * y_stride + r] += kernels.h's acc_m of row r with token t (the sum over blocks, in order,
 * of m * f32(s)), r < nr: the term Q4_1 / Q5_1 add to their code sums. m: the rows' m as floats,
 * [nr][n_blocks], nr * n_blocks <= SYN_K_MIN_TERMS_MAX; s: each token's n_blocks Q8_1 sums. */
enum { SYN_K_MIN_TERMS_MAX = 8192 };
void syn_k_add_min_terms(int64_t n_blocks, const float *m, int64_t nr, const uint16_t *s,
                         int64_t n_tokens, float *y, int64_t y_stride);

void syn_k_matvec_unpacked(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w,
                           size_t w_row_bytes, int64_t r0, int64_t r1, const void *act, float *y);
void syn_k_matmul_unpacked(const syn_k_via_q8_0 *v, int64_t n_blocks, const void *w,
                           size_t w_row_bytes, int64_t r0, int64_t r1, const void *act,
                           int64_t n_tokens, float *y, int64_t y_stride);

/* A tier's unpackers: each block's codes (codes.h) as a Q8_0 block, and m for Q4_1 / Q5_1. */
#define SYN_K_DECLARE_UNPACK(sfx)                                                                  \
    void syn_unpack_q4_0_##sfx(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m);    \
    void syn_unpack_q5_0_##sfx(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m);    \
    void syn_unpack_q4_1_##sfx(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m);    \
    void syn_unpack_q5_1_##sfx(const void *w_row, int64_t n_blocks, block_q8_0 *out, float *m);

/* A tier's Q4_0 / Q5_0 / Q4_1 / Q5_1 matvec unpacking the codes in registers (the x86 tiers). */
#define SYN_K_DECLARE_MATVEC_Q4_Q5(sfx)                                                            \
    void syn_matvec_q4_0_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);                                                           \
    void syn_matvec_q5_0_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);                                                           \
    void syn_matvec_q4_1_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);                                                           \
    void syn_matvec_q5_1_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);

/* A VNNI tier's Q4_0 / Q5_0 / Q4_1 / Q5_1 matmul over codes unpacked in registers (quants_x86.h,
 * x86_matmul_codes). */
#define SYN_K_DECLARE_MATMUL_Q4_Q5(sfx)                                                            \
    void syn_matmul_q4_0_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);                                         \
    void syn_matmul_q5_0_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);                                         \
    void syn_matmul_q4_1_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);                                         \
    void syn_matmul_q5_1_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);

/* The k-quant matrix kernels of a tier. */
#define SYN_K_DECLARE_KQ(sfx)                                                                      \
    void syn_matvec_q4_k_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);                                                           \
    void syn_matmul_q4_k_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);                                         \
    void syn_matvec_q5_k_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);                                                           \
    void syn_matmul_q5_k_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);                                         \
    void syn_matvec_q6_k_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               float *);                                                           \
    void syn_matmul_q6_k_##sfx(int64_t, const void *, size_t, int64_t, int64_t, const void *,      \
                               int64_t, float *, int64_t);
/* syn_kernels_get with the GFNI builds of the avx512-vnni tier's 4- to 6-bit kernels taken or not
 * (gfni: the caller has checked syn_cpu_has_gfni; other tiers ignore it): the tests run both. */
syn_status syn_kernels_get_build(syn_isa_tier isa, bool gfni, syn_kernels *out);

#if defined(__x86_64__)
#define SYN_K_DECLARE_X16(T)                                                                       \
    void syn_matvec_x16_##T##_avx512(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,   \
                                     const void *act, float *y);                                   \
    void syn_matmul_x16_##T##_avx512(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,   \
                                     const void *act, int64_t n_tokens, float *y,                  \
                                     int64_t y_stride);
SYN_K_DECLARE_X16(q8_0)
SYN_K_DECLARE_X16(q5_0)
SYN_K_DECLARE_X16(q4_0)
SYN_K_DECLARE_X16(q5_1)
SYN_K_DECLARE_X16(q4_1)
SYN_K_DECLARE_X16(q4_k)
SYN_K_DECLARE_X16(q5_k)
SYN_K_DECLARE_X16(q6_k)
#endif

#if defined(__x86_64__)
SYN_K_DECLARE_QUANT_DOT(avx2) /* also used by the avx512-vnni and avx-vnni tiers */
SYN_K_DECLARE_MAT(avx2)
SYN_K_DECLARE_MAT(avx512)
SYN_K_DECLARE_MAT(avxvnni)
SYN_K_DECLARE_UNPACK(avx2) /* used by every x86 tier */
SYN_K_DECLARE_MATVEC_Q4_Q5(avx2)
SYN_K_DECLARE_MATVEC_Q4_Q5(avx512)
SYN_K_DECLARE_MATMUL_Q4_Q5(avx512)
SYN_K_DECLARE_MATMUL_Q4_Q5(avxvnni)
SYN_K_DECLARE_MATVEC_Q4_Q5(avx512_gfni) /* installed over avx512's where the CPU has GFNI */
SYN_K_DECLARE_MATVEC_Q4_Q5(avxvnni)
SYN_K_DECLARE_KQ(avx2) /* every x86 tier but avx512-vnni */
SYN_K_DECLARE_KQ(avx512)
SYN_K_DECLARE_KQ(avx512_gfni) /* installed over avx512's where the CPU has GFNI */
/* AVX-VNNI's matmuls (x86_matmul_codes's 256-bit lane loop: 8-row x 4-token tiles) built with the
 * AVX-512 tier's flags (quants_avx512.c), so that the tests run that loop on CPUs with AVX-512
 * VNNI but not AVX-VNNI, whose tier syn_kernels_get refuses there. */
void syn_matmul_q8_0_avx512_ymm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                int64_t r1, const void *act, int64_t n_tokens, float *y,
                                int64_t y_stride);
void syn_matmul_q4_0_avx512_ymm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                int64_t r1, const void *act, int64_t n_tokens, float *y,
                                int64_t y_stride);
void syn_matmul_q5_0_avx512_ymm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                int64_t r1, const void *act, int64_t n_tokens, float *y,
                                int64_t y_stride);
void syn_matmul_q4_1_avx512_ymm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                int64_t r1, const void *act, int64_t n_tokens, float *y,
                                int64_t y_stride);
void syn_matmul_q5_1_avx512_ymm(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                                int64_t r1, const void *act, int64_t n_tokens, float *y,
                                int64_t y_stride);
void syn_quantize_row_q8_1_avx2(const float *x, block_q8_0 *y, uint16_t *s, int64_t n);
void syn_quantize_row_q8_k_avx2(const float *x, block_q8_k *y, int64_t n);
#endif
#if defined(__aarch64__)
SYN_K_DECLARE_QUANT_DOT(dotprod) /* also used by the i8mm tier */
SYN_K_DECLARE_MAT(dotprod)
SYN_K_DECLARE_MAT(i8mm)
SYN_K_DECLARE_UNPACK(dotprod) /* used by both aarch64 tiers */
SYN_K_DECLARE_KQ(dotprod)     /* likewise */
void syn_quantize_row_q8_1_dotprod(const float *x, block_q8_0 *y, uint16_t *s, int64_t n);
void syn_quantize_row_q8_k_dotprod(const float *x, block_q8_k *y, int64_t n);
#endif

#endif
