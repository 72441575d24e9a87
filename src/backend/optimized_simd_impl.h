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

/* Blocks between the one being attended and the one whose cache lines are asked for meanwhile.
 * The cache keeps each layer's K and V of a KV head as one run of a few KiB per block
 * (optimized_simd.h), too short for the hardware prefetchers to lock on; the run of block b + 2 is
 * prefetched into L2 a few lines per step of block b's score loop (measured, attention alone at
 * depth 4096, 1 thread: all of a run at once 13 ms, spread 7 ms; into L1 14 ms; 1-4 blocks ahead
 * within noise). */
enum { PF_AHEAD = 2 };

/* Keys per KV block, and key groups of 8 in one. */
enum { KB = SYN_KV_BLOCK, KB_GROUPS = SYN_KV_BLOCK / OPT_KV_BLOCK };
_Static_assert(KB_GROUPS == 2, "qk_block scores a block as two groups of 8 keys");

/* Scores of the 16 keys of one block (k: [hd][16]) for query heads q[0..NG), NG <= 4, a
 * compile-time constant: s[g * KB + key] = scale * (q_g . key). Each lane sums over i in order;
 * the accumulators are named variables (GCC keeps arrays of vectors in memory) and up to 8
 * independent ones hide the add latency. Step i also prefetches [pf + i * pf_step, + pf_step)
 * into L2 (pf NULL: none). */
V8_INLINE void qk_block(const float *k, const float *q, int32_t hd, const int NG, float scale, float *s,
                        const char *pf, size_t pf_step) {
    const v8f z = v8_set1(0.0f);
    v8f a0 = z, a1 = z, a2 = z, a3 = z, b0 = z, b1 = z, b2 = z, b3 = z;
    const float *q0 = q, *q1 = q + hd, *q2 = q + 2 * (size_t)hd, *q3 = q + 3 * (size_t)hd;
    for (int32_t i = 0; i < hd; i++) {
        if (pf)
            for (size_t o = 0; o < pf_step; o += 64) __builtin_prefetch(pf + (size_t)i * pf_step + o, 0, 1);
        const v8f ka = v8_load(k + (size_t)i * KB), kc = v8_load(k + (size_t)i * KB + OPT_KV_BLOCK);
        const v8f x0 = v8_set1(q0[i]);
        a0 = a0 + x0 * ka;
        b0 = b0 + x0 * kc;
        if (NG > 1) {
            const v8f x1 = v8_set1(q1[i]);
            a1 = a1 + x1 * ka;
            b1 = b1 + x1 * kc;
        }
        if (NG > 2) {
            const v8f x2 = v8_set1(q2[i]);
            a2 = a2 + x2 * ka;
            b2 = b2 + x2 * kc;
        }
        if (NG > 3) {
            const v8f x3 = v8_set1(q3[i]);
            a3 = a3 + x3 * ka;
            b3 = b3 + x3 * kc;
        }
    }
    const v8f sc = v8_set1(scale);
    v8_store(s, a0 * sc);
    v8_store(s + OPT_KV_BLOCK, b0 * sc);
    if (NG > 1) {
        v8_store(s + KB, a1 * sc);
        v8_store(s + KB + OPT_KV_BLOCK, b1 * sc);
    }
    if (NG > 2) {
        v8_store(s + 2 * KB, a2 * sc);
        v8_store(s + 2 * KB + OPT_KV_BLOCK, b2 * sc);
    }
    if (NG > 3) {
        v8_store(s + 3 * KB, a3 * sc);
        v8_store(s + 3 * KB + OPT_KV_BLOCK, b3 * sc);
    }
}

/* For heads g < NG (NG <= 4) and lanes i0 .. i0 + 8 * NV (NV <= 2), both compile-time constants,
 * with v the slab of those lanes ([KB][8 * NV]):
 * acc[g * hd + i] = acc[g * hd + i] * alpha[g] (when rescale), then
 * acc[g * hd + i] = acc[g * hd + i] + p[g * KB + t] * v[t][i - i0], for t = 0 .. nt - 1 in
 * order. The 8 accumulators are named variables held in registers over the block; each key's V
 * slab is loaded once for all NG heads. */
