/*
 * optimized_simd_impl.h: the body of the optimized backend's float math (see optimized_simd.h),
 * included once per build flavour: optimized_simd.c (portable) and optimized_simd_avx2.c (x86
 * AVX2). The includer defines OPT_SIMD_SFX; every function here is static except the table getter
 * opt_simd_table_<sfx>. GCC vector extensions give 8-lane code that each flavour lowers to its own
 * instructions; lane-wise IEEE operations make the flavours bitwise equal.
 */
#ifndef OPT_SIMD_SFX
#error "define OPT_SIMD_SFX before including optimized_simd_impl.h"
#endif

#include <math.h>
#include <string.h>

#include "backend/optimized_simd.h"
#include "kernels/fp16.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

/* 8-lane vectors passed between always-inline helpers only; without AVX GCC and clang warn that
 * such a value would change the calling convention, which never happens once inlined. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
/* GCC never contracts a * b + c under -std=c11; clang would within a statement unless told. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

#define V8_INLINE static inline __attribute__((always_inline))

V8_INLINE v8f v8_load(const float *p) {
    v8f v;
    memcpy(&v, p, sizeof v);
    return v;
}

V8_INLINE void v8_store(float *p, v8f v) { memcpy(p, &v, sizeof v); }

V8_INLINE v8f v8_set1(float x) { return (v8f){x, x, x, x, x, x, x, x}; }

/* Lane-wise mask ? a : b. */
V8_INLINE v8f v8_select(v8i mask, v8f a, v8f b) { return (v8f)(((v8i)a & mask) | ((v8i)b & ~mask)); }

V8_INLINE v8f v8_max(v8f a, v8f b) { return v8_select(a < b, b, a); }

/* The fixed fold of 8 lanes: ((0+1)+(2+3))+((4+5)+(6+7)). */
V8_INLINE float v8_fold_sum(v8f v) { return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])); }

V8_INLINE float v8_fold_max(v8f v) {
    float m = v[0];
    for (int i = 1; i < 8; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* exp(x), relative error ~2e-7: x = n ln2 + r (|r| <= ln2/2, Cody-Waite split of ln2 so n*ln2_hi
 * is exact), degree-6 Taylor polynomial for e^r, then 2^n through the exponent bits. Inputs are
 * clamped to [-87, 88] so 2^n stays a normal number (exp(-87) ~ 1.6e-38 stands in for 0). */
V8_INLINE v8f v8_exp(v8f x) {
    const v8f lo = v8_set1(-87.0f), hi = v8_set1(88.0f);
    x = v8_select(x < lo, lo, x);
    x = v8_select(x > hi, hi, x);
    const v8f magic = v8_set1(12582912.0f); /* 1.5 * 2^23: adding it rounds to an integer */
    const v8f n = (x * v8_set1(1.44269504088896341f) + magic) - magic;
    v8f r = x - n * v8_set1(0.693145751953125f);
    r = r - n * v8_set1(1.42860682030941723e-6f);
    v8f p = v8_set1(1.0f / 720.0f);
    p = p * r + v8_set1(1.0f / 120.0f);
    p = p * r + v8_set1(1.0f / 24.0f);
    p = p * r + v8_set1(1.0f / 6.0f);
    p = p * r + v8_set1(0.5f);
    p = p * r + v8_set1(1.0f);
    p = p * r + v8_set1(1.0f);
    const v8i bits = (__builtin_convertvector(n, v8i) + 127) << 23;
    return p * (v8f)bits;
}

/* silu(g) * u on 8 lanes. */
V8_INLINE v8f v8_swiglu(v8f g, v8f u) { return g / (v8_set1(1.0f) + v8_exp(-g)) * u; }

static void swiglu(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) v8_store(g + i, v8_swiglu(v8_load(g + i), v8_load(u + i)));
    if (i < n) { /* the tail through the same lane-wise code */
        float gt[8] = {0}, ut[8] = {0};
        memcpy(gt, g + i, sizeof(float) * (size_t)(n - i));
        memcpy(ut, u + i, sizeof(float) * (size_t)(n - i));
        v8_store(gt, v8_swiglu(v8_load(gt), v8_load(ut)));
        memcpy(g + i, gt, sizeof(float) * (size_t)(n - i));
    }
}

static float dot(const float *a, const float *b, int64_t n) {
    v8f acc = v8_set1(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) acc = acc + v8_load(a + i) * v8_load(b + i);
    float lanes[8];
    v8_store(lanes, acc);
    for (int64_t j = 0; i < n; i++, j++) lanes[j] = lanes[j] + a[i] * b[i];
    return v8_fold_sum(v8_load(lanes));
}

/* src[n] binary16 -> dst[n] float32. Every binary16 value is a float32 value, so F16C's vcvtph2ps
 * (where the flavour has it) and the portable conversion give the same bits. */
V8_INLINE void f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
#endif
    for (; i < n; i++) dst[i] = syn_k_fp16_to_f32(src[i]);
}

