/*
 * kernels.h: the compute kernels of the optimized backend, one dispatch table per ISA tier.
 *
 * The numeric contract every tier implements bit for bit (quants_scalar.c is the specification):
 *
 *   quantize_row_q8_0  ggml's Q8_0 rule: per block of 32, amax = max|x|, d = amax / 127 (float32),
 *                      id = d ? 1/d : 0, q = round-half-to-even(x * id), scale stored as fp16(d)
 *                      rounded to nearest even. Identical codes and scales on every tier.
 *   dot of one weight row and one activation row, over n_blocks blocks:
 *                      float acc = 0;
 *                      for b in 0..n_blocks-1 (in this order):
 *                          isum = sum_i w[b].qs[i] * a[b].qs[i]          (exact int32)
 *                          s    = f32(w[b].d) * f32(a[b].d)              (one float multiply)
 *                          acc  = acc + (float)isum * s                  (multiply, then add;
 *                                                                         never fused)
 * Because every output follows that sequence exactly, whatever lanes or tiles hold it, the matvec
 * and matmul kernels of a tier agree bitwise, results do not depend on the number of tokens in a
 * batch, on tile edges or on how rows are split across threads, and all tiers agree bitwise with
 * scalar. (The build uses -std=c11, which makes GCC keep multiplies and adds unfused; the kernels
 * also keep them in separate statements so clang's default contraction cannot fuse them.)
 *
 * The other quantized types (the kernel of type T reads T's weight blocks; "codes" are codes.h's):
 *
 *   Q4_0, Q5_0 x Q8_0  exactly the Q8_0 dot above with w[b].qs replaced by the block's codes
 *                      (q - 8, q - 16): the types share Q8_0's kernels once unpacked.
 *   Q4_1, Q5_1 x Q8_1  the Q8_1 activation is the Q8_0 one (same d and qs) plus s[b] =
 *                      fp16(d * sum(qs)) from the unrounded float d, as ggml's block_q8_1;
 *                      result = acc_d + acc_m, where acc_d is the Q8_0 dot above over the
 *                      unsigned codes q and acc_m = sum over b, in order, of
 *                      f32(w[b].m) * f32(s[b]) (float acc_m = 0; p = m * s; acc_m = acc_m + p).
 *   quantize_row_q8_k  ggml's Q8_K rule per block of 256: max = the first element of largest |x|,
 *                      iscale = -127 / max, q = min(127, round-half-to-even(iscale * x)),
 *                      d = 1 / iscale, bsums[k] = sum of codes 16k..16k+15; all zero when max is 0.
 *   Q4_K, Q5_K x Q8_K  per super-block b, in order (c: codes, sc/mn: the 6-bit scales and mins):
 *                          isum = sum_j sc[j] * (sum_{i in sub-block j} c[i] * a.qs[i])  (exact)
 *                          msum = sum_j mn[j] * (a.bsums[2j] + a.bsums[2j+1])           (exact)
 *                          acc = acc + (float)isum * (f32(w.d) * a.d)
 *                          acc = acc - (float)msum * (f32(w.dmin) * a.d)
 *                      (each product its own statement, as above).
 *   Q6_K x Q8_K        isum = sum_{j < 16} scales[j] * (sum_{i in sub-block j} c[i] * a.qs[i])
 *                      over its 16 sub-blocks of 16; acc = acc + (float)isum * (f32(w.d) * a.d).
 * Every int32 above is exact (|isum| < 2^31 for any block bytes and activation codes).
 *
 * Input contract: weight codes may be any int8 (files can hold -128); activation codes must lie in
 * [-127, 127], as the quantizers produce (the AVX2 tier takes |w| as the unsigned operand and
 * moves w's sign onto a, which cannot negate -128). Inputs must not contain NaN.
 *
 * The per-block whole int32 sum does not force horizontal work: the x86 VNNI matmul puts rows in
 * vector lanes (a tile's weights transposed on the fly, activation dwords broadcast), so each lane
 * accumulates whole-block sums directly; matvec folds 8 blocks' sums of one row with one hadd tree.
 *
 * Calling (tests/bench times the kernels): matvec reads rows [r0, r1) as one sequential
 * stream, which is what reaches memory speed, so give each call a contiguous row range as large as
 * the load balance allows (>= 256 rows; e.g. n_rows / (2 * n_threads)). Matmul computes per-call
 * activation corrections and transposes each 16-row tile once per 256 tokens: give it >= 64 rows
 * per call (a multiple of 16) and all the tokens of the step at once, as shorter calls repeat that
 * work.
 *
 * Layouts: a weight matrix is rows of n_blocks blocks of its type, row r starting at
 * (const char *)w + r * w_row_bytes (w_row_bytes >= n_blocks * block bytes, even); activations
 * are n_tokens rows of n_blocks contiguous blocks of the type's activation format (Q8_1: a
 * syn_act_q8_1 whose q and s arrays hold the rows); outputs are y[t * y_stride + r].
 * Kernels never allocate, never fail and are thread-safe (disjoint outputs per caller); their
 * buffers live on the caller's stack, up to about 200 KiB (unpacked.c's matmul of Q4_0 ... Q5_1).
 */
