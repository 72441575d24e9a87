/*
 * floats_impl.h: the body of the float32 kernels (floats.h), included once per build:
 * floats_generic.c (portable), floats_avx2.c (x86 AVX2) and floats_avx512.c, each of which
 * names its build of attention, swiglu, dot and delta_rule (all static here). GCC vector extensions
 * give 8-lane code (SwiGLU and attention: the build's widest) that each build lowers to its own
 * instructions; lane-wise IEEE operations make the builds bitwise equal. The includer may define
 * SYN_F_MAX_NG (below) first.
 */
#ifndef SYN_KERNELS_FLOATS_IMPL_H
#define SYN_KERNELS_FLOATS_IMPL_H

#include <math.h>
#include <string.h>

#include "kernels/floats.h"
#include "kernels/fp16.h"

#if defined(__F16C__) || defined(__AVX512F__)
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
V8_INLINE v8f v8_select(v8i mask, v8f a, v8f b) {
    return (v8f)(((v8i)a & mask) | ((v8i)b & ~mask));
}

V8_INLINE v8f v8_max(v8f a, v8f b) { return v8_select(a < b, b, a); }

/* The fixed fold of 8 lanes: ((0+1)+(2+3))+((4+5)+(6+7)). */
V8_INLINE float v8_fold_sum(v8f v) {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

V8_INLINE float v8_fold_max(v8f v) {
    float m = v[0];
    for (int i = 1; i < 8; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* The build's widest vector (AVX-512: 16 lanes; otherwise 8, which GCC lowers well everywhere,
 * where it lowers 16 lanes on AVX2 through memory), for streams of independent elements. */
#if defined(__AVX512F__)
#define SYN_F_WIDE_LANES 16
#else
#define SYN_F_WIDE_LANES 8
#endif
typedef float vwf __attribute__((vector_size(4 * SYN_F_WIDE_LANES)));
typedef int32_t vwi __attribute__((vector_size(4 * SYN_F_WIDE_LANES)));

/* exp(x), relative error ~2e-7: x = n ln2 + r (|r| <= ln2/2, Cody-Waite split of ln2 so n*ln2_hi
 * is exact), degree-6 Taylor polynomial for e^r, then 2^n through the exponent bits. Inputs are
 * clamped to [-87, 88] so 2^n stays a normal number (exp(-87) ~ 1.6e-38 stands in for 0). One body
 * for each vector type VF (VI: its integer type). */
#define SYN_F_DEFINE_EXP(name, VF, VI)                                                             \
    V8_INLINE VF name(VF x) {                                                                      \
        const VF zero = {0}, lo = zero - 87.0f, hi = zero + 88.0f;                                 \
        x = (VF)((((VI)lo) & (VI)(x < lo)) | (((VI)x) & ~(VI)(x < lo)));                           \
        x = (VF)((((VI)hi) & (VI)(x > hi)) | (((VI)x) & ~(VI)(x > hi)));                           \
        const VF magic = zero + 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */      \
        const VF n = (x * 1.44269504088896341f + magic) - magic;                                   \
        VF r = x - n * 0.693145751953125f;                                                         \
        r = r - n * 1.42860682030941723e-6f;                                                       \
        VF p = r * (1.0f / 720.0f) + (1.0f / 120.0f);                                              \
        p = p * r + (1.0f / 24.0f);                                                                \
        p = p * r + (1.0f / 6.0f);                                                                 \
        p = p * r + 0.5f;                                                                          \
        p = p * r + 1.0f;                                                                          \
        p = p * r + 1.0f;                                                                          \
        const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;                              \
        return p * (VF)bits;                                                                       \
    }
SYN_F_DEFINE_EXP(v8_exp, v8f, v8i)
SYN_F_DEFINE_EXP(vw_exp, vwf, vwi)

/* silu(g) * u lane-wise: g / (1 + exp(-g)) * u. */
#define SYN_F_SWIGLU(g, u, exp) ((g) / (1.0f + exp(-(g))) * (u))

static void swiglu(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    /* two wide vectors a step: their exponentials' dependency chains interleave, where one vector a
     * step left the core waiting on them */
    for (; i + 2 * SYN_F_WIDE_LANES <= n; i += 2 * SYN_F_WIDE_LANES) {
        vwf g0, g1, u0, u1;
        memcpy(&g0, g + i, sizeof g0);
        memcpy(&g1, g + i + SYN_F_WIDE_LANES, sizeof g1);
        memcpy(&u0, u + i, sizeof u0);
        memcpy(&u1, u + i + SYN_F_WIDE_LANES, sizeof u1);
        g0 = SYN_F_SWIGLU(g0, u0, vw_exp);
        g1 = SYN_F_SWIGLU(g1, u1, vw_exp);
        memcpy(g + i, &g0, sizeof g0);
        memcpy(g + i + SYN_F_WIDE_LANES, &g1, sizeof g1);
    }
    for (; i + 8 <= n; i += 8)
        v8_store(g + i, SYN_F_SWIGLU(v8_load(g + i), v8_load(u + i), v8_exp));
    if (i < n) { /* the tail through the same lane-wise code */
        float gt[8] = {0}, ut[8] = {0};
        memcpy(gt, g + i, sizeof(float) * (size_t)(n - i));
        memcpy(ut, u + i, sizeof(float) * (size_t)(n - i));
        v8_store(gt, SYN_F_SWIGLU(v8_load(gt), v8_load(ut), v8_exp));
        memcpy(g + i, gt, sizeof(float) * (size_t)(n - i));
    }
}

static float dot(const float *a, const float *b, int64_t n) {
    v8f acc = v8_set1(0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc = acc + v8_load(a + i) * v8_load(b + i);
    float lanes[8];
    v8_store(lanes, acc);
    for (int64_t j = 0; i < n; i++, j++)
        lanes[j] = lanes[j] + a[i] * b[i];
    return v8_fold_sum(v8_load(lanes));
}

/* 8 binary16 values -> float32. Every binary16 value is a float32 value, so F16C's vcvtph2ps
 * (where the build has it) and the portable conversion give the same bits. */
V8_INLINE v8f v8_load_f16(const uint16_t *p) {
#if defined(__F16C__)
    return (v8f)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#else
    v8f v;
    for (int j = 0; j < 8; j++)
        v[j] = syn_k_fp16_to_f32(p[j]);
    return v;
#endif
}

/* 8 cache elements from element index at of base (F16: binary16, converted; else float32). */
V8_INLINE v8f kv_load(const void *base, size_t at, const bool F16) {
    return F16 ? v8_load_f16((const uint16_t *)base + at) : v8_load((const float *)base + at);
}

typedef uint32_t v8u __attribute__((vector_size(32)));

/* 8 float32 -> binary16 bits (in the low half of each lane), lane-wise as syn_k_f32_to_fp16. */
V8_INLINE v8u v8_to_fp16_bits(v8f x) {
    const v8u u = (v8u)x, sign = (u >> 16) & 0x8000u, abs = u & 0x7fffffffu;
    const v8u zero = {0};
    /* below 2^-14 (subnormal): adding 0.5 lets the FPU's rounding produce the subnormal bits */
    const v8u sub = (v8u)((v8f)abs + 0.5f) - 0x3f000000u;
    const v8u normal = (abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13;
    v8u h = (v8u)v8_select((v8i)(abs < 0x38800000u), (v8f)sub, (v8f)normal);
    h = (v8u)v8_select((v8i)(abs >= 0x477ff000u), (v8f)(zero + 0x7c00u), (v8f)h);
    h = (v8u)v8_select((v8i)(abs > 0x7f800000u), (v8f)(zero + 0x7e00u), (v8f)h);
    return (sign | h) & 0xffffu;
}

/* GEGLU (floats.h) for 8 lanes at g, u. */
V8_INLINE void geglu8(float *g, const float *u, const uint16_t *table) {
    const v8f x = v8_load(g);
    const v8u h = v8_to_fp16_bits(x);
    uint16_t looked_up[8];
    for (int j = 0; j < 8; j++)
        looked_up[j] = table[h[j]];
    v8f y = v8_load_f16(looked_up);
    y = v8_select(x <= -10.0f, v8_set1(0.0f), y);
    y = v8_select(x >= 10.0f, x, y);
    v8_store(g, y * v8_load(u));
}

static void geglu(float *g, const float *u, int64_t n, const uint16_t *table) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        geglu8(g + i, u + i, table);
    if (i < n) { /* the tail through the same lane-wise code */
        float gt[8] = {0}, ut[8] = {0};
        memcpy(gt, g + i, sizeof(float) * (size_t)(n - i));
        memcpy(ut, u + i, sizeof(float) * (size_t)(n - i));
        geglu8(gt, ut, table);
        memcpy(g + i, gt, sizeof(float) * (size_t)(n - i));
    }
}

/* Query heads one pass of the kernels below handles: their accumulators live in registers, two
 * vectors a head, so the builds with 32 vector registers (AVX-512) take 8, the others 4. */
#ifndef SYN_F_MAX_NG
#define SYN_F_MAX_NG 4
#endif
_Static_assert(SYN_F_MAX_NG == 4 || SYN_F_MAX_NG == 8, "one pass handles 4 or 8 query heads");

/* Blocks between the one being attended and the one whose cache lines are asked for meanwhile. The
 * cache keeps each layer's K and V of a KV head as one run of a few KiB per block (floats.h), too
 * short for the hardware prefetchers to lock on; the run of block b + 2 is prefetched into L2 a few
 * lines per step of block b's score loop (a whole run at once stalls on the burst of prefetches,
 * and into L1 was slower; 1 to 4 blocks ahead all do as well). */
enum { PF_AHEAD = 2 };

/* Keys per KV block, and key groups of 8 in one. */
enum { KB = SYN_ATTN_BLOCK, KB_GROUPS = SYN_ATTN_BLOCK / SYN_ATTN_KEY_GROUP };
_Static_assert(KB_GROUPS == 2, "qk_block scores a block as two groups of 8 keys");

/* The attention's vectors are the build's widest: a block's 16 keys (or a V slab's 16 dims) are
 * one AVX-512 vector or two of 8 lanes elsewhere. Every lane is a key (or a dim) of its own whose
 * operations do not depend on the vector width, so the builds stay bitwise equal. */
enum { AW = SYN_F_WIDE_LANES };

V8_INLINE vwf vw_set1(float x) {
#if SYN_F_WIDE_LANES == 16
    return (vwf){x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x};
#else
    return v8_set1(x);
#endif
}

/* The first n (8 or AW, a constant) cache elements from element index at of base into a vector,
 * the lanes past n zero. */
V8_INLINE vwf kvw_load(const void *base, size_t at, const int n, const bool F16) {
    vwf v = {0};
#if SYN_F_WIDE_LANES == 16
    if (F16 && n == 16)
        return (vwf)_mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + at)));
#endif
    if (F16) {
        const v8f h = v8_load_f16((const uint16_t *)base + at);
        memcpy(&v, &h, sizeof h);
    } else {
        memcpy(&v, (const float *)base + at, sizeof(float) * (size_t)n);
    }
    return v;
}