/* Key group b (positions 8b .. 8b + 7, [head_dim][8]) of the attended head, as float32 (f16
 * groups converted into buf). */
V8_INLINE const char *k_addr(const opt_attn_args *a, size_t b) {
    enum { GROUPS = SYN_KV_BLOCK / OPT_KV_BLOCK };
    const size_t elem = a->f16 ? sizeof(uint16_t) : sizeof(float);
    const size_t at = ((b % GROUPS) * (size_t)a->n_head_kv + (size_t)a->kv_head) * (size_t)a->head_dim * OPT_KV_BLOCK;
    return (const char *)a->blocks[b / GROUPS] + a->k_off + at * elem;
}

V8_INLINE const float *k_block(const opt_attn_args *a, size_t b, float *buf) {
    const char *src = k_addr(a, b);
    if (!a->f16) return (const float *)src;
    f16_to_f32((const uint16_t *)src, buf, (size_t)a->head_dim * OPT_KV_BLOCK);
    return buf;
}

/* Asks for the cache lines of [p, p + bytes) ahead of use. The cache keeps each layer's K and V as
 * runs of a few KiB per block (backend.h), too short for the hardware prefetchers to lock on. */
V8_INLINE void prefetch_span(const void *p, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch((const char *)p + o, 0, 1);
}

/* Position t's V row ([head_dim]) of the attended head, in the cache's element type. */
V8_INLINE const char *v_row(const opt_attn_args *a, uint32_t t) {
    const size_t elem = a->f16 ? sizeof(uint16_t) : sizeof(float);
    const size_t at = ((size_t)(t % SYN_KV_BLOCK) * (size_t)a->n_head_kv + (size_t)a->kv_head) * (size_t)a->head_dim;
    return (const char *)a->blocks[t / SYN_KV_BLOCK] + a->v_off + at * elem;
}

/* Scores of the 8 keys of one or two K blocks (kb[0..nb)) for query heads q[0..ng), ng <= 4:
 * scores[g * stride + j * 8 + lane] = scale * (q_g . key). Each lane sums over i in order; the
 * accumulators are named variables (GCC keeps arrays of vectors in memory) and up to 8
 * independent ones hide the add latency. */
V8_INLINE void qk_blocks(const float *const kb[2], int nb, const float *q, int32_t hd, int ng, float scale,
                         float *scores, size_t stride) {
    const v8f z = v8_set1(0.0f);
    v8f a0 = z, a1 = z, a2 = z, a3 = z, b0 = z, b1 = z, b2 = z, b3 = z;
    const float *q0 = q, *q1 = q + hd, *q2 = q + 2 * (size_t)hd, *q3 = q + 3 * (size_t)hd;
    const float *k0 = kb[0], *k1 = nb > 1 ? kb[1] : kb[0];
    for (int32_t i = 0; i < hd; i++) {
        const v8f ka = v8_load(k0 + (size_t)i * OPT_KV_BLOCK), kc = v8_load(k1 + (size_t)i * OPT_KV_BLOCK);
        const v8f x0 = v8_set1(q0[i]);
        a0 = a0 + x0 * ka;
        b0 = b0 + x0 * kc;
        if (ng > 1) {
            const v8f x1 = v8_set1(q1[i]);
            a1 = a1 + x1 * ka;
            b1 = b1 + x1 * kc;
        }
        if (ng > 2) {
            const v8f x2 = v8_set1(q2[i]);
            a2 = a2 + x2 * ka;
            b2 = b2 + x2 * kc;
        }
        if (ng > 3) {
            const v8f x3 = v8_set1(q3[i]);
            a3 = a3 + x3 * ka;
            b3 = b3 + x3 * kc;
        }
    }
    const v8f s = v8_set1(scale);
    const v8f acc[2][4] = {{a0, a1, a2, a3}, {b0, b1, b2, b3}};
    for (int j = 0; j < nb; j++)
        for (int g = 0; g < ng; g++) v8_store(scores + (size_t)g * stride + (size_t)j * OPT_KV_BLOCK, acc[j][g] * s);
}

