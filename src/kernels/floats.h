/*
 * floats.h: the float32 kernels of the optimized backend (one token's attention over one KV head,
 * SwiGLU, the float dot product, the delta net's recurrence). Each tier's table (kernels.h) names
 * the build it takes: floats_generic.c (portable), floats_avx2.c or floats_avx512.c, all from
 * floats_impl.h.
 *
 * Every function is written with 8-lane vectors (SwiGLU and attention: the build's widest) whose
 * lanes follow a fixed order of IEEE operations (no reassociation, no fused multiply-add: -std=c11
 * keeps GCC from contracting), so results are bitwise identical whatever vector width the compiler
 * lowers them to, and never depend on how many tokens share a step.
 */
#ifndef SYN_KERNELS_FLOATS_H
#define SYN_KERNELS_FLOATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SYN_ATTN_BLOCK: positions per cache block (the backend's KV block, backend.h: SYN_KV_BLOCK).
 * SYN_ATTN_KEY_GROUP: keys per score vector: within a cache block K is stored transposed in
 * groups of 8 positions so that the scores of 8 keys are one vector computed without horizontal
 * sums. */
enum { SYN_ATTN_BLOCK = 16, SYN_ATTN_KEY_GROUP = 8 };
_Static_assert(SYN_ATTN_BLOCK % SYN_ATTN_KEY_GROUP == 0, "a block holds whole groups of 8 keys");

/*
 * One query token's attention over one KV head, for the group of query heads sharing it.
 * The keys and values live in the sequence's cache blocks; within a block, at the layer's offset,
 * each KV head's keys and values of the block's b = SYN_ATTN_BLOCK positions are one contiguous
 * run (elements float32, or IEEE half when f16), laid out so that the attention reads it front
 * to back:
 *   [n_head_kv] of { K [head_dim][b], V [head_dim / 16][b][16] }
 *   position p (t = p % b), dim i of head h: K at K[i][t]; V at V[i / 16][t][i % 16], where a
 *   last slab of 8 dims (head_dim % 16 == 8) is [b][8]: V + b * (i - i % 16) + t * w + i % 16,
 *   w = min(16, head_dim - (i - i % 16)).
 */
typedef struct syn_attn_args {
    int32_t head_dim; /* a multiple of 8 */
    int32_t n_head_kv;
    int32_t kv_head;           /* the KV head attended */
    int32_t group;             /* query heads per KV head */
    uint32_t n_keys;           /* attend to positions first_key .. n_keys - 1 */
    uint32_t first_key;        /* < n_keys: 0, or a sliding window's first position; the blocks
                                * before first_key / SYN_ATTN_BLOCK are not read */
    bool f16;                  /* cache element type */
    float scale;               /* 1 / sqrt(head_dim) */
    const void *const *blocks; /* the sequence's blocks: position p in blocks[p / SYN_ATTN_BLOCK] */
    size_t layer_off;          /* bytes from a block's start to the layer's K and V */
    const float *q;            /* [group][head_dim] the roped query heads */
    float *out;                /* [group][head_dim] softmax(q k / sqrt(d)) v */
    float *scratch;            /* [syn_attn_scratch_floats(group)] */
} syn_attn_args;

/* Floats of scratch one attention call over a group of query heads needs (the same for any
 * n_keys: it holds one block's scores at a time). */
static inline size_t syn_attn_scratch_floats(int32_t group) {
    return (size_t)group * (SYN_ATTN_BLOCK + SYN_ATTN_KEY_GROUP + 2);
}

/* The attention above. */
typedef void (*syn_attention_fn)(const syn_attn_args *a);

/* g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i], for g, u [n]. */
typedef void (*syn_swiglu_fn)(float *g, const float *u, int64_t n);

/* g[i] = gelu(g[i]) * u[i] for g, u [n], gelu as ggml's CPU backend rounds it: g rounded to
 * binary16 (to nearest, ties to even), looked up in table [65536] (gelu of every binary16 value,
 * as binary16 bits), 0 at or below -10 and g itself at or above 10. */
typedef void (*syn_geglu_fn)(float *g, const float *u, int64_t n, const uint16_t *table);

/* sum a[i] * b[i] over [n], in 8 lanes (i mod 8) then a fixed pairwise fold. */
typedef float (*syn_dot_f32_fn)(const float *a, const float *b, int64_t n);

/*
 * The gated delta rule of one V head of qwen35's delta net over n tokens of one sequence, in token
 * order, on the sequence's state S [dk][dv] (dv a multiple of 8):
 *   S = S * decay_t;  d = beta_t (v_t - S^T k_t);  S += k_t d^T;  o_t = S^T q_t
 * The columns of S are independent, so strips of them run through all n tokens while a strip stays
 * in the L1 cache; each column's sums run over the keys in order, in IEEE operations lane by lane
 * (no fused multiply-add), so every build and every split of a sequence's tokens gives the same
 * bits.
 */
typedef struct syn_delta_rule_args {
    int32_t dk, dv;
    size_t n;           /* tokens */
    float *S;           /* [dk][dv] */
    const float *qk;    /* [n][2][dk] token t's query (L2-normed and scaled), then its key */
    const float *gates; /* [n][2] token t's decay, then its beta */
    const float *v;     /* token t's values [dv] at v + t * v_stride */
    size_t v_stride;
    float *o; /* token t's output [dv] at o + t * o_stride */
    size_t o_stride;
} syn_delta_rule_args;

typedef void (*syn_delta_rule_fn)(const syn_delta_rule_args *a);

/*
 * One token of qwen35's causal depthwise convolution, channels [0, n): with the state s [K-1][n]
 * (row stride `stride`, the oldest input first) and weights w [K][n] (stride `stride`),
 *   acc[c] = (((0 + w[0][c] s[0][c]) + w[1][c] s[1][c]) + ...) + w[K-1][c] x[c]
 * then s shifts by one row, x[c] enters as its newest row, and x[c] = silu(acc[c]) =
 * acc / (1 + exp(-acc)). Lane-wise IEEE operations and the kernels' own exp: every build gives
 * the same bits.
 */
typedef void (*syn_dn_conv_fn)(float *x, float *s, const float *w, int32_t K, size_t stride,
                               int64_t n);

#endif