V8_INLINE void pv_block(const float *v, uint32_t nt, const float *p, const float *alpha, bool rescale, const int NG,
                        const int NV, int32_t i0, float *acc, size_t hd) {
    const v8f z = v8_set1(0.0f);
    /* Rows past NG alias row 0 (never used) so that no pointer leaves its array. */
    float *o0 = acc + i0, *o1 = NG > 1 ? o0 + hd : o0, *o2 = NG > 2 ? o1 + hd : o0, *o3 = NG > 3 ? o2 + hd : o0;
    const float *p0 = p, *p1 = NG > 1 ? p0 + KB : p0, *p2 = NG > 2 ? p1 + KB : p0, *p3 = NG > 3 ? p2 + KB : p0;
    v8f a0 = v8_load(o0), a1 = NV > 1 ? v8_load(o0 + 8) : z;
    v8f b0 = NG > 1 ? v8_load(o1) : z, b1 = NG > 1 && NV > 1 ? v8_load(o1 + 8) : z;
    v8f c0 = NG > 2 ? v8_load(o2) : z, c1 = NG > 2 && NV > 1 ? v8_load(o2 + 8) : z;
    v8f d0 = NG > 3 ? v8_load(o3) : z, d1 = NG > 3 && NV > 1 ? v8_load(o3 + 8) : z;
    if (rescale) { /* x * 1 is x: heads whose maximum held keep their bits */
        const v8f e0 = v8_set1(alpha[0]);
        a0 = a0 * e0;
        a1 = a1 * e0;
        if (NG > 1) {
            const v8f e1 = v8_set1(alpha[1]);
            b0 = b0 * e1;
            b1 = b1 * e1;
        }
        if (NG > 2) {
            const v8f e2 = v8_set1(alpha[2]);
            c0 = c0 * e2;
            c1 = c1 * e2;
        }
        if (NG > 3) {
            const v8f e3 = v8_set1(alpha[3]);
            d0 = d0 * e3;
            d1 = d1 * e3;
        }
    }
    for (uint32_t t = 0; t < nt; t++) {
        const float *vr = v + (size_t)t * 8 * NV;
        const v8f v0 = v8_load(vr), v1 = NV > 1 ? v8_load(vr + 8) : z;
        const v8f x0 = v8_set1(p0[t]);
        a0 = a0 + x0 * v0;
        a1 = a1 + x0 * v1;
        if (NG > 1) {
            const v8f x1 = v8_set1(p1[t]);
            b0 = b0 + x1 * v0;
            b1 = b1 + x1 * v1;
        }
        if (NG > 2) {
            const v8f x2 = v8_set1(p2[t]);
            c0 = c0 + x2 * v0;
            c1 = c1 + x2 * v1;
        }
        if (NG > 3) {
            const v8f x3 = v8_set1(p3[t]);
            d0 = d0 + x3 * v0;
            d1 = d1 + x3 * v1;
        }
    }
    v8_store(o0, a0);
    if (NV > 1) v8_store(o0 + 8, a1);
    if (NG > 1) {
        v8_store(o1, b0);
        if (NV > 1) v8_store(o1 + 8, b1);
    }
    if (NG > 2) {
        v8_store(o2, c0);
        if (NV > 1) v8_store(o2 + 8, c1);
    }
    if (NG > 3) {
        v8_store(o3, d0);
        if (NV > 1) v8_store(o3 + 8, d1);
    }
}

/* The shapes above with their head count (and lane count) made constant, one body each. */
static void qk_heads(const float *k, const float *q, int32_t hd, int ng, float scale, float *s, const char *pf,
                     size_t pf_step) {
    switch (ng) {
    case 1: qk_block(k, q, hd, 1, scale, s, pf, pf_step); break;
    case 2: qk_block(k, q, hd, 2, scale, s, pf, pf_step); break;
    case 3: qk_block(k, q, hd, 3, scale, s, pf, pf_step); break;
    default: qk_block(k, q, hd, 4, scale, s, pf, pf_step); break;
    }
}

static void pv_heads(const float *v, uint32_t nt, const float *p, const float *alpha, bool rescale, int ng, int32_t hd,
                     float *acc) {
    int32_t i0 = 0;
#define PV_SLABS(NG)                                                                                                   \
    for (; i0 + 16 <= hd; i0 += 16) pv_block(v + (size_t)KB * i0, nt, p, alpha, rescale, NG, 2, i0, acc, (size_t)hd); \
    if (i0 < hd) pv_block(v + (size_t)KB * i0, nt, p, alpha, rescale, NG, 1, i0, acc, (size_t)hd);
    switch (ng) {
    case 1: PV_SLABS(1) break;
    case 2: PV_SLABS(2) break;
    case 3: PV_SLABS(3) break;
    default: PV_SLABS(4) break;
    }
#undef PV_SLABS
}