#ifndef SYN_KERNELS_H
#define SYN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels/blocks.h"
#include "kernels/cpu_features.h"
#include "kernels/floats.h"

/* The Q8_1 activation: ggml's block_q8_1 split into its Q8_0 part and its sums, so that the Q4_1
 * and Q5_1 kernels run Q8_0's on the first. Token t's row: q + t * n_blocks, s + t * n_blocks. */
typedef struct syn_act_q8_1 {
    const block_q8_0 *q;
    const uint16_t *s; /* fp16(d * sum(qs)) per block */
} syn_act_q8_1;

/* Decode: y[r] = dot(W row r, a) for r in [r0, r1); act: one activation row in the weight type's
 * dot format (model/wtype.h: act_type), y indexed by absolute row. */
typedef void (*syn_matvec_fn)(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                              int64_t r1, const void *act, float *y);

/* Prefill/batches: y[t * y_stride + r] = dot(W row r, A row t) for r in [r0, r1),
 * t in [0, n_tokens); act: n_tokens rows of n_blocks activation blocks. Register-blocked tiles;
 * n_tokens == 1 is matvec. */
typedef void (*syn_matmul_fn)(int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t r0,
                              int64_t r1, const void *act, int64_t n_tokens, float *y,
                              int64_t y_stride);

/* The matrix kernels of one weight type on one tier; NULL where the tier has none for the type. */
typedef struct syn_type_kernels {
    syn_matvec_fn matvec;
    syn_matmul_fn matmul;
} syn_type_kernels;

/* The x16 layouts: a matrix's rows interleaved in groups of 16, so that one 64-byte load holds
 * the same four codes (or packed bytes) of 16 rows and VPDPBUSD leaves each row's block sum in its
 * own lane: decode then needs no horizontal sums and prefill no transposition. Two arrays, each
 * read front to back by a decode of all the rows (two streams however short the rows are), block
 * k of group g at (g * n_blocks + k) times the type's bytes per group block in each:
 *   Q8_0  codes  [8][16][4] u8: dword j, lane i: codes 4j .. 4j + 3 of row 16g + i's block k,
 *                each plus 128 (VPDPBUSD's unsigned operand; the sums start from -128 * sum(a))
 *         scales [16] fp16: row 16g + i's d
 *   Q5_0  codes  [4][16][4] u8, then [8] u64: vector v, lane i: row 16g + i's qs bytes 4v .. 4v + 3
 *                as stored (low nibbles: elements 4v .. 4v + 3, high: 16 + 4v ..); mask j, bit
 *                4i + b: the fifth bit of row 16g + i's element 4j + b (so that mask j adds 16
 *                to the bytes of dword j's codes); the codes q are unsigned, the sums start from
 *                -16 * sum(a)
 *         scales [16] fp16: row 16g + i's d
 *   Q4_0  codes  Q5_0's 4 vectors without the masks (the sums start from -8 * sum(a))
 *         scales as Q5_0's
 *   Q5_1, Q4_1  codes as Q5_0's, Q4_0's (the unsigned codes' sums start from 0)
 *         scales [16] fp16 d, then [16] fp16 m
 *   Q4_K  codes  [32][16][4] u8: vector v, lane i: row 16g + i's qs bytes 4v .. 4v + 3 as stored
 *                (vector 8p + k: codes 64p + 4k .. in the low nibbles, 64p + 32 + 4k .. in the
 *                high)
 *         scales [4][16][4] u8: vector m, lane i: bytes 4m .. 4m + 3 of row 16g + i's block
 *                (d | dmin, then the 12 packed scale and min bytes)
 *   Q5_K  codes  Q4_K's 32 vectors, then [8][16][4] u8: vector k, lane i: row 16g + i's qh bytes
 *                4k .. 4k + 3 (bit 2p of a byte: the fifth bit of the code in vector 8p + k's low
 *                nibble, bit 2p + 1: in its high nibble)
 *         scales as Q4_K's
 *   Q6_K  codes  per half h of the block, per k < 8: three vectors, of ql bytes 64h + 4k ..,
 *                ql bytes 64h + 32 + 4k .. and qh bytes 32h + 4k .. (lane i: row 16g + i's)
 *         scales [4][16][4] i8: vector q, lane i: row 16g + i's scales 4q .. 4q + 3; then [16]
 *                fp16: row 16g + i's d
 * the same bytes as the rows (34, 22, 18, 24 and 20 per block of 32; 144, 176 and 210 per block
 * of 256). Codes arrays are 64-byte aligned. Rows past the last whole group stay in the rows. */