V8_INLINE vwf vw_load(const float *p) {
    vwf v;
    memcpy(&v, p, sizeof v);
    return v;
}

V8_INLINE vwf vw_select(vwi mask, vwf a, vwf b) {
    return (vwf)(((vwi)a & mask) | ((vwi)b & ~mask));
}

/* Scores of the 16 keys of one block (k: [hd][16], F16 or float32) for query heads q[0..NG),
 * NG <= SYN_F_MAX_NG, both compile-time constants: s[g * KB + key] = scale * (q_g . key). Each lane
 * sums over i in order; the accumulators are named variables (GCC keeps arrays of vectors in
 * memory), independent ones hiding the add latency (b: the second half of the keys where a
 * vector holds 8). Step i also prefetches [pf + i * pf_step, + pf_step) into L2 (pf NULL: none). */
V8_INLINE void qk_block(const void *k, const float *q, int32_t hd, const int NG, const bool F16,
                        float scale, float *s, const char *pf, size_t pf_step) {
    enum { HALVES = KB / AW }; /* vectors per block's keys: 1 or 2 */
    const vwf z = {0};
    vwf a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z;
    vwf b0 = z, b1 = z, b2 = z, b3 = z, b4 = z, b5 = z, b6 = z, b7 = z;
    for (int32_t i = 0; i < hd; i++) {
        if (pf)
            for (size_t o = 0; o < pf_step; o += 64)
                __builtin_prefetch(pf + (size_t)i * pf_step + o, 0, 1);
        const vwf ka = kvw_load(k, (size_t)i * KB, AW, F16),
                  kc = HALVES > 1 ? kvw_load(k, (size_t)i * KB + AW, AW, F16) : z;
#define QK_HEAD(j)                                                                                 \
    if (NG > j) {                                                                                  \
        const vwf x = vw_set1(q[(size_t)(j) * (size_t)hd + (size_t)i]);                            \
        a##j = a##j + x * ka;                                                                      \
        if (HALVES > 1) b##j = b##j + x * kc;                                                      \
    }
        QK_HEAD(0) QK_HEAD(1) QK_HEAD(2) QK_HEAD(3) QK_HEAD(4) QK_HEAD(5) QK_HEAD(6) QK_HEAD(7)
#undef QK_HEAD
    }
    const vwf sc = vw_set1(scale);
#define QK_STORE(j)                                                                                \
    if (NG > j) {                                                                                  \
        const vwf sa = a##j * sc, sb = b##j * sc;                                                  \
        memcpy(s + (j)*KB, &sa, sizeof sa);                                                        \
        if (HALVES > 1) memcpy(s + (j)*KB + AW, &sb, sizeof sb);                                   \
    }
    QK_STORE(0) QK_STORE(1) QK_STORE(2) QK_STORE(3) QK_STORE(4) QK_STORE(5) QK_STORE(6) QK_STORE(7)
#undef QK_STORE
}