/*
 * One pass over the KV head's blocks in key order, K and V of a block together (one contiguous
 * run of the cache), with a running softmax per query head g:
 *   s      = scale * q_g . k over the block's keys (lanes past n_keys: -inf)
 *   m'     = max(m, max of s)      (m starts at -inf)
 *   alpha  = exp(m - m') when m' > m, else 1 (the accumulators are multiplied by it: x * 1 = x)
 *   p      = exp(s - m') (lanes past n_keys: 0)
 *   l      = (l * alpha + p[0..8)) + p[8..16)     8 lanes, key mod 8
 *   out    = out * alpha, then out + p[t] * v[t] for each key t of the block in order
 * and at the end out / (the fixed fold of l). Every step is lane-wise and in a fixed order that
 * depends only on n_keys, so every flavour and thread count gives the same bits.
 */
static void attention(const opt_attn_args *a) {
    const int32_t hd = a->head_dim, n_group = a->group;
    const uint32_t n = a->n_keys;
    const size_t n_blocks = ((size_t)n + KB - 1) / KB;
    const size_t elem = a->f16 ? sizeof(uint16_t) : sizeof(float);
    const size_t k_elems = (size_t)KB * (size_t)hd; /* a block's K (or V) of one head */
    const size_t head_bytes = 2 * k_elems * elem;
    const size_t head_off = a->layer_off + (size_t)a->kv_head * head_bytes;

    float *s = a->scratch;                       /* [group][KB] scores, then weights */
    float *l = s + (size_t)n_group * KB;         /* [group][8] weight sums */
    float *m = l + (size_t)n_group * OPT_KV_BLOCK; /* [group] running maxima */
    float *alpha = m + n_group;                  /* [group] this block's rescale factors */
    float *kbuf = alpha + n_group;               /* [KB][hd] f16 K, then [KB][hd] f16 V, as float */
    float *vbuf = kbuf + k_elems;

    memset(a->out, 0, sizeof(float) * (size_t)n_group * (size_t)hd);
    for (int32_t g = 0; g < n_group; g++) {
        v8_store(l + (size_t)g * OPT_KV_BLOCK, v8_set1(0.0f));
        m[g] = -INFINITY;
    }
    const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
    for (size_t b = 0; b < n_blocks; b++) {
        const char *pf = b + PF_AHEAD < n_blocks ? (const char *)a->blocks[b + PF_AHEAD] + head_off : NULL;
        const char *src = (const char *)a->blocks[b] + head_off;
        const uint32_t nt = n - (uint32_t)(b * KB) < KB ? n - (uint32_t)(b * KB) : KB;
        const float *k = (const float *)src, *v = (const float *)(src + k_elems * elem);
        if (a->f16) {
            f16_to_f32((const uint16_t *)src, kbuf, k_elems);
            f16_to_f32((const uint16_t *)(src + k_elems * elem), vbuf, k_elems);
            k = kbuf;
            v = vbuf;
        }
        for (int32_t g = 0; g < n_group; g += 4)
            qk_heads(k, a->q + (size_t)g * hd, hd, n_group - g < 4 ? n_group - g : 4, a->scale, s + (size_t)g * KB,
                     g == 0 ? pf : NULL, head_bytes / (size_t)hd);

        bool rescale = false;
        const v8i live0 = lane < (int32_t)nt, live1 = lane + OPT_KV_BLOCK < (int32_t)nt;
        const v8f ninf = v8_set1(-INFINITY), z = v8_set1(0.0f);
        for (int32_t g = 0; g < n_group; g++) {
            float *sg = s + (size_t)g * KB;
            const v8f s0 = v8_select(live0, v8_load(sg), ninf), s1 = v8_select(live1, v8_load(sg + OPT_KV_BLOCK), ninf);
            const float bm = v8_fold_max(v8_max(s0, s1));
            const float mn = bm > m[g] ? bm : m[g];
            alpha[g] = 1.0f;
            if (mn > m[g]) {
                alpha[g] = v8_exp(v8_set1(m[g] - mn))[0];
                rescale = true;
            }
            m[g] = mn;
            const v8f mv = v8_set1(mn);
            const v8f p0 = v8_select(live0, v8_exp(s0 - mv), z), p1 = v8_select(live1, v8_exp(s1 - mv), z);
            v8_store(sg, p0);
            v8_store(sg + OPT_KV_BLOCK, p1);
            float *lg = l + (size_t)g * OPT_KV_BLOCK;
            v8_store(lg, (v8_load(lg) * v8_set1(alpha[g]) + p0) + p1);
        }

        for (int32_t g = 0; g < n_group; g += 4)
            pv_heads(v, nt, s + (size_t)g * KB, alpha + g, rescale, n_group - g < 4 ? n_group - g : 4, hd,
                     a->out + (size_t)g * hd);
    }
    for (int32_t g = 0; g < n_group; g++) {
        const v8f d = v8_set1(v8_fold_sum(v8_load(l + (size_t)g * OPT_KV_BLOCK)));
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