enum {
    SYN_X16_ROWS = 16,
    SYN_X16_VEC = SYN_X16_ROWS * 4, /* one 64-byte vector of a layout: a dword of each row */
    /* bytes of one group block in each type's codes array, and where its parts start */
    SYN_X16_Q8_0_CODES = 8 * SYN_X16_VEC,
    SYN_X16_Q5_0_MASKS = 4 * SYN_X16_VEC,
    SYN_X16_Q5_0_CODES = SYN_X16_Q5_0_MASKS + 8 * 8, /* and Q5_1's */
    SYN_X16_Q4_0_CODES = 4 * SYN_X16_VEC,            /* and Q4_1's */
    SYN_X16_Q4_K_CODES = 32 * SYN_X16_VEC,
    SYN_X16_Q5_K_CODES = 40 * SYN_X16_VEC, /* its qh vectors from SYN_X16_Q4_K_CODES */
    SYN_X16_Q6_K_HALF = 24 * SYN_X16_VEC,  /* each half's: 8 x (ql, ql, qh) */
    SYN_X16_Q6_K_CODES = 2 * SYN_X16_Q6_K_HALF,
    /* and in its scales array */
    SYN_X16_D_SCALES = SYN_X16_ROWS * 2,  /* Q8_0, Q5_0, Q4_0: 16 fp16 d */
    SYN_X16_DM_SCALES = SYN_X16_ROWS * 4, /* Q5_1, Q4_1: 16 fp16 d, then 16 fp16 m */
    SYN_X16_K45_SCALES = 4 * SYN_X16_VEC,
    SYN_X16_Q6_K_SCALES = 4 * SYN_X16_VEC + SYN_X16_ROWS * 2,
};

typedef struct syn_x16 {
    const uint8_t *codes;
    const uint8_t *scales;
} syn_x16;

/* Bytes of one group's block in type's codes array and in its scales array; 0 where the type has
 * no x16 layout. */
size_t syn_x16_code_bytes(uint32_t type);
size_t syn_x16_scale_bytes(uint32_t type);

/* Writes groups [g0, g1) of matrix w (rows of n_blocks blocks of type, kernels.h's row layout)
 * into codes and scales, the arrays of the whole matrix. type must have an x16 layout. */
void syn_x16_pack(uint32_t type, int64_t n_blocks, const void *w, size_t w_row_bytes, int64_t g0,
                  int64_t g1, uint8_t *codes, uint8_t *scales);

/* Row r's block k read back from x as the file stores it (block: the type's block bytes). */
void syn_x16_block(uint32_t type, const syn_x16 *x, int64_t n_blocks, int64_t r, int64_t k,
                   void *block);

/* matvec / matmul over rows [r0, r1) of an x16 matrix, r0 and r1 multiples of 16: the same
 * outputs, bit for bit, as the type's kernels on its rows. */
typedef void (*syn_matvec_x16_fn)(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                                  const void *act, float *y);
typedef void (*syn_matmul_x16_fn)(int64_t n_blocks, const syn_x16 *w, int64_t r0, int64_t r1,
                                  const void *act, int64_t n_tokens, float *y, int64_t y_stride);

typedef struct syn_x16_kernels {
    syn_matvec_x16_fn matvec;
    syn_matmul_x16_fn matmul;
} syn_x16_kernels;

typedef struct syn_kernels {
    syn_isa_tier isa;

    /* x[n] -> y[n / 32]; n is a multiple of QK8_0. */
    void (*quantize_row_q8_0)(const float *x, block_q8_0 *y, int64_t n);

    /* x[n] -> the Q8_0 part y[n / 32] and sums s[n / 32] of Q8_1 (y as quantize_row_q8_0's). */
    void (*quantize_row_q8_1)(const float *x, block_q8_0 *y, uint16_t *s, int64_t n);

    /* x[n] -> y[n / 256]; n is a multiple of QK_K. */
    void (*quantize_row_q8_k)(const float *x, block_q8_k *y, int64_t n);

    /* Per weight type (enum ggml_type): every quantized type of the weight-type table. */
    syn_type_kernels mat[GGML_TYPE_COUNT];
    /* Per weight type, the kernels of its x16 layout; NULL where the tier reads only rows. */
    syn_x16_kernels x16[GGML_TYPE_COUNT];

    /* The float32 kernels (floats.h): bitwise the same on every tier. */
    syn_attention_fn attention;
    syn_swiglu_fn swiglu;
    syn_geglu_fn geglu;
    syn_dot_f32_fn dot_f32; /* the float matrices' row dot */
    syn_delta_rule_fn delta_rule;
    syn_dn_conv_fn dn_conv;
} syn_kernels;

/* Fills *out with the kernels of isa. SYN_ERR_UNAVAILABLE (message naming the tier) when this
 * build or CPU cannot run it; never substitutes another tier. */
syn_status syn_kernels_get(syn_isa_tier isa, syn_kernels *out);

#endif