/* Keys per tile of the weighted V sum: a tile's V rows (8 KiB of float32 at head_dim 64) stay in
 * L1 while every head of the group and every dimension slab reads them, so V comes from memory
 * once per group instead of once per query head; the next tile is prefetched meanwhile (tiles of
 * 16-64 keys measured within 5%, 64 slightly slower). f16 tiles are converted into a 16-row
 * buffer. */
enum { PV_TILE_F32 = 32, PV_TILE_F16 = 2 * OPT_KV_BLOCK };

/* Key groups between the one being scored and the one being prefetched. */
enum { PF_K_AHEAD = 4 };

/* For heads g < ng (ng <= 4) and lanes i0 .. i0 + 8 * nv (nv <= 2):
 * acc[g * hd + i] = acc[g * hd + i] + p[g * p_stride + t] * rows[t][i], for t = 0 .. nt - 1 in
 * order. The 8 accumulators are named variables held in registers over the tile (GCC keeps arrays
 * of vectors in memory); each key's V slab is loaded once for all ng heads. */
V8_INLINE void pv_tile(const float *const *rows, uint32_t nt, const float *p, size_t p_stride, int ng, int nv,
                       int32_t i0, float *acc, size_t hd) {
    const v8f z = v8_set1(0.0f);
    /* Rows past ng alias row 0 (never used) so that no pointer leaves its array. */
    float *o0 = acc + i0, *o1 = ng > 1 ? o0 + hd : o0, *o2 = ng > 2 ? o1 + hd : o0, *o3 = ng > 3 ? o2 + hd : o0;
    const float *p0 = p, *p1 = ng > 1 ? p0 + p_stride : p0, *p2 = ng > 2 ? p1 + p_stride : p0,
                *p3 = ng > 3 ? p2 + p_stride : p0;
    v8f a0 = v8_load(o0), a1 = nv > 1 ? v8_load(o0 + 8) : z;
    v8f b0 = ng > 1 ? v8_load(o1) : z, b1 = ng > 1 && nv > 1 ? v8_load(o1 + 8) : z;
    v8f c0 = ng > 2 ? v8_load(o2) : z, c1 = ng > 2 && nv > 1 ? v8_load(o2 + 8) : z;
    v8f d0 = ng > 3 ? v8_load(o3) : z, d1 = ng > 3 && nv > 1 ? v8_load(o3 + 8) : z;
    for (uint32_t t = 0; t < nt; t++) {
        const float *vr = rows[t] + i0;
        const v8f v0 = v8_load(vr), v1 = nv > 1 ? v8_load(vr + 8) : z;
        const v8f x0 = v8_set1(p0[t]);
        a0 = a0 + x0 * v0;
        a1 = a1 + x0 * v1;
        if (ng > 1) {
            const v8f x1 = v8_set1(p1[t]);
            b0 = b0 + x1 * v0;
            b1 = b1 + x1 * v1;
        }
        if (ng > 2) {
            const v8f x2 = v8_set1(p2[t]);
            c0 = c0 + x2 * v0;
            c1 = c1 + x2 * v1;
        }
        if (ng > 3) {
            const v8f x3 = v8_set1(p3[t]);
            d0 = d0 + x3 * v0;
            d1 = d1 + x3 * v1;
        }
    }
    v8_store(o0, a0);
    if (nv > 1) v8_store(o0 + 8, a1);
    if (ng > 1) {
        v8_store(o1, b0);
        if (nv > 1) v8_store(o1 + 8, b1);
    }
    if (ng > 2) {
        v8_store(o2, c0);
        if (nv > 1) v8_store(o2 + 8, c1);
    }
    if (ng > 3) {
        v8_store(o3, d0);
        if (nv > 1) v8_store(o3 + 8, d1);
    }
}

/* Sum of head row s's softmax weights ([n_blocks * 8], padding lanes zero): 8 lanes over the
 * blocks in order, then the fixed fold. */
V8_INLINE float weights_total(const float *s, size_t n_blocks) {
    v8f sum = v8_set1(0.0f);
    for (size_t b = 0; b < n_blocks; b++) sum = sum + v8_load(s + b * OPT_KV_BLOCK);
    return v8_fold_sum(sum);
}

