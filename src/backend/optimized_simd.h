/*
 * optimized_simd.h: the float32 math of the optimized backend (attention, SwiGLU, float dot
 * products), behind a small table so that ISA-specific builds of the same source can slot in.
 *
 * Every function is written with 8-lane vectors (SwiGLU: the flavour's widest) whose lanes follow
 * a fixed order of IEEE operations (no reassociation, no fused multiply-add: -std=c11 keeps GCC from
 * contracting), so results are bitwise identical whatever vector width the compiler lowers them
 * to, and never depend on how many tokens share a step.
 */
#ifndef SYN_BACKEND_OPTIMIZED_SIMD_H
#define SYN_BACKEND_OPTIMIZED_SIMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "kernels/cpu_features.h"

/* Keys per score vector: within a cache block K is stored transposed in groups of 8 positions so
 * that the scores of 8 keys are one vector computed without horizontal sums. */
enum { OPT_KV_BLOCK = 8 };
_Static_assert(SYN_KV_BLOCK % OPT_KV_BLOCK == 0, "a KV block holds whole groups of 8 keys");

/*
 * One query token's attention over one KV head, for the group of query heads sharing it.
 * The keys and values live in the sequence's cache blocks (backend.h); within a block, at the
 * layer's offset, each KV head's keys and values of the block's b = SYN_KV_BLOCK positions are one
 * contiguous run (elements float32, or IEEE half when f16), laid out so that the attention reads
 * it front to back:
 *   [n_head_kv] of { K [head_dim][b], V [head_dim / 16][b][16] }
 *   position p (t = p % b), dim i of head h: K at K[i][t]; V at V[i / 16][t][i % 16], where a
 *   last slab of 8 dims (head_dim % 16 == 8) is [b][8]: V + b * (i - i % 16) + t * w + i % 16,
 *   w = min(16, head_dim - (i - i % 16)).
 */
typedef struct opt_attn_args {
    int32_t head_dim;   /* a multiple of 8 */
    int32_t n_head_kv;
    int32_t kv_head;    /* the KV head attended */
    int32_t group;      /* query heads per KV head */
    uint32_t n_keys;    /* attend to positions 0 .. n_keys - 1 (n_keys >= 1) */
    bool f16;           /* cache element type */
    float scale;        /* 1 / sqrt(head_dim) */
    const void *const *blocks; /* the sequence's blocks: position p in blocks[p / SYN_KV_BLOCK] */
    size_t layer_off;          /* bytes from a block's start to the layer's K and V */
    const float *q;     /* [group][head_dim] the roped query heads */
    float *out;         /* [group][head_dim] softmax(q k / sqrt(d)) v */
    float *scratch;     /* [opt_attn_scratch_floats(group)] */
} opt_attn_args;

/* Floats of scratch one attention call over a group of query heads needs (the same for any
 * n_keys: it holds one block's scores at a time). */
static inline size_t opt_attn_scratch_floats(int32_t group) {
    return (size_t)group * (SYN_KV_BLOCK + OPT_KV_BLOCK + 2);
}

typedef struct opt_simd {
    void (*attention)(const opt_attn_args *a);
    /* g[i] = silu(g[i]) * u[i] = g[i] / (1 + exp(-g[i])) * u[i], for g, u [n]. */
    void (*swiglu)(float *g, const float *u, int64_t n);
    /* sum a[i] * b[i] over [n], in 8 lanes (i mod 8) then a fixed pairwise fold. */
    float (*dot)(const float *a, const float *b, int64_t n);
} opt_simd;

/* The table for a kernel tier (all tiers give the same bits; wider ones are faster). */
void opt_simd_get(syn_isa isa, opt_simd *out);

#endif