/* For heads g < NG (NG <= SYN_F_MAX_NG) and lanes i0 .. i0 + 8 * NV (NV <= 2), with v the slab of
 * those lanes ([KB][8 * NV], F16 or float32), all three compile-time constants:
 * acc[g * hd + i] = acc[g * hd + i] * alpha[g] (when rescale), then
 * acc[g * hd + i] = acc[g * hd + i] + p[g * KB + t] * v[t][i - i0], for t = 0 .. nt - 1 in
 * order. The accumulators are named variables held in registers over the block (b: the second
 * half of a 16-lane slab where a vector holds 8; a slab of 8 in a 16-lane vector leaves its upper
 * lanes zero); each key's V slab is loaded once for all NG heads. */
V8_INLINE void pv_block(const void *v, uint32_t nt, const float *p, const float *alpha,
                        bool rescale, const int NG, const int NV, const bool F16, int32_t i0,
                        float *acc, size_t hd) {
    const int W = 8 * NV;           /* the slab's lanes */
    const int NA = W < AW ? W : AW; /* lanes of a */
    const bool HALVES = W > AW;     /* b holds lanes [AW, 16) */
    const vwf z = {0};
    vwf a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z;
    vwf b0 = z, b1 = z, b2 = z, b3 = z, b4 = z, b5 = z, b6 = z, b7 = z;
#define PV_LOAD(j)                                                                                 \
    if (NG > j) {                                                                                  \
        a##j = kvw_load(acc + (size_t)(j)*hd + i0, 0, NA, false);                                  \
        if (HALVES) b##j = kvw_load(acc + (size_t)(j)*hd + i0 + AW, 0, AW, false);                 \
        if (rescale) { /* x * 1 is x: heads whose maximum held keep their bits */                  \
            const vwf e = vw_set1(alpha[j]);                                                       \
            a##j = a##j * e;                                                                       \
            b##j = b##j * e;                                                                       \
        }                                                                                          \
    }
    /* clang-format lays this run of statement-like macros out differently on each pass. */
    /* clang-format off */
    PV_LOAD(0) PV_LOAD(1) PV_LOAD(2) PV_LOAD(3) PV_LOAD(4) PV_LOAD(5) PV_LOAD(6) PV_LOAD(7)
    /* clang-format on */
#undef PV_LOAD
        for (uint32_t t = 0; t < nt; t++) {
        const vwf v0 = kvw_load(v, (size_t)t * (size_t)W, NA, F16),
                  v1 = HALVES ? kvw_load(v, (size_t)t * 16 + AW, AW, F16) : z;
#define PV_HEAD(j)                                                                                 \
    if (NG > j) {                                                                                  \
        const vwf x = vw_set1(p[(j)*KB + t]);                                                      \
        a##j = a##j + x * v0;                                                                      \
        if (HALVES) b##j = b##j + x * v1;                                                          \
    }
        PV_HEAD(0) PV_HEAD(1) PV_HEAD(2) PV_HEAD(3) PV_HEAD(4) PV_HEAD(5) PV_HEAD(6) PV_HEAD(7)
#undef PV_HEAD
    }
#define PV_STORE(j)                                                                                \
    if (NG > j) {                                                                                  \
        memcpy(acc + (size_t)(j)*hd + i0, &a##j, sizeof(float) * (size_t)NA);                      \
        if (HALVES) memcpy(acc + (size_t)(j)*hd + i0 + AW, &b##j, sizeof(float) * AW);             \
    }
    PV_STORE(0) PV_STORE(1) PV_STORE(2) PV_STORE(3) PV_STORE(4) PV_STORE(5) PV_STORE(6) PV_STORE(7)
#undef PV_STORE
}

/* The shapes above with their head count, element type (and lane count) made constant, one body
 * each. */
#define SYN_F_NG_CASES(X, F16)                                                                     \
    case 1: X(1, F16) break;                                                                       \
    case 2: X(2, F16) break;                                                                       \
    case 3: X(3, F16) break;                                                                       \
    case 4: X(4, F16) break;                                                                       \
    case 5: X((SYN_F_MAX_NG > 4 ? 5 : 4), F16) break;                                              \
    case 6: X((SYN_F_MAX_NG > 4 ? 6 : 4), F16) break;                                              \
    case 7: X((SYN_F_MAX_NG > 4 ? 7 : 4), F16) break;                                              \
    default: X(SYN_F_MAX_NG, F16) break;

static void qk_heads(const void *k, const float *q, int32_t hd, int ng, bool f16, float scale,
                     float *s, const char *pf, size_t pf_step) {
#define QK_CALL(NG, F16) qk_block(k, q, hd, NG, F16, scale, s, pf, pf_step);
    if (f16) {
        switch (ng) { SYN_F_NG_CASES(QK_CALL, true) }
    } else {
        switch (ng) { SYN_F_NG_CASES(QK_CALL, false) }
    }
#undef QK_CALL
}

static void pv_heads(const void *v, uint32_t nt, const float *p, const float *alpha, bool rescale,
                     int ng, bool f16, int32_t hd, float *acc) {
    const size_t elem = f16 ? sizeof(uint16_t) : sizeof(float);
#define PV_CALL(NG, F16)                                                                           \
    {                                                                                              \
        int32_t i0 = 0;                                                                            \
        for (; i0 + 16 <= hd; i0 += 16)                                                            \
            pv_block((const char *)v + (size_t)KB * (size_t)i0 * elem, nt, p, alpha, rescale, NG,  \
                     2, F16, i0, acc, (size_t)hd);                                                 \
        if (i0 < hd)                                                                               \
            pv_block((const char *)v + (size_t)KB * (size_t)i0 * elem, nt, p, alpha, rescale, NG,  \
                     1, F16, i0, acc, (size_t)hd);                                                 \
    }
    if (f16) {
        switch (ng) { SYN_F_NG_CASES(PV_CALL, true) }
    } else {
        switch (ng) { SYN_F_NG_CASES(PV_CALL, false) }
    }
#undef PV_CALL
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
 * depends only on n_keys, so every build and thread count gives the same bits.
 */
static void attention(const syn_attn_args *a) {
    const int32_t hd = a->head_dim, n_group = a->group;
    const uint32_t n = a->n_keys;
    const size_t n_blocks = ((size_t)n + KB - 1) / KB;
    const size_t elem = a->f16 ? sizeof(uint16_t) : sizeof(float);
    const size_t k_elems = (size_t)KB * (size_t)hd; /* a block's K (or V) of one head */
    const size_t head_bytes = 2 * k_elems * elem;
    const size_t head_off = a->layer_off + (size_t)a->kv_head * head_bytes;

    float *s = a->scratch;                               /* [group][KB] scores, then weights */
    float *l = s + (size_t)n_group * KB;                 /* [group][8] weight sums */
    float *m = l + (size_t)n_group * SYN_ATTN_KEY_GROUP; /* [group] running maxima */
    float *alpha = m + n_group;                          /* [group] this block's rescale factors */

    memset(a->out, 0, sizeof(float) * (size_t)n_group * (size_t)hd);
    for (int32_t g = 0; g < n_group; g++) {
        v8_store(l + (size_t)g * SYN_ATTN_KEY_GROUP, v8_set1(0.0f));
        m[g] = -INFINITY;
    }
    const v8i lane8 = {0, 1, 2, 3, 4, 5, 6, 7};
#if SYN_F_WIDE_LANES == 16
    const vwi lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#else
    const vwi lane = lane8;
#endif
    for (size_t b = a->first_key / KB; b < n_blocks; b++) {
        const char *pf =
            b + PF_AHEAD < n_blocks ? (const char *)a->blocks[b + PF_AHEAD] + head_off : NULL;
        const char *src = (const char *)a->blocks[b] + head_off;
        const uint32_t nt = n - (uint32_t)(b * KB) < KB ? n - (uint32_t)(b * KB) : KB;
        for (int32_t g = 0; g < n_group; g += SYN_F_MAX_NG)
            qk_heads(src, a->q + (size_t)g * hd, hd,
                     n_group - g < SYN_F_MAX_NG ? n_group - g : SYN_F_MAX_NG, a->f16, a->scale,
                     s + (size_t)g * KB, g == 0 ? pf : NULL, head_bytes / (size_t)hd);

        bool rescale = false;
        /* lanes [lo, nt) of the block are keys of the window */
        const int32_t lo = a->first_key > b * KB ? (int32_t)(a->first_key - b * KB) : 0;
        const v8i live0 = (lane8 >= lo) & (lane8 < (int32_t)nt),
                  live1 = (lane8 + SYN_ATTN_KEY_GROUP >= lo) &
                          (lane8 + SYN_ATTN_KEY_GROUP < (int32_t)nt);
        vwi live[KB / AW]; /* the same in the exponentials' vectors */
        for (int c = 0; c < KB / AW; c++)
            live[c] = (lane + c * AW >= lo) & (lane + c * AW < (int32_t)nt);
        const v8f ninf = v8_set1(-INFINITY);
        const vwf z = {0};
        for (int32_t g = 0; g < n_group;
             g++) { /* maxima first: the exponentials below are independent */
            const float *sg = s + (size_t)g * KB;
            const v8f s0 = v8_select(live0, v8_load(sg), ninf),
                      s1 = v8_select(live1, v8_load(sg + SYN_ATTN_KEY_GROUP), ninf);
            const float bm = v8_fold_max(v8_max(s0, s1));
            alpha[g] = 1.0f;
            if (bm > m[g]) {
                alpha[g] = v8_exp(v8_set1(m[g] - bm))[0];
                m[g] = bm;
                rescale = true;
            }
        }
        for (int32_t g = 0; g < n_group; g++) {
            float *sg = s + (size_t)g * KB;
            const vwf mv = vw_set1(m[g]);
            for (int c = 0; c < KB / AW; c++) {
                const vwf pc = vw_select(live[c], vw_exp(vw_load(sg + c * AW) - mv), z);
                memcpy(sg + c * AW, &pc, sizeof pc);
            }
            float *lg = l + (size_t)g * SYN_ATTN_KEY_GROUP;
            v8_store(lg, (v8_load(lg) * v8_set1(alpha[g]) + v8_load(sg)) +
                             v8_load(sg + SYN_ATTN_KEY_GROUP));
        }

        for (int32_t g = 0; g < n_group; g += SYN_F_MAX_NG)
            pv_heads(src + k_elems * elem, nt, s + (size_t)g * KB, alpha + g, rescale,
                     n_group - g < SYN_F_MAX_NG ? n_group - g : SYN_F_MAX_NG, a->f16, hd,
                     a->out + (size_t)g * hd);
    }
    for (int32_t g = 0; g < n_group; g++) {
        const v8f d = v8_set1(v8_fold_sum(v8_load(l + (size_t)g * SYN_ATTN_KEY_GROUP)));
        float *o = a->out + (size_t)g * hd;
        for (int32_t i = 0; i < hd; i += 8)
            v8_store(o + i, v8_load(o + i) / d);
    }
}

/* Columns [j, j + NV * lanes of VF) of the delta rule (floats.h) through all tokens, each column's
 * sums in named vector accumulators (GCC keeps arrays of vectors in memory, and a sum carried
 * through a store and a load waits on store forwarding at every key). Token t's update of S and
 * its output share one pass over the strip with token t + 1's decay and S^T k: the same operations
 * on the same values as one pass per step, with half the loads and stores. */
#define SYN_F_DEFINE_DELTA_STRIP(name, VF, NV)                                                     \
    V8_INLINE void name(const syn_delta_rule_args *a, int32_t j) {                                 \
        enum { L = (int)(sizeof(VF) / sizeof(float)) };                                            \
        const int32_t dk = a->dk, dv = a->dv;                                                      \
        const VF zero = {0};                                                                       \
        VF sk0 = zero, sk1 = zero, d0 = zero, d1 = zero, o0 = zero, o1 = zero, x0, x1;             \
        float *S = a->S + j;                                                                       \
        { /* token 0: S *= decay; sk = S^T k */                                                    \
            const VF decay = zero + a->gates[0];                                                   \
            const float *k = a->qk + dk;                                                           \
            for (int32_t i = 0; i < dk; i++) {                                                     \
                float *Si = S + (size_t)i * dv;                                                    \
                memcpy(&x0, Si, sizeof x0);                                                        \
                x0 = x0 * decay;                                                                   \
                memcpy(Si, &x0, sizeof x0);                                                        \
                sk0 = sk0 + x0 * k[i];                                                             \
                if (NV > 1) {                                                                      \
                    memcpy(&x1, Si + L, sizeof x1);                                                \
                    x1 = x1 * decay;                                                               \
                    memcpy(Si + L, &x1, sizeof x1);                                                \
                    sk1 = sk1 + x1 * k[i];                                                         \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (size_t t = 0; t < a->n; t++) {                                                        \
            const float *q = a->qk + t * 2 * (size_t)dk, *k = q + dk;                              \
            const VF beta = zero + a->gates[2 * t + 1];                                            \
            const float *v = a->v + t * a->v_stride + j;                                           \
            memcpy(&d0, v, sizeof d0);                                                             \
            d0 = beta * (d0 - sk0);                                                                \
            if (NV > 1) {                                                                          \
                memcpy(&d1, v + L, sizeof d1);                                                     \
                d1 = beta * (d1 - sk1);                                                            \
            }                                                                                      \
            o0 = o1 = sk0 = sk1 = zero;                                                            \
            if (t + 1 < a->n) { /* S += k d^T; o = S^T q; then token t + 1's S *= decay; sk */     \
                const float *k_next = k + 2 * (size_t)dk;                                          \
                const VF decay = zero + a->gates[2 * t + 2];                                       \
                for (int32_t i = 0; i < dk; i++) {                                                 \
                    float *Si = S + (size_t)i * dv;                                                \
                    memcpy(&x0, Si, sizeof x0);                                                    \
                    x0 = x0 + k[i] * d0;                                                           \
                    o0 = o0 + x0 * q[i];                                                           \
                    x0 = x0 * decay;                                                               \
                    memcpy(Si, &x0, sizeof x0);                                                    \
                    sk0 = sk0 + x0 * k_next[i];                                                    \
                    if (NV > 1) {                                                                  \
                        memcpy(&x1, Si + L, sizeof x1);                                            \
                        x1 = x1 + k[i] * d1;                                                       \
                        o1 = o1 + x1 * q[i];                                                       \
                        x1 = x1 * decay;                                                           \
                        memcpy(Si + L, &x1, sizeof x1);                                            \
                        sk1 = sk1 + x1 * k_next[i];                                                \
                    }                                                                              \
                }                                                                                  \
            } else { /* the last token: S += k d^T; o = S^T q */                                   \
                for (int32_t i = 0; i < dk; i++) {                                                 \
                    float *Si = S + (size_t)i * dv;                                                \
                    memcpy(&x0, Si, sizeof x0);                                                    \
                    x0 = x0 + k[i] * d0;                                                           \
                    memcpy(Si, &x0, sizeof x0);                                                    \
                    o0 = o0 + x0 * q[i];                                                           \
                    if (NV > 1) {                                                                  \
                        memcpy(&x1, Si + L, sizeof x1);                                            \
                        x1 = x1 + k[i] * d1;                                                       \
                        memcpy(Si + L, &x1, sizeof x1);                                            \
                        o1 = o1 + x1 * q[i];                                                       \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            float *out = a->o + t * a->o_stride + j;                                               \
            memcpy(out, &o0, sizeof o0);                                                           \
            if (NV > 1) memcpy(out + L, &o1, sizeof o1);                                           \
        }                                                                                          \
    }
/* Strips of two of the build's widest vectors, then of 8 lanes for the rest of dv. */
SYN_F_DEFINE_DELTA_STRIP(delta_strip_wide, vwf, 2)
SYN_F_DEFINE_DELTA_STRIP(delta_strip_8, v8f, 1)

static void delta_rule(const syn_delta_rule_args *a) {
    if (a->n == 0) return;
    int32_t j = 0;
    for (; j + 2 * SYN_F_WIDE_LANES <= a->dv; j += 2 * SYN_F_WIDE_LANES)
        delta_strip_wide(a, j);
    for (; j < a->dv; j += 8)
        delta_strip_8(a, j);
}

/* The convolution step (floats.h) for the channels of one vector at c; VF's lanes, EXP its exp. */
#define SYN_F_DEFINE_DN_CONV_LANES(name, VF, EXP)                                                  \
    V8_INLINE void name(float *x, float *s, const float *w, int32_t K, size_t stride, size_t c) {  \
        VF acc = {0}, sv, wv, xv;                                                                  \
        memcpy(&xv, x + c, sizeof xv);                                                             \
        for (int32_t j = 0; j + 1 < K; j++) {                                                      \
            memcpy(&sv, s + (size_t)j * stride + c, sizeof sv);                                    \
            memcpy(&wv, w + (size_t)j * stride + c, sizeof wv);                                    \
            acc = acc + wv * sv;                                                                   \
            if (j > 0) memcpy(s + (size_t)(j - 1) * stride + c, &sv, sizeof sv);                   \
        }                                                                                          \
        memcpy(&wv, w + (size_t)(K - 1) * stride + c, sizeof wv);                                  \
        acc = acc + wv * xv;                                                                       \
        if (K > 1) memcpy(s + (size_t)(K - 2) * stride + c, &xv, sizeof xv);                       \
        acc = acc / (1.0f + EXP(-acc));                                                            \
        memcpy(x + c, &acc, sizeof acc);                                                           \
    }
SYN_F_DEFINE_DN_CONV_LANES(dn_conv_wide, vwf, vw_exp)
SYN_F_DEFINE_DN_CONV_LANES(dn_conv_8, v8f, v8_exp)

static void dn_conv(float *x, float *s, const float *w, int32_t K, size_t stride, int64_t n) {
    size_t c = 0;
    for (; c + SYN_F_WIDE_LANES <= (size_t)n; c += SYN_F_WIDE_LANES)
        dn_conv_wide(x, s, w, K, stride, c);
    for (; c + 8 <= (size_t)n; c += 8)
        dn_conv_8(x, s, w, K, stride, c);
    for (; c < (size_t)n; c++) { /* the tail, one lane of the same operations */
        float acc = 0.0f;
        for (int32_t j = 0; j + 1 < K; j++) {
            acc = acc + w[(size_t)j * stride + c] * s[(size_t)j * stride + c];
            if (j > 0) s[(size_t)(j - 1) * stride + c] = s[(size_t)j * stride + c];
        }
        acc = acc + w[(size_t)(K - 1) * stride + c] * x[c];
        if (K > 1) s[(size_t)(K - 2) * stride + c] = x[c];
        v8f lane = v8_set1(acc);
        lane = lane / (1.0f + v8_exp(-lane));
        x[c] = lane[0];
    }
}

#endif
