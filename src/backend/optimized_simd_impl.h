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

/* Key group b (positions 8b .. 8b + 7, [head_dim][8]) of the attended head, as float32 (f16
 * groups converted into buf). */
V8_INLINE const float *k_block(const opt_attn_args *a, size_t b, float *buf) {
    enum { GROUPS = SYN_KV_BLOCK / OPT_KV_BLOCK };
    const size_t hd = (size_t)a->head_dim;
    const char *base = (const char *)a->blocks[b / GROUPS] + a->k_off;
    const size_t at = ((b % GROUPS) * (size_t)a->n_head_kv + (size_t)a->kv_head) * hd * OPT_KV_BLOCK;
    if (!a->f16) return (const float *)base + at;
    const uint16_t *src = (const uint16_t *)base + at;
    for (size_t i = 0; i < hd * OPT_KV_BLOCK; i++) buf[i] = syn_k_fp16_to_f32(src[i]);
    return buf;
}

/* Elements [i0, i0 + n) of position t's V row of the attended head (f16 converted into buf). */
V8_INLINE const float *v_slab(const opt_attn_args *a, uint32_t t, int32_t i0, int32_t n, float *buf) {
    const char *base = (const char *)a->blocks[t / SYN_KV_BLOCK] + a->v_off;
    const size_t at = ((size_t)(t % SYN_KV_BLOCK) * (size_t)a->n_head_kv + (size_t)a->kv_head) * (size_t)a->head_dim +
                      (size_t)i0;
    if (!a->f16) return (const float *)base + at;
    const uint16_t *src = (const uint16_t *)base + at;
    for (int32_t i = 0; i < n; i++) buf[i] = syn_k_fp16_to_f32(src[i]);
    return buf;
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

/* out[i0 .. i0 + 8 * nv) = sum over t < n of p[t] * V[t][i0 ..], divided by sum; nv <= 8 vectors
 * held in registers (named, as above) across the whole loop over positions. */
V8_INLINE void pv_slab(const opt_attn_args *a, const float *p, uint32_t n, int32_t i0, int nv, float sum,
                       float *out, float *buf) {
    const v8f z = v8_set1(0.0f);
    v8f c0 = z, c1 = z, c2 = z, c3 = z, c4 = z, c5 = z, c6 = z, c7 = z;
    for (uint32_t t = 0; t < n; t++) {
        const float *vr = v_slab(a, t, i0, nv * 8, buf);
        const v8f pt = v8_set1(p[t]);
        c0 = c0 + pt * v8_load(vr);
        if (nv > 1) c1 = c1 + pt * v8_load(vr + 8);
        if (nv > 2) c2 = c2 + pt * v8_load(vr + 16);
        if (nv > 3) c3 = c3 + pt * v8_load(vr + 24);
        if (nv > 4) c4 = c4 + pt * v8_load(vr + 32);
        if (nv > 5) c5 = c5 + pt * v8_load(vr + 40);
        if (nv > 6) c6 = c6 + pt * v8_load(vr + 48);
        if (nv > 7) c7 = c7 + pt * v8_load(vr + 56);
    }
    const v8f d = v8_set1(sum);
    const v8f acc[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
    for (int v = 0; v < nv; v++) v8_store(out + i0 + v * 8, acc[v] / d);
}

static void attention(const opt_attn_args *a) {
    const int32_t hd = a->head_dim, n_group = a->group;
    const uint32_t n = a->n_keys;
    const size_t n_blocks = ((size_t)n + OPT_KV_BLOCK - 1) / OPT_KV_BLOCK;
    const size_t padded = n_blocks * OPT_KV_BLOCK;
    float *scores = a->scratch;                      /* [group][padded] */
    float *kbuf = scores + (size_t)n_group * padded; /* [2][head_dim][8]: f16 blocks as float */
    float *vbuf = kbuf + (size_t)hd * OPT_KV_BLOCK * 2; /* [64]: an f16 V slab as float */

    /* Scores: each K block is read once for the whole group of query heads. */
    for (size_t b = 0; b < n_blocks; b += 2) {
        const int nb = n_blocks - b >= 2 ? 2 : 1;
        const float *kb[2] = {k_block(a, b, kbuf), NULL};
        if (nb == 2) kb[1] = k_block(a, b + 1, kbuf + (size_t)hd * OPT_KV_BLOCK);
        for (int32_t g = 0; g < n_group; g += 4) {
            const int ng = n_group - g < 4 ? n_group - g : 4;
            qk_blocks(kb, nb, a->q + (size_t)g * hd, hd, ng, a->scale, scores + (size_t)g * padded + b * OPT_KV_BLOCK,
                      padded);
        }
    }

    for (int32_t g = 0; g < n_group; g++) {
        /* Softmax, max-subtracted; lanes past n_keys are excluded. */
        float *s = scores + (size_t)g * padded;
        for (size_t p = n; p < padded; p++) s[p] = -INFINITY;
        v8f mx = v8_load(s);
        for (size_t b = 1; b < n_blocks; b++) mx = v8_max(mx, v8_load(s + b * OPT_KV_BLOCK));
        const v8f m = v8_set1(v8_fold_max(mx));
        v8f sum = v8_set1(0.0f);
        for (size_t b = 0; b < n_blocks; b++) {
            v8_store(s + b * OPT_KV_BLOCK, v8_exp(v8_load(s + b * OPT_KV_BLOCK) - m));
            if (b + 1 == n_blocks)
                for (size_t p = n; p < padded; p++) s[p] = 0.0f;
            sum = sum + v8_load(s + b * OPT_KV_BLOCK);
        }
        const float total = v8_fold_sum(sum);
        /* Weighted sum of V rows, 64 dimensions at a time. */
        for (int32_t i0 = 0; i0 < hd; i0 += 64) {
            const int nv = hd - i0 >= 64 ? 8 : (hd - i0) / 8;
            pv_slab(a, s, n, i0, nv, total, a->out + (size_t)g * hd, vbuf);
        }
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