static void attention(const opt_attn_args *a) {
    const int32_t hd = a->head_dim, n_group = a->group;
    const uint32_t n = a->n_keys;
    const size_t n_blocks = ((size_t)n + OPT_KV_BLOCK - 1) / OPT_KV_BLOCK;
    const size_t padded = n_blocks * OPT_KV_BLOCK;
    float *scores = a->scratch;                      /* [group][padded] */
    float *kbuf = scores + (size_t)n_group * padded; /* [2][head_dim][8]: f16 K blocks, later f16 V
                                                      * tiles ([16][head_dim]), as float */

    /* Scores: each K block is read once for the whole group of query heads. */
    const size_t elem = a->f16 ? sizeof(uint16_t) : sizeof(float);
    const size_t k_bytes = (size_t)hd * OPT_KV_BLOCK * elem; /* one key group of the head */
    for (size_t b = 0; b < n_blocks; b += 2) {
        const int nb = n_blocks - b >= 2 ? 2 : 1;
        for (size_t f = b + PF_K_AHEAD; f < b + PF_K_AHEAD + 2 && f < n_blocks; f++) prefetch_span(k_addr(a, f), k_bytes);
        const float *kb[2] = {k_block(a, b, kbuf), NULL};
        if (nb == 2) kb[1] = k_block(a, b + 1, kbuf + (size_t)hd * OPT_KV_BLOCK);
        for (int32_t g = 0; g < n_group; g += 4) {
            const int ng = n_group - g < 4 ? n_group - g : 4;
            qk_blocks(kb, nb, a->q + (size_t)g * hd, hd, ng, a->scale, scores + (size_t)g * padded + b * OPT_KV_BLOCK,
                      padded);
        }
    }

    /* Softmax weights, max-subtracted and not yet normalised; lanes past n_keys are zero. */
    for (int32_t g = 0; g < n_group; g++) {
        float *s = scores + (size_t)g * padded;
        for (size_t p = n; p < padded; p++) s[p] = -INFINITY;
        v8f mx = v8_load(s);
        for (size_t b = 1; b < n_blocks; b++) mx = v8_max(mx, v8_load(s + b * OPT_KV_BLOCK));
        const v8f m = v8_set1(v8_fold_max(mx));
        for (size_t b = 0; b < n_blocks; b++) v8_store(s + b * OPT_KV_BLOCK, v8_exp(v8_load(s + b * OPT_KV_BLOCK) - m));
        for (size_t p = n; p < padded; p++) s[p] = 0.0f;
    }

    /* Weighted sum of V rows: out accumulates over key tiles in key order. */
    memset(a->out, 0, sizeof(float) * (size_t)n_group * (size_t)hd);
    const uint32_t tile = a->f16 ? PV_TILE_F16 : PV_TILE_F32;
    const float *rows[PV_TILE_F32];
    for (uint32_t t0 = 0; t0 < n; t0 += tile) {
        const uint32_t nt = n - t0 < tile ? n - t0 : tile;
        const size_t v_bytes = (size_t)hd * elem;
        for (uint32_t t = t0 + tile; t < t0 + 2 * tile && t < n; t++) prefetch_span(v_row(a, t), v_bytes);
        for (uint32_t t = 0; t < nt; t++) {
            const char *src = v_row(a, t0 + t);
            if (!a->f16) {
                rows[t] = (const float *)src;
                continue;
            }
            float *dst = kbuf + (size_t)t * (size_t)hd;
            f16_to_f32((const uint16_t *)src, dst, (size_t)hd);
            rows[t] = dst;
        }
        for (int32_t g = 0; g < n_group; g += 4) {
            const int ng = n_group - g < 4 ? n_group - g : 4;
            for (int32_t i0 = 0; i0 < hd; i0 += 16) {
                const int nv = hd - i0 >= 16 ? 2 : 1;
                pv_tile(rows, nt, scores + (size_t)g * padded + t0, padded, ng, nv, i0, a->out + (size_t)g * hd,
                        (size_t)hd);
            }
        }
    }
    for (int32_t g = 0; g < n_group; g++) {
        const v8f d = v8_set1(weights_total(scores + (size_t)g * padded, n_blocks));
        float *o = a->out + (size_t)g * hd;
        for (int32_t i = 0; i < hd; i += 8) v8_store(o + i, v8_load(o + i) / d);
    }
}

#define OPT_CAT2(a, b) a##b
#define OPT_CAT(a, b) OPT_CAT2(a, b)

void OPT_CAT(opt_simd_table_, OPT_SIMD_SFX)(opt_simd *out);
void OPT_CAT(opt_simd_table_, OPT_SIMD_SFX)(opt_simd *out) {
    out->attention = attention;
    out->swiglu = swiglu;
    out->dot = dot;
}
